"""End to end: an "always" answer for a command does not let a chained command through."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import spawn_tiller

pytestmark = [pytest.mark.anyio, pytest.mark.process]


async def test_allow_always_for_a_command_does_not_cover_a_chained_command(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    fake_openai.enqueue(
        tool_call_reply([("b1", "bash", {"command": "git --version"})]),
        tool_call_reply([("b2", "bash", {"command": "git --version"})]),
        tool_call_reply([("b3", "bash", {"command": "git --version; echo PWN > ../x"})]),
        text_reply("done"),
    )
    asked: list[str] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["args"]["command"])
        if len(asked) == 1:
            return {"outcome": "allowAlways"}
        return {"outcome": "rejectOnce", "reason": "not that"}

    async with spawn_tiller(fake_openai, workspace) as tiller:
        tiller.on_request("client/requestPermission", answer)
        await tiller.request("initialize", {"capabilities": {"permissions": True}})
        result = await tiller.request("agent/prompt", {"message": "check git"})

    assert result["stopReason"] == "stop"
    assert asked == ["git --version", "git --version; echo PWN > ../x"]
    assert not (tmp_path / "x").exists()
    results = [m["content"] for m in fake_openai.requests[3]["messages"] if m["role"] == "tool"]
    assert "git version" in results[0] and "git version" in results[1]
    assert "rejected" in results[2] and "not that" in results[2]
