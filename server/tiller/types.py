"""Core data types: content blocks, messages, usage, and the agent event union.

Everything here is a pydantic model that goes on the wire (events, session logs, results) as
camelCase JSON via ``dump()``. Of Tiller's own it imports only ``tiller.modes`` (plain
``Literal``s, re-exported here, that start-up reads without pydantic).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from tiller.modes import (
    HookEventName,
    HookOutcome,
    ToolKind,
    now_ms,
)

__all__ = [
    "COMPACTION_REASONS",
    "PROCESS_STATES",
    "AgentEnd",
    "AgentEvent",
    "AgentSettled",
    "AgentStart",
    "AssistantContent",
    "AssistantMessage",
    "CheckpointEvent",
    "CommandEntry",
    "CommandsChanged",
    "CompactionEnd",
    "CompactionReason",
    "CompactionStart",
    "HookEnd",
    "HookStart",
    "ImageContent",
    "McpRenamedTool",
    "McpServerState",
    "McpStatus",
    "McpStatusName",
    "Message",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "Notice",
    "PathText",
    "PlanChanged",
    "PlanItem",
    "PlanStatus",
    "ProcessExit",
    "ProcessInfo",
    "ProcessOutput",
    "ProcessStart",
    "ProcessState",
    "RetryEnd",
    "RetryScheduled",
    "RunResult",
    "RunStopReason",
    "StopReason",
    "TextContent",
    "ThinkingContent",
    "ToolCall",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "ToolResultMessage",
    "TurnEnd",
    "TurnStart",
    "Usage",
    "UserContent",
    "UserMessage",
    "WireModel",
]


class WireModel(BaseModel):
    """Base of every model that crosses the wire: camelCase aliases, populate by either name."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, defer_build=True)

    def dump(self) -> dict[str, Any]:
        """The JSON-ready dict of this model, as it goes on the wire."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


def _no_nul(value: str) -> str:
    if "\0" in value:
        raise ValueError("a path cannot contain a NUL character")
    return value


PathText = Annotated[str, AfterValidator(_no_nul)]
"""A file system path given on the wire or by a model: a NUL character in it is invalid params
(-32602; for a tool call, an error result), not an error of the file system call it would
reach."""


def _no_nul_text(value: str) -> str:
    if "\0" in value:
        raise ValueError("a NUL character cannot be passed on to the system")
    return value


SystemText = Annotated[str, AfterValidator(_no_nul_text)]
"""Text a tool passes on to the system (a command, a search pattern or glob): a NUL character
in it makes the call invalid, as in a ``PathText``."""


# ---------------------------------------------------------------------------------------------
# Content blocks


class TextContent(WireModel):
    type: Literal["text"] = "text"
    text: str


class ImageContent(WireModel):
    type: Literal["image"] = "image"
    data: str = Field(description="base64-encoded image bytes")
    mime_type: str


class ThinkingContent(WireModel):
    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = None


class ToolCall(WireModel):
    type: Literal["toolCall"] = "toolCall"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    arguments_error: str | None = None
    """Set by a provider when the streamed arguments were not one JSON object: ``arguments`` is
    then a best-effort repair, for display only, and the call is never executed."""


UserContent = Annotated[TextContent | ImageContent, Field(discriminator="type")]
AssistantContent = Annotated[
    TextContent | ThinkingContent | ToolCall, Field(discriminator="type")
]


# ---------------------------------------------------------------------------------------------
# Messages

StopReason = Literal["stop", "length", "toolUse", "error", "aborted"]
"""Why one assistant message ended. ``error`` and ``aborted`` end the run."""

RunStopReason = Literal[StopReason, "maxTurns", "maxTokens"]
"""Why a run ended: the last assistant message's reason, or a per-run limit."""


# ---------------------------------------------------------------------------------------------
# Enumerations: each spelled once, here (or in tiller.modes); tuples list them in documentation
# order.

PlanStatus = Literal["pending", "in_progress", "completed"]
"""Where a step of the agent's plan is (the ``todo`` tool; ACP's plan entry statuses)."""

ProcessState = Literal["running", "exited", "killed", "ended"]
"""Where a background process is: still ``running``; ``exited`` by itself (its exit code, or
the signal that ended it); ``killed`` by ``process_kill`` or ``process/kill``; ``ended`` with
its session or its server (``session/close``, shutdown, or a server that is gone: what a
loaded session shows of its processes)."""
PROCESS_STATES: tuple[ProcessState, ...] = get_args(ProcessState)

CompactionReason = Literal["threshold", "overflow", "manual"]
"""Why a compaction ran: the context neared the window, the provider said it was too long, or
the client asked (agent/compact)."""
COMPACTION_REASONS: tuple[CompactionReason, ...] = get_args(CompactionReason)


class Usage(WireModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float = Field(default=0.0, description="USD, from the model's configured prices")
    reasoning_tokens: int | None = Field(default=None, description="of outputTokens: reasoning")
    estimated: bool | None = Field(default=None, description="true: Tiller estimated it")

    @property
    def total_tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )

    def add(self, other: Usage) -> Usage:
        """A new Usage that is the sum of this one and ``other``."""
        reasoning = (self.reasoning_tokens, other.reasoning_tokens)
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cost=self.cost + other.cost,
            reasoning_tokens=None if reasoning == (None, None) else sum(n or 0 for n in reasoning),
            estimated=True if self.estimated or other.estimated else None,
        )


class UserMessage(WireModel):
    role: Literal["user"] = "user"
    content: str | list[UserContent]
    timestamp: int = Field(default_factory=now_ms)
    acp_content: list[dict[str, Any]] | None = None
    """The ACP content blocks the message came from, as the client sent them, when ``content``
    (what the model reads) differs from them: ACP's ``session/load`` replays these."""
    queue_id: str | None = Field(default=None, exclude=True)
    """Internal: the session-log entry that recorded this message as queued (steer/followUp)."""


class AssistantMessage(WireModel):
    role: Literal["assistant"] = "assistant"
    content: list[AssistantContent] = Field(default_factory=list)
    provider: str = ""
    model: str = ""
    usage: Usage = Field(default_factory=Usage)
    stop_reason: StopReason = "stop"
    error_message: str | None = None
    timestamp: int = Field(default_factory=now_ms)
    response_items: list[dict[str, Any]] | None = None
    """OpenAI's Responses API output items of this reply, opaque (tiller.providers.openai_
    responses): sent back unchanged to the same provider and model family, never shown."""
    retryable: bool = Field(default=False, exclude=True)
    """Set by a provider on a transient failure (429, 5xx, connection reset, a stream cut or
    stalled before the message completed). Internal: never on the wire or in logs."""
    retry_after: float | None = Field(default=None, exclude=True)
    """Seconds the provider asked us to wait (``Retry-After``), if it said. Internal."""

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [block for block in self.content if isinstance(block, ToolCall)]

    @property
    def text(self) -> str:
        return "".join(block.text for block in self.content if isinstance(block, TextContent))


class ToolResultMessage(WireModel):
    role: Literal["toolResult"] = "toolResult"
    tool_call_id: str
    tool_name: str
    content: list[UserContent] = Field(default_factory=list)
    details: Any = None
    is_error: bool = False
    timestamp: int = Field(default_factory=now_ms)
    usage: Usage | None = None
    """The model usage the call caused (a ``task`` call: its subagent's model calls), counted
    in the run's and the session's usage; absent for a call that used no model."""

    @property
    def text(self) -> str:
        return "".join(block.text for block in self.content if isinstance(block, TextContent))


Message = Annotated[
    UserMessage | AssistantMessage | ToolResultMessage, Field(discriminator="role")
]


# ---------------------------------------------------------------------------------------------
# Agent events: the one stream that is the whole UI contract (see protocol.md, "Events").


class AgentStart(WireModel):
    type: Literal["agent_start"] = "agent_start"


class TurnStart(WireModel):
    type: Literal["turn_start"] = "turn_start"


class MessageStart(WireModel):
    type: Literal["message_start"] = "message_start"
    message: Message


class MessageUpdate(WireModel):
    """One streamed delta of the assistant message in progress: never the message so far.

    ``kind`` says what grows: ``text`` and ``thinking`` carry ``delta`` text for content block
    ``index``; ``toolCallStart`` opens tool call ``index`` with ``toolCallId`` and ``toolName``;
    ``toolCallArgs`` carries a fragment of that call's JSON arguments in ``delta``.
    """

    type: Literal["message_update"] = "message_update"
    kind: Literal["text", "thinking", "toolCallStart", "toolCallArgs"]
    index: int
    delta: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None


class MessageEnd(WireModel):
    type: Literal["message_end"] = "message_end"
    message: Message


class ToolExecutionStart(WireModel):
    """A tool call begins (also one that will not run). ``title``, ``kind`` and ``path`` show it
    as its tool describes itself (``tiller.tools.base.ToolInfo``), so that a client never
    needs to know a tool by its name: ``title`` is one line (``Edit src/app.py``, a command
    tool's command, else the tool's name), ``kind`` ACP's tool kind (``other`` for a tool that
    declares none, or an unknown one), ``path`` the absolute path a tool with a path argument
    acts on."""

    type: Literal["tool_execution_start"] = "tool_execution_start"
    tool_call_id: str
    tool_name: str
    args: dict[str, Any] = Field(default_factory=dict)
    title: str
    kind: ToolKind
    path: str | None = None


class ToolExecutionUpdate(WireModel):
    """Progress of a running tool: ``partialResult`` is cumulative, not a delta."""

    type: Literal["tool_execution_update"] = "tool_execution_update"
    tool_call_id: str
    tool_name: str
    partial_result: Any = None


class ToolExecutionEnd(WireModel):
    type: Literal["tool_execution_end"] = "tool_execution_end"
    tool_call_id: str
    tool_name: str
    result: ToolResultMessage
    is_error: bool


class TurnEnd(WireModel):
    type: Literal["turn_end"] = "turn_end"
    message: AssistantMessage
    tool_results: list[ToolResultMessage] = Field(default_factory=list)


class AgentEnd(WireModel):
    type: Literal["agent_end"] = "agent_end"
    stop_reason: RunStopReason
    error_message: str | None = None
    usage: Usage = Field(default_factory=Usage)


class RetryScheduled(WireModel):
    """A transient provider failure: the assistant message in progress (if any) is discarded,
    and the model call is retried after ``delayMs``."""

    type: Literal["retry_scheduled"] = "retry_scheduled"
    attempt: int
    max_attempts: int
    delay_ms: int
    error_message: str


class RetryEnd(WireModel):
    """The retries of one model call are over: ``success`` says whether a retry got through."""

    type: Literal["retry_end"] = "retry_end"
    success: bool
    attempt: int


class CompactionStart(WireModel):
    """The older part of the context is being summarized: ``reason`` is ``threshold`` (the
    context neared the model's window), ``overflow`` (the provider said it was too long) or
    ``manual`` (agent/compact)."""

    type: Literal["compaction_start"] = "compaction_start"
    reason: CompactionReason
    tokens_before: int


class CompactionEnd(WireModel):
    """The compaction is over: ``removedCount`` messages were replaced by ``summary`` (one
    user message), or ``errorMessage`` says why nothing changed."""

    type: Literal["compaction_end"] = "compaction_end"
    reason: CompactionReason
    tokens_before: int
    tokens_after: int | None = None
    removed_count: int = 0
    summary: str | None = None
    error_message: str | None = None


class CheckpointEvent(WireModel):
    """The workspace was snapshotted after a mutating tool call: ``entryId`` is the turn's
    ``checkpoint`` log entry (pass it to session/revert to undo the turn), ``files`` what the
    agent changed in the turn so far, ``notCovered`` what snapshots leave out."""

    type: Literal["checkpoint"] = "checkpoint"
    entry_id: str
    files: list[str] = Field(default_factory=list)
    not_covered: list[str] = Field(default_factory=list)


class AgentSettled(WireModel):
    """Nothing else will follow for this run: no retry, no queued message. The idle signal."""

    type: Literal["agent_settled"] = "agent_settled"


class CommandEntry(WireModel):
    """A slash command as listed (``commands/list``, ``commands_changed``): ``name`` has no
    slash; ``source`` says where it comes from."""

    name: str
    description: str
    argument_hint: str | None = None
    source: Literal["prompt", "mcp", "skill"]


class CommandsChanged(WireModel):
    """The session's slash commands changed (a template or skill was added, edited or
    removed); ``commands`` is the new list."""

    type: Literal["commands_changed"] = "commands_changed"
    commands: list[CommandEntry]


class PlanItem(WireModel):
    content: str
    status: PlanStatus


class PlanChanged(WireModel):
    """The agent replaced its plan (a ``todo`` call); ``items`` is the whole new list."""

    type: Literal["plan"] = "plan"
    items: list[PlanItem]


McpStatusName = Literal["starting", "ready", "needsAuth", "failed", "stopped"]


class McpRenamedTool(WireModel):
    """A tool of an MCP server offered under another name than ``mcp__<server>__<tool>``
    because that name, once sanitised, was another tool's: ``tool`` is the server's name for
    it, ``name`` the one the model sees."""

    tool: str
    name: str


class McpServerState(WireModel):
    """One MCP server of a session: ``transport`` ``stdio``, ``http`` or ``sse``; ``error``
    (with the tail of its stderr) when ``failed``, why when ``needsAuth``; ``tools``: the
    names the model sees; ``renamed``: those of its tools whose name another tool had first;
    ``authUrl`` while a login waits for the browser; ``protocolVersion`` the MCP revision
    spoken, when ready."""

    name: str
    transport: str
    status: McpStatusName
    error: str | None = None
    tools: list[str] = Field(default_factory=list)
    renamed: list[McpRenamedTool] | None = None
    auth_url: str | None = None
    protocol_version: str | None = None


class McpStatus(WireModel):
    """An MCP server of the session changed its status or its tools (tiller.mcp)."""

    type: Literal["mcp_status"] = "mcp_status"
    server: McpServerState


class Notice(WireModel):
    """What the user should know about the session's model: deprecated, replaced, a thinking
    level it lacks (protocol.md, ``notice``)."""

    type: Literal["notice"] = "notice"
    level: Literal["info", "warning"]
    message: str


class HookStart(WireModel):
    """A hook command started (tiller.hooks): ``hookId`` pairs it with its ``hook_end``;
    ``source`` is the settings file it came from; ``toolCallId`` the call a tool event's hook
    runs for."""

    type: Literal["hook_start"] = "hook_start"
    hook_id: str
    hook_event: HookEventName
    command: str
    source: str
    tool_call_id: str | None = None


class HookEnd(WireModel):
    """A hook command ended: ``outcome`` ``ok``, ``blocked`` (it blocked or denied: exit code 2
    or a ``block``/``deny`` decision), ``error`` (another exit code, or it could not start) or
    ``timeout`` (killed); ``decision`` what its output decided (``block``, ``allow``, ``ask``);
    ``message`` the reason, the error output, or what it added to the context, shortened."""

    type: Literal["hook_end"] = "hook_end"
    hook_id: str
    hook_event: HookEventName
    command: str
    source: str
    tool_call_id: str | None = None
    outcome: HookOutcome
    exit_code: int | None = None
    decision: Literal["block", "allow", "ask"] | None = None
    message: str | None = None


class ProcessInfo(WireModel):
    """One background process of a session (``bash`` with ``background: true``): ``id`` numbers
    it within its session (1, 2, ...); ``command`` the command line; ``pid`` the process
    (group) the server started, absent for one of an earlier server; ``toolCallId`` the call
    that started it; ``startedAt``/``endedAt`` in ms since the epoch; ``exitCode`` or
    ``signal`` once it ended (neither for ``ended``); ``outputBytes``: everything it wrote;
    ``droppedBytes``: how much of that is no longer held (only the last ``OUTPUT_LIMIT``
    bytes are kept)."""

    id: int
    command: str
    state: ProcessState
    pid: int | None = None
    tool_call_id: str | None = None
    started_at: int
    ended_at: int | None = None
    exit_code: int | None = None
    signal: str | None = None
    output_bytes: int = 0
    dropped_bytes: int = 0


class ProcessStart(WireModel):
    """A background process started."""

    type: Literal["process_start"] = "process_start"
    process: ProcessInfo


class ProcessOutput(WireModel):
    """New output of a background process (stdout and stderr merged), merged over a short
    window; ``skipped``: bytes of it left out of the events (a fast writer: at most
    ``EVENT_MAX_BYTES`` go out per window; ``process/output`` has what is held)."""

    type: Literal["process_output"] = "process_output"
    process_id: int
    data: str
    skipped: int | None = None


class ProcessExit(WireModel):
    """A background process ended (``process.state`` says how)."""

    type: Literal["process_exit"] = "process_exit"
    process: ProcessInfo


AgentEvent = Annotated[
    AgentStart
    | TurnStart
    | MessageStart
    | MessageUpdate
    | MessageEnd
    | ToolExecutionStart
    | ToolExecutionUpdate
    | ToolExecutionEnd
    | TurnEnd
    | AgentEnd
    | RetryScheduled
    | RetryEnd
    | CompactionStart
    | CompactionEnd
    | CheckpointEvent
    | AgentSettled
    | CommandsChanged | McpStatus | PlanChanged | Notice
    | HookStart | HookEnd
    | ProcessStart | ProcessOutput | ProcessExit,
    Field(discriminator="type"),
]


@dataclass
class RunResult:
    """How a run ended: ``agent_end``'s payload plus the messages the run appended."""

    stop_reason: RunStopReason
    error_message: str | None = None
    usage: Usage = field(default_factory=Usage)
    messages: list[Message] = field(default_factory=list)
