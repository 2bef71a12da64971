"""ACP's ``mcpServers`` (``session/new``, ``session/load``) connect, and ``mcpCapabilities``
says which transports Tiller speaks, end to end with the ACP SDK as the client."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import text_block
from acp.schema import EnvVariable, McpServerStdio

from support.acp_client import Recorder, spawn_acp, user_texts
from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import wait_requests
from support.mcp_servers import everything_argv
from support.paths import SCRIPTED_MCP_SERVER

pytestmark = [pytest.mark.anyio, pytest.mark.process]

SCRIPTED = SCRIPTED_MCP_SERVER


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


@asynccontextmanager
async def cancelled_while_gated(
    fake_openai: FakeOpenAI, tmp_path: Path, method: str,
    send: Callable[[Any, str], Awaitable[Any]],
) -> AsyncIterator[tuple[Any, str, Any]]:
    """A session whose MCP server is held back; ``send(conn, sessionId)`` (a ``method``
    request) goes out, then a ``session/cancel`` while it still waits for that server; the
    server is let start. Yields (connection, sessionId, the request's answer)."""
    gated, fifo = gated_server(tmp_path)
    recorder = Recorder()
    async with spawn_acp(recorder, fake_openai, tmp_path) as conn:
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[gated])).session_id
        async with anyio.create_task_group() as group:
            answers: list[Any] = []

            async def request() -> None:
                answers.append(await send(conn, sid))

            group.start_soon(request)
            await recorder.wait_for(lambda m: m.get("method") == method, sent=True)
            await conn.cancel(session_id=sid)
            # Handled in order: once this is answered, the cancel has been seen, and the
            # request still waits for the gated server.
            await conn.list_sessions(cwd=str(tmp_path))
            with fifo.open("w"):  # let the MCP server start
                pass
        yield conn, sid, answers[0]


async def test_a_cancel_while_the_prompt_waits_for_its_mcp_servers_means_no_turn(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """``session/cancel`` while a ``session/prompt`` still waits for the session's MCP servers
    answers that prompt ``cancelled``: the model is never called for it."""
    fake_openai.enqueue(text_reply("the second prompt's reply"))

    async def prompt(conn: Any, sid: str) -> Any:
        return await conn.prompt(session_id=sid, prompt=[text_block("first")])

    async with cancelled_while_gated(fake_openai, tmp_path, "session/prompt", prompt) as (
        conn, sid, first
    ):
        second = await conn.prompt(session_id=sid, prompt=[text_block("second")])

    assert first.stop_reason == "cancelled"
    assert second.stop_reason == "end_turn"
    assert len(fake_openai.requests) == 1
    assert [m["content"] for m in fake_openai.requests[0]["messages"]
            if m["role"] == "user"] == ["second"]


async def test_a_cancel_while_steering_waits_for_its_mcp_servers_starts_no_turn(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """``_session/steering`` on an idle session would start a turn; a ``session/cancel`` while
    it still waits for the session's MCP servers stops that: nothing is consumed."""

    async def steer(conn: Any, sid: str) -> Any:
        return await conn.ext_method("session/steering", {
            "sessionId": sid, "prompt": [{"type": "text", "text": "go on alone"}]})

    async with cancelled_while_gated(fake_openai, tmp_path, "_session/steering", steer) as (
        conn, _sid, answer
    ):
        await conn.list_sessions(cwd=str(tmp_path))

    assert answer == {"outcome": "promptRequired", "reason": "cancelled"}
    assert fake_openai.requests == []


async def test_a_session_takes_its_messages_in_the_order_they_came(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """A ``session/prompt`` during a turn steers it, but first expands its MCP prompt command
    (the server holds the prompt's text back); a ``_tiller/followUp`` sent meanwhile is queued
    after the steering, not before it."""
    fifo = tmp_path / "prompt-gate"
    os.mkfifo(fifo)
    scripted = McpServerStdio(name="s", command=sys.executable,
                              args=[str(SCRIPTED), "--prompt-fifo", str(fifo)], env=[])
    held = threading.Event()
    fake_openai.enqueue(text_reply("first", gate=held), text_reply("second"),
                        text_reply("third"))
    recorder = Recorder()
    async with spawn_acp(recorder, fake_openai, tmp_path) as conn:
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[scripted])).session_id
        answers: dict[str, Any] = {}
        async with anyio.create_task_group() as group:

            async def ask(name: str, call: Any) -> None:
                answers[name] = await call

            group.start_soon(ask, "start", conn.prompt(session_id=sid,
                                                       prompt=[text_block("start")]))
            await wait_requests(fake_openai, 1)
            group.start_soon(ask, "steer", conn.prompt(session_id=sid,
                                                       prompt=[text_block("/mcp__s__held")]))
            await recorder.wait_for(lambda m: m.get("method") == "session/prompt" and m[
                "params"]["prompt"][0]["text"] == "/mcp__s__held", sent=True)
            group.start_soon(ask, "follow", conn.ext_method(
                "tiller/followUp", {"sessionId": sid, "prompt": "then this"}))
            await recorder.wait_for(lambda m: m.get("method") == "_tiller/followUp", sent=True)
            await conn.list_sessions(cwd=str(tmp_path))  # in order: the followUp was handled
            with fifo.open("w"):  # the prompt's text comes
                pass
            held.set()

    assert answers["follow"] == {"queued": 1}
    assert answers["start"].stop_reason == answers["steer"].stop_reason == "end_turn"
    assert user_texts(fake_openai, 1)[-1] == "use tabs"
    assert user_texts(fake_openai, 2)[-1] == "then this"
