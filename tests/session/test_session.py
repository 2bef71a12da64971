"""The session core without a front: a Session publishes typed events to its subscribers,
each after the log recorder has written what it records, and offers fronts a seam that runs
after the permission gate clears a tool call. (The wire forms are tested end to end.)"""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import clean_env
from support.scripted import ScriptedProvider, reply_text
from tiller.config import load_config
from tiller.session.registry import SessionRegistry, SessionSpec
from tiller.session.session import Session
from tiller.store.log import SessionLog
from tiller.store.saved import log_path, open_saved
from tiller.types import (
    AgentSettled,
    AgentStart,
    MessageEnd,
    ToolCall,
    ToolExecutionStart,
    UserMessage,
    WireModel,
)

pytestmark = pytest.mark.anyio


def registry(fake: FakeOpenAI, cwd: Path) -> SessionRegistry:
    argv = ["--base-url", fake.url, "--model", "fake-model", "--cwd", str(cwd),
            "--session-dir", str(cwd / ".sessions")]
    return SessionRegistry(load_config(argv, clean_env()))


def logged_messages(session: Session) -> list[dict[str, Any]]:
    assert session.log.path is not None
    lines = [json.loads(line) for line in session.log.path.read_text().splitlines()]
    return [line["message"] for line in lines if line.get("type") == "message"]


async def test_subscribers_get_typed_events_after_the_log_has_them(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(text_reply("hello back"))
    session = registry(fake_openai, tmp_path).create(SessionSpec())
    seen: list[tuple[object, list[dict[str, Any]]]] = []
    session.subscribe(lambda event: seen.append((event, logged_messages(session))))

    await session.agent.prompt("hello")

    events = [event for event, _ in seen]
    assert all(isinstance(event, WireModel) for event in events)
    assert isinstance(events[0], AgentStart) and isinstance(events[-1], AgentSettled)
    ends = [(event, logged) for event, logged in seen if isinstance(event, MessageEnd)]
    assert [event.message.role for event, _ in ends] == ["user", "assistant"]
    for event, logged in ends:  # on disk before any subscriber saw it
        assert logged[-1] == event.message.dump()


async def test_the_cleared_seam_runs_only_for_calls_the_gate_lets_through(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(
        tool_call_reply([("r1", "ls", {}), ("w1", "write", {"path": "x.txt", "content": "x"})]),
        text_reply("done"),
    )
    session = registry(fake_openai, tmp_path).create(SessionSpec(permission_mode="readonly"))
    started: list[str] = []
    cleared: list[tuple[str, dict[str, Any]]] = []
    session.subscribe(
        lambda event: started.append(event.tool_call_id)
        if isinstance(event, ToolExecutionStart) else None
    )

    async def on_cleared(call: ToolCall, args: dict[str, Any]) -> None:
        assert call.id in started  # the call was announced before it was cleared
        cleared.append((call.id, args))

    session.on_tool_cleared(on_cleared)
    await session.agent.prompt("look, then write")

    assert cleared == [("r1", {})]
    assert not (tmp_path / "x.txt").exists()


async def test_a_loaded_transcript_goes_straight_to_the_oldest_gc_generation(
    tmp_path: Path,
) -> None:
    """The objects a load builds live as long as the session: the collector must not traverse
    them young (with a 10,000-entry log that was ~12 ms of the load, paid right after it). Both
    steps: the log as saved (``open_saved``, what session/load answers with) and the validated
    messages of the live session (``adopt``)."""
    config = load_config(["--cwd", str(tmp_path), "--session-dir", str(tmp_path / ".sessions")],
                         clean_env())
    path = log_path(config.session_dir, tmp_path, "abc12345")
    written = SessionLog.create(path, {"id": "abc12345", "cwd": str(tmp_path)}, durable=False)
    for number in range(300):
        written.append("message", message=UserMessage(content=f"message {number}").dump())
    written.close()
    paused = gc.isenabled()
    gc.disable()  # no collection may move them meanwhile: only the load decides
    try:
        saved = open_saved(config.session_dir, "abc12345")
        session = await SessionRegistry(config).adopt(saved)
        session.log.close()
        young = {id(item) for generation in (0, 1) for item in gc.get_objects(generation)}
    finally:
        if paused:
            gc.enable()
    built = [*saved.outline.messages, *session.agent.messages]
    assert len(built) == 600 and all(gc.is_tracked(m) for m in session.agent.messages)
    assert not any(id(message) in young for message in built)  # oldest, or frozen


async def test_shutdown_aborts_a_run_then_closes_every_session(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """The registry's shutdown goes through ``Session.close``: the running session's run ends
    ``aborted`` within the grace, and no session is live afterwards."""
    fake_openai.enqueue(tool_call_reply([("s1", "bash", {"command": "sleep 1000"})]))
    sessions = registry(fake_openai, tmp_path)
    busy = sessions.create(SessionSpec(permission_mode="auto"))
    idle = sessions.create(SessionSpec())
    started = anyio.Event()
    busy.subscribe(lambda event: started.set() if isinstance(event, ToolExecutionStart) else None)
    results = []

    async def run() -> None:
        results.append(await busy.prompt("wait for it"))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await started.wait()
        assert busy.is_running and sessions.live() == [busy, idle]
        with anyio.fail_after(10):
            await sessions.shutdown(grace=5)

    assert [result.stop_reason for result in results] == ["aborted"]
    assert not busy.is_running
    assert sessions.live() == [] and sessions.lookup(busy.id) is None


async def test_the_fronts_delta_window_goes_with_every_model_request(tmp_path: Path) -> None:
    """``set_delta_window`` reaches the provider (``ModelRequest.delta_window``, which paces the
    reads of the stream: tests/providers/test_http.py); a new session's is 0."""
    scripted = ScriptedProvider()
    scripted.enqueue(reply_text("one"), reply_text("two"))
    argv = ["--base-url", "http://127.0.0.1:9/v1", "--model", "fake-model", "--cwd",
            str(tmp_path), "--no-session"]
    sessions = SessionRegistry(load_config(argv, clean_env()),
                               providers=lambda config, provider, model: lambda: scripted)
    session = sessions.create(SessionSpec())
    await session.agent.prompt("first")
    session.set_delta_window(0.25)
    await session.agent.prompt("second")
    assert [request.delta_window for request in scripted.requests] == [0.0, 0.25]
    scripted.assert_done()
