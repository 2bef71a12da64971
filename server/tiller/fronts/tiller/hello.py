"""Tiller's ``initialize``: its params as the front reads them and its result, without anyio,
pydantic or the session machinery (so it can be answered before the front is imported:
``tiller.fronts.tiller.early``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from tiller import PROTOCOL_VERSION, __version__
from tiller.config import ServerConfig
from tiller.frozen import frozen
from tiller.modes import PERMISSION_MODES, QUEUE_MODES, THINKING_LEVELS
from tiller.protocol.names import EVENT_TYPES, METHODS, NOTIFICATIONS, SERVER_REQUESTS
from tiller.session.capabilities import (
    checkpoints_off_reason,
    default_model_notice,
    sandbox_info,
)

if TYPE_CHECKING:
    from tiller.protocol.models import InitializeParams

__all__ = ["Initialize", "initialize_result", "may_be_acp", "speaks_our_version"]


@frozen
class Initialize:
    """``initialize``'s params as the handler uses them. ``model_validate`` reads plain JSON of
    the usual shape itself; anything else (snake_case names, numbers as strings, a wrong type
    ...) goes through the params model of ``initialize``'s row in ``tiller.protocol.methods``,
    which coerces it or answers -32602 as for every method. Both read the same: a test holds
    them to it."""

    capabilities: dict[str, Any]
    """As the client sent them, camelCase, nulls dropped."""
    protocol_version: int | None = None
    delta_window_ms: float | None = None

    @classmethod
    def model_validate(cls, raw: dict[str, Any]) -> Initialize:
        plain = cls.plain(raw)
        if plain is not None:
            return plain
        from tiller.protocol.methods import METHODS as ROWS

        params = cast("InitializeParams", ROWS["initialize"].params.model_validate(raw))
        return cls(params.capabilities.dump(), params.protocol_version, params.delta_window_ms)

    @classmethod
    def plain(cls, raw: dict[str, Any]) -> Initialize | None:
        """The params if they hold only known camelCase names with exactly JSON's types, else
        None (``model_validate`` then reads them, or refuses them)."""
        version, window = raw.get("protocolVersion"), raw.get("deltaWindowMs")
        info, capabilities = raw.get("clientInfo"), raw.get("capabilities", {})
        fs = capabilities.get("fs") if isinstance(capabilities, dict) else None
        asks = capabilities.get("elicitation") if isinstance(capabilities, dict) else None
        if not (
            raw.keys() <= {"clientInfo", "capabilities", "protocolVersion", "deltaWindowMs"}
            and (version is None or type(version) is int)
            and (window is None or (type(window) in (int, float) and 0 <= window <= 1000))
            and (info is None or (_only(info, {"name", "version"}, str)
                                  and type(info.get("name")) is str))
            and _only(capabilities, {"permissions", "fs", "elicitation", "openUrl",
                                      "diagnostics"}, bool)
            and (fs is None or _only(fs, {"readTextFile", "writeTextFile", "keepsUnsaved"}, bool))
            and (asks is None or _only(asks, {"form", "url"}, bool))
        ):
            return None
        dumped = {key: value for key, value in capabilities.items() if value is not None}
        for name, inner in (("fs", fs), ("elicitation", asks)):
            if inner is not None:
                dumped[name] = {key: value for key, value in inner.items() if value is not None}
        return cls(dumped, version, window)


def may_be_acp(params: Any) -> bool:
    """Whether ``initialize``'s ``params`` may be ACP's: they state a ``protocolVersion``
    without Tiller's ``capabilities`` object (or with ACP's ``clientCapabilities``); the ACP
    front's own check (``tiller.fronts.acp.server.is_acp_initialize``) decides."""
    return isinstance(params, dict) and "protocolVersion" in params and not (
        "capabilities" in params and "clientCapabilities" not in params)


def speaks_our_version(params: Initialize) -> bool:
    """The client states no ``protocolVersion``, or ours."""
    return params.protocol_version in (None, PROTOCOL_VERSION)


def initialize_result(config: ServerConfig) -> dict[str, Any]:
    """What ``initialize`` answers (protocol.md): the server, its version and capabilities."""
    reason = checkpoints_off_reason(config)
    result: dict[str, Any] = {
        "serverInfo": {"name": "tiller", "version": __version__},
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {
            "agent": {"steer": True, "followUp": True, "continue": True, "abort": True},
            "queueModes": list(QUEUE_MODES),
            "permissionModes": list(PERMISSION_MODES),
            "thinkingLevels": list(THINKING_LEVELS),
            "sessions": {
                "new": True, "list": True, "load": True, "fork": True,
                "persistent": config.session_dir is not None,
            },
            "checkpoints": {"enabled": True} if reason is None
            else {"enabled": False, "reason": reason},
            "sandbox": sandbox_info(config),
            "methods": [*METHODS, *NOTIFICATIONS],
            "serverRequests": list(SERVER_REQUESTS),
            "events": list(EVENT_TYPES),
        },
    }
    if notice := default_model_notice(config):
        result["notice"] = notice
    return result


def _only(value: Any, names: set[str], kind: type) -> bool:
    """``value`` is an object of only ``names``, each None or exactly a ``kind`` (the members
    ``fs`` and ``elicitation`` excepted: the caller checks them)."""
    return isinstance(value, dict) and value.keys() <= names and all(
        item is None or type(item) is kind or key in ("fs", "elicitation")
        for key, item in value.items()
    )
