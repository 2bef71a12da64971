"""Tiller's front: protocol.md's methods, served on a ``tiller.wire.jsonrpc.Front``.

``initialize`` is answered here without pydantic, the protocol's models or the session
machinery, and so is ``session/load`` of a saved session: its answer is the log's messages as
saved (``tiller.store.saved.open_saved``), and the session goes live (its messages validated,
the models and the session machinery imported) right after the answer is written. Every other
method of ``tiller.protocol.names`` is registered lazily, its handler in
``tiller.fronts.tiller.handlers`` (imported, with the models, on the first such call), and waits
until no session is on its way to going live (and, the first time, for the model a
``--base-url`` server serves: ``SessionRegistry.ready``). A session's events go out as
``agent/event`` notifications (``tiller.fronts.tiller.events.EventNotifier``, its deltas
coalesced within the ``initialize`` ``deltaWindowMs``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import anyio
from pygls.exceptions import JsonRpcInvalidParams

from tiller import PROTOCOL_VERSION, __version__
from tiller.config import ServerConfig
from tiller.errors import RequestError
from tiller.modes import PERMISSION_MODES, QUEUE_MODES, THINKING_LEVELS
from tiller.protocol.names import EVENT_TYPES, METHODS, NOTIFICATIONS, SERVER_REQUESTS
from tiller.session.capabilities import (
    checkpoints_off_reason,
    default_model_notice,
    sandbox_info,
)
from tiller.wire.jsonrpc import Front, Handler, Method, SerializedResult

if TYPE_CHECKING:  # the session machinery is imported on first use, not for initialize
    from tiller.fronts.tiller.handlers import Methods
    from tiller.protocol.models import InitializeParams, SessionIdParams
    from tiller.session.registry import SessionRegistry
    from tiller.session.session import Session
    from tiller.store.saved import SavedSession

__all__ = ["LAZY", "OWN", "Initialize", "SessionId", "TillerFront"]

log = logging.getLogger(__name__)

OWN = ("initialize", "session/load")
"""The methods served here, without pydantic; ``tiller.fronts.tiller.handlers.Methods`` serves
the rest of ``tiller.protocol.names.METHODS`` (and ``session/load`` of a live session)."""
LAZY = tuple(name for name in METHODS if name not in OWN)
"""The methods whose handlers (and models) are imported on the first call of one of them."""


@dataclass(frozen=True)
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
        plain = cls._plain(raw)
        if plain is not None:
            return plain
        from tiller.protocol.methods import METHODS as ROWS

        params = cast("InitializeParams", ROWS["initialize"].params.model_validate(raw))
        return cls(params.capabilities.dump(), params.protocol_version, params.delta_window_ms)

    @classmethod
    def _plain(cls, raw: dict[str, Any]) -> Initialize | None:
        """The params if they hold only known camelCase names with exactly JSON's types."""
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
            and _only(capabilities, {"permissions", "fs", "elicitation", "openUrl"}, bool)
            and (fs is None or _only(fs, {"readTextFile", "writeTextFile", "keepsUnsaved"}, bool))
            and (asks is None or _only(asks, {"form", "url"}, bool))
        ):
            return None
        dumped = {key: value for key, value in capabilities.items() if value is not None}
        for name, inner in (("fs", fs), ("elicitation", asks)):
            if inner is not None:
                dumped[name] = {key: value for key, value in inner.items() if value is not None}
        return cls(dumped, version, window)


@dataclass(frozen=True)
class SessionId:
    """``session/load``'s params: ``{"sessionId": "..."}`` read as is, anything else through
    the params model of its row in ``tiller.protocol.methods`` (coerced, or -32602)."""

    session_id: str

    @classmethod
    def model_validate(cls, raw: dict[str, Any]) -> SessionId:
        if raw.keys() == {"sessionId"} and type(raw["sessionId"]) is str:
            return cls(raw["sessionId"])
        from tiller.protocol.methods import METHODS as ROWS

        params = cast("SessionIdParams", ROWS["session/load"].params.model_validate(raw))
        return cls(params.session_id)


class _Loads:
    """The ``session/load`` in progress (there is one at a time), from opening the log until
    the session is live or has failed to go live; ``settled()`` returns once there is none."""

    def __init__(self) -> None:
        self._done: anyio.Event | None = None

    def enter(self) -> None:
        self._done = anyio.Event()

    def leave(self) -> None:
        done, self._done = self._done, None
        if done is not None:
            done.set()

    async def settled(self) -> None:
        while self._done is not None:
            await self._done.wait()


def _only(value: Any, names: set[str], kind: type) -> bool:
    """``value`` is an object of only ``names``, each None or exactly a ``kind`` (the members
    ``fs`` and ``elicitation`` excepted: the caller checks them)."""
    return isinstance(value, dict) and value.keys() <= names and all(
        item is None or type(item) is kind or key in ("fs", "elicitation")
        for key, item in value.items()
    )


class TillerFront:
    """protocol.md's methods over one session registry, served by ``front``."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.delta_window_ms: float | None = None
        self._registry: SessionRegistry | None = None
        self._capabilities: dict[str, Any] | None = None
        self.front = Front(self._shutdown)
        self._loads = _Loads()
        self._handlers: Methods | None = None
        self._closed = False
        self.front.register("initialize", Initialize, self.initialize)
        self.front.register("session/load", SessionId, self.session_load)
        self.front.register_lazy(LAZY, self._methods)

    @property
    def sessions(self) -> SessionRegistry:
        """The session registry, built (its modules imported) when first needed."""
        if self._registry is None:
            from tiller.session.registry import SessionRegistry

            self._registry = SessionRegistry(self.config, self._attach)
            self._connect_client()
        return self._registry

    @property
    def handlers(self) -> Methods:
        """The methods' handlers (``tiller.fronts.tiller.handlers``), imported when first needed."""
        if self._handlers is None:
            from tiller.fronts.tiller.handlers import Methods

            self._handlers = Methods(self.front, self.config, lambda: self.sessions)
        return self._handlers

    def _methods(self) -> Mapping[str, Method]:
        """The lazily registered methods, each waiting for a load in progress (``_Loads``)."""
        return {name: (params, self._after_loads(fn))
                for name, (params, fn) in self.handlers.table(LAZY).items()}

    def _after_loads(self, fn: Handler[Any]) -> Handler[Any]:
        async def handle(params: Any) -> Any:
            await self._loads.settled()
            await self.sessions.ready()
            return await fn(params)

        return handle

    async def session_load(self, params: SessionId) -> Any:
        """A live session's history, or a saved session's as its log has it: answered at once,
        the session made live right after (``_go_live``). One load at a time."""
        await self._loads.settled()
        live = self._registry.lookup(params.session_id) if self._registry is not None else None
        if live is not None:
            return self.handlers.history(live)
        from pydantic_core import to_json

        from tiller.store.saved import open_saved

        self._loads.enter()
        try:
            saved = await anyio.to_thread.run_sync(
                open_saved, self.config.session_dir, params.session_id)
            try:
                result = SerializedResult(to_json(saved.history(self.config)))
            except BaseException:  # it cannot be sent (a lone surrogate in a message)
                saved.close()
                raise
        except BaseException:
            self._loads.leave()
            raise
        result.then = lambda: self._go_live(saved)
        return result

    async def _go_live(self, saved: SavedSession) -> None:
        """Make a session whose ``session/load`` was answered live. If its messages are not
        valid, requests for it get the error (``SessionRegistry.adopt``)."""
        try:
            if self._closed:
                saved.close()
            else:
                await self.sessions.adopt(saved)
        except RequestError as exc:  # SessionLogError: a message in the log is not valid
            log.warning("session %s could not go live: %s", saved.id, exc.message)
        except Exception:
            log.exception("session %s could not go live", saved.id)
        finally:
            self._loads.leave()

    def _connect_client(self) -> None:
        """Hand what the client declared in ``initialize`` to the sessions, if both exist."""
        if self._registry is not None and self._capabilities is not None:
            from tiller.session.session import EditorClient

            self._registry.set_client(EditorClient(self.front.client_request, self._capabilities))

    async def _shutdown(self) -> None:
        """Let a session going live finish (bounded), then shut the sessions down."""
        self._closed = True
        with anyio.move_on_after(10):
            await self._loads.settled()
        if self._registry is not None:
            await self._registry.shutdown()

    def _attach(self, session: Session) -> None:
        """Send the session's events as ``agent/event`` notifications."""
        from tiller.fronts.tiller.events import DEFAULT_DELTA_WINDOW, EventNotifier

        def window() -> float:
            ms = self.delta_window_ms
            return DEFAULT_DELTA_WINDOW if ms is None else ms / 1000

        link = session.task_link
        session.subscribe(EventNotifier(session.id, self.front.write_message, window,
                                        link.wire() if link is not None else None))

    async def initialize(self, params: Initialize) -> dict[str, Any]:
        """Take the client's capabilities; a ``protocolVersion`` other than ours is refused."""
        if params.protocol_version not in (None, PROTOCOL_VERSION):
            raise JsonRpcInvalidParams(
                f"Invalid params: protocolVersion: this server speaks Tiller protocol version "
                f"{PROTOCOL_VERSION}, not {params.protocol_version}"
            )
        self._capabilities = params.capabilities
        self._connect_client()
        if params.delta_window_ms is not None:
            self.delta_window_ms = params.delta_window_ms
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
                    "persistent": self.config.session_dir is not None,
                },
                "checkpoints": self._checkpoints_info(),
                "sandbox": sandbox_info(self.config),
                "methods": [*METHODS, *NOTIFICATIONS],
                "serverRequests": list(SERVER_REQUESTS),
                "events": list(EVENT_TYPES),
            },
        }
        if notice := default_model_notice(self.config):
            result["notice"] = notice
        return result

    def _checkpoints_info(self) -> dict[str, Any]:
        """Whether new sessions get checkpoints, and why not (protocol.md's CheckpointsInfo)."""
        reason = checkpoints_off_reason(self.config)
        return {"enabled": True} if reason is None else {"enabled": False, "reason": reason}
