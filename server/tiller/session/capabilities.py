"""What the sessions this server makes will offer, known before any exists: ``initialize``
answers with it without importing the session machinery (this module imports only the
shadow repository's light module, the sandbox's probe and the embedded model's facts)."""

from __future__ import annotations

from typing import Any

from tiller.checkpoints.shadow import off_reason
from tiller.config import ServerConfig
from tiller.modes import SANDBOX_MODES
from tiller.providers.embedded import CHAT_ONLY_NOTICE, is_chat_only
from tiller.sandbox.probe import availability

__all__ = ["checkpoints_off_reason", "default_model_notice", "sandbox_info"]


def sandbox_info(config: ServerConfig) -> dict[str, Any]:
    """``initialize``'s ``capabilities.sandbox``: whether commands can be sandboxed here
    (``available``, ``kind``, ``reason``), the modes, and new sessions' mode and network."""
    return {**availability().wire(), "modes": list(SANDBOX_MODES),
            "mode": config.sandbox.mode, "network": config.sandbox.network}


def checkpoints_off_reason(config: ServerConfig) -> str | None:
    """Why new sessions would have no checkpoints, None when they would (the reason each such
    session's ``state()`` gives too)."""
    return off_reason(saved=config.session_dir is not None)


def default_model_notice(config: ServerConfig) -> str | None:
    """What a new session's ``notice`` would say of the default model (``Session.notice``):
    that the embedded model is chat only; None for any other model."""
    settings = config.providers.get(config.provider)
    model = config.model or config.default_model(config.provider)
    return CHAT_ONLY_NOTICE if is_chat_only(settings.type if settings else None, model) else None
