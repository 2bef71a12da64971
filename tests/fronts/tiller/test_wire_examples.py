"""End to end: details of the wire that protocol.md's examples show, checked on a real run:
an assistant ``message_start`` carries the placeholder ``stopReason: "stop"``, a bash call
never repeats the same progress update, and ``models/list`` shows the ``baseUrl`` calls go to."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import spawn_tiller

pytestmark = [pytest.mark.anyio, pytest.mark.process]


async def test_a_tool_round_as_protocol_md_shows_it(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(
        tool_call_reply([("call_1", "bash", {"command": "echo one; echo two"})]),
        text_reply("Done."),
    )
    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        await tiller.prompt("run it")
        listed = await tiller.request("models/list")

    starts = [e["message"] for e in tiller.events
              if e["type"] == "message_start" and e["message"]["role"] == "assistant"]
    ends = [e["message"] for e in tiller.events
            if e["type"] == "message_end" and e["message"]["role"] == "assistant"]
    assert len(starts) == 2 and all(m["stopReason"] == "stop" for m in starts)
    assert [m["stopReason"] for m in ends] == ["toolUse", "stop"]
    outputs = [e["partialResult"]["output"] for e in tiller.events
               if e["type"] == "tool_execution_update"]
    assert outputs and outputs[-1] == "one\ntwo\n"
    assert all(a != b for a, b in zip(outputs, outputs[1:], strict=False))
    openai = next(p for p in listed["providers"] if p["name"] == "openai")
    assert openai["baseUrl"] == fake_openai.url
