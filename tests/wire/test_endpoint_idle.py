"""``Endpoint.wait_idle``: work in a worker thread (the warm-up) waits while one of the client's
requests is being handled, goes on once none is, and stops waiting for good when the connection
ends (``tiller.session.warm``)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import anyio
import pytest

from tiller.session.warm import SESSION_MODULES, build_models, import_ahead, import_modules
from tiller.wire.endpoint import Endpoint

pytestmark = pytest.mark.anyio


async def test_a_waiting_thread_goes_on_only_once_every_request_is_answered() -> None:
    endpoint, sent, answered = Endpoint(), [], asyncio.Event()

    def write(body: bytes) -> None:
        sent.append(body)
        answered.set()

    endpoint.write = write
    releases = {1: asyncio.Event(), 2: asyncio.Event()}

    async def held(params: Any) -> None:
        await releases[params["n"]].wait()

    endpoint.methods["held"] = held
    endpoint.on_request(1, "held", {"n": 1})
    endpoint.on_request(2, "held", {"n": 2})
    went_on = threading.Event()
    answers: list[bool] = []

    def warm_up() -> None:
        answers.append(endpoint.wait_idle())
        went_on.set()

    waiting = threading.Thread(target=warm_up)
    waiting.start()
    releases[1].set()
    await answered.wait()  # request 1
    assert not went_on.wait(0.2)  # request 2 still runs
    releases[2].set()
    assert await anyio.to_thread.run_sync(went_on.wait, 10)
    waiting.join()
    assert answers == [True] and len(sent) == 2


async def test_once_the_connection_ends_a_waiting_thread_is_told_to_stop() -> None:
    endpoint = Endpoint()
    endpoint.write = lambda body: None
    never = asyncio.Event()

    async def held(params: Any) -> None:
        await never.wait()

    endpoint.methods["held"] = held
    endpoint.on_request(1, "held", None)
    answer: list[bool] = []
    waiting = threading.Thread(target=lambda: answer.append(endpoint.wait_idle()))
    waiting.start()
    endpoint.close()
    await anyio.to_thread.run_sync(waiting.join, 10)
    assert answer == [False]
    assert endpoint.wait_idle() is False  # and never waits again
    endpoint.running[1].cancel()


def test_the_warm_up_asks_before_each_step_and_stops_when_told() -> None:
    asked: list[int] = []

    def proceed() -> bool:
        asked.append(len(asked))
        return len(asked) <= 3

    import_ahead(proceed=proceed)
    assert len(asked) == 4  # three steps ran; the fourth was refused, and nothing after it

    asked.clear()
    import_ahead(proceed=lambda: asked.append(0) is None)
    assert len(asked) > len(SESSION_MODULES)  # a module, a model, a tool: each a step


def test_the_modules_and_the_models_are_separate_phases_each_stopping_when_told() -> None:
    """A front waits for the modules' phase and lets the models' phase give way: each asks
    before its steps, says whether it finished, and a stopped import builds no model."""
    took, finished = import_modules(proceed=lambda: False)
    assert (took, finished) == (0.0, False)
    took, finished = import_modules()
    assert finished and took >= 0

    asked: list[int] = []
    build_models(proceed=lambda: asked.append(0) is None and len(asked) <= 2)
    assert len(asked) == 3  # two models built, the third refused, nothing after it

    asked.clear()
    import_ahead(proceed=lambda: asked.append(0) is None and len(asked) <= 1)
    assert len(asked) == 2  # the first module, then refused: the models were never asked
