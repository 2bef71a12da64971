"""Getting ready for the first prompt while the client is still idle: the modules a session, its
tools and the server's provider need (pydantic's models, the HTTP library: a few hundred ms on a
loaded machine), imported in a worker thread right after ``initialize`` is answered, so the first
prompt does not pay for them (protocol.md, ``initialize``). Memory is spent for that latency: the
process holds those modules from the start (README, Performance).

The work goes step by step (a module, a model, a tool's schema, the provider), and before each
step asks ``proceed``, which a front makes wait while one of the client's requests is handled
(``Endpoint.wait_idle``): a thread sharing the interpreter would slow the request down, and the
request imports what it needs itself.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence

from tiller.config import ServerConfig
from tiller.providers.registry import prepare_ahead

__all__ = ["MODEL_MODULES", "SESSION_MODULES", "build_models", "import_ahead", "import_modules",
           "prepare_provider"]

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


Proceed = Callable[[], bool]
"""Called between steps; blocks while the step should wait, returns whether to go on."""


def _always() -> bool:
    return True


def import_ahead(extra: Sequence[str] = (), models: Sequence[str] = (),
                 proceed: Proceed = _always) -> float:
    """``import_modules`` then ``build_models``, asking ``proceed`` before each step; seconds
    it took (waits excluded)."""
    took, finished = import_modules(extra, proceed)
    return took + build_models(models, proceed) if finished else took


def import_modules(extra: Sequence[str] = (), proceed: Proceed = _always) -> tuple[float, bool]:
    """Import ``extra`` (the front's own modules) and ``SESSION_MODULES``, asking ``proceed``
    before each; the seconds it took (waits excluded) and whether it went to the end. A module
    that fails is logged and left to fail where it is used, with that error."""
    took = 0.0
    for name in (*extra, *SESSION_MODULES):
        if not proceed():
            return took, False
        start = time.perf_counter()
        try:
            importlib.import_module(name)
        except Exception:
            log.debug("warm-up: importing %s failed", name, exc_info=True)
        took += time.perf_counter() - start
    return took, True


def build_models(models: Sequence[str] = (), proceed: Proceed = _always) -> float:
    """Finish the pydantic models of ``MODEL_MODULES`` and ``models`` and build the built-in
    tools' JSON schemas (a first prompt's request needs them), asking ``proceed`` before each;
    seconds it took (waits excluded). Each is built on first use otherwise (``defer_build``),
    so a request that comes first builds what it needs itself."""
    took = 0.0
    try:
        for step in _model_steps((*MODEL_MODULES, *models)):
            if not proceed():
                return took
            start = time.perf_counter()
            step()
            took += time.perf_counter() - start
    except Exception:
        log.debug("warm-up: building the models failed", exc_info=True)
    return took


def prepare_provider(config: ServerConfig, proceed: Proceed = _always) -> float:
    """Prepare the server's default provider (``prepare_ahead``: the HTTP library
    imported, a first call made but for the network, the TLS context built) if ``proceed()``;
    seconds it took. A failure is logged and left to the first prompt."""
    if not proceed():
        return 0.0
    start = time.perf_counter()
    try:
        prepare_ahead(config.providers.get(config.provider), config.base_url)
    except Exception:
        log.debug("warm-up: preparing the provider failed", exc_info=True)
    return time.perf_counter() - start


def _model_steps(module_names: Sequence[str]) -> Iterator[Callable[[], object]]:
    """One step per pydantic model the modules define that is not built yet (it builds it),
    then one per built-in tool (it builds the tool's JSON schema)."""
    from pydantic import BaseModel

    for name in module_names:
        module = importlib.import_module(name)
        for value in list(vars(module).values()):
            if (isinstance(value, type) and issubclass(value, BaseModel)
                    and value.__module__ == name and not value.__pydantic_complete__):
                yield value.model_rebuild
    from tiller.tools.builtin import default_tools

    for tool in default_tools():
        yield tool.parameters_schema
