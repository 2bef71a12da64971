"""Streamed deltas merged in a time window, so a fast stream costs fewer messages on the wire.

``Coalescer.add(key, delta)``: a delta arriving less than ``window()`` seconds after the last
one sent is held; later deltas with the same ``key`` (a stream: a block of a message, a kind
of ACP chunk) are appended to it; the held text is sent (``send(key, text)``) when the window
ends, when a delta of another key arrives, or when the owner calls ``flush`` (before any other
message, so the order on the wire is the order of the events). The first delta after a quiet
window is never delayed; a window of 0, or no running event loop, sends every delta as it comes.
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
        self._timer: asyncio.TimerHandle | None = None

    def add(self, key: Hashable, delta: str) -> None:
        """Send ``delta`` now, or hold it to be merged with the next ones of ``key``."""
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
        if loop is None or window <= 0 or loop.time() - self._last_sent >= window:
            self._emit(key, delta, loop)
            return
        self._key, self._parts = key, [delta]
        self._timer = loop.call_at(self._last_sent + window, self.flush)

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

    def _emit(self, key: Hashable, text: str, loop: asyncio.AbstractEventLoop | None) -> None:
        if loop is not None:
            self._last_sent = loop.time()
        self._send(key, text)
