"""End to end: ``$/cancelRequest`` for an ``agent/prompt`` that has not begun its run yet.

A cancel can arrive while the prompt still waits for the session's MCP servers to start, or in
the same read as the prompt itself, before its handler ran at all. Either way the run must not
start: the answer is ``aborted``, the model is never called, and the server keeps serving.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from support.fake_openai import FakeOpenAI, text_reply
from support.helpers import spawn_tiller
from support.paths import SCRIPTED_MCP_SERVER
from tiller.client import TillerClient

pytestmark = [pytest.mark.anyio, pytest.mark.process]

SCRIPTED = SCRIPTED_MCP_SERVER


async def answer_of(tiller: TillerClient, msg_id: int, into: dict[str, Any]) -> None:
    """Await the response to request ``msg_id`` (sent by the test itself) into ``into``."""
    into.update(await tiller.wait_for(
        lambda m: m.get("id") == msg_id and "method" not in m, timeout=60))


async def test_a_cancel_while_mcp_servers_start_means_the_run_never_begins(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fifo = tmp_path / "start-gate"
    os.mkfifo(fifo)
    config = tmp_path / "config.toml"
    config.write_text(
        "[mcp_servers.gated]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = {json.dumps([str(SCRIPTED), '--wait-fifo', str(fifo)])}\n"
        "startup_timeout = 120\n"
    )
    fake_openai.enqueue(text_reply("the second prompt's reply"))
    async with spawn_tiller(fake_openai, tmp_path, "--config", str(config)) as tiller:
        await tiller.request("session/new")
        answer: dict[str, Any] = {}
        async with anyio.create_task_group() as group:
            group.start_soon(answer_of, tiller, 900, answer)
            await tiller.send({"jsonrpc": "2.0", "id": 900, "method": "agent/prompt",
                               "params": {"message": "first"}})
            await tiller.notify("$/cancelRequest", {"id": 900})
            # Requests are read in order: once this is answered, the cancel has been seen,
            # and the prompt is still waiting for the gated server.
            state = await tiller.request("agent/getState")
            assert state["isRunning"] is False
            with fifo.open("w"):  # let the MCP server start
                pass
        second = await tiller.prompt("second")
        events = [e["type"] for e in tiller.events]

    assert answer["result"]["stopReason"] == "aborted"
    assert second["stopReason"] == "stop"
    assert len(fake_openai.requests) == 1  # only the second prompt reached the model
    assert [m["content"] for m in fake_openai.requests[0]["messages"]
            if m["role"] == "user"] == ["second"]
    assert events.count("agent_start") == 1


async def test_a_cancel_in_the_same_read_as_its_prompt_is_not_lost(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(text_reply("the second prompt's reply"))
    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        await tiller.request("session/new")
        answer: dict[str, Any] = {}
        prompt = {"jsonrpc": "2.0", "id": 901, "method": "agent/prompt",
                  "params": {"message": "first"}}
        cancel = {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 901}}
        async with anyio.create_task_group() as group:
            group.start_soon(answer_of, tiller, 901, answer)
            await tiller.send_raw((json.dumps(prompt) + "\n" + json.dumps(cancel) + "\n").encode())
        second = await tiller.prompt("second")

    assert answer["result"]["stopReason"] == "aborted"
    assert second["stopReason"] == "stop"
    assert [m["content"] for m in fake_openai.requests[-1]["messages"]
            if m["role"] == "user"] == ["second"]
    assert len(fake_openai.requests) == 1
