"""Issue 27 over ACP: a sandboxed command runs without ``session/request_permission`` and its
final ``tool_call_update`` says how it ran (``rawOutput.sandbox``); one that asks to escalate
is asked about, the question showing that it would leave the sandbox and the model's reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import text_block

from support.acp_client import Recorder, spawn_acp, start
from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply

pytestmark = [pytest.mark.anyio, pytest.mark.process]


async def test_acp_asks_only_for_the_escalation_and_shows_why(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(
        tool_call_reply([("boxed", "bash", {"command": "echo inside > made.txt"})]),
        tool_call_reply([("out", "bash", {"command": "echo outside", "escalate": "unsandboxed",
                                          "reason": "start the dev server"})]),
        text_reply("done"),
    )
    recorder = Recorder(["reject_once"])
    async with spawn_acp(recorder, fake_openai, tmp_path) as conn:
        session_id = await start(conn, tmp_path)
        await conn.prompt(session_id=session_id, prompt=[text_block("go")])

    assert (tmp_path / "made.txt").read_text() == "inside\n"
    boxed = recorder.final("boxed")
    assert boxed["status"] == "completed"
    assert boxed["rawOutput"]["sandbox"] == {"mode": "workspace-write", "network": False}
    [question] = recorder.asked()
    assert question["toolCall"]["toolCallId"] == "out"
    shown = question["toolCall"]["content"][0]["content"]["text"]
    assert "asks to run outside the sandbox: start the dev server" in shown
    assert recorder.final("out")["status"] == "failed"
