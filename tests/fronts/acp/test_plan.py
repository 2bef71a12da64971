"""ACP plans end to end: a ``todo`` call is a ``think`` tool call that needs no permission, and
the plan goes to the client as ``plan`` updates (the whole list each time), also after
``session/load``'s replay."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import text_block

from support.acp_client import Recorder, spawn_acp, start
from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply

pytestmark = [pytest.mark.anyio, pytest.mark.process]

STEPS = [{"content": "Read the failing test", "status": "completed"},
         {"content": "Fix the parser", "status": "in_progress"}]


async def test_todo_calls_become_plan_updates(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.enqueue(
        tool_call_reply([("t1", "todo", {"todos": STEPS[:1]})]),
        tool_call_reply([("t2", "todo", {"todos": STEPS})]),
        text_reply("working on it"),
    )
    recorder = Recorder()
    async with spawn_acp(recorder, fake_openai, tmp_path) as conn:
        session_id = await start(conn, tmp_path)  # mode "ask": todo still needs no answer
        await conn.prompt(session_id=session_id, prompt=[text_block("fix the parser")])
    reloaded = Recorder()
    async with spawn_acp(reloaded, fake_openai, tmp_path) as conn:
        await conn.initialize(protocol_version=1)
        await conn.load_session(cwd=str(tmp_path), session_id=session_id, mcp_servers=[])

    plans = [u["entries"] for u in recorder.session_updates() if u["sessionUpdate"] == "plan"]
    assert plans == [[{**step, "priority": "medium"} for step in steps]
                     for steps in (STEPS[:1], STEPS)]
    assert recorder.asked() == []
    call = next(u for u in recorder.session_updates() if u["sessionUpdate"] == "tool_call")
    assert call["kind"] == "think" and call["title"] == "Update the plan"
    after_load = [u for u in reloaded.session_updates() if u["sessionUpdate"] == "plan"]
    assert [u["entries"] for u in after_load] == [plans[-1]]
