"""Params and results of every JSON-RPC method, mirroring protocol.md section by section.

Requests are validated into these models at the boundary (a failure is -32602 naming the field);
results are dumped with ``WireModel.dump()``. Unknown extra fields in params are ignored, so older
servers accept newer clients.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from tiller.types import Message, RunStopReason, Usage, UserContent, WireModel

__all__ = [
    "EVENT_METHOD",
    "ClientInfo",
    "GetMessagesResult",
    "GetStateResult",
    "InitializeParams",
    "InitializeResult",
    "PromptParams",
    "QueueMode",
    "QueueParams",
    "QueueResult",
    "RunResultModel",
    "ServerInfo",
    "SessionNewParams",
    "SessionNewResult",
    "SessionParams",
    "SetQueueModesParams",
    "SetQueueModesResult",
]

EVENT_METHOD = "agent/event"
"""The one server-to-client notification: params are ``{sessionId, seq, type, ...}``."""

QueueMode = Literal["one-at-a-time", "all"]


# initialize ------------------------------------------------------------------------------------


class ClientInfo(WireModel):
    name: str
    version: str | None = None


class InitializeParams(WireModel):
    client_info: ClientInfo | None = None
    capabilities: dict[str, Any] = Field(default_factory=dict)


class ServerInfo(WireModel):
    name: str
    version: str


class InitializeResult(WireModel):
    server_info: ServerInfo
    protocol_version: int
    capabilities: dict[str, Any]


# session/new -----------------------------------------------------------------------------------


class SessionNewParams(WireModel):
    cwd: str | None = None
    provider: str | None = None
    model: str | None = None
    system_prompt: str | None = None


class SessionNewResult(WireModel):
    session_id: str


# agent/* ---------------------------------------------------------------------------------------


class SessionParams(WireModel):
    """Params of methods that take only an optional session (default: the default session)."""

    session_id: str | None = None


class PromptParams(SessionParams):
    message: str | list[UserContent]


class RunResultModel(WireModel):
    """The result of agent/prompt and agent/continue, sent after ``agent_end``."""

    stop_reason: RunStopReason
    error_message: str | None = None
    usage: Usage


class QueueParams(SessionParams):
    message: str | list[UserContent]


class QueueResult(WireModel):
    queued: int = Field(description="messages now waiting in that queue, this one included")


class GetStateResult(WireModel):
    session_id: str
    is_running: bool
    provider: str
    model: str | None
    cwd: str
    message_count: int
    pending_steering: int
    pending_follow_up: int
    steering_mode: QueueMode
    follow_up_mode: QueueMode
    usage: Usage


class GetMessagesResult(WireModel):
    messages: list[Message]


class SetQueueModesParams(SessionParams):
    steering: QueueMode | None = None
    follow_up: QueueMode | None = None


class SetQueueModesResult(WireModel):
    steering: QueueMode
    follow_up: QueueMode
