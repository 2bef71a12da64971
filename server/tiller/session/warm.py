"""Getting ready for the first prompt while the client is still idle: the modules a session,
its tools and the server's provider need (the provider's SDK among them: ``import openai``
alone takes half a second), imported in a worker thread right after ``initialize`` is answered,
so the first prompt does not pay for them (protocol.md, ``initialize``). Memory is spent for
that latency: the process holds those modules from the start (README, Performance).
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Sequence

from tiller.config import ServerConfig
from tiller.providers.registry import prepare_ahead

__all__ = ["SESSION_MODULES", "import_ahead"]

log = logging.getLogger(__name__)

SESSION_MODULES = (
    "tiller.session.registry",
    "tiller.session.session",
    *(f"tiller.tools.{name}" for name in
      ("builtin", "bash", "read", "write", "edit", "grep", "find", "ls", "todo")),
)
"""What every first prompt needs (each imports the rest: the agent, its loop, the store...)."""


def import_ahead(config: ServerConfig, extra: Sequence[str] = ()) -> float:
    """Import ``extra`` (the front's own modules) and ``SESSION_MODULES``, and prepare the
    server's provider (``prepare_ahead``: its SDK, the TLS context); seconds it took. What
    fails is logged and left to fail where it is used, with that error."""
    start = time.perf_counter()
    for name in (*extra, *SESSION_MODULES):
        try:
            importlib.import_module(name)
        except Exception:
            log.debug("warm-up: importing %s failed", name, exc_info=True)
    try:
        prepare_ahead(config.providers.get(config.provider))
    except Exception:
        log.debug("warm-up: preparing the provider failed", exc_info=True)
    return time.perf_counter() - start
