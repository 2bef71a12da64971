"""Streamed deltas merged in a time window, so a fast stream costs fewer messages on the wire.

``Coalescer.add(key, delta)``: a delta arriving less than ``window()`` seconds after the last
one sent is held; later deltas with the same ``key`` (a stream: a block of a message, a kind
of ACP chunk) are appended to it; the held text is sent (``send(key, text)``) when the window
ends, when a delta of another key arrives, or when the owner calls ``flush`` (before any other
message, so the order on the wire is the order of the events). The first delta after a quiet
window is not held for a timer: it goes out once the loop has run the current step, with the
deltas that came in that step (the rest of the same read of the model's stream). A window of 0,
or no running event loop, sends every delta as it comes.
Both fronts use it: Tiller's ``message_update`` and ACP's ``agent_message_chunk`` /
``agent_thought_chunk``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable

__all__ = ["DEFAULT_WINDOW", "Coalescer"]

DEFAULT_WINDOW = 0.016
"""Seconds: deltas within this long of the last one sent are merged (Tiller's front lets the
client choose, ``initialize``'s ``deltaWindowMs``; ACP has no such parameter)."""


class Coalescer:
    """Holds at most one merged delta; see the module docstring."""

    def __init__(
        self, send: Callable[[Hashable, str], None], window: Callable[[], float]
    ) -> None:
        self._send = send
        self.window = window
        self._key: Hashable | None = None
        self._parts: list[str] = []
        self._last_sent = float("-inf")
        self._timer: asyncio.Handle | None = None

    def add(self, key: Hashable, delta: str) -> None:
        """Hold ``delta``, merged with the next ones of ``key``, until this step of the loop
        ends (a quiet window) or the window does; off the loop or with a window of 0, send it
        now."""
        if self._parts:
            if key == self._key:
                self._parts.append(delta)
                return
            self.flush()
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        window = self.window() if loop is not None else 0.0  # off the loop: no timer
        if loop is None or window <= 0:
            self._emit(key, delta, loop)
            return
        self._key, self._parts = key, [delta]
        now = loop.time()
        if now - self._last_sent >= window:  # at once, with what came in the same read
            self._timer = loop.call_soon(self.flush)
        else:
            due = self._last_sent + window
            self._timer = loop.call_at(due, self._flush_due, due)

    def flush(self) -> None:
        """Send the held delta, if any, now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._parts:
            key, text = self._key, "".join(self._parts)
            self._key, self._parts = None, []
            try:
                loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            self._emit(key, text, loop)

    def _flush_due(self, due: float) -> None:
        """The timer: send the held delta, counted as sent when it was due. A timer fires a
        little late (up to a millisecond here), and counting from then would move each window
        later than the last, out of step with the model's stream, read once per window
        (``providers.http``): every delta would then wait most of a window for the timer."""
        self._timer = None
        self.flush()
        self._last_sent = due

    def _emit(self, key: Hashable, text: str, loop: asyncio.AbstractEventLoop | None) -> None:
        if loop is not None:
            self._last_sent = loop.time()
        self._send(key, text)
