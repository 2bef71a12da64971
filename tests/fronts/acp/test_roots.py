"""ACP ``additionalDirectories``: extra workspace roots for the permission gate, end to end. In
``acceptEdits`` mode a write inside one is "in the workspace" (allowed without a question), a
write elsewhere outside the cwd is still denied; a relative directory is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import RequestError, text_block

from support.acp_client import Recorder, spawn_acp
from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply

pytestmark = [pytest.mark.anyio, pytest.mark.process]


async def test_additional_directories_are_workspace_roots(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    workspace, extra, elsewhere = tmp_path / "ws", tmp_path / "lib", tmp_path / "elsewhere"
    for folder in (workspace, extra, elsewhere):
        folder.mkdir()
    fake_openai.enqueue(
        tool_call_reply([("w1", "write", {"path": str(extra / "a.txt"), "content": "in\n"})]),
        tool_call_reply([("w2", "write", {"path": str(elsewhere / "b.txt"),
                                          "content": "out\n"})]),
        text_reply("done"),
        tool_call_reply([("w3", "write", {"path": str(extra / "c.txt"), "content": "c\n"})]),
        text_reply("done again"),
    )
    recorder = Recorder()
    async with spawn_acp(recorder, fake_openai, workspace) as conn:
        init = await conn.initialize(protocol_version=1)
        with pytest.raises(RequestError) as relative:
            await conn.new_session(cwd=str(workspace), additional_directories=["lib"],
                                   mcp_servers=[])
        session = await conn.new_session(cwd=str(workspace), additional_directories=[str(extra)],
                                         mcp_servers=[])
        sid = session.session_id
        await conn.set_session_mode(session_id=sid, mode_id="acceptEdits")
        await conn.prompt(session_id=sid, prompt=[text_block("write both")])
        await conn.close_session(session_id=sid)
        await conn.resume_session(session_id=sid, cwd=str(workspace),
                                  additional_directories=[str(extra)])
        await conn.set_session_mode(session_id=sid, mode_id="acceptEdits")
        await conn.prompt(session_id=sid, prompt=[text_block("one more")])

    capabilities = init.agent_capabilities
    assert capabilities is not None and capabilities.session_capabilities is not None
    assert capabilities.session_capabilities.additional_directories is not None
    assert relative.value.code == -32602
    assert (extra / "a.txt").read_text() == "in\n"
    assert not (elsewhere / "b.txt").exists()
    assert recorder.final("w1")["status"] == "completed"
    assert recorder.final("w2")["status"] == "failed"
    assert (extra / "c.txt").read_text() == "c\n"  # resume takes the roots again
    assert recorder.asked() == []
