"""Getting ready for the first prompt while the client is still idle: the modules a session, its
tools and the server's provider need (pydantic's models, the HTTP library: a few hundred ms on a
loaded machine), imported in a worker thread right after ``initialize`` is answered, so the first
prompt does not pay for them (protocol.md, ``initialize``). Memory is spent for that latency: the
process holds those modules from the start (README, Performance).
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Sequence

from tiller.config import ServerConfig
from tiller.providers.registry import prepare_ahead

__all__ = ["MODEL_MODULES", "SESSION_MODULES", "import_ahead", "prepare_provider"]

log = logging.getLogger(__name__)

SESSION_MODULES = (
    "tiller.session.registry",
    "tiller.session.session",
    *(f"tiller.tools.{name}" for name in
      ("builtin", "bash", "read", "write", "edit", "grep", "find", "ls", "todo")),
)
"""What every first prompt needs (each imports the rest: the agent, its loop, the store...)."""


MODEL_MODULES = ("tiller.types",)
"""Whose pydantic models a first prompt validates or dumps (built on first use: defer_build)."""


def import_ahead(extra: Sequence[str] = (), models: Sequence[str] = ()) -> float:
    """Import ``extra`` (the front's own modules) and ``SESSION_MODULES``, finish the pydantic
    models of ``MODEL_MODULES`` and ``models``, and build the built-in tools' JSON schemas (a
    first prompt's request needs them); seconds it took. What fails is logged and left to fail
    where it is used, with that error."""
    start = time.perf_counter()
    for name in (*extra, *SESSION_MODULES):
        try:
            importlib.import_module(name)
        except Exception:
            log.debug("warm-up: importing %s failed", name, exc_info=True)
    try:
        _finish_models((*MODEL_MODULES, *models))
        from tiller.tools.builtin import default_tools

        for tool in default_tools():
            tool.parameters_schema()
    except Exception:
        log.debug("warm-up: building the models failed", exc_info=True)
    return time.perf_counter() - start


def prepare_provider(config: ServerConfig) -> float:
    """Prepare the server's default provider (``prepare_ahead``: the HTTP library
    imported, a first call made but for the network, the TLS context built); seconds it took.
    A failure is logged and left to the first prompt."""
    start = time.perf_counter()
    try:
        prepare_ahead(config.providers.get(config.provider), config.base_url)
    except Exception:
        log.debug("warm-up: preparing the provider failed", exc_info=True)
    return time.perf_counter() - start


def _finish_models(module_names: Sequence[str]) -> None:
    """Build each pydantic model the modules define that is not built yet."""
    from pydantic import BaseModel

    for name in module_names:
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, BaseModel)
                    and value.__module__ == name and not value.__pydantic_complete__):
                value.model_rebuild()
