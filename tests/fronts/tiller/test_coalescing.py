"""End to end: ``message_update`` deltas arriving in a burst are merged (protocol.md,
``message_update``), deltas stay deltas, and ``initialize``'s ``deltaWindowMs: 0`` turns it off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.fake_openai import FakeOpenAI, text_reply
from support.helpers import spawn_tiller

pytestmark = [pytest.mark.anyio, pytest.mark.process]

CHUNKS = 2_000
TEXT = "".join(f"w{i % 10} " for i in range(CHUNKS))  # 3 characters per chunk


async def streamed(fake: FakeOpenAI, cwd: Path, initialize: dict[str, Any]) -> list[dict[str, Any]]:
    """The events of one prompt whose reply arrives as CHUNKS chunks in one burst."""
    fake.enqueue(text_reply(TEXT, chunk_size=3))
    async with spawn_tiller(fake, cwd) as tiller:
        await tiller.request("initialize", {"capabilities": {}, **initialize})
        await tiller.request("agent/prompt", {"message": "talk"}, timeout=60)
        return list(tiller.events)


def updates(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "message_update"]


async def test_a_burst_of_deltas_is_merged_by_default(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    events = await streamed(fake_openai, tmp_path, {})
    deltas = updates(events)
    assert "".join(d["delta"] for d in deltas) == TEXT  # deltas, not the message so far
    assert all(d["kind"] == "text" and d["index"] == 0 for d in deltas)
    assert deltas[0]["delta"].startswith("w0 ")  # the first read's, not held for a window
    assert len(deltas) < CHUNKS  # merged
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    end = next(e for e in events if e["type"] == "message_end" and
               e["message"]["role"] == "assistant")
    assert events.index(end) > events.index(deltas[-1])  # held text goes out before the end
    assert end["message"]["content"] == [{"type": "text", "text": TEXT}]


async def test_a_window_of_zero_sends_every_delta(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    deltas = updates(await streamed(fake_openai, tmp_path, {"deltaWindowMs": 0}))
    assert len(deltas) == CHUNKS
    assert [d["delta"] for d in deltas] == [TEXT[i : i + 3] for i in range(0, len(TEXT), 3)]


async def test_a_negative_window_is_invalid_params(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        reply = await tiller.request_raw("initialize", {"deltaWindowMs": -1})
    assert reply["error"]["code"] == -32602 and "deltaWindowMs" in reply["error"]["message"]
