"""The session log as an event subscriber: which events a session's log records, and how.

``LogRecorder`` is the first subscriber of every Session (tiller.session.session), so an event's
entry is on disk before any front sends the event and before the step that depends on it proceeds.
It also keeps ``entry_ids``: the log entry of each message in the agent's transcript, and
``shown``: how each tool call was shown when it started (``tiller.store.log.Outline.shown``).
"""

from __future__ import annotations

import logging
from typing import Any

from tiller.store.log import Entry, SessionLog
from tiller.types import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    AssistantMessage,
    CompactionEnd,
    MessageEnd,
    ProcessExit,
    ProcessStart,
    ToolExecutionEnd,
    ToolExecutionStart,
    UserMessage,
)

__all__ = ["LogRecorder"]

log = logging.getLogger(__name__)


class LogRecorder:
    """Writes one session's events to its log. A failed write is logged, never raised: the
    run goes on without that entry (``append`` then returns None)."""

    def __init__(self, session_id: str, session_log: SessionLog) -> None:
        self.session_id = session_id
        self.log = session_log
        self.entry_ids: list[str] = []
        """The log entry of each message in ``agent.messages`` ("" where there is none)."""
        self.shown: dict[tuple[str, str], dict[str, Any]] = {}
        """(assistant message's entry, tool call id) -> ``{title, kind, path?}`` of its start."""
        self._assistant_entry = ""

    def append(self, entry_type: str, **data: Any) -> Entry | None:
        """Write one entry; None if it could not be written."""
        try:
            return self.log.append(entry_type, **data)
        except OSError:
            log.exception("session %s: cannot write its log", self.session_id)
            return None

    def append_message(self, message: Any, **extra: Any) -> None:
        """Write a transcript message and remember its entry."""
        entry = self.append("message", message=message, **extra)
        self.entry_ids.append(entry.id if entry else "")

    def __call__(self, event: AgentEvent) -> None:
        if isinstance(event, MessageEnd):
            extra = {}
            if isinstance(event.message, UserMessage) and event.message.queue_id:
                extra["queueId"] = event.message.queue_id
            self.append_message(event.message.dump(), **extra)
            if isinstance(event.message, AssistantMessage):
                self._assistant_entry = self.entry_ids[-1]
        elif isinstance(event, ToolExecutionStart):
            shown: dict[str, Any] = {"title": event.title, "kind": event.kind}
            if event.path is not None:
                shown["path"] = event.path
            self.append("tool_start", toolCallId=event.tool_call_id,
                        toolName=event.tool_name, args=event.args, **shown)
            self.shown[(self._assistant_entry, event.tool_call_id)] = shown
        elif isinstance(event, ToolExecutionEnd):
            self.append("tool_end", toolCallId=event.tool_call_id,
                        isError=event.is_error)
        elif isinstance(event, CompactionEnd) and event.summary is not None:
            removed = event.removed_count
            first_kept = next((i for i in self.entry_ids[removed:] if i), None)
            self.append("compaction", summary=event.summary,
                        firstKeptEntryId=first_kept, tokensBefore=event.tokens_before)
            self.entry_ids[:removed] = [""]
        elif isinstance(event, ProcessStart | ProcessExit):
            self.append("process_start" if isinstance(event, ProcessStart) else "process_end",
                        sessionId=self.session_id, process=event.process.dump())
        elif isinstance(event, AgentStart):
            self.append("run_start")
        elif isinstance(event, AgentEnd):
            self.append("run_end", stopReason=event.stop_reason,
                        errorMessage=event.error_message)
