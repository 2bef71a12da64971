"""Unit tests of the output path: ``EventNotifier`` (serialized events, merged deltas) and
``FramedWriter`` (line separators escaped for NDJSON readers)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from tiller.fronts.tiller.events import EventNotifier
from tiller.types import AgentEnd, MessageUpdate, Usage
from tiller.wire.framing import Framing
from tiller.wire.stdio import FramedWriter


class _Reader:
    framing: Framing | None = Framing.NDJSON


def _notifier(window: float) -> tuple[EventNotifier, list[dict[str, Any]]]:
    """A notifier on session ``s1`` and the params of what it sent (the envelope checked)."""
    sent: list[dict[str, Any]] = []

    def write(body: bytes) -> None:
        message = json.loads(body)
        assert message.keys() == {"jsonrpc", "method", "params"}
        assert message["method"] == "agent/event" and message["params"]["sessionId"] == "s1"
        sent.append(message["params"])

    return EventNotifier("s1", write, lambda: window), sent


def test_line_and_paragraph_separators_go_out_escaped() -> None:
    out: list[bytes] = []
    writer = FramedWriter(out.append, _Reader())  # type: ignore[arg-type]
    writer.write(json.dumps({"text": "a\u2028b\u2029c"}, ensure_ascii=False).encode())
    assert out == [b'{"text": "a\\u2028b\\u2029c"}\n']
    assert json.loads(out[0]) == {"text": "a\u2028b\u2029c"}


@pytest.mark.anyio
async def test_deltas_within_the_window_are_merged_and_flushed_before_the_next_event() -> None:
    notify, sent = _notifier(window=60.0)  # long: only the next event can flush
    notify(MessageUpdate(kind="text", index=0, delta="a"))
    await anyio.lowlevel.checkpoint()  # the first delta goes out with its step's: alone
    for piece in ("b", "c"):
        notify(MessageUpdate(kind="text", index=0, delta=piece))
    notify(MessageUpdate(kind="toolCallStart", index=1, tool_call_id="c1", tool_name="ls"))
    notify(AgentEnd(stop_reason="stop", usage=Usage()))
    assert [(e["seq"], e["type"], e.get("delta")) for e in sent] == [
        (1, "message_update", "a"), (2, "message_update", "bc"),
        (3, "message_update", None), (4, "agent_end", None),
    ]
    assert sent[2]["toolCallId"] == "c1" and sent[3]["stopReason"] == "stop"


@pytest.mark.anyio
async def test_a_held_delta_goes_out_when_the_window_ends() -> None:
    notify, sent = _notifier(window=0.5)  # "y" comes well inside it, even on a loaded machine
    flushed = anyio.Event()
    write = notify.write
    notify.write = lambda body: (write(body), flushed.set() if len(sent) == 2 else None)
    notify(MessageUpdate(kind="text", index=0, delta="x"))
    await anyio.lowlevel.checkpoint()
    notify(MessageUpdate(kind="text", index=0, delta="y"))
    assert len(sent) == 1
    with anyio.fail_after(5):
        await flushed.wait()  # the loop's timer flushed it, no other event did
    assert [e["delta"] for e in sent] == ["x", "y"]


def test_off_the_event_loop_every_delta_goes_out() -> None:
    notify, sent = _notifier(window=60.0)
    notify(MessageUpdate(kind="text", index=0, delta="x"))
    notify(MessageUpdate(kind="text", index=0, delta="y"))
    assert [e["delta"] for e in sent] == ["x", "y"]
