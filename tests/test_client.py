"""``tiller.client.TillerClient`` against a real server: the agent helpers, one session's event
iterator, no time limit by default, ``$/cancelRequest`` when the caller gives up, and a clear
EOFError when the server dies mid-request."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import clean_env, spawn_tiller, wait_requests
from support.paths import README
from tiller.client import RpcError

pytestmark = [pytest.mark.anyio, pytest.mark.process]


async def test_helpers_steer_follow_up_and_iterate_one_sessions_events(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    os.mkfifo(tmp_path / "release")
    fake_openai.enqueue(
        tool_call_reply([("call_wait", "bash", {"command": "cat release"})]),
        text_reply("Steered."),
        text_reply("Followed up."),
    )
    async with spawn_tiller(fake_openai, tmp_path) as tiller, anyio.create_task_group() as tg:
        other = (await tiller.request("session/new", {}))["sessionId"]
        mine = (await tiller.request("session/new", {}))["sessionId"]
        events = tiller.session_events(mine)  # before the prompt: nothing is missed
        results: list[Any] = []

        async def prompt() -> None:
            results.append(await tiller.prompt("work", session_id=mine))

        tg.start_soon(prompt)
        seen: list[dict[str, Any]] = []
        async for event in events:
            seen.append(event)
            if event["type"] == "tool_execution_start":
                assert await tiller.steer("use tabs", session_id=mine) == {"queued": 1}
                assert await tiller.follow_up("then test", session_id=mine) == {"queued": 1}
                await anyio.to_thread.run_sync((tmp_path / "release").write_text, "done\n")
            if event["type"] == "agent_settled":
                break

    assert results[0]["stopReason"] == "stop"
    assert {event["sessionId"] for event in seen} == {mine} != {other}
    types = [event["type"] for event in seen]
    assert types[0] == "agent_start" and types.count("agent_end") == 1
    sent = [request["messages"][-1]["content"] for request in fake_openai.requests[1:]]
    assert sent == ["use tabs", "then test"]


async def test_abort_helper_stops_the_run(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    gate = threading.Event()
    fake_openai.enqueue(text_reply("never seen", gate=gate))
    async with spawn_tiller(fake_openai, tmp_path) as tiller, anyio.create_task_group() as tg:
        results: list[Any] = []

        async def prompt() -> None:
            results.append(await tiller.prompt("x"))

        tg.start_soon(prompt)
        await wait_requests(fake_openai, 1)
        await tiller.abort()
        await tiller.wait_event("agent_settled")
        with pytest.raises(RpcError) as nothing_runs:
            await tiller.abort()
        gate.set()

    assert results[0]["stopReason"] == "aborted"
    assert nothing_runs.value.code == -32011


async def test_a_cancelled_request_sends_cancel_request(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """The caller's cancel scope fires while the run waits on the model: the server hears
    ``$/cancelRequest`` and aborts the run (without it the run would wait for the gate)."""
    gate = threading.Event()
    fake_openai.enqueue(text_reply("never seen", gate=gate))
    async with spawn_tiller(fake_openai, tmp_path) as tiller, anyio.create_task_group() as tg:
        scope = anyio.CancelScope()

        async def prompt() -> None:
            with scope:
                await tiller.prompt("x")

        tg.start_soon(prompt)
        await wait_requests(fake_openai, 1)
        scope.cancel()
        end = await tiller.wait_event("agent_end")
        gate.set()

    assert scope.cancelled_caught
    assert end["stopReason"] == "aborted"


async def test_the_callers_timeout_cancels_the_run(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    gate = threading.Event()
    fake_openai.enqueue(text_reply("never seen", gate=gate))
    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        await tiller.request("agent/getState")  # the server is up: the limit is the run's
        with pytest.raises(TimeoutError):
            await tiller.prompt("x", timeout=5)
        end = await tiller.wait_event("agent_end")
        gate.set()

    assert end["stopReason"] == "aborted"


async def test_a_request_pending_when_the_server_dies_raises_eof(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    gate = threading.Event()
    fake_openai.enqueue(text_reply("never seen", gate=gate))
    async with spawn_tiller(fake_openai, tmp_path) as tiller, anyio.create_task_group() as tg:
        failures: list[BaseException] = []

        async def prompt() -> None:
            try:
                await tiller.prompt("x")
            except EOFError as exc:
                failures.append(exc)

        tg.start_soon(prompt)
        await wait_requests(fake_openai, 1)
        tiller.process.kill()
        gate.set()

    assert failures and "agent/prompt" in str(failures[0])


def test_the_readmes_python_client_runs(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    """README.md's "Write a client in 30 lines" Python example, run as written."""
    readme = README.read_text()
    section = readme[readme.index("### Write a client in 30 lines"):]
    start = section.index("```python\n") + len("```python\n")
    example = section[start : section.index("\n```", start)]
    (tmp_path / "notes.txt").write_text("x")
    fake_openai.enqueue(
        tool_call_reply([("call_1", "bash", {"command": "ls"})]), text_reply("One file.")
    )
    done = subprocess.run(
        [sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True,
        env=clean_env(OPENAI_BASE_URL=fake_openai.url, XDG_DATA_HOME=str(tmp_path)), timeout=60,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout == "\n[bash] {'command': 'ls'}\nOne file.\nstop, 10 tokens out\n"
    assert "notes.txt" in fake_openai.requests[1]["messages"][-1]["content"]
