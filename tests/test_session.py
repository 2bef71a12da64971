"""The session core without a front: a Session publishes typed events to its subscribers,
each after the log recorder has written what it records, and offers fronts a seam that runs
after the permission gate clears a tool call. (The wire forms are tested end to end.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fake_openai import FakeOpenAI, text_reply, tool_call_reply
from helpers import clean_env
from tiller.config import load_config
from tiller.protocol import SessionNewParams
from tiller.session import Session
from tiller.sessions import SessionRegistry
from tiller.types import (
    AgentSettled,
    AgentStart,
    MessageEnd,
    ToolCall,
    ToolExecutionStart,
    WireModel,
)

pytestmark = pytest.mark.anyio


def registry(fake: FakeOpenAI, cwd: Path) -> SessionRegistry:
    argv = ["--base-url", fake.url, "--cwd", str(cwd), "--session-dir", str(cwd / ".sessions")]
    return SessionRegistry(load_config(argv, clean_env()))


def logged_messages(session: Session) -> list[dict[str, Any]]:
    assert session.log.path is not None
    lines = [json.loads(line) for line in session.log.path.read_text().splitlines()]
    return [line["message"] for line in lines if line.get("type") == "message"]


async def test_subscribers_get_typed_events_after_the_log_has_them(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(text_reply("hello back"))
    session = registry(fake_openai, tmp_path).create(SessionNewParams())
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
    session = registry(fake_openai, tmp_path).create(SessionNewParams(permission_mode="readonly"))
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
