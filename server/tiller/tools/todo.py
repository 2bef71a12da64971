"""The ``todo`` tool: the model keeps a short plan, a list of steps each ``pending``,
``in_progress`` or ``completed`` (as Claude Code's TodoWrite and Codex's update_plan do).

Every call replaces the whole list. The tool only validates and returns it (``details``: a
``TodoList``); ``tiller.session.plan.PlanTracker`` turns each successful result into the session's
plan and a ``plan`` event. It changes nothing else, so the permission gate never asks about it.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from tiller.errors import ToolError
from tiller.tools.base import Tool, ToolContext, ToolInfo, ToolResult
from tiller.types import PlanItem

__all__ = ["TodoList", "TodoParams", "TodoTool"]

MAX_ITEMS = 50

MARKS = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


class TodoList(BaseModel):
    """A ``todo`` result's details: the plan as the call left it."""

    todos: list[PlanItem]


class TodoParams(BaseModel):
    todos: list[PlanItem] = Field(
        description="The whole plan, in order: every step with its status (pending, "
        "in_progress or completed). It replaces the previous list; send [] to clear it.",
    )


class TodoTool(Tool[TodoParams]):
    name = "todo"
    description = (
        "Keep a short plan for a task of several steps: send the whole list each time, one "
        "step in_progress while you work on it, completed as soon as it is done. Use it for "
        "multi-step work, not for a single quick change."
    )
    Params = TodoParams
    info = ToolInfo(kind="think", mutates=False, title="Update the plan", hook_name="TodoWrite")

    async def execute(self, params: TodoParams, ctx: ToolContext) -> ToolResult:
        todos = params.todos
        if len(todos) > MAX_ITEMS:
            raise ToolError(f"a plan has at most {MAX_ITEMS} steps; got {len(todos)}")
        if any(not item.content.strip() for item in todos):
            raise ToolError("every step needs a non-empty content")
        lines = [f"{MARKS[item.status]} {item.content}" for item in todos]
        text = "Plan updated:\n" + "\n".join(lines) if lines else "Plan cleared."
        return ToolResult.text(text, details=TodoList(todos=todos))
