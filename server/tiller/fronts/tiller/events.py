"""A session's events as ``agent/event`` notifications: serialized once, deltas coalesced.

Each notification is written as one already-serialized JSON body (pydantic's
``model_dump_json``, or a preformatted ``message_update``) straight to the connection's framed
writer, not through ``Endpoint.notify`` (a dict, then ``json``).

Coalescing (protocol.md, ``message_update``; ``tiller.wire.coalesce``): a ``message_update``
delta (``text``, ``thinking``, ``toolCallArgs``) arriving less than ``window`` seconds after the
last one sent is held; later deltas of the same kind and block are appended to it; it is sent
when the window ends, or before any other event (a different block, ``toolCallStart``,
``message_end`` ...). The first delta after a quiet window is never delayed. A window of 0 sends
every delta as it comes. ``seq`` counts the notifications actually sent, so it stays gapless.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping
from typing import cast

from tiller.protocol.names import EVENT_METHOD
from tiller.types import AgentEvent, MessageUpdate
from tiller.wire.coalesce import DEFAULT_WINDOW, Coalescer

__all__ = ["DEFAULT_DELTA_WINDOW", "EventNotifier"]

DEFAULT_DELTA_WINDOW = DEFAULT_WINDOW
"""Seconds: deltas within this long of the last ``message_update`` sent are merged, unless
``initialize`` set ``deltaWindowMs``."""

_MERGED_KINDS = frozenset({"text", "thinking", "toolCallArgs"})


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
        self.seq = 0
        fields = "".join(f"{json.dumps(key)}:{json.dumps(value)},"
                         for key, value in (extra or {}).items())
        self._prefix = (
            f'{{"jsonrpc":"2.0","method":"{EVENT_METHOD}","params":'
            f'{{"sessionId":{json.dumps(session_id)},{fields}"seq":'
        ).encode()
        self._deltas = Coalescer(self._send_delta, window)

    def __call__(self, event: AgentEvent) -> None:
        if (
            isinstance(event, MessageUpdate)
            and event.kind in _MERGED_KINDS
            and event.delta is not None
        ):
            self._deltas.add((event.kind, event.index), event.delta)
            return
        self.flush()
        self._send(event.model_dump_json(by_alias=True, exclude_none=True).encode())

    def flush(self) -> None:
        """Send the held delta, if any, now."""
        self._deltas.flush()

    def _send_delta(self, key: Hashable, delta: str) -> None:
        kind, index = cast("tuple[str, int]", key)
        text = json.dumps(delta, ensure_ascii=False)
        self._send(
            f'{{"type":"message_update","kind":"{kind}","index":{index},"delta":{text}}}'.encode()
        )

    def _send(self, event_json: bytes) -> None:
        """Write ``event_json`` (an object with at least ``type``) as the next notification."""
        self.seq += 1
        self.write(b"".join((self._prefix, str(self.seq).encode(), b",", event_json[1:], b"}")))
