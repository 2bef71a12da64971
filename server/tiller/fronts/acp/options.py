"""ACP session config options: the model, the thought level, the permission mode and the
command sandbox of a session as ACP ``configOptions`` (``select`` options), and setting one.

=================  ================  ======================================================
``id``             ``category``      values
=================  ================  ======================================================
``model``          ``model``         ``provider/model``: the models each usable provider
                                     lists (the server's own, or one with a key or a URL;
                                     ``tiller.providers.directory``: its ``GET /v1/models``
                                     as last asked, else the catalog's) and its default
``thought_level``  ``thought_level`` ``off``, ``low``, ``medium``, ``high``, ``xhigh``,
                                     ``max``; the model runs a level it lacks at the nearest
``mode``           ``mode``          the permission modes (the same as ACP's session modes)
``sandbox``        ``_sandbox``      the sandbox modes: ``workspace-write``, ``read-only``,
                                     ``off``, ``required`` (protocol.md, "Sandbox")
=================  ================  ======================================================
"""

from __future__ import annotations

from typing import Any

from tiller.config import ServerConfig
from tiller.modes import PERMISSION_MODES, SANDBOX_MODES, THINKING_LEVELS
from tiller.session.session import Session

__all__ = [
    "MODES",
    "OptionError",
    "config_options",
    "model_choices",
    "offered_models",
    "set_option",
    "usable_providers",
]

MODES: list[dict[str, str]] = [
    {"id": "ask", "name": "Ask",
     "description": "Ask before file changes, commands and anything outside the workspace"},
    {"id": "acceptEdits", "name": "Accept edits",
     "description": "Change workspace files freely; ask before commands; nothing outside"},
    {"id": "auto", "name": "Auto", "description": "Run every tool without asking"},
    {"id": "readonly", "name": "Read-only",
     "description": "Read and search only: no file changes, no commands"},
]
"""ACP session modes: Tiller's permission modes (protocol.md, "Permissions")."""

THOUGHT_NAMES = {"off": "Off", "low": "Low", "medium": "Medium", "high": "High",
                 "xhigh": "Extra high", "max": "Max"}
SANDBOXES: list[dict[str, str]] = [
    {"value": "workspace-write", "name": "Workspace write",
     "description": "Commands run sandboxed: writes only in the workspace, no network"},
    {"value": "read-only", "name": "Read-only",
     "description": "Commands run sandboxed: no writes but a private /tmp, no network"},
    {"value": "off", "name": "Off", "description": "Commands run unsandboxed, as the user"},
    {"value": "required", "name": "Required",
     "description": "Workspace write, and a command that cannot be sandboxed is refused"},
]
"""The ``sandbox`` option's values (tiller.modes.SANDBOX_MODES)."""


class OptionError(ValueError):
    """A config id or value the session does not have (the front answers -32602)."""


def _usable(config: ServerConfig, provider: str) -> bool:
    settings = config.providers.get(provider)
    if provider == config.provider:
        return True
    if settings is None or settings.type == "local":
        return False
    return settings.has_key(config.env) or settings.resolve_base_url(config.env) is not None


def usable_providers(config: ServerConfig, session: Session) -> list[str]:
    """The providers whose models the model option offers: the session's, then the usable."""
    names = [session.provider, *config.providers]
    return [name for name in dict.fromkeys(names)
            if name == session.provider or _usable(config, name)]


def offered_models(config: ServerConfig, session: Session) -> frozenset[tuple[str, str]]:
    """The (provider, model) pairs the model option offers now."""
    return frozenset((provider, model) for provider, model, _ in model_choices(config, session))


def model_choices(config: ServerConfig, session: Session) -> list[tuple[str, str, str]]:
    """``(provider, model, description)`` to choose from, the session's own first; retired
    models are left out, a deprecated one says when it retires."""
    choices = [(session.provider, session.model)]
    notes: dict[tuple[str, str], str] = {}
    for name in usable_providers(config, session):
        for info in session.directory.models(name):
            choices.append((name, info.id))
            if info.lifecycle == "deprecated":
                notes[name, info.id] = f"deprecated, retires {info.retires_at or 'soon'}"
        choices.append((name, config.default_model(name)))
    return [(provider, model, ", ".join(filter(None, [provider, notes.get((provider, model))])))
            for provider, model in dict.fromkeys(choices)]


def _select(option_id: str, name: str, current: str, values: list[dict[str, str]],
            description: str) -> dict[str, Any]:
    return {"id": option_id, "name": name, "description": description, "category": option_id,
            "type": "select", "currentValue": current, "options": values}


def config_options(config: ServerConfig, session: Session) -> list[dict[str, Any]]:
    """The session's ``configOptions``, current values included."""
    models = [{"value": f"{provider}/{model}", "name": model, "description": description}
              for provider, model, description in model_choices(config, session)]
    levels = [{"value": level, "name": THOUGHT_NAMES[level]} for level in THINKING_LEVELS]
    modes = [{"value": mode["id"], "name": mode["name"], "description": mode["description"]}
             for mode in MODES]
    return [
        _select("model", "Model", f"{session.provider}/{session.model}", models,
                "The model the next turn uses"),
        _select("thought_level", "Thinking", session.thinking, levels,
                "How hard a reasoning model thinks (ignored by other models)"),
        _select("mode", "Permissions", session.permission_mode, modes,
                "What tools may do without asking"),
        {**_select("sandbox", "Sandbox", session.sandbox_mode, SANDBOXES,
                   "Where commands run (from the next command on)"), "category": "_sandbox"},
    ]


async def set_option(config: ServerConfig, session: Session, option_id: str, value: Any) -> None:
    """Apply one option to the session (the model from the next turn on). Raises OptionError
    for an unknown id or value."""
    if not isinstance(value, str):
        raise OptionError(f"value: {option_id} takes a value id, not {value!r}")
    if option_id == "model":
        pairs = {f"{p}/{m}": (p, m) for p, m, _ in model_choices(config, session)}
        if value not in pairs:
            raise OptionError(f"value: unknown model {value!r}")
        await session.set_model(*pairs[value])
    elif option_id == "thought_level":
        if value not in THINKING_LEVELS:
            raise OptionError(f"value: unknown thought level {value!r}")
        session.set_thinking(value)
    elif option_id == "mode":
        if value not in PERMISSION_MODES:
            raise OptionError(f"value: unknown mode {value!r}")
        session.set_permission_mode(value)
    elif option_id == "sandbox":
        if value not in SANDBOX_MODES:
            raise OptionError(f"value: unknown sandbox mode {value!r}")
        session.set_sandbox(value)
    else:
        raise OptionError(f"configId: unknown config option {option_id!r}")
