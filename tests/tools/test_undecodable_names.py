"""End to end: a file whose name is not UTF-8 (a byte Python keeps as a lone surrogate) is listed,
found and searched like any other; the results show the byte as ``\\xNN`` and can be sent, saved
and loaded again. ``ls`` once failed on such a directory (UnicodeEncodeError) and a result holding
the name could not be serialized at all."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import spawn_tiller
from tiller.tools.truncate import printable

pytestmark = pytest.mark.anyio


def test_printable_escapes_bytes_and_replaces_other_lone_surrogates() -> None:
    assert printable("bad-\udcff.txt") == "bad-\\xff.txt"
    assert printable("half \ud83d emoji") == "half \ufffd emoji"
    text = "plain é \U0001f600"
    assert printable(text) is text


@pytest.mark.process
async def test_ls_find_and_grep_show_a_name_that_is_not_utf8(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    Path(os.fsdecode(os.path.join(os.fsencode(tmp_path), b"bad-\xff.txt"))).write_bytes(
        b"needle in a file\n")
    fake_openai.enqueue(
        tool_call_reply([("c1", "ls", {"path": "."}), ("c2", "find", {"pattern": "*.txt"}),
                         ("c3", "grep", {"pattern": "needle", "path": "."})]),
        text_reply("done"),
    )
    async with spawn_tiller(fake_openai, tmp_path, "--permission-mode", "auto") as tiller:
        result = await tiller.request("agent/prompt", {"message": "look"}, timeout=60)
        session_id = (await tiller.request("agent/getState"))["sessionId"]
        ends = {e["toolCallId"]: e for e in tiller.events if e["type"] == "tool_execution_end"}
    async with spawn_tiller(fake_openai, tmp_path) as again:
        loaded = await again.request("session/load", {"sessionId": session_id})

    assert result["stopReason"] == "stop"
    texts = {call: end["result"]["content"][0]["text"] for call, end in ends.items()}
    assert not any(end["isError"] for end in ends.values()), texts
    assert "bad-\\xff.txt" in texts["c1"].splitlines()
    assert "bad-\\xff.txt" in texts["c2"].splitlines()
    assert "needle in a file" in texts["c3"]
    saved = [m["content"][0]["text"] for m in loaded["messages"] if m["role"] == "toolResult"]
    assert saved == [texts["c1"], texts["c2"], texts["c3"]]
    tool_messages = [m for m in fake_openai.requests[1]["messages"] if m["role"] == "tool"]
    assert "bad-\\xff.txt" in tool_messages[0]["content"]
