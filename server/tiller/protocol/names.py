"""The names of protocol.md's methods, notifications and events, in its order, without pydantic.

This is the one list of names. ``tiller.protocol.methods`` gives each method its params and
result models (a test holds the two to the same names in the same order, and both to
protocol.md's headings); ``initialize`` answers with these tuples as they are, and the front
registers ``METHODS`` from them. It imports nothing, so answering ``initialize`` loads no model.
"""

from __future__ import annotations

__all__ = [
    "EVENT_METHOD",
    "EVENT_TYPES",
    "METHODS",
    "NOTIFICATIONS",
    "SERVER_NOTIFICATIONS",
    "SERVER_REQUESTS",
]

METHODS = (
    "initialize", "session/new", "session/list", "session/load", "session/fork",
    "session/close", "session/delete", "session/changes", "session/revert", "agent/prompt",
    "agent/continue", "agent/steer", "agent/followUp", "agent/abort", "agent/getState",
    "agent/getMessages", "agent/setQueueModes", "agent/compact", "agent/setPermissionMode",
    "models/list", "agent/setModel", "agent/setThinkingLevel", "commands/list", "agents/list",
    "mcp/list", "mcp/login", "mcp/logout", "process/list", "process/output", "process/kill",
)
"""Client-to-server requests ("Methods (client → server)")."""

NOTIFICATIONS = ("$/cancelRequest",)
"""Client-to-server notifications (that section's last)."""

SERVER_REQUESTS = ("client/requestPermission", "client/readTextFile", "client/writeTextFile",
                   "client/elicit", "client/openUrl", "client/getDiagnostics")
"""Server-to-client requests ("Requests (server → client)"), each sent only if the client
declared it can answer."""

EVENT_METHOD = "agent/event"
"""The notification that carries a session's events: params ``{sessionId, seq, type, ...}``."""

SERVER_NOTIFICATIONS = (EVENT_METHOD, "$/cancelRequest")
"""Server-to-client notifications."""

EVENT_TYPES = (
    "agent_start", "turn_start", "message_start", "message_update", "message_end",
    "tool_execution_start", "tool_execution_update", "tool_execution_end", "turn_end",
    "agent_end", "retry_scheduled", "retry_end", "compaction_start", "compaction_end",
    "checkpoint", "agent_settled", "commands_changed", "mcp_status", "plan", "notice",
    "hook_start", "hook_end",
    "process_start", "process_output", "process_exit",
)
"""Every ``agent/event`` type, in the order of ``tiller.types.AgentEvent``'s members (a test
keeps the two equal; protocol.md documents each)."""
