"""``Coalescer``: the deltas of one read go out together and at once; a delta within the window
of the last send is held until that window ends; and windows are counted from when a held
delta was due, so they stay in step with a stream read once per window. The loop's clock is
set by hand (``Clock``): what is tested is the arithmetic, not this machine's timers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable

import pytest

from tiller.wire.coalesce import Coalescer

pytestmark = pytest.mark.anyio

WINDOW = 0.016


class Clock:
    """The running loop's ``time``, moved by ``at``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.now = loop.time()
        self.start = self.now
        loop.time = lambda: self.now  # type: ignore[method-assign]

    def at(self, offset: float) -> None:
        self.now = self.start + offset


@pytest.fixture
async def clock() -> AsyncIterator[Clock]:
    loop = asyncio.get_running_loop()
    real = loop.time
    yield Clock(loop)
    loop.time = real  # type: ignore[method-assign]


async def turns(n: int = 3) -> None:
    """Let the loop run ``n`` times (what is due runs: the clock is past it)."""
    for _ in range(n):
        await asyncio.sleep(0)


@pytest.fixture
def sent() -> list[tuple[Hashable, str]]:
    """What the coalescer sent, in order: (key, text)."""
    return []


@pytest.fixture
def coalescer(sent: list[tuple[Hashable, str]]) -> Coalescer:
    return Coalescer(lambda key, text: sent.append((key, text)), lambda: WINDOW)


async def test_the_deltas_of_one_read_go_out_at_once_as_one(
    clock: Clock, coalescer: Coalescer, sent: list[tuple[Hashable, str]]
) -> None:
    coalescer.add("text", "Hel")
    coalescer.add("text", "lo")
    assert sent == []  # the rest of the read may follow in this same step
    await turns()
    assert sent == [("text", "Hello")]  # the clock did not move: nothing waited for a timer


async def test_a_held_delta_counts_its_window_from_when_it_was_due(
    clock: Clock, coalescer: Coalescer, sent: list[tuple[Hashable, str]]
) -> None:
    coalescer.add("text", "a")
    await turns()
    clock.at(0.010)
    coalescer.add("text", "b")  # within the window: held until 0.016
    await turns()
    assert sent == [("text", "a")]
    clock.at(0.0175)  # the timer fires 1.5 ms late, as timers do
    await turns()
    assert sent == [("text", "a"), ("text", "b")]
    clock.at(0.0325)  # the next read, one window after the last (16.5 ms after 0.016)
    coalescer.add("text", "c")
    await turns()
    # Counted from 0.0175 (when the timer fired) it would wait; from 0.016, it does not.
    assert sent == [("text", "a"), ("text", "b"), ("text", "c")]


async def test_another_key_or_a_flush_sends_the_held_delta_first(
    clock: Clock, coalescer: Coalescer, sent: list[tuple[Hashable, str]]
) -> None:
    coalescer.add("text", "a")
    await turns()
    clock.at(0.005)
    coalescer.add("text", "b")
    coalescer.add("thinking", "t")
    assert sent == [("text", "a"), ("text", "b")]
    coalescer.flush()
    assert sent == [("text", "a"), ("text", "b"), ("thinking", "t")]
    await turns()
    assert len(sent) == 3  # no timer left to send anything twice


async def test_a_window_of_zero_sends_each_delta_as_it_comes(
    sent: list[tuple[Hashable, str]]
) -> None:
    coalescer = Coalescer(lambda key, text: sent.append((key, text)), lambda: 0.0)
    coalescer.add("text", "a")
    coalescer.add("text", "b")
    assert sent == [("text", "a"), ("text", "b")]
