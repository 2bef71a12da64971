"""What the sessions this server makes will offer, known before any exists: ``initialize``
answers with it without importing the session machinery (this module imports only the
shadow repository's light module and the sandbox's probe)."""

from __future__ import annotations

from typing import Any

from tiller.checkpoints.shadow import off_reason
from tiller.config import ServerConfig
from tiller.modes import SANDBOX_MODES
from tiller.sandbox.probe import availability

__all__ = ["checkpoints_off_reason", "sandbox_info"]


def sandbox_info(config: ServerConfig) -> dict[str, Any]:
    """``initialize``'s ``capabilities.sandbox``: whether commands can be sandboxed here
    (``available``, ``kind``, ``reason``), the modes, and new sessions' mode and network."""
    return {**availability().wire(), "modes": list(SANDBOX_MODES),
            "mode": config.sandbox.mode, "network": config.sandbox.network}


def checkpoints_off_reason(config: ServerConfig) -> str | None:
    """Why new sessions would have no checkpoints, None when they would (the reason each such
    session's ``state()`` gives too)."""
    return off_reason(saved=config.session_dir is not None)
