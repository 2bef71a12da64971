"""Issue 26, 11: many live sessions against the server's open-file limit.

Each live saved session used to keep its log open, so under a lowered descriptor limit enough
``session/new`` + prompt made every later session's tools fail with EMFILE (and its log writes
fail silently). An idle session now holds no descriptor, and a request that finds none free is
answered -32019 saying which limit was reached; the server keeps serving.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import spawn_tiller
from tiller.client import RpcError

pytestmark = [pytest.mark.anyio, pytest.mark.process]

SESSIONS = 60
HEADROOM = 24
"""Descriptors the server may open beyond those it holds at the start: far fewer than
``SESSIONS``, enough for one bash call and a provider connection."""


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def test_idle_sessions_hold_no_descriptor_and_exhaustion_is_a_clear_error(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(SESSIONS):
        fake_openai.enqueue(text_reply(f"reply {i}"))
    fake_openai.enqueue(
        tool_call_reply([("c1", "bash", {"command": "echo still-alive"})]), text_reply("done"))
    async with spawn_tiller(fake_openai, ws) as tiller:
        pid = tiller.process.pid
        hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)[1]
        limit = open_descriptors(pid) + HEADROOM
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, hard))
        ids = []
        for i in range(SESSIONS):
            session_id = (await tiller.request("session/new"))["sessionId"]
            result = await tiller.request("agent/prompt",
                                          {"sessionId": session_id, "message": f"hello {i}"})
            assert result["stopReason"] == "stop", result
            ids.append(session_id)
        held = open_descriptors(pid)
        last = (await tiller.request("session/new"))["sessionId"]
        result = await tiller.request("agent/prompt", {"sessionId": last, "message": "run it"})
        listed = await tiller.request("session/list", {"limit": 100})

        # Out of descriptors altogether (only stdio fits under the limit): a clear error.
        await tiller.request("session/close", {"sessionId": ids[0]})
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (3, hard))
        with pytest.raises(RpcError) as load_refused:
            await tiller.request("session/load", {"sessionId": ids[0]})
        with pytest.raises(RpcError) as list_refused:
            await tiller.request("session/list")
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, hard))
        loaded = await tiller.request("session/load", {"sessionId": ids[0]})

    assert held < limit - HEADROOM // 2  # sixty saved sessions live, no descriptor each
    assert result["stopReason"] == "stop"
    tool_result = fake_openai.requests[-1]["messages"][-1]
    assert tool_result["role"] == "tool" and "still-alive" in tool_result["content"]
    assert len(listed["sessions"]) == SESSIONS + 1  # every log was written
    for refused in (load_refused.value, list_refused.value):
        assert refused.code == -32019
        assert "limit of 3 open files" in refused.message and "ulimit -n" in refused.message
    assert [m["content"] for m in loaded["messages"] if m["role"] == "assistant"][0][0][
        "text"] == "reply 0"
