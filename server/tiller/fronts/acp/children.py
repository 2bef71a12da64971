"""A subagent's progress inside its ``task`` tool call (ACP has no child sessions).

ACP clients know one session per conversation: a subagent's session (tiller.session.subagents)
is not sent as one of its own. ``ChildProgress`` turns the child's events into
``tool_call_update``s of the parent's ``task`` call, in the parent's session: its ``content``
is the child's progress so far (each of its tool calls with a mark, then the last thing it
said), replaced as it goes, until the parent's own ``tool_execution_end`` sends the call's
result. Nothing is sent per streamed delta: one update per tool call started or ended, per
message the child finished, and one when it ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tiller.tools.base import Tool
from tiller.types import (
    AgentEnd,
    AgentEvent,
    AssistantMessage,
    MessageEnd,
    ToolExecutionEnd,
    ToolExecutionStart,
)

__all__ = ["TEXT_LIMIT", "ChildProgress"]

TEXT_LIMIT = 600
"""Characters of the child's last message shown (its end; the rest is the call's result)."""

MARKS = {"running": "…", "completed": "✓", "failed": "✗"}


@dataclass
class ChildProgress:
    """One child session's progress as updates of call ``call_id`` (the parent's ``task``
    call); ``tools`` are the child's (titles come from how each describes itself)."""

    call_id: str
    agent_name: str
    tools: Sequence[Tool[Any]]
    calls: dict[str, tuple[str, str]] = field(default_factory=dict)
    """The child's tool calls in order: id -> (title, running | completed | failed)."""
    said: str = ""
    ended: str | None = None

    def on_event(self, event: AgentEvent) -> list[dict[str, Any]]:
        """The ``session/update`` payloads (for the parent's session) for one child event."""
        if isinstance(event, ToolExecutionStart):
            self.calls[event.tool_call_id] = (event.title, "running")
        elif isinstance(event, ToolExecutionEnd):
            title = self.calls.get(event.tool_call_id, (event.tool_name, ""))[0]
            self.calls[event.tool_call_id] = (title, "failed" if event.is_error
                                              else "completed")
        elif isinstance(event, MessageEnd) and isinstance(event.message, AssistantMessage):
            if not event.message.text.strip():
                return []
            self.said = event.message.text.strip()
        elif isinstance(event, AgentEnd):
            self.ended = event.stop_reason
        else:
            return []
        return [{"sessionUpdate": "tool_call_update", "toolCallId": self.call_id,
                 "status": "in_progress", "content": self.content()}]

    def content(self) -> list[dict[str, Any]]:
        """The progress as one Markdown text block."""
        count = len(self.calls)
        head = f"**{self.agent_name}** · {count} tool call{'s' if count != 1 else ''}"
        if self.ended is not None:
            head += f" · ended: {self.ended}"
        lines = [head, ""]
        lines += [f"- {MARKS[status]} {title}" for title, status in self.calls.values()]
        if self.said:
            said = self.said if len(self.said) <= TEXT_LIMIT else "…" + self.said[-TEXT_LIMIT:]
            lines += ["", *(f"> {line}" for line in said.splitlines())]
        return [{"type": "content", "content": {"type": "text", "text": "\n".join(lines)}}]
