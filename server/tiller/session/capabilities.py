"""What the sessions this server makes will offer, known before any exists: ``initialize``
answers with it without importing the session machinery (this module imports only the
shadow repository's light module)."""

from __future__ import annotations

from tiller.checkpoints.shadow import off_reason
from tiller.config import ServerConfig

__all__ = ["checkpoints_off_reason"]


def checkpoints_off_reason(config: ServerConfig) -> str | None:
    """Why new sessions would have no checkpoints, None when they would (the reason each such
    session's ``state()`` gives too)."""
    return off_reason(saved=config.session_dir is not None)
