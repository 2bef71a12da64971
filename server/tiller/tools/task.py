"""``task``: hand a self-contained job to a subagent, a child session with a fresh context.

The tool only speaks to the model: what a subagent is, how its session is made, run, aborted
and reported is the session layer's (tiller.session.subagents), reached through the
``Subagents`` port the tool is built with, so nothing here knows sessions. Several ``task``
calls of one message run at once (the port bounds how many).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel, Field

from tiller.frozen import frozen
from tiller.tools.base import Tool, ToolContext, ToolInfo, ToolResult

__all__ = ["DEFAULT_AGENT", "AgentChoice", "Subagents", "TaskParams", "TaskTool"]

DEFAULT_AGENT = "general-purpose"


class TaskParams(BaseModel):
    description: str = Field(
        min_length=1, max_length=200,
        description="A short (3-8 words) description of the task, shown to the user")
    prompt: str = Field(
        min_length=1,
        description="The whole task for the subagent, with every detail it needs: it sees "
                    "nothing of this conversation, and only its final report comes back")
    agent: str | None = Field(
        default=None, description=f"Which agent runs it (default: {DEFAULT_AGENT})")


@frozen
class AgentChoice:
    """An agent the model may name: its name and what it is for."""

    name: str
    description: str


class Subagents(Protocol):
    """What the tool needs of the session layer. ``choices`` must be cheap (read at each model
    call); ``run`` runs the task in a child session to its end and returns its report (an
    error result for an unknown agent, a failed or aborted child); cancelled (the parent's
    abort), it aborts the child and lets it end before it re-raises."""

    def choices(self) -> Sequence[AgentChoice]: ...

    async def run(self, params: TaskParams, ctx: ToolContext) -> ToolResult: ...


class TaskTool(Tool[TaskParams]):
    name = "task"
    description = (
        "Start a subagent on a self-contained task: it works in a fresh context with its own "
        "tools and returns only its final report (and the files it changed). Use it to keep "
        "long searches or multi-step work out of your context, and to work on independent "
        "tasks in parallel: several task calls in one message run at the same time. Give it "
        "everything it needs in the prompt; it cannot ask you anything."
    )
    Params = TaskParams
    info = ToolInfo(kind="other", mutates=True, delegates=True, title="{description}")

    def __init__(self, subagents: Subagents) -> None:
        self.subagents = subagents

    def model_description(self) -> str:
        choices = self.subagents.choices()
        lines = [f"- {choice.name}: {choice.description}" for choice in choices]
        return f"{self.description}\n\nAgents:\n" + "\n".join(lines) if lines else \
            self.description

    async def execute(self, params: TaskParams, ctx: ToolContext) -> ToolResult:
        return await self.subagents.run(params, ctx)
