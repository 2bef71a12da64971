"""Params and results of every JSON-RPC method, mirroring protocol.md section by section
(``tiller.protocol.methods`` says which method takes which).

Requests are validated into these models at the boundary (a failure is -32602 naming the field);
results are dumped with ``WireModel.dump()``. Unknown extra fields in params are ignored, so older
servers accept newer clients.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from tiller.modes import PermissionMode, QueueMode, ThinkingLevel, ToolKind
from tiller.protocol.checkpoints import CheckpointsInfo, RevertResult
from tiller.protocol.sandbox import SandboxParams, SandboxState
from tiller.types import (
    CommandEntry,
    McpServerState,
    Message,
    PathText,
    PlanItem,
    ProcessInfo,
    RunStopReason,
    Usage,
    UserContent,
    WireModel,
)

__all__ = [
    "AgentEntry",
    "AgentsListResult",
    "CancelRequestParams",
    "ClientCapabilities",
    "ClientInfo",
    "CommandsListResult",
    "CompactParams",
    "CompactResult",
    "ContextFileEntry",
    "ElicitationCapabilities",
    "EmptyResult",
    "FsCapabilities",
    "GetMessagesResult",
    "GetStateResult",
    "InitializeParams",
    "InitializeResult",
    "McpListResult",
    "McpLoginParams",
    "McpServerResult",
    "ModelCostModel",
    "ModelEntry",
    "ModelsListResult",
    "NoParams",
    "ProcessListResult",
    "ProcessOutputParams",
    "ProcessOutputResult",
    "ProcessParams",
    "ProcessResult",
    "PromptParams",
    "ProviderEntry",
    "QueueParams",
    "QueueResult",
    "RefusedFileEntry",
    "RunResultModel",
    "ServerInfo",
    "SessionForkParams",
    "SessionIdParams",
    "SessionInfo",
    "SessionListParams",
    "SessionListResult",
    "SessionLoadResult",
    "SessionNewParams",
    "SessionNewResult",
    "SessionParams",
    "SetModelParams",
    "SetModelResult",
    "SetPermissionModeParams",
    "SetPermissionModeResult",
    "SetQueueModesParams",
    "SetQueueModesResult",
    "SetThinkingLevelParams",
    "SetThinkingLevelResult",
    "ToolCallShown",
]

# initialize ------------------------------------------------------------------------------------


class ClientInfo(WireModel):
    name: str
    version: str | None = None


class FsCapabilities(WireModel):
    """What the client does with files: ``keepsUnsaved`` says changes written through
    ``client/writeTextFile`` stay unsaved in its buffers (the disk keeps the old text)."""

    read_text_file: bool | None = None
    write_text_file: bool | None = None
    keeps_unsaved: bool | None = None


class ElicitationCapabilities(WireModel):
    """Which ``client/elicit`` modes the client shows: a form, a URL to open."""

    form: bool | None = None
    url: bool | None = None


class ClientCapabilities(WireModel):
    """The server-to-client requests the client answers (see ``initialize``)."""

    permissions: bool | None = None
    fs: FsCapabilities | None = None
    elicitation: ElicitationCapabilities | None = None
    open_url: bool | None = None
    diagnostics: bool | None = Field(default=None, description="answers "
                                     "client/getDiagnostics")


class InitializeParams(WireModel):
    client_info: ClientInfo | None = None
    capabilities: ClientCapabilities = Field(default_factory=ClientCapabilities)
    protocol_version: int | None = Field(
        default=None, description="the Tiller protocol version the client speaks (send "
        "capabilities with it: an integer protocolVersion alone is ACP's initialize)",
    )
    delta_window_ms: float | None = Field(
        default=None, ge=0, le=1000,
        description="message_update deltas within this many ms are merged (default 16; 0: off)",
    )


class ServerInfo(WireModel):
    name: str
    version: str


class InitializeResult(WireModel):
    server_info: ServerInfo
    protocol_version: int
    capabilities: dict[str, Any]
    notice: str | None = Field(
        default=None, description="a line to show the user about the server's default model "
        "before the first prompt (the embedded model is chat only)",
    )


# session/new -----------------------------------------------------------------------------------


class SessionNewParams(WireModel):
    cwd: PathText | None = None
    provider: str | None = None
    model: str | None = None
    thinking_level: ThinkingLevel | None = None
    system_prompt: str | None = None
    append_system_prompt: str | None = None
    context_files: bool = True
    permission_mode: PermissionMode | None = None
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    """MCP servers for this session only, in ACP's shape (checked by tiller.mcp.config)."""
    sandbox: SandboxParams | None = None


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


class ContextFileEntry(WireModel):
    path: str
    size: int
    truncated: bool


class RefusedFileEntry(WireModel):
    """A project file (context file, template, skill) left unread: it leads out of its root."""

    path: str
    reason: str


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
    thinking_level: ThinkingLevel
    effective_thinking_level: ThinkingLevel | None = Field(
        default=None, description="the level the model runs at, when not thinkingLevel")
    permission_mode: PermissionMode
    usage: Usage
    context_files: list[ContextFileEntry] = Field(default_factory=list)
    refused_files: list[RefusedFileEntry] = Field(default_factory=list)
    checkpoints: CheckpointsInfo | None = None
    plan: list[PlanItem] = Field(default_factory=list)
    sandbox: SandboxState | None = None
    notice: str | None = None
    """A line to show the user about the session's model before the first prompt: that the
    embedded model is chat only (protocol.md, ``agent/getState``)."""
    parent_session_id: str | None = Field(
        default=None, description="a subagent's session: the session whose task call started it")
    parent_tool_call_id: str | None = Field(
        default=None, description="a subagent's session: the parent's task call")
    agent: str | None = Field(default=None, description="a subagent's session: its agent")
    processes: list[ProcessInfo] = Field(default_factory=list)


class McpListResult(WireModel):
    servers: list[McpServerState]


class AgentEntry(WireModel):
    """An agent the ``task`` tool can start (``agents/list``): ``tools`` its allow-list (absent:
    every tool), ``model`` / ``thinking`` when it sets them, ``source`` where it comes from,
    ``path`` its file."""

    name: str
    description: str
    tools: list[str] | None = None
    model: str | None = None
    thinking: ThinkingLevel | None = None
    source: Literal["builtin", "workspace", "claude", "user"]
    path: str | None = None


class AgentsListResult(WireModel):
    agents: list[AgentEntry]
    invalid_files: list[RefusedFileEntry] = Field(default_factory=list)


class CommandsListResult(WireModel):
    commands: list[CommandEntry]
    refused_files: list[RefusedFileEntry] = Field(default_factory=list)


class GetMessagesResult(WireModel):
    messages: list[Message]


class SetQueueModesParams(SessionParams):
    steering: QueueMode | None = None
    follow_up: QueueMode | None = None


class SetQueueModesResult(WireModel):
    steering: QueueMode
    follow_up: QueueMode


# models ----------------------------------------------------------------------------------------


class ProviderEntry(WireModel):
    name: str
    type: Literal["openai", "anthropic", "local"]
    base_url: str | None = None
    api_key_env: str | None = None
    configured: bool = Field(description="a key is set, or none is needed (local, base URL)")
    models_fetched_at: int | None = Field(
        default=None, description="when the provider last listed its models (ms since the epoch)")
    models_error: str | None = Field(
        default=None, description="why the provider's model list could not be had")


class ModelCostModel(WireModel):
    input: float
    output: float
    cache_read: float
    cache_write: float
    cache_write_1h: float | None = Field(default=None, alias="cacheWrite1h")


class ModelEntry(WireModel):
    provider: str
    id: str
    display_name: str | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None
    cost: ModelCostModel | None = None
    reasoning: bool = False
    thinking_levels: list[ThinkingLevel] | None = Field(
        default=None, description="the levels the model takes; absent: not known")
    line: str | None = None
    lifecycle: Literal["active", "deprecated", "retired"] | None = None
    deprecated_at: str | None = None
    retires_at: str | None = None
    source: Literal["catalog", "config", "provider"] = "catalog"
    checked: str | None = Field(default=None,
                                description="when the catalog's facts and prices were checked")


class ModelsListResult(WireModel):
    providers: list[ProviderEntry]
    models: list[ModelEntry]


class McpLoginParams(SessionParams):
    server: str = Field(description="the name of one of the session's MCP servers")


class McpServerResult(WireModel):
    server: McpServerState


class SetModelParams(WireModel):
    session_id: str | None = None
    provider: str
    model: str | None = None


class SetModelResult(WireModel):
    provider: str
    model: str
    notice: str | None = Field(default=None,
                               description="the model is deprecated, or was replaced")


class SetThinkingLevelParams(WireModel):
    session_id: str | None = None
    level: ThinkingLevel


class SetThinkingLevelResult(WireModel):
    level: ThinkingLevel
    effective: ThinkingLevel = Field(description="the level the session's model runs at")
    note: str | None = Field(default=None, description="why effective is not level")


# session/list, session/load, session/fork, session/delete, session/close -----------------------


class SessionListParams(WireModel):
    cwd: PathText | None = None
    limit: int = Field(default=50, ge=1, le=500)
    cursor: str | None = None


class SessionInfo(WireModel):
    session_id: str
    title: str | None = None
    cwd: str
    created: int
    updated: int
    message_count: int
    live: bool
    parent_session_id: str | None = Field(
        default=None, description="a subagent's session: the session whose task call started it")
    parent_tool_call_id: str | None = Field(
        default=None, description="a subagent's session: the parent's task call")
    agent: str | None = Field(default=None, description="a subagent's session: its agent")
    children: list[SessionInfo] | None = Field(
        default=None, description="the subagents' sessions this session's task calls started, "
                                  "oldest first (absent when none)")


class SessionListResult(WireModel):
    sessions: list[SessionInfo]
    next_cursor: str | None = None


class SessionIdParams(WireModel):
    session_id: str


class SessionForkParams(SessionIdParams):
    entry_id: str
    revert_files: bool = Field(
        default=False, description="also put the files the agent changed after the entry back"
    )


class ToolCallShown(WireModel):
    """How a tool call of a loaded transcript was shown when it started: its
    ``tool_execution_start``'s ``title``, ``kind`` and ``path``."""

    tool_call_id: str
    title: str
    kind: ToolKind
    path: str | None = None


class SessionLoadResult(WireModel):
    """A live session's history: ``entryIds[i]`` is the log entry of ``messages[i]`` (the point
    to pass to session/fork); ``toolCalls`` shows each tool call of ``messages``, in order."""

    session_id: str
    cwd: str
    provider: str
    model: str
    messages: list[Message]
    entry_ids: list[str]
    pending_steering: int = 0
    pending_follow_up: int = 0
    revert: RevertResult | None = Field(
        default=None, description="session/fork with revertFiles: what was put back"
    )
    tool_calls: list[ToolCallShown] = Field(default_factory=list)
    parent_session_id: str | None = Field(
        default=None, description="a subagent's session: the session whose task call started it")
    parent_tool_call_id: str | None = Field(
        default=None, description="a subagent's session: the parent's task call")
    agent: str | None = Field(default=None, description="a subagent's session: its agent")


# agent/compact ---------------------------------------------------------------------------------


class CompactParams(SessionParams):
    instructions: str | None = None


class CompactResult(WireModel):
    compacted: bool
    summary: str | None = None
    tokens_before: int
    tokens_after: int
    message_count: int


class SetPermissionModeParams(SessionParams):
    mode: PermissionMode


class SetPermissionModeResult(WireModel):
    mode: PermissionMode


# process/list, process/output, process/kill ----------------------------------------------------


class ProcessListResult(WireModel):
    processes: list[ProcessInfo]


class ProcessParams(SessionParams):
    process_id: int = Field(description="a background process's id (agent/getState's processes)")


class ProcessOutputParams(ProcessParams):
    lines: int | None = Field(default=None, ge=1,
                              description="only the last lines of what is held")


class ProcessOutputResult(WireModel):
    process: ProcessInfo
    output: str = Field(description="the output held (the last OUTPUT_LIMIT bytes), or its "
                        "last lines")


class ProcessResult(WireModel):
    process: ProcessInfo


# shared by several methods ---------------------------------------------------------------------


class NoParams(WireModel):
    """Params of a method that takes none: ``{}`` or absent."""


class EmptyResult(WireModel):
    """The ``{}`` result of a method that only acknowledges."""


class CancelRequestParams(WireModel):
    id: int | str
