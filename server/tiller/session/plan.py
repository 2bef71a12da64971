"""The session's plan: what the model's last successful ``todo`` call left
(``tiller.tools.todo``).

``PlanTracker`` subscribes to the session's events: when the result message of a ``todo`` call
(a tool that returns a ``TodoList``) is added to the transcript, the plan becomes its list and
a ``plan`` event (``PlanChanged``) is published. ``restore`` reads the plan back from a loaded
transcript, so ``agent/getState`` and ACP show it after a restart too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError

from tiller.tools.base import Tool, find_tool
from tiller.tools.todo import TodoList, TodoTool
from tiller.types import AgentEvent, Message, MessageEnd, PlanChanged, PlanItem, ToolResultMessage

__all__ = ["PlanTracker"]


class PlanTracker:
    """The plan of one session; ``publish`` is the session's bus, ``tools()`` its tools."""

    def __init__(self, publish: Callable[[AgentEvent], None],
                 tools: Callable[[], Sequence[Tool[Any]]]) -> None:
        self.publish = publish
        self.tools = tools
        self.items: list[PlanItem] = []

    def _plan_of(self, message: Message) -> list[PlanItem] | None:
        """The plan a transcript message sets, or None when it sets none."""
        if not isinstance(message, ToolResultMessage) or message.is_error:
            return None
        if not isinstance(find_tool(self.tools(), message.tool_name), TodoTool):
            return None
        try:
            return TodoList.model_validate(message.details).todos
        except ValidationError:
            return None

    def __call__(self, event: AgentEvent) -> None:
        if isinstance(event, MessageEnd):
            items = self._plan_of(event.message)
            if items is not None:
                self.items = items
                self.publish(PlanChanged(items=items))

    def restore(self, messages: Sequence[Message]) -> None:
        """Take the plan the last ``todo`` result in ``messages`` left (none: empty)."""
        tools = self.tools()
        todo_names = {tool.name for tool in tools
                      if isinstance(find_tool(tools, tool.name), TodoTool)}
        for message in reversed(messages):  # a long transcript: skip the other messages cheaply
            if not isinstance(message, ToolResultMessage) or message.tool_name not in todo_names:
                continue
            items = self._plan_of(message)
            if items is not None:
                self.items = items
                return
