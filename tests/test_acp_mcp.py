"""ACP's ``mcpServers`` (``session/new``, ``session/load``) connect, and ``mcpCapabilities``
says which transports Tiller speaks, end to end with the ACP SDK as the client."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import text_block
from acp.schema import EnvVariable, McpServerStdio

from fake_openai import FakeOpenAI, text_reply, tool_call_reply
from test_acp import Recorder, spawn_acp
from test_e2e_mcp import everything_argv

pytestmark = pytest.mark.anyio

SCRIPTED = Path(__file__).parent / "mcp" / "scripted_server.py"


def gated_server(tmp_path: Path) -> tuple[McpServerStdio, Path]:
    """An MCP server that starts only once something opens the returned FIFO for writing."""
    fifo = tmp_path / "start-gate"
    os.mkfifo(fifo)
    server = McpServerStdio(name="gated", command=sys.executable,
                            args=[str(SCRIPTED), "--wait-fifo", str(fifo)], env=[])
    return server, fifo


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


async def test_a_cancel_while_the_prompt_waits_for_its_mcp_servers_means_no_turn(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """``session/cancel`` while a ``session/prompt`` still waits for the session's MCP servers
    answers that prompt ``cancelled``: the model is never called for it."""
    gated, fifo = gated_server(tmp_path)
    fake_openai.enqueue(text_reply("the second prompt's reply"))
    recorder = Recorder()
    async with spawn_acp(recorder, fake_openai, tmp_path) as conn:
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[gated])).session_id
        async with anyio.create_task_group() as group:
            answers: list[Any] = []

            async def first() -> None:
                answers.append(await conn.prompt(session_id=sid, prompt=[text_block("first")]))

            group.start_soon(first)
            await recorder.wait_for(lambda m: m.get("method") == "session/prompt", sent=True)
            await conn.cancel(session_id=sid)
            # Handled in order: once this is answered, the cancel has been seen, and the
            # prompt still waits for the gated server.
            await conn.list_sessions(cwd=str(tmp_path))
            with fifo.open("w"):  # let the MCP server start
                pass
        second = await conn.prompt(session_id=sid, prompt=[text_block("second")])

    assert answers[0].stop_reason == "cancelled"
    assert second.stop_reason == "end_turn"
    assert len(fake_openai.requests) == 1
    assert [m["content"] for m in fake_openai.requests[0]["messages"]
            if m["role"] == "user"] == ["second"]


async def test_a_cancel_while_steering_waits_for_its_mcp_servers_starts_no_turn(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """``_session/steering`` on an idle session would start a turn; a ``session/cancel`` while
    it still waits for the session's MCP servers stops that: nothing is consumed."""
    gated, fifo = gated_server(tmp_path)
    recorder = Recorder()
    async with spawn_acp(recorder, fake_openai, tmp_path) as conn:
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[gated])).session_id
        async with anyio.create_task_group() as group:
            answers: list[Any] = []

            async def steer() -> None:
                answers.append(await conn.ext_method("session/steering", {
                    "sessionId": sid, "prompt": [{"type": "text", "text": "go on alone"}]}))

            group.start_soon(steer)
            await recorder.wait_for(lambda m: m.get("method") == "_session/steering", sent=True)
            await conn.cancel(session_id=sid)
            await conn.list_sessions(cwd=str(tmp_path))  # in order: the cancel was seen
            with fifo.open("w"):  # let the MCP server start
                pass
        await conn.list_sessions(cwd=str(tmp_path))

    assert answers == [{"outcome": "promptRequired", "reason": "cancelled"}]
    assert fake_openai.requests == []
