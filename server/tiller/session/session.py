"""``Session``: one live conversation: its Agent, its log recorder, its permission gate and its
editor bridge, and the bus its events go out on.

The Session is its Agent's ``emit``: every event is published, in order, to the subscribers,
the log recorder (tiller.store.recorder) first, so an event is on disk before a front sends it.
Fronts take part only through two seams: ``subscribe`` (events, typed) and
``on_tool_cleared`` (a step after the permission gate lets a tool call run). Everything a wire
method changes or reads in a session goes through a method or property here (``prepare``,
``prompt``, ``steer``, ``abort``, ``state`` ...): the fronts never touch the Agent, the gate,
the MCP servers, the checkpoints or the context themselves (tests/test_imports.py holds them to
it). Checkpoints (tiller.checkpoints.checkpoints) use the same seams plus the Agent's
``after_tool_call``: the Agent never learns about git.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

import anyio

from tiller.agent.agent import Agent
from tiller.agent.compaction import estimate_tokens
from tiller.agent.model_call import model_context
from tiller.agent.settings import AgentSettings
from tiller.agent.tool_batch import AfterToolCallResult, BeforeToolCallResult
from tiller.checkpoints.checkpoints import Checkpoints, open_shadow
from tiller.config import ServerConfig, config_dir, default_data_dir
from tiller.context.agents import AgentDefinition
from tiller.context.confined import RefusedFile
from tiller.context.project import ContextFile, ProjectContext
from tiller.diagnostics.commands import CommandDiagnostics
from tiller.diagnostics.editor import EditorDiagnostics
from tiller.diagnostics.watch import DiagnosticsWatch
from tiller.errors import AgentBusyError, UnknownProcessError
from tiller.frozen import frozen
from tiller.gate.editor import ClientFiles, ClientPermissions, ClientRequest
from tiller.gate.permissions import PermissionGate
from tiller.gate.protected import ProtectedPaths
from tiller.hooks.session_hooks import SessionHooks
from tiller.hooks.trust import TrustStore
from tiller.mcp.client import McpHost, McpServer, McpServers
from tiller.mcp.config import McpServerConfig, parse_server_list
from tiller.mcp.elicit import NoUser
from tiller.mcp.prompts import McpPromptSource
from tiller.mcp.resources import expand_mentions
from tiller.modes import (
    SUMMARY_PREFIX,
    THINKING_LEVELS,
    PermissionMode,
    QueueMode,
    SandboxMode,
    ThinkingLevel,
)
from tiller.procs import ProcessScope
from tiller.protocol.checkpoints import ChangesResult, RevertResult
from tiller.providers.base import ModelInfo, Provider
from tiller.providers.directory import ModelDirectory
from tiller.providers.embedded import CHAT_ONLY_NOTICE, is_chat_only
from tiller.providers.levels import EffectiveLevel
from tiller.providers.registry import create_provider
from tiller.sandbox.command import CommandSandbox
from tiller.sandbox.settings import SandboxSettings
from tiller.sandbox.use import SandboxUse
from tiller.session.mcp_user import ClientUser
from tiller.session.model_guard import ModelWatch
from tiller.session.plan import PlanTracker
from tiller.session.subagents import (
    Children,
    SessionSubagents,
    TaskLink,
    TaskSetup,
    may_nest,
    task_tools,
)
from tiller.store.log import SessionLog, shown_tool_calls
from tiller.store.recorder import LogRecorder
from tiller.tools.background import BackgroundProcess, ProcessTable
from tiller.tools.base import EditorFiles, Terminal, Tool
from tiller.tools.builtin import default_tools
from tiller.tools.task import TaskTool
from tiller.types import (
    AgentEvent,
    AssistantMessage,
    CommandEntry,
    CommandsChanged,
    McpServerState,
    Message,
    PlanItem,
    ProcessInfo,
    RunResult,
    TextContent,
    ToolCall,
    ToolExecutionUpdate,
    ToolResultMessage,
    Usage,
    UserContent,
    UserMessage,
)

if TYPE_CHECKING:
    from tiller.store.replay import Replay  # imported where a log is loaded (registry)

__all__ = [
    "ClearedHook",
    "Compaction",
    "EditorClient",
    "ProviderFactory",
    "Session",
    "SessionState",
    "Subscriber",
    "protected_paths",
    "provider_factory",
]

CHILD_CHECKPOINTS = ("a subagent's changes are checkpointed in its parent session, as its "
                     "task call's")
"""Why a child session has no checkpoints of its own."""

Subscriber = Callable[[AgentEvent], None]
"""Receives every event of the session, in order; must not raise."""

ClearedHook = Callable[[ToolCall, dict[str, Any]], Awaitable[None]]
"""Awaited after the permission gate lets a call run, before it runs; must not raise."""


@frozen
class EditorClient:
    """The client as the sessions' editor: how to send it a request, and the capabilities it
    declared in ``initialize`` (``fs.readTextFile``, ``fs.writeTextFile``, ``fs.keepsUnsaved``,
    ``permissions``, ``elicitation.form``, ``elicitation.url``, ``openUrl``,
    ``diagnostics``)."""

    request: ClientRequest
    capabilities: dict[str, Any]


@frozen
class SessionState:
    """What a session is doing and holds, at one moment (``Session.state``)."""

    session_id: str
    is_running: bool
    provider: str
    model: str
    cwd: Path
    message_count: int
    pending_steering: int
    """Messages queued as steering, not delivered yet; likewise ``pending_follow_up``."""
    pending_follow_up: int
    steering_mode: QueueMode
    follow_up_mode: QueueMode
    thinking_level: ThinkingLevel
    effective_thinking_level: ThinkingLevel
    """The level the model runs ``thinking_level`` at (tiller.providers.levels)."""
    permission_mode: PermissionMode
    usage: Usage
    """The session's spending so far, every run's together."""
    context_files: list[ContextFile]
    refused_files: list[RefusedFile]
    """Context files left out: they lead out of their root (tiller.context.confined)."""
    checkpoints_enabled: bool
    checkpoints_reason: str | None
    """Why checkpoints are off (None when they are on)."""
    plan_items: list[PlanItem]
    """The agent's plan: its last ``todo`` call's items."""
    sandbox: SandboxSettings
    """The session's sandbox settings."""
    sandbox_use: SandboxUse
    """How a command without ``escalate`` would run now (tiller.sandbox.use)."""
    notice: str | None = None
    """What the user should be told about the model before prompting (``Session.notice``)."""
    task: TaskLink | None = None
    """A child session's link to its parent (tiller.session.subagents)."""
    background_processes: list[ProcessInfo] = field(default_factory=list)
    """The background processes (tiller.tools.background), oldest first."""


@frozen
class Compaction:
    """What ``Session.compact`` did: ``summary`` (without the summary's prefix) replaced the
    older messages when ``compacted``; the context's size before and after, estimated."""

    compacted: bool
    summary: str | None
    tokens_before: int
    tokens_after: int
    message_count: int


ProviderFactory = Callable[[ServerConfig, str, str], Callable[[], Provider]]
"""Given the server's config, a provider name and a model: a function building that provider
(``provider_factory``; tests inject spies)."""


def provider_factory(config: ServerConfig, provider: str, model: str) -> Callable[[], Provider]:
    """A factory for ``provider``/``model``; the server's --base-url applies to the server's
    own provider only."""
    base_url = config.base_url if provider == config.provider else None

    def build() -> Provider:
        return create_provider(
            provider, model=model, base_url=base_url, env=config.env,
            providers=config.providers, cache_ttl=config.cache_ttl,
        )

    return build


def _data_dirs(config: ServerConfig) -> list[Path]:
    """Tiller's data dir and, when sessions are saved, its session dir (which may lie
    elsewhere): what the gate protects and the sandbox hides."""
    dirs = [default_data_dir(config.env)]
    if config.session_dir is not None:
        dirs.append(config.session_dir)
    return dirs


def protected_paths(config: ServerConfig) -> ProtectedPaths:
    """What no file tool changes unasked (tiller.gate.protected): besides the workspace's own,
    Tiller's config dir, data dir and session dir, and the home folder's hidden entries."""
    home = config.env.get("HOME")
    return ProtectedPaths(tiller_dirs=[config_dir(config), *_data_dirs(config)],
                          home=Path(home) if home else None)


class Session:
    """One live session. ``explicit_mode`` is the permission mode a client chose for it; None
    follows the server's default. ``model_default``: the model is the provider's default (no
    one chose it), which a retired one may be replaced from (``tiller.session.model_guard``)."""

    def __init__(
        self, config: ServerConfig, session_log: SessionLog, *, session_id: str, cwd: Path,
        provider: str, model: str, context: ProjectContext,
        client: EditorClient | None = None, mode: PermissionMode | None = None,
        providers: ProviderFactory = provider_factory,
        mcp_servers: Sequence[McpServerConfig] = (),
        model_default: bool = False,
        sandbox: SandboxSettings | None = None,
        task: TaskSetup | None = None,
        children: Children | None = None,
    ) -> None:
        self.config = config
        self.task = task
        """A child session's link to its parent and set-up (None: a top-level session)."""
        self.providers = providers
        self.id, self.cwd, self.provider, self.model = session_id, cwd, provider, model
        self.model_default = model_default
        self.directory = ModelDirectory(config)
        """The providers' models (tiller.providers.directory)."""
        self.watch = ModelWatch(self)
        self.context = context
        """Context files, slash commands and skills (tiller.context.project)."""
        self.recorder = LogRecorder(session_id, session_log)
        self._subscribers: list[Subscriber] = [self.recorder]
        self._cleared_hooks: list[ClearedHook] = []
        self.processes = ProcessScope()
        """What the session's commands started; killed when the session closes."""
        self.sandbox = self._command_sandbox(sandbox or config.sandbox)
        """Where the session's commands run (tiller.sandbox.command)."""
        self.background = ProcessTable(self.processes, self.publish)
        """The commands run in the background (tiller.tools.background); killed at close."""
        tools = default_tools(sanitize_env=config.sanitize_env, processes=self.processes,
                              sandbox=self.sandbox, background=self.background)
        self._builtin_tools = frozenset(tool.name for tool in tools)
        limit = config.tasks.max_depth
        self.subagents = SessionSubagents(
            self, lambda: self.context.agents, children, config.tasks.max_concurrent,
        ) if children is not None and may_nest(task, limit) else None
        """The ``task`` tool's port (None: this session cannot start subagents)."""
        tools, withheld = task_tools(tools, task, self.subagents,
                                     nesting_refused=children is not None, max_depth=limit)
        host = McpHost(cwd=cwd, scope=self.processes,
                       auth_dir=default_data_dir(config.env),
                       login_timeout=config.permission_timeout)
        self.mcp = McpServers(
            [*config.mcp_servers, *mcp_servers], tools=tools, host=host,
            publish=self.publish, on_prompts=self._mcp_prompts_changed,
        )
        """The session's MCP servers; their tools join ``tools`` once started, their prompts
        the slash commands (tiller.mcp.prompts)."""
        self.context.catalog.add_source(McpPromptSource(self.mcp))
        self.hooks = SessionHooks(
            config.hooks, cwd=cwd, session_id=session_id, transcript=session_log.path,
            processes=self.processes, publish=self.publish, tools=lambda: self.tools,
            mode=lambda: self.gate.mode, model=lambda: self.model,
            trust=TrustStore(config.data_dir) if config.data_dir is not None else None,
            sanitize_env=config.sanitize_env,
        )
        """The user's hooks and the trusted workspace's (tiller.hooks)."""
        self._refreshing = asyncio.Lock()
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False
        settings = AgentSettings(
            tools=tools,
            system_prompt=context.system_prompt(self.chat_only),
            cwd=cwd,
            max_turns=task.max_turns if task is not None else config.max_turns,
            retry=config.retry,
            compaction=config.compaction,
            max_run_tokens=task.max_tokens if task is not None else config.max_run_tokens,
            withheld_tools=withheld,
            before_tool_call=self._before_tool_call,
            after_tool_call=self._after_tool_call,
            run_hooks=self.hooks,
            cache_key=session_id,
            notices=self.background,
        )
        self.agent = Agent(
            settings, providers(config, provider, model), self.publish,
            model_info=self.directory.info(provider, model), thinking=config.thinking,
            guard=self.watch,
        )
        repo, off_reason = open_shadow(config.session_dir, cwd, session_log.path, session_id,
                                       config.checkpoint_max_bytes)
        if task is not None:  # its changes are its parent's turn's (the parent's snapshots)
            repo, off_reason = None, CHILD_CHECKPOINTS
        self.checkpoints = Checkpoints(repo, off_reason, self.recorder, lambda: self.tools,
                                       self.publish)
        """The workspace snapshots around the agent's mutating turns
        (tiller.checkpoints.checkpoints)."""
        self.subscribe(self.checkpoints)
        self.plan = PlanTracker(self.publish, lambda: self.tools)
        """The agent's plan (its last ``todo`` call; tiller.session.plan)."""
        self.subscribe(self.plan)
        self.on_tool_cleared(self.checkpoints.before_tool)
        commands = CommandDiagnostics(config.diagnostics, cwd, self.processes, self.sandbox,
                                      config.sanitize_env) if config.diagnostics.commands else None
        self.diagnostics = DiagnosticsWatch(lambda: self.tools, cwd, commands)
        """The problems the agent's file changes introduce (tiller.diagnostics.watch)."""
        self.subscribe(self.diagnostics)
        self.on_tool_cleared(self.diagnostics.before_tool)
        self.files: EditorFiles | None = None
        self.explicit_mode: PermissionMode | None = None
        self.extra_roots: list[Path] = []
        """Workspace roots besides ``cwd`` (ACP's ``additionalDirectories``)."""
        self.gate: PermissionGate
        self.connect_editor(client, mode)

    @property
    def task_link(self) -> TaskLink | None:
        """Where a child session comes from (its parent, the parent's ``task`` call, its
        agent); None for a top-level session."""
        return self.task.link if self.task is not None else None

    def shared_tools(self) -> list[Tool[Any]]:
        """The tools a child of this session shares with it rather than making its own: those
        of the session's MCP servers."""
        return [tool for tool in self.tools
                if tool.name not in self._builtin_tools and tool.name != TaskTool.name]

    def _command_sandbox(self, settings: SandboxSettings) -> CommandSandbox:
        """The session's command sandbox: its roots, the gate's protected paths, Tiller's
        folders (the config dir read-only, the data and session dirs hidden), whether commands
        go to the editor's terminal, and whether the gate can let one escalate."""
        config = self.config
        return CommandSandbox(
            settings, roots=lambda: [self.cwd, *self.extra_roots],
            protected=lambda path: self.gate.protected.why(
                path, [self.cwd, *self.extra_roots]) is not None,
            read_only_dirs=[config_dir(config)], hidden_dirs=_data_dirs(config),
            terminal=lambda: self.agent.settings.terminal is not None,
            may_escalate=lambda: self.gate.may_escalate(),
        )

    @property
    def log(self) -> SessionLog:
        return self.recorder.log

    @property
    def entry_ids(self) -> list[str]:
        """The log entry of each message in ``agent.messages`` ("" where there is none)."""
        return self.recorder.entry_ids

    @property
    def tools(self) -> Sequence[Tool[Any]]:
        """The session's tools; the gate and the fronts read how each describes itself."""
        return self.agent.settings.tools

    def shown_tool_calls(self) -> list[dict[str, Any]]:
        """How each tool call of the transcript was shown when it started, in order
        (``session/load``'s ``toolCalls``, ``tiller.store.log.shown_tool_calls``)."""
        calls = ((entry_id, call.id, call.name)
                 for entry_id, message in zip(self.entry_ids, self.agent.messages, strict=True)
                 if isinstance(message, AssistantMessage) for call in message.tool_calls)
        return shown_tool_calls(calls, self.recorder.shown)

    @property
    def thinking(self) -> ThinkingLevel:
        return self.agent.thinking

    @property
    def chat_only(self) -> bool:
        """Whether the session's model is the embedded one, which has no tools
        (tiller.providers.embedded): its system prompt is its own."""
        settings = self.config.providers.get(self.provider)
        return is_chat_only(settings.type if settings else None, self.model)

    @property
    def notice(self) -> str | None:
        """What the user should be told about the session's model before prompting
        (``agent/getState``'s ``notice``): that the embedded model is chat only."""
        return CHAT_ONLY_NOTICE if self.chat_only else None

    # ------------------------------------------------------------------ the seams

    def subscribe(self, subscriber: Subscriber) -> None:
        """Add a subscriber; it gets every later event, after those subscribed before it."""
        self._subscribers.append(subscriber)

    def set_delta_window(self, seconds: float) -> None:
        """How late the front lets a streamed delta reach it (its coalescing window): the
        model's stream is then read at most once per window (``AgentSettings.delta_window``).
        Takes effect from the next run; default 0, every chunk as it arrives."""
        self.agent.settings = replace(self.agent.settings, delta_window=max(0.0, seconds))

    def on_tool_cleared(self, hook: ClearedHook) -> None:
        """Await ``hook`` for every tool call the permission gate lets run, before it runs."""
        self._cleared_hooks.append(hook)

    def publish(self, event: AgentEvent) -> None:
        """Hand ``event`` to every subscriber, in order (the Agent's ``emit``)."""
        for subscriber in self._subscribers:
            subscriber(event)

    async def _before_tool_call(
        self, call: ToolCall, args: dict[str, Any]
    ) -> BeforeToolCallResult | None:
        """The PreToolUse hooks, then the permission gate (told what the hooks decided), then
        the cleared hooks of a call that runs."""
        hooked = await self.hooks.pre_tool_use(call)
        if hooked.block is not None:
            return BeforeToolCallResult(block=True, reason=hooked.block)
        permission = (hooked.permission, hooked.reason) if hooked.permission else None
        verdict = await self.gate(call, args, permission)
        if verdict is None or not verdict.block:
            for hook in self._cleared_hooks:
                await hook(call, args)
        return verdict

    async def _after_tool_call(
        self, call: ToolCall, result: ToolResultMessage
    ) -> AfterToolCallResult | None:
        """The PostToolUse hooks (a formatter's changes count as the call's), then the
        checkpoint after the call, then the problems the call introduced (of the formatted
        file); the hooks' texts join the result."""
        texts = await self.hooks.post_tool_use(call, result)
        await self.checkpoints.after_tool(call, result)
        content = await self.diagnostics.after_tool(call, result)
        if content is None and not texts:
            return None
        return AfterToolCallResult(content=[*(result.content if content is None else content),
                                            *(TextContent(text=text) for text in texts)])

    # ------------------------------------------------------------------ the editor

    def connect_editor(self, client: EditorClient | None, mode: PermissionMode | None) -> None:
        """Give the session's agent the editor's files and a permission gate, as far as the
        client declared it can answer ``client/*`` requests."""
        request, caps = (client.request, client.capabilities) if client else (None, {})
        fs_caps = caps.get("fs")
        fs = fs_caps if isinstance(fs_caps, dict) else {}
        can_read, can_write = bool(fs.get("readTextFile")), bool(fs.get("writeTextFile"))
        files = None
        if request is not None and (can_read or can_write):
            files = ClientFiles(request, self.id, can_read, can_write,
                                keeps_unsaved=bool(fs.get("keepsUnsaved")))
        asker = None
        if request is not None and caps.get("permissions"):
            link = self.task_link
            asker = ClientPermissions(request, self.id, self.config.permission_timeout,
                                      link.wire() if link is not None else {})
        chosen = mode or self.config.permission_mode or ("ask" if asker else "auto")
        self.explicit_mode = mode

        def waiting(call: ToolCall) -> None:
            self.publish(ToolExecutionUpdate(
                tool_call_id=call.id, tool_name=call.name,
                partial_result={"status": "awaitingPermission"},
            ))

        self.gate = PermissionGate(
            chosen, [self.cwd, *self.extra_roots], tools=self.tools,
            rules=self.config.permission_rules,
            ask=asker, files=files, waiting=waiting, protected=protected_paths(self.config),
            sandbox=self.sandbox,
        )
        self.hooks.ask = asker
        self.mcp.host.user = NoUser() if request is None else self._mcp_user(request, caps)
        self.diagnostics.editor = EditorDiagnostics(
            request, self.id, self.config.diagnostics.editor_timeout,
        ) if request is not None and caps.get("diagnostics") else None
        self.files = files
        self.agent.settings = replace(self.agent.settings, files=files)

    def set_sandbox(self, mode: SandboxMode | None = None, network: bool | None = None) -> None:
        """Run the next commands in another sandbox mode, or with(out) network (None:
        unchanged)."""
        settings = self.sandbox.settings
        self.sandbox.settings = replace(
            settings, mode=settings.mode if mode is None else mode,
            network=settings.network if network is None else network)

    def _mcp_user(self, request: ClientRequest, caps: dict[str, Any]) -> ClientUser:
        """The user as the MCP servers reach them, as far as the client declared it."""
        declared = caps.get("elicitation")
        modes = frozenset(mode for mode in ("form", "url")
                          if isinstance(declared, dict) and declared.get(mode))

        def asking(call_id: str) -> None:
            name = next((call.name for message in reversed(self.agent.messages)
                         if isinstance(message, AssistantMessage)
                         for call in message.tool_calls if call.id == call_id), "")
            self.publish(ToolExecutionUpdate(
                tool_call_id=call_id, tool_name=name, partial_result={"status": "awaitingInput"},
            ))

        return ClientUser(request, self.id, modes, bool(caps.get("openUrl")),
                          self.config.permission_timeout, asking)

    def set_extra_roots(self, roots: Sequence[Path]) -> None:
        """Treat ``roots`` as part of the workspace too (permissions: "inside")."""
        self.extra_roots = list(roots)
        self.gate.roots = [self.cwd, *self.extra_roots]

    def use_terminal(self, terminal: Terminal | None) -> None:
        """Run ``bash`` in the editor's terminals (None: in Tiller's own processes)."""
        self.agent.settings = replace(self.agent.settings, terminal=terminal)

    # ------------------------------------------------------------------ runs

    @property
    def is_running(self) -> bool:
        """A run (or a compaction) is active."""
        return self.agent.is_running

    @overload
    async def prepare(self, message: None) -> None: ...

    @overload
    async def prepare(
        self, message: str | Sequence[UserContent]
    ) -> str | list[UserContent]: ...

    async def prepare(
        self, message: str | Sequence[UserContent] | None
    ) -> str | list[UserContent] | None:
        """Get a prompt ready to run: the session's MCP servers started (the first call starts
        them, later ones wait for that start to end; a server that fails is reported, never
        raised), then a leading ``/name ...`` expanded by its command (an MCP prompt's needs its
        server), the message as typed when it names no known command. None (a continue) only
        starts the servers. The hooks are made ready first (tiller.hooks: the workspace's
        files asked about, SessionStart run once)."""
        await self.hooks.prepare(resumed=bool(self.agent.messages))
        await self.mcp.ensure_started()
        await anyio.to_thread.run_sync(self.context.agents.refresh)
        if message is None:
            return None
        await self.refresh_commands()
        return await expand_mentions(await self.context.expand(message), self.mcp)

    async def prompt(self, content: str | Sequence[UserContent] | UserMessage) -> RunResult:
        """Run ``content`` (``prepare``d) as new user input, after the UserPromptSubmit hooks
        (which may add context, or refuse it: PromptBlockedError); returns when the run has
        ended. AgentBusyError while a run is active."""
        if self.agent.is_running:
            return await self.agent.prompt(content)  # raises AgentBusyError
        return await self.agent.prompt(await self.hooks.submit_prompt(content))

    def check_idle(self) -> None:
        """AgentBusyError while a run is active: a prompt is refused before anything is
        prepared for it (hooks, MCP servers, commands), not after."""
        self.agent.check_idle()

    async def continue_(self) -> RunResult:
        """Resume from the transcript (after an error, an abort, a restart), delivering the
        queued messages first if there are any; returns when the run has ended.
        CannotContinueError when there is nothing to continue, AgentBusyError during a run."""
        return await self.agent.continue_()

    def steer(self, content: str | Sequence[UserContent] | UserMessage) -> int:
        """Queue ``content`` as steering (delivered after the current tool batch, before the next
        model call), logged first (``_enqueue``). Returns the steering queue's length."""
        return self._enqueue("steering", content)

    def follow_up(self, content: str | Sequence[UserContent] | UserMessage) -> int:
        """Queue ``content`` as a follow-up (delivered when the agent would otherwise stop),
        logged first (``_enqueue``). Returns the follow-up queue's length."""
        return self._enqueue("followUp", content)

    def _enqueue(
        self, queue: Literal["steering", "followUp"],
        content: str | Sequence[UserContent] | UserMessage,
    ) -> int:
        """Log a steering or follow-up message, then queue it: once this returns, the message
        survives a crash and is delivered after a restart. Returns the queue's length."""
        if isinstance(content, UserMessage):
            message = content
        else:
            message = UserMessage(content=content if isinstance(content, str) else list(content))
        entry = self.recorder.append("queued", queue=queue, message=message.dump())
        message.queue_id = entry.id if entry else None
        if queue == "steering":
            return self.agent.steer(message)
        return self.agent.follow_up(message)

    def abort(self) -> None:
        """End the active run (or compaction) with stop reason ``aborted``: the model stream is
        cancelled, running tools are killed. NoActiveRunError when none is active."""
        self.agent.abort()

    def set_queue_modes(
        self, steering: QueueMode | None = None, follow_up: QueueMode | None = None
    ) -> tuple[QueueMode, QueueMode]:
        """How many queued messages each poll delivers, per queue (None: unchanged; read at the
        next poll). Returns the steering and follow-up modes now in effect."""
        agent = self.agent
        if steering is not None:
            agent.steering_mode = steering
        if follow_up is not None:
            agent.follow_up_mode = follow_up
        return agent.steering_mode, agent.follow_up_mode

    async def compact(self, instructions: str | None = None) -> Compaction:
        """Summarize the older part of the conversation now (``instructions`` guide the
        summary); emits ``compaction_start``/``compaction_end``. AgentBusyError during a run."""
        agent = self.agent
        before = estimate_tokens(model_context(agent.messages))
        compacted = await agent.compact(instructions)
        summary = agent.messages[0].content if compacted else None
        return Compaction(
            compacted=compacted,
            summary=summary.removeprefix(SUMMARY_PREFIX) if isinstance(summary, str) else None,
            tokens_before=before,
            tokens_after=estimate_tokens(model_context(agent.messages)),
            message_count=len(agent.messages),
        )

    # ------------------------------------------------------------------ what fronts read

    @property
    def permission_mode(self) -> PermissionMode:
        """The mode the next tool call is judged by."""
        return self.gate.mode

    @property
    def sandbox_mode(self) -> SandboxMode:
        """The sandbox mode the next command runs in (tiller.sandbox)."""
        return self.sandbox.settings.mode

    @property
    def context_window(self) -> int | None:
        """The model's context window in tokens, when the catalog knows it."""
        info = self.agent.model_info
        return info.context_window if info is not None else None

    def messages(self) -> list[Message]:
        """The transcript, oldest first (a copy: later messages do not change it)."""
        return list(self.agent.messages)

    def state(self) -> SessionState:
        """A snapshot of the session (``agent/getState``)."""
        agent = self.agent
        return SessionState(
            session_id=self.id, is_running=agent.is_running, provider=self.provider,
            model=self.model, cwd=self.cwd, message_count=len(agent.messages),
            pending_steering=len(agent.steering_queue),
            pending_follow_up=len(agent.follow_up_queue),
            steering_mode=agent.steering_mode, follow_up_mode=agent.follow_up_mode,
            thinking_level=agent.thinking,
            effective_thinking_level=self.watch.thinking().level,
            permission_mode=self.gate.mode, usage=agent.usage,
            context_files=list(self.context.prompt_files(self.chat_only)),
            refused_files=list(self.context.refused),
            checkpoints_enabled=self.checkpoints.enabled,
            checkpoints_reason=self.checkpoints.reason, plan_items=list(self.plan.items),
            sandbox=self.sandbox.settings, sandbox_use=self.sandbox.plan(),
            notice=self.notice, task=self.task_link,
            background_processes=self.background.infos(),
        )

    # ------------------------------------------------------------------ background processes

    def process_infos(self) -> list[ProcessInfo]:
        """The session's background processes, oldest first (``process/list``)."""
        return self.background.infos()

    def _process(self, process_id: int) -> BackgroundProcess:
        process = self.background.get(process_id)
        if process is None:
            known = ", ".join(str(p.id) for p in self.background) or "none"
            raise UnknownProcessError(f"the session has no background process {process_id} "
                                      f"(it has: {known})")
        return process

    def process_output(self, process_id: int, lines: int | None = None) -> tuple[ProcessInfo, str]:
        """A background process and the output it holds (its last ``lines`` lines);
        UnknownProcessError for an id the session does not have. The model's reading is not
        moved."""
        process = self._process(process_id)
        return process.info(), process.held_text(lines)

    async def kill_process(self, process_id: int) -> ProcessInfo:
        """End a background process for the user (SIGTERM, then SIGKILL): the model is told
        at its next poll point. Returns it as it is then (one that had ended: unchanged)."""
        process = self._process(process_id)
        await process.kill("user")
        return process.info()

    # ------------------------------------------------------------------ what methods change

    def set_permission_mode(self, mode: PermissionMode) -> None:
        """The next tool call is judged by ``mode``."""
        self.gate.mode = mode
        self.explicit_mode = mode

    async def changes(self, start: str | None = None, end: str | None = None) -> ChangesResult:
        """``session/changes``: the files the agent changed after entry ``start`` up to entry
        ``end`` (default: the whole session), with diffs. CheckpointsOffError when they are off,
        UnknownEntryError for an entry not on the session's branch."""
        return await self.checkpoints.changes(start, end)

    async def revert(self, entry_id: str, paths: Sequence[str] | None, *, force: bool,
                     stop: str, log_path: Path | None = None) -> RevertResult:
        """``session/revert``: the files the agent changed after ``entry_id`` put back (through
        the editor when it writes files). Refused while a run is active: the client is told to
        ``stop`` it (its protocol's word: abort, cancel) first. ``log_path``: the checkpoints
        of another session's log (a fork's source)."""
        if self.agent.is_running:
            raise AgentBusyError(f"the session has an active run: {stop} it before a revert")
        return await self.checkpoints.revert(entry_id, paths, force=force, files=self.files,
                                             log_path=log_path)

    async def add_mcp_servers(self, entries: Sequence[Any], where: str) -> None:
        """Add MCP servers, given in ACP's shape (``tiller.mcp.config.parse_server_list``;
        ConfigError names ``where``), to the live session; a name it has already is kept as it
        is. When its servers have started (or are starting), the new ones start now."""
        await self.mcp.add(parse_server_list(entries, where))

    async def mcp_servers(self) -> list[McpServerState]:
        """Each MCP server's state, once they have started (the first call starts them) and the
        commands are refreshed (their prompts are listed from then on)."""
        await self.mcp.ensure_started()
        await self.refresh_commands()
        return self.mcp.states()

    async def mcp_login(self, name: str) -> McpServerState:
        """Sign in to MCP server ``name`` through the browser (tiller.mcp.client's ``login``):
        its state once signed in, refused, or out of time. ConfigError (the params' fault)
        for an unknown server or one that does not use OAuth."""
        return await self.mcp.account(name, McpServer.login)

    async def mcp_logout(self, name: str) -> McpServerState:
        """Revoke and forget MCP server ``name``'s tokens, then connect again; its state."""
        return await self.mcp.account(name, McpServer.logout)

    async def set_model(self, provider: str, model: str | None) -> str | None:
        """Switch to another provider/model between runs (the old provider is closed); the
        model is looked up first (``ModelDirectory.lookup``). Returns the notice a deprecated
        model gets, or None."""
        chosen = model or self.config.default_model(provider)
        self.providers(self.config, provider, chosen)()  # a missing key fails before the lookup
        info = await self.directory.lookup(provider, chosen)
        await self.switch_model(provider, chosen, info, default=model is None)
        notice = self.watch.lifecycle_notice(info)
        if notice:
            self.watch.mark("lifecycle", chosen)
        return notice

    async def switch_model(self, provider: str, model: str, info: ModelInfo | None, *,
                           default: bool) -> None:
        """Use ``model`` of ``provider`` from the next model call on, and log it."""
        await self.agent.set_provider(self.providers(self.config, provider, model), info)
        self.provider, self.model, self.model_default = provider, model, default
        self.agent.settings = replace(self.agent.settings,
                                      system_prompt=self.context.system_prompt(self.chat_only))
        self.recorder.append("model_change", provider=provider, model=model)

    async def refresh_commands(self) -> None:
        """Re-read the command sources that changed (a worker thread: file I/O); if the list
        differs, rebuild the system prompt (skills are in it) and publish ``commands_changed``.
        A source that changes on its own (an MCP server's prompts) calls this too."""
        async with self._refreshing:
            if not await anyio.to_thread.run_sync(self.context.catalog.refresh):
                return
            self.agent.settings = replace(self.agent.settings,
                                          system_prompt=self.context.system_prompt(self.chat_only))
            self.publish(CommandsChanged(commands=self.command_entries()))

    def _mcp_prompts_changed(self) -> None:
        """An MCP server's prompts changed: refresh the commands in the background."""
        task = asyncio.create_task(self.refresh_commands())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def command_entries(self) -> list[CommandEntry]:
        """The session's slash commands as listed on the wire."""
        return [CommandEntry(name=c.name, description=c.description,
                             argument_hint=c.argument_hint, source=c.source)
                for c in self.context.commands]

    async def agents(self) -> tuple[list[AgentDefinition], list[RefusedFile]]:
        """The agents the ``task`` tool can start, re-read when a file changed, and the agent
        files skipped (broken front matter, a symlink out of their folder) with the reason."""
        catalog = self.context.agents
        await anyio.to_thread.run_sync(catalog.refresh)
        return list(catalog.agents), list(catalog.invalid)

    def refused_command_files(self) -> list[RefusedFile]:
        """The template and skill files the commands' sources refused at their last load: they
        lead out of their root (tiller.context.confined)."""
        return list(self.context.catalog.refused)

    def set_thinking(self, level: ThinkingLevel) -> EffectiveLevel:
        """Read when the next run starts; returns the level the model runs it at (and why,
        when that differs: the note then is not repeated as a notice)."""
        self.agent.thinking = level
        self.recorder.append("thinking_change", level=level)
        effective = self.watch.thinking()
        if effective.note:
            self.watch.mark("thinking", self.model, level)
        return effective

    def restore(self, state: Replay) -> None:
        """Take over a replayed log's transcript, queues, thinking level and spending (what a
        crash left unfinished was repaired in the log before:
        ``tiller.store.saved.open_saved``)."""
        agent = self.agent
        agent.usage = state.usage
        agent.messages.extend(state.messages)
        self.plan.restore(state.messages)
        self.entry_ids.extend(state.entry_ids)
        self.recorder.shown.update(state.shown)
        self.background.restore(state.processes)
        agent.steering_queue.extend(state.steering)
        agent.follow_up_queue.extend(state.follow_ups)
        if state.thinking in THINKING_LEVELS:
            agent.thinking = state.thinking

    async def close(self, grace: float | None = None) -> None:
        """Stop the run (if any) and wait for it to wind down, at most ``grace`` seconds (None:
        as long as it takes); then stop the MCP servers, kill the background processes (their
        ends recorded as ``ended``) and the processes its commands left running
        (``ProcessScope.kill``), close the log and the provider. Once: a second call does
        nothing."""
        if self._closed:
            return
        self._closed = True
        if self.agent.is_running:
            self.agent.abort()
            with anyio.move_on_after(grace):
                await self.agent.wait_idle()
        await self.mcp.close()
        for task in list(self._background):
            task.cancel()
        await self.background.close()
        await self.processes.kill()
        self.log.close()
        await self.agent.aclose()
