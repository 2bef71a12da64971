"""ACP's ``mcpServers`` (``session/new``, ``session/load``) connect, and ``mcpCapabilities``
says which transports Tiller speaks, end to end with the ACP SDK as the client."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from acp import text_block
from acp.schema import EnvVariable, McpServerStdio

from fake_openai import FakeOpenAI, text_reply, tool_call_reply
from test_acp import Recorder, spawn_acp
from test_e2e_mcp import everything_argv

pytestmark = pytest.mark.anyio

SCRIPTED = Path(__file__).parent / "mcp" / "scripted_server.py"


async def test_session_new_and_load_connect_their_mcp_servers(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(
        tool_call_reply([("t1", "mcp__time__get_current_time", {"timezone": "Asia/Tokyo"})]),
        text_reply("it is late"),
        tool_call_reply([("s1", "mcp__s__flood", {"lines": 2})]),
        text_reply("flooded"),
    )
    recorder = Recorder()
    time_server = McpServerStdio(
        name="time", command=sys.executable, args=["-m", "mcp_server_time"],
        env=[EnvVariable(name="TZ", value="UTC")],
    )
    scripted = McpServerStdio(name="s", command=sys.executable, args=[str(SCRIPTED)], env=[])
    async with spawn_acp(recorder, fake_openai, tmp_path, "--permission-mode", "auto") as conn:
        init = await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[time_server])
        sid = session.session_id
        first = await conn.prompt(session_id=sid, prompt=[text_block("time?")])
        await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[scripted])
        second = await conn.prompt(session_id=sid, prompt=[text_block("flood")])

    capabilities = init.agent_capabilities
    assert capabilities is not None and capabilities.mcp_capabilities is not None
    assert capabilities.mcp_capabilities.http and capabilities.mcp_capabilities.sse
    assert first.stop_reason == "end_turn" and second.stop_reason == "end_turn"
    assert "mcp__time__get_current_time" in {
        t["function"]["name"] for t in fake_openai.requests[0]["tools"]}
    start = next(u for u in recorder.session_updates()
                 if u["sessionUpdate"] == "tool_call" and u["toolCallId"] == "t1")
    assert start["kind"] == "other" and start["title"] == "time: get_current_time"
    final = recorder.final("t1")
    assert final["status"] == "completed"
    assert "Asia/Tokyo" in final["content"][0]["content"]["text"]
    assert "mcp__s__flood" in {t["function"]["name"] for t in fake_openai.requests[2]["tools"]}
    assert recorder.final("s1")["status"] == "completed"


async def test_an_mcp_prompt_is_an_acp_command_and_expands_before_the_turn(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    node, entry = everything_argv()
    fake_openai.enqueue(text_reply("sunny"))
    recorder = Recorder()
    everything = McpServerStdio(name="everything", command=node, args=[entry, "stdio"], env=[])
    async with spawn_acp(recorder, fake_openai, tmp_path, "--permission-mode", "auto") as conn:
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[everything])
        answer = await conn.prompt(session_id=session.session_id,
                                   prompt=[text_block("/mcp__everything__args-prompt Oslo")])

    assert answer.stop_reason == "end_turn"
    user = [m for m in fake_openai.requests[0]["messages"] if m["role"] == "user"][-1]
    content = user["content"]
    text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
    assert text == "What's weather in Oslo?"
    announced = [u for u in recorder.session_updates()
                 if u["sessionUpdate"] == "available_commands_update"]
    names = {c["name"] for c in announced[-1]["availableCommands"]}
    assert "mcp__everything__args-prompt" in names
