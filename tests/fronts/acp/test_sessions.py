"""ACP session management end to end, with the official ``agent-client-protocol`` client:
``session/list`` (cwd filter, cursor paging over 120 sessions, titles, ``updatedAt``),
``session/resume`` (live again without a replay, with its ``mcpServers``), ``session/close``,
the ``session_info_update`` a session sends when it gets its title, and ``usage_update``."""

from __future__ import annotations

import os
import sys
from datetime import datetime
from pathlib import Path

import pytest
from acp import RequestError, text_block
from acp.schema import McpServerStdio

from support.acp_client import Recorder, spawn_acp, user_texts
from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.paths import SCRIPTED_MCP_SERVER
from tiller.store.log import SessionLog
from tiller.store.saved import log_path
from tiller.types import UserMessage

pytestmark = [pytest.mark.anyio, pytest.mark.process]

SCRIPTED = SCRIPTED_MCP_SERVER


def save_session(root: Path, cwd: Path, index: int) -> str:
    """A saved session of workspace ``cwd`` whose first message is ``task <index>``, its file
    modified at ``index`` seconds after 1 Jan 2026 (the list's order)."""
    session_id = f"{index:04d}" + "ab" * 14
    path = log_path(root, cwd, session_id)
    assert path is not None
    saved = SessionLog.create(path, {"id": session_id, "cwd": str(cwd), "provider": "openai",
                                     "model": "gpt-4o-mini"}, durable=False)
    saved.append("message", message=UserMessage(content=f"task {index}").dump())
    saved.close()
    stamp = 1_767_225_600 + index
    os.utime(path, (stamp, stamp))
    return session_id


async def test_session_list_pages_through_120_sessions_of_a_workspace(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    root, workspace, other = tmp_path / ".sessions", tmp_path / "ws", tmp_path / "other"
    workspace.mkdir()
    other.mkdir()
    ours = [save_session(root, workspace, index) for index in range(120)]
    theirs = [save_session(root, other, index) for index in range(120, 125)]
    recorder = Recorder()
    pages = []
    async with spawn_acp(recorder, fake_openai, tmp_path) as conn:
        init = await conn.initialize(protocol_version=1)
        cursor = None
        while True:
            page = await conn.list_sessions(cwd=str(workspace), cursor=cursor)
            pages.append(page)
            cursor = page.next_cursor
            if cursor is None:
                break
        everything = await conn.list_sessions()
        with pytest.raises(RequestError) as bad_cursor:
            await conn.list_sessions(cursor="not-a-cursor")

    capabilities = init.agent_capabilities
    assert capabilities is not None and capabilities.session_capabilities is not None
    assert capabilities.session_capabilities.list is not None
    assert capabilities.session_capabilities.resume is not None
    assert capabilities.session_capabilities.close is not None
    assert [len(page.sessions) for page in pages] == [50, 50, 20]
    listed = [info for page in pages for info in page.sessions]
    assert [info.session_id for info in listed] == ours[::-1]  # most recent first, no repeats
    assert listed[0].title == "task 119" and listed[-1].title == "task 0"
    assert all(info.cwd == str(workspace) for info in listed)
    assert listed[0].updated_at is not None
    assert datetime.fromisoformat(listed[0].updated_at).year >= 2026
    first_of_all = [info.session_id for info in everything.sessions]
    assert first_of_all[:5] == theirs[::-1] and everything.next_cursor is not None
    assert bad_cursor.value.code == -32602


async def test_close_then_resume_goes_on_without_a_replay(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(
        text_reply("first answer", usage=(1200, 34)),
        tool_call_reply([("s1", "mcp__s__flood", {"lines": 2})]),
        text_reply("second answer"),
    )
    recorder = Recorder()
    scripted = McpServerStdio(name="s", command=sys.executable, args=[str(SCRIPTED)], env=[])
    async with spawn_acp(recorder, fake_openai, tmp_path, "--permission-mode", "auto",
                         "--model", "gpt-5.6-terra") as conn:
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        sid = session.session_id
        await conn.prompt(session_id=sid, prompt=[text_block("Fix   the flaky\ntest please")])
        await conn.close_session(session_id=sid)
        with pytest.raises(RequestError) as closed:
            await conn.prompt(session_id=sid, prompt=[text_block("still there?")])
        with pytest.raises(RequestError) as unknown:
            await conn.resume_session(session_id="f" * 32, cwd=str(tmp_path))
        mark = len(recorder.raw)
        resumed = await conn.resume_session(session_id=sid, cwd=str(tmp_path),
                                            mcp_servers=[scripted])
        replayed = recorder.session_updates(mark)
        answer = await conn.prompt(session_id=sid, prompt=[text_block("flood")])
        listed = await conn.list_sessions(cwd=str(tmp_path))

    titles = [u for u in recorder.session_updates() if u["sessionUpdate"] == "session_info_update"]
    assert [u["title"] for u in titles] == ["Fix the flaky test please"]  # once, on the first
    assert datetime.fromisoformat(titles[0]["updatedAt"]).year >= 2026
    usage = [u for u in recorder.session_updates() if u["sessionUpdate"] == "usage_update"]
    assert usage[0]["used"] == 1234 and usage[0]["size"] == 1_050_000
    assert usage[0]["cost"]["currency"] == "USD" and usage[0]["cost"]["amount"] > 0
    assert len(usage) == 3 and usage[2]["cost"]["amount"] >= usage[0]["cost"]["amount"]
    assert closed.value.code == -32002 and unknown.value.code == -32002
    assert not [u for u in replayed if u["sessionUpdate"].endswith("_chunk")]  # no replay
    assert resumed.modes is not None and resumed.config_options is not None
    assert answer.stop_reason == "end_turn"
    assert user_texts(fake_openai, 1) == ["Fix   the flaky\ntest please", "flood"]
    assert "mcp__s__flood" in {t["function"]["name"] for t in fake_openai.requests[1]["tools"]}
    assert recorder.final("s1")["status"] == "completed"
    assert [(info.session_id, info.title) for info in listed.sessions] == [
        (sid, "Fix the flaky test please")]
