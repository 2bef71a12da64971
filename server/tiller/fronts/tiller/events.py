"""A session's events as ``agent/event`` notifications: serialized once, deltas coalesced.

Each notification is written as one already-serialized JSON body (pydantic's
``model_dump_json``, or a preformatted ``message_update``) straight to the connection's framed
writer, not through pygls's ``notify`` (a dict, then cattrs, then ``json``).

Coalescing (protocol.md, ``message_update``): a ``message_update`` delta (``text``,
``thinking``, ``toolCallArgs``) arriving less than ``window`` seconds after the last one sent
is held; later deltas of the same kind and block are appended to it; it is sent when the
window ends, or before any other event (a different block, ``toolCallStart``, ``message_end``
...). The first delta after a quiet window is never delayed. A window of 0 sends every delta as
it comes. ``seq`` counts the notifications actually sent, so it stays gapless.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from tiller.protocol.names import EVENT_METHOD
from tiller.types import AgentEvent, MessageUpdate

__all__ = ["DEFAULT_DELTA_WINDOW", "EventNotifier"]

DEFAULT_DELTA_WINDOW = 0.016
"""Seconds: deltas within this long of the last ``message_update`` sent are merged."""

_MERGED_KINDS = frozenset({"text", "thinking", "toolCallArgs"})


@dataclass
class _Held:
    kind: str
    index: int
    parts: list[str] = field(default_factory=list)


class EventNotifier:
    """A subscriber sending one session's events with ``write`` (a framed body writer);
    ``window`` is read per delta, in seconds (0: no coalescing); ``extra`` fields go with each
    (a child session's ``parentSessionId`` and ``parentToolCallId``)."""

    def __init__(
        self, session_id: str, write: Callable[[bytes], None], window: Callable[[], float],
        extra: Mapping[str, str] | None = None,
    ) -> None:
        self.session_id = session_id
        self.write = write
        self.window = window
        self.seq = 0
        fields = "".join(f"{json.dumps(key)}:{json.dumps(value)},"
                         for key, value in (extra or {}).items())
        self._prefix = (
            f'{{"jsonrpc":"2.0","method":"{EVENT_METHOD}","params":'
            f'{{"sessionId":{json.dumps(session_id)},{fields}"seq":'
        ).encode()
        self._held: _Held | None = None
        self._last_update = float("-inf")
        self._timer: asyncio.TimerHandle | None = None

    def __call__(self, event: AgentEvent) -> None:
        if (
            isinstance(event, MessageUpdate)
            and event.kind in _MERGED_KINDS
            and event.delta is not None
        ):
            self._delta(event.kind, event.index, event.delta)
            return
        self.flush()
        self._send(event.model_dump_json(by_alias=True, exclude_none=True).encode())

    def flush(self) -> None:
        """Send the held delta, if any, now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        held, self._held = self._held, None
        if held is not None:
            self._send_delta(held.kind, held.index, "".join(held.parts))

    def _delta(self, kind: str, index: int, delta: str) -> None:
        held = self._held
        if held is not None:
            if held.kind == kind and held.index == index:
                held.parts.append(delta)
                return
            self.flush()
        loop = _running_loop()
        window = self.window() if loop is not None else 0.0  # off the loop: no timer
        if loop is None or window <= 0 or loop.time() - self._last_update >= window:
            self._send_delta(kind, index, delta)
            return
        self._held = _Held(kind, index, [delta])
        self._timer = loop.call_at(self._last_update + window, self.flush)

    def _send_delta(self, kind: str, index: int, delta: str) -> None:
        loop = _running_loop()
        if loop is not None:
            self._last_update = loop.time()
        text = json.dumps(delta, ensure_ascii=False)
        self._send(
            f'{{"type":"message_update","kind":"{kind}","index":{index},"delta":{text}}}'.encode()
        )

    def _send(self, event_json: bytes) -> None:
        """Write ``event_json`` (an object with at least ``type``) as the next notification."""
        self.seq += 1
        self.write(b"".join((self._prefix, str(self.seq).encode(), b",", event_json[1:], b"}")))


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
