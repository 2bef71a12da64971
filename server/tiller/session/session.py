"""``Session``: one live conversation: its Agent, its log recorder, its permission gate and its
editor bridge, and the bus its events go out on.

The Session is its Agent's ``emit``: every event is published, in order, to the subscribers,
the log recorder (tiller.store.recorder) first, so an event is on disk before a front sends it.
Fronts take part only through two seams: ``subscribe`` (events, typed) and
``on_tool_cleared`` (a step after the permission gate lets a tool call run). Everything a wire
method changes in a session goes through a method here. Checkpoints (tiller.checkpoints.checkpoints)
use the same seams plus the Agent's ``after_tool_call``: the Agent never learns about git.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import anyio

from tiller.agent.agent import Agent
from tiller.agent.settings import AgentSettings
from tiller.agent.tool_batch import BeforeToolCallResult
from tiller.checkpoints.checkpoints import Checkpoints, open_shadow
from tiller.config import ServerConfig, config_dir, default_session_dir
from tiller.context.project import ProjectContext
from tiller.errors import AgentBusyError
from tiller.gate.editor import ClientFiles, ClientPermissions, ClientRequest
from tiller.gate.permissions import PermissionGate
from tiller.gate.protected import ProtectedPaths
from tiller.mcp.client import McpServers
from tiller.mcp.config import McpServerConfig
from tiller.mcp.prompts import McpPromptSource
from tiller.modes import THINKING_LEVELS, PermissionMode, ThinkingLevel
from tiller.procs import ProcessScope
from tiller.protocol.checkpoints import RevertResult
from tiller.providers.base import Provider
from tiller.providers.registry import create_provider
from tiller.session.plan import PlanTracker
from tiller.store.log import SessionLog, shown_tool_calls
from tiller.store.recorder import LogRecorder
from tiller.store.replay import Replay
from tiller.tools.base import EditorFiles, Terminal, Tool
from tiller.tools.builtin import default_tools
from tiller.types import (
    AgentEvent,
    AssistantMessage,
    CommandEntry,
    CommandsChanged,
    ToolCall,
    ToolExecutionUpdate,
    ToolResultMessage,
    UserContent,
    UserMessage,
)

__all__ = [
    "ClearedHook",
    "EditorClient",
    "ProviderFactory",
    "Session",
    "Subscriber",
    "protected_paths",
    "provider_factory",
]

Subscriber = Callable[[AgentEvent], None]
"""Receives every event of the session, in order; must not raise."""

ClearedHook = Callable[[ToolCall, dict[str, Any]], Awaitable[None]]
"""Awaited after the permission gate lets a call run, before it runs; must not raise."""


@dataclass(frozen=True)
class EditorClient:
    """The client as the sessions' editor: how to send it a request, and the capabilities it
    declared in ``initialize`` (``fs.readTextFile``, ``fs.writeTextFile``, ``fs.keepsUnsaved``,
    ``permissions``)."""

    request: ClientRequest
    capabilities: dict[str, Any]


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
            providers=config.providers,
        )

    return build


def protected_paths(config: ServerConfig) -> ProtectedPaths:
    """What no file tool changes unasked (tiller.gate.protected): besides the workspace's own,
    Tiller's config dir, data dir and session dir, and the home folder's hidden entries."""
    dirs = [config_dir(config), default_session_dir(config.env).parent]
    if config.session_dir is not None:
        dirs.append(config.session_dir)
    home = config.env.get("HOME")
    return ProtectedPaths(tiller_dirs=dirs, home=Path(home) if home else None)


class Session:
    """One live session. ``explicit_mode`` is the permission mode a client chose for it; None
    follows the server's default."""

    def __init__(
        self, config: ServerConfig, session_log: SessionLog, *, session_id: str, cwd: Path,
        provider: str, model: str, context: ProjectContext,
        client: EditorClient | None = None, mode: PermissionMode | None = None,
        providers: ProviderFactory = provider_factory,
        mcp_servers: Sequence[McpServerConfig] = (),
    ) -> None:
        self.config = config
        self.providers = providers
        self.id, self.cwd, self.provider, self.model = session_id, cwd, provider, model
        self.context = context
        """Context files, slash commands and skills (tiller.context.project)."""
        self.recorder = LogRecorder(session_id, session_log)
        self._subscribers: list[Subscriber] = [self.recorder]
        self._cleared_hooks: list[ClearedHook] = []
        self.processes = ProcessScope()
        """What the session's commands started; killed when the session closes."""
        tools = default_tools(sanitize_env=config.sanitize_env, processes=self.processes)
        self.mcp = McpServers(
            [*config.mcp_servers, *mcp_servers], tools=tools, cwd=cwd, scope=self.processes,
            publish=self.publish, on_prompts=self._mcp_prompts_changed,
        )
        """The session's MCP servers; their tools join ``tools`` once started, their prompts
        the slash commands (tiller.mcp.prompts)."""
        self.context.catalog.add_source(McpPromptSource(self.mcp))
        self._refreshing = asyncio.Lock()
        self._background: set[asyncio.Task[None]] = set()
        settings = AgentSettings(
            tools=tools,
            system_prompt=context.system_prompt(),
            cwd=cwd,
            max_turns=config.max_turns,
            retry=config.retry,
            compaction=config.compaction,
            max_run_tokens=config.max_run_tokens,
            before_tool_call=self._before_tool_call,
            after_tool_call=self._after_tool_call,
            cache_key=session_id,
        )
        self.agent = Agent(
            settings, providers(config, provider, model), self.publish,
            model_info=config.model_info(provider, model), thinking=config.thinking,
        )
        repo, off_reason = open_shadow(config.session_dir, cwd, session_log.path, session_id,
                                       config.checkpoint_max_bytes)
        self.checkpoints = Checkpoints(repo, off_reason, self.recorder, lambda: self.tools,
                                       self.publish)
        """The workspace snapshots around the agent's mutating turns
        (tiller.checkpoints.checkpoints)."""
        self.subscribe(self.checkpoints)
        self.plan = PlanTracker(self.publish, lambda: self.tools)
        """The agent's plan (its last ``todo`` call; tiller.session.plan)."""
        self.subscribe(self.plan)
        self.on_tool_cleared(self.checkpoints.before_tool)
        self.files: EditorFiles | None = None
        self.explicit_mode: PermissionMode | None = None
        self.extra_roots: list[Path] = []
        """Workspace roots besides ``cwd`` (ACP's ``additionalDirectories``)."""
        self.gate: PermissionGate
        self.connect_editor(client, mode)

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

    # ------------------------------------------------------------------ the seams

    def subscribe(self, subscriber: Subscriber) -> None:
        """Add a subscriber; it gets every later event, after those subscribed before it."""
        self._subscribers.append(subscriber)

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
        verdict = await self.gate(call, args)
        if verdict is None or not verdict.block:
            for hook in self._cleared_hooks:
                await hook(call, args)
        return verdict

    async def _after_tool_call(self, call: ToolCall, result: ToolResultMessage) -> None:
        await self.checkpoints.after_tool(call, result)

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
            asker = ClientPermissions(request, self.id, self.config.permission_timeout)
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
        )
        self.files = files
        self.agent.settings = replace(self.agent.settings, files=files)

    def set_extra_roots(self, roots: Sequence[Path]) -> None:
        """Treat ``roots`` as part of the workspace too (permissions: "inside")."""
        self.extra_roots = list(roots)
        self.gate.roots = [self.cwd, *self.extra_roots]

    def use_terminal(self, terminal: Terminal | None) -> None:
        """Run ``bash`` in the editor's terminals (None: in Tiller's own processes)."""
        self.agent.settings = replace(self.agent.settings, terminal=terminal)

    # ------------------------------------------------------------------ what methods change

    def set_permission_mode(self, mode: PermissionMode) -> None:
        """The next tool call is judged by ``mode``."""
        self.gate.mode = mode
        self.explicit_mode = mode

    def enqueue(
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

    async def revert(self, entry_id: str, paths: Sequence[str] | None, *, force: bool,
                     stop: str) -> RevertResult:
        """``session/revert``: the files the agent changed after ``entry_id`` put back (through
        the editor when it writes files). Refused while a run is active: the client is told to
        ``stop`` it (its protocol's word: abort, cancel) first."""
        if self.agent.is_running:
            raise AgentBusyError(f"the session has an active run: {stop} it before a revert")
        return await self.checkpoints.revert(entry_id, paths, force=force, files=self.files)

    async def set_model(self, provider: str, model: str | None) -> None:
        """Switch to another provider/model between runs (the old provider is closed)."""
        model = model or self.config.default_model(provider)
        await self.agent.set_provider(
            self.providers(self.config, provider, model), self.config.model_info(provider, model)
        )
        self.provider, self.model = provider, model
        self.recorder.append("model_change", provider=provider, model=model)

    async def expand_prompt(
        self, message: str | Sequence[UserContent]
    ) -> str | list[UserContent]:
        """The prompt a ``/name ...`` message becomes (the message as typed when it starts
        with no known command), after ``refresh_commands``."""
        await self.refresh_commands()
        return await self.context.expand(message)

    async def refresh_commands(self) -> None:
        """Re-read the command sources that changed (a worker thread: file I/O); if the list
        differs, rebuild the system prompt (skills are in it) and publish ``commands_changed``.
        A source that changes on its own (an MCP server's prompts) calls this too."""
        async with self._refreshing:
            if not await anyio.to_thread.run_sync(self.context.catalog.refresh):
                return
            self.agent.settings = replace(self.agent.settings,
                                          system_prompt=self.context.system_prompt())
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

    def set_thinking(self, level: ThinkingLevel) -> None:
        """Read when the next run starts."""
        self.agent.thinking = level
        self.recorder.append("thinking_change", level=level)

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
        agent.steering_queue.extend(state.steering)
        agent.follow_up_queue.extend(state.follow_ups)
        if state.thinking in THINKING_LEVELS:
            agent.thinking = state.thinking

    async def close(self) -> None:
        """Stop the run (if any), its MCP servers, kill the processes its commands left
        running (``ProcessScope.kill``), close the log and the provider."""
        if self.agent.is_running:
            self.agent.abort()
            await self.agent.wait_idle()
        await self.mcp.close()
        for task in list(self._background):
            task.cancel()
        await self.processes.kill()
        self.log.close()
        await self.agent.aclose()
