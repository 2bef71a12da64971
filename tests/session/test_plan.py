"""The ``todo`` tool and the session's plan over Tiller's protocol, end to end: each successful
call replaces the plan and sends a ``plan`` event; ``agent/getState`` shows the plan, also
after a restart; a bad call fails as a tool error and leaves the plan alone. Plus the tool's
own checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import spawn_tiller
from tiller.errors import ToolError
from tiller.tools.base import ToolContext
from tiller.tools.todo import TodoParams, TodoTool
from tiller.types import PlanItem

pytestmark = pytest.mark.anyio

STEPS = [{"content": "Read the failing test", "status": "completed"},
         {"content": "Fix the parser", "status": "in_progress"},
         {"content": "Run the suite", "status": "pending"}]


@pytest.mark.process
async def test_todo_calls_set_the_plan_and_get_state_shows_it(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(
        tool_call_reply([("t1", "todo", {"todos": STEPS[:1]})]),
        tool_call_reply([("t2", "todo", {"todos": STEPS})]),
        tool_call_reply([("t3", "todo", {"todos": [{"content": "x", "status": "started"}]})]),
        text_reply("on it"),
    )
    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        session_id = (await tiller.request("session/new"))["sessionId"]
        before = await tiller.request("agent/getState", {"sessionId": session_id})
        await tiller.request("agent/prompt", {"sessionId": session_id, "message": "fix it"})
        state = await tiller.request("agent/getState", {"sessionId": session_id})
        plans = [e["items"] for e in tiller.events
                 if e["type"] == "plan"]
        ends = [e for e in tiller.events
                if e["type"] == "tool_execution_end"]
    async with spawn_tiller(fake_openai, tmp_path) as again:
        await again.request("session/load", {"sessionId": session_id})
        restored = await again.request("agent/getState", {"sessionId": session_id})

    assert before["plan"] == []
    assert plans == [STEPS[:1], STEPS]  # the failed third call sent none
    assert state["plan"] == STEPS and restored["plan"] == STEPS
    assert [end["result"]["isError"] for end in ends] == [False, False, True]
    assert "[~] Fix the parser" in ends[1]["result"]["content"][0]["text"]


async def test_the_todo_tool_checks_its_list(tmp_path: Path) -> None:
    tool = TodoTool()
    context = ToolContext(cwd=tmp_path, tool_call_id="t")
    cleared = await tool.execute(TodoParams(todos=[]), context)
    assert cleared.content[0].text == "Plan cleared."  # type: ignore[union-attr]
    with pytest.raises(ToolError, match="non-empty"):
        await tool.execute(TodoParams(todos=[PlanItem(content=" ", status="pending")]), context)
    with pytest.raises(ToolError, match="at most 50"):
        await tool.execute(TodoParams(todos=[PlanItem(content="s", status="pending")] * 51),
                           context)
    assert tool.info.mutates is False and tool.info.kind == "think"
