"""Subagents over ACP (issue 29): the task is one ``tool_call`` of the parent's session whose
content is updated with the subagent's progress until it ends; the subagent's permission
question is asked as that call; nothing goes out under the subagent's own session id. Every
message is checked against ACP's schema (``spawn_acp``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp import text_block

from support.acp_client import Recorder, spawn_acp, start
from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply

pytestmark = [pytest.mark.anyio, pytest.mark.process]


def asks(prompt: str) -> Any:
    def match(body: dict[str, Any]) -> bool:
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        return bool(users) and users[0].get("content") == prompt

    return match


async def test_a_task_is_one_tool_call_updated_with_its_subagents_progress(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("old\n")
    fake_openai.route(asks("tidy the notes"),
                      tool_call_reply([("r1", "read", {"path": "notes.txt"})]),
                      tool_call_reply([("w1", "write", {"path": "notes.txt", "content": "new\n"})]),
                      text_reply("Rewrote notes.txt."))
    fake_openai.enqueue(
        tool_call_reply([("t1", "task", {"description": "Tidy the notes",
                                         "prompt": "tidy the notes"})]),
        text_reply("All tidy."))
    recorder = Recorder()
    async with spawn_acp(recorder, fake_openai, ws, "--session-dir",
                         str(tmp_path / "data")) as conn:
        session_id = await start(conn, ws)
        response = await conn.prompt(session_id=session_id, prompt=[text_block("tidy up")])

    assert response.stop_reason == "end_turn"
    sent_under = {m["params"]["sessionId"] for m in recorder.raw
                  if m.get("method") in ("session/update", "session/request_permission")}
    assert sent_under == {session_id}  # never the subagent's own session
    task = [u for u in recorder.session_updates() if u.get("toolCallId") == "t1"]
    assert task[0]["sessionUpdate"] == "tool_call" and task[0]["title"] == "Tidy the notes"
    progress = [u["content"][0]["content"]["text"] for u in task[1:-1] if "content" in u]
    assert progress[0] == "**general-purpose** · 1 tool call\n\n- … Read notes.txt"
    assert progress[-1] == ("**general-purpose** · 2 tool calls · ended: stop\n\n"
                            "- ✓ Read notes.txt\n- ✓ Write notes.txt\n\n> Rewrote notes.txt.")
    assert all(u.get("status") == "in_progress" for u in task[1:-1] if "content" in u)
    final = task[-1]
    assert final["status"] == "completed"
    assert final["content"][0]["content"]["text"] == (
        "Rewrote notes.txt.\n\nFiles it changed: notes.txt.")
    [question] = recorder.asked()
    assert question["toolCall"]["toolCallId"] == "t1" and "title" not in question["toolCall"]
    asked = question["toolCall"]["content"]
    assert asked[0]["content"]["text"] == "A subagent asks to run: Write notes.txt"
    assert asked[1]["type"] == "diff" and asked[1]["newText"] == "new\n"
    assert (ws / "notes.txt").read_text() == "new\n"
