"""Shared pytest fixtures: the anyio backend and strict loopback fakes of the model APIs; and the
``process`` marker held honest: a test that is not marked ``process`` fails if it starts one of
the programs the spawning tests drive (a Python interpreter such as the ``tiller`` server,
Neovim, Node, VS Code), so ``make test-fast`` (``-m "not process"``) never spawns them."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from support.fake_anthropic import FakeAnthropic
from support.fake_openai import FakeOpenAI
from support.fake_openai_responses import FakeResponses


@pytest.fixture
def anyio_backend() -> str:
    """Run ``@pytest.mark.anyio`` tests on asyncio only (Tiller runs on asyncio)."""
    return "asyncio"


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A started FakeOpenAI; at teardown it is closed, then every scripted reply must have been
    used and no request may have gone unscripted (see ``FakeOpenAI.assert_script_complete``)."""
    with FakeOpenAI() as fake:
        yield fake
    fake.assert_script_complete()


@pytest.fixture
def fake_responses() -> Iterator[FakeResponses]:
    """A started FakeResponses (OpenAI's Responses API); checked as ``fake_openai`` is."""
    with FakeResponses() as fake:
        yield fake
    fake.assert_script_complete()


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    """A started FakeAnthropic; at teardown it is closed, then every scripted reply must have
    been used and no request may have gone unscripted (``FakeAnthropic.assert_script_complete``)."""
    with FakeAnthropic() as fake:
        yield fake
    fake.assert_script_complete()


PEERS = ("python", "tiller", "nvim", "node", "npm", "npx", "code-server", "chromium", "uvx")
"""Programs only a ``process`` test may start (by the basename's start: python3.11 is python)."""


@pytest.fixture(autouse=True)
def only_process_tests_spawn_peers(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a test without the ``process`` marker, starting a peer program raises."""
    if request.node.get_closest_marker("process") is not None:
        return
    real_init = subprocess.Popen.__init__

    def guarded(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
        program = os.path.basename(os.fsdecode(argv[0])) if argv else ""
        if kwargs.get("shell"):
            program = os.fsdecode(argv[0]).split()[0].rsplit("/", 1)[-1] if argv else ""
        if program.startswith(PEERS):
            raise AssertionError(f"{request.node.nodeid} starts {program!r}: mark it process")
        real_init(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", guarded)
