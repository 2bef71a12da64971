"""protocol.md's methods as one table: each name of ``tiller.protocol.names`` -> its models.

Everything that needs a method's models reads them here: the front validates a request's params
with its row's ``params`` (``tiller.fronts.tiller.handlers.Methods.table``), each handler is
annotated with its row's models (a test holds them to it), and ``tiller schema`` builds
``x-methods`` and the rest from these tables (``tiller.protocol.schema``), from which the VS Code
extension's types are generated. A test keeps the keys equal to ``tiller.protocol.names``, in
order.
"""

from __future__ import annotations

from typing import NamedTuple

from tiller.protocol.checkpoints import ChangesParams, ChangesResult, RevertParams, RevertResult
from tiller.protocol.client_requests import (
    ElicitParams,
    ElicitResult,
    GetDiagnosticsParams,
    GetDiagnosticsResult,
    OpenUrlParams,
    ReadTextFileParams,
    ReadTextFileResult,
    RequestPermissionParams,
    RequestPermissionResult,
    WriteTextFileParams,
)
from tiller.protocol.models import (
    AgentsListResult,
    CancelRequestParams,
    CommandsListResult,
    CompactParams,
    CompactResult,
    EmptyResult,
    GetMessagesResult,
    GetStateResult,
    InitializeParams,
    InitializeResult,
    McpListResult,
    McpLoginParams,
    McpServerResult,
    ModelsListResult,
    NoParams,
    ProcessListResult,
    ProcessOutputParams,
    ProcessOutputResult,
    ProcessParams,
    ProcessResult,
    PromptParams,
    QueueParams,
    QueueResult,
    RunResultModel,
    SessionForkParams,
    SessionIdParams,
    SessionListParams,
    SessionListResult,
    SessionLoadResult,
    SessionNewParams,
    SessionNewResult,
    SessionParams,
    SetModelParams,
    SetModelResult,
    SetPermissionModeParams,
    SetPermissionModeResult,
    SetQueueModesParams,
    SetQueueModesResult,
    SetThinkingLevelParams,
    SetThinkingLevelResult,
)
from tiller.types import WireModel

__all__ = ["METHODS", "NOTIFICATIONS", "SERVER_NOTIFICATIONS", "SERVER_REQUESTS", "Row"]


class Row(NamedTuple):
    """One request: what validates its params, and what its result is."""

    params: type[WireModel]
    result: type[WireModel]


METHODS: dict[str, Row] = {
    "initialize": Row(InitializeParams, InitializeResult),
    "session/new": Row(SessionNewParams, SessionNewResult),
    "session/list": Row(SessionListParams, SessionListResult),
    "session/load": Row(SessionIdParams, SessionLoadResult),
    "session/fork": Row(SessionForkParams, SessionLoadResult),
    "session/close": Row(SessionIdParams, EmptyResult),
    "session/delete": Row(SessionIdParams, EmptyResult),
    "session/changes": Row(ChangesParams, ChangesResult),
    "session/revert": Row(RevertParams, RevertResult),
    "agent/prompt": Row(PromptParams, RunResultModel),
    "agent/continue": Row(SessionParams, RunResultModel),
    "agent/steer": Row(QueueParams, QueueResult),
    "agent/followUp": Row(QueueParams, QueueResult),
    "agent/abort": Row(SessionParams, EmptyResult),
    "agent/getState": Row(SessionParams, GetStateResult),
    "agent/getMessages": Row(SessionParams, GetMessagesResult),
    "agent/setQueueModes": Row(SetQueueModesParams, SetQueueModesResult),
    "agent/compact": Row(CompactParams, CompactResult),
    "agent/setPermissionMode": Row(SetPermissionModeParams, SetPermissionModeResult),
    "models/list": Row(NoParams, ModelsListResult),
    "agent/setModel": Row(SetModelParams, SetModelResult),
    "agent/setThinkingLevel": Row(SetThinkingLevelParams, SetThinkingLevelResult),
    "commands/list": Row(SessionParams, CommandsListResult),
    "agents/list": Row(SessionParams, AgentsListResult),
    "mcp/list": Row(SessionParams, McpListResult),
    "mcp/login": Row(McpLoginParams, McpServerResult),
    "mcp/logout": Row(McpLoginParams, McpServerResult),
    "process/list": Row(SessionParams, ProcessListResult),
    "process/output": Row(ProcessOutputParams, ProcessOutputResult),
    "process/kill": Row(ProcessParams, ProcessResult),
}
"""Client-to-server requests."""

NOTIFICATIONS: dict[str, type[WireModel]] = {"$/cancelRequest": CancelRequestParams}
"""Client-to-server notifications: method -> params."""

SERVER_REQUESTS: dict[str, tuple[type[WireModel], type[WireModel] | None]] = {
    "client/requestPermission": (RequestPermissionParams, RequestPermissionResult),
    "client/readTextFile": (ReadTextFileParams, ReadTextFileResult),
    "client/writeTextFile": (WriteTextFileParams, None),
    "client/elicit": (ElicitParams, ElicitResult),
    "client/openUrl": (OpenUrlParams, None),
    "client/getDiagnostics": (GetDiagnosticsParams, GetDiagnosticsResult),
}
"""Server-to-client requests: method -> (params, the client's answer); None: the answer is
ignored, ``{}`` or null."""

SERVER_NOTIFICATIONS: dict[str, type[WireModel] | None] = {
    "agent/event": None,
    "$/cancelRequest": CancelRequestParams,
}
"""Server-to-client notifications: method -> params; ``agent/event``'s params are
``{sessionId, seq}`` plus one event of ``tiller.types.AgentEvent`` (hence None)."""
