"""protocol.md's methods after ``initialize``: thin handlers over the session registry.

``tiller.fronts.tiller.front`` imports this module (and with it pydantic, the protocol's models and
the session machinery) on the first call of any of them. Each handler reads its validated params,
calls the session (or the registry), and shapes the result.

One coroutine method of ``Methods`` per wire method, named after it (``handler_name``:
``agent/setModel`` is ``agent_set_model``) and annotated with its row's models of
``tiller.protocol.methods``, which also validates its params; a test fails for a handler without
a row, a row without a handler, or an annotation that is not its row's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict
from typing import TYPE_CHECKING

from tiller.config import ServerConfig
from tiller.protocol.checkpoints import (
    ChangesParams,
    ChangesResult,
    CheckpointsInfo,
    RevertParams,
    RevertResult,
)
from tiller.protocol.methods import METHODS
from tiller.protocol.models import (
    AgentEntry,
    AgentsListResult,
    CommandsListResult,
    CompactParams,
    CompactResult,
    ContextFileEntry,
    EmptyResult,
    GetMessagesResult,
    GetStateResult,
    McpListResult,
    McpLoginParams,
    McpServerResult,
    ModelCostModel,
    ModelEntry,
    ModelsListResult,
    NoParams,
    ProcessListResult,
    ProcessOutputParams,
    ProcessOutputResult,
    ProcessParams,
    ProcessResult,
    PromptParams,
    ProviderEntry,
    QueueParams,
    QueueResult,
    RefusedFileEntry,
    RunResultModel,
    SessionForkParams,
    SessionIdParams,
    SessionInfo,
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
    ToolCallShown,
)
from tiller.protocol.sandbox import SandboxState, SandboxUseModel
from tiller.sandbox.probe import availability
from tiller.types import RunResult, UserContent
from tiller.wire.jsonrpc import Front, Method

if TYPE_CHECKING:
    from tiller.sandbox.settings import SandboxSettings
    from tiller.sandbox.use import SandboxUse
    from tiller.session.registry import SessionRegistry
    from tiller.session.session import Session
    from tiller.session.subagents import TaskLink
    from tiller.store.saved import SessionSummary

__all__ = ["Methods", "handler_name", "sandbox_state"]


def _link_fields(link: TaskLink | None) -> dict[str, str]:
    """A child session's ``parentSessionId``, ``parentToolCallId`` and ``agent`` (none for a
    top-level session), as model fields."""
    if link is None:
        return {}
    return {"parent_session_id": link.parent_session_id,
            "parent_tool_call_id": link.parent_tool_call_id, "agent": link.agent_name}


def _session_info(summary: SessionSummary) -> SessionInfo:
    """``session/list``'s entry of a saved session, its children's under it."""
    fields = {key: value for key, value in vars(summary).items() if key != "children"}
    children = [_session_info(child) for child in summary.children]
    return SessionInfo(**fields, children=children or None)


def handler_name(method: str) -> str:
    """The ``Methods`` attribute that serves wire method ``method``: ``session/new`` ->
    ``session_new``, ``agent/followUp`` -> ``agent_follow_up``."""
    return re.sub(r"(?<=[a-z])([A-Z])", r"_\1", method).lower().replace("/", "_")


def sandbox_state(settings: SandboxSettings, use: SandboxUse) -> SandboxState:
    """``agent/getState``'s ``sandbox``: the settings, this machine's sandbox, and how a
    command runs now."""
    found = availability()
    return SandboxState(
        mode=settings.mode, network=settings.network, auto_allow=settings.auto_allow,
        available=found.ok, kind=found.kind, reason=found.reason,
        commands=SandboxUseModel.model_validate(use.wire()),
    )


class Methods:
    """The handlers of one ``TillerFront``: ``sessions()`` gives its registry (built on first
    use), ``front`` its connection."""

    def __init__(
        self, front: Front, config: ServerConfig, sessions: Callable[[], SessionRegistry]
    ) -> None:
        self.front = front
        self.config = config
        self._registry = sessions

    @property
    def sessions(self) -> SessionRegistry:
        return self._registry()

    def table(self, names: Iterable[str]) -> Mapping[str, Method]:
        """Wire name -> (its params model from ``tiller.protocol.methods``, its handler) for each
        of ``names``; the handler is the coroutine method named by ``handler_name``."""
        return {name: (METHODS[name].params, getattr(self, handler_name(name))) for name in names}

    async def session_new(self, params: SessionNewParams) -> SessionNewResult:
        from tiller.session.registry import SessionSpec

        spec = SessionSpec(
            cwd=params.cwd, provider=params.provider, model=params.model,
            thinking_level=params.thinking_level, system_prompt=params.system_prompt,
            append_system_prompt=params.append_system_prompt, context_files=params.context_files,
            permission_mode=params.permission_mode,
            mcp_servers=params.mcp_servers,
            sandbox_mode=params.sandbox.mode if params.sandbox else None,
            sandbox_network=params.sandbox.network if params.sandbox else None,
        )
        return SessionNewResult(session_id=self.sessions.create(spec).id)

    async def session_list(self, params: SessionListParams) -> SessionListResult:
        found, cursor = await self.sessions.list_saved(params.cwd, params.limit, params.cursor)
        return SessionListResult(sessions=[_session_info(summary) for summary in found],
                                 next_cursor=cursor)

    async def session_fork(self, params: SessionForkParams) -> SessionLoadResult:
        session, reverted = await self.sessions.fork(
            params.session_id, params.entry_id, revert_files=params.revert_files)
        history = self.history(session)
        history.revert = reverted
        return history

    async def session_changes(self, params: ChangesParams) -> ChangesResult:
        return await self.sessions.get(params.session_id).changes(params.from_, params.to)

    async def session_revert(self, params: RevertParams) -> RevertResult:
        return await self.sessions.get(params.session_id).revert(
            params.entry_id, params.paths, force=params.force, stop="abort")

    async def session_close(self, params: SessionIdParams) -> EmptyResult:
        await self.sessions.close(params.session_id)
        return EmptyResult()

    async def session_delete(self, params: SessionIdParams) -> EmptyResult:
        await self.sessions.delete(params.session_id)
        return EmptyResult()

    async def agent_prompt(self, params: PromptParams) -> RunResultModel:
        return await self._run(self.sessions.get(params.session_id), params.message)

    async def agent_continue(self, params: SessionParams) -> RunResultModel:
        return await self._run(self.sessions.get(params.session_id), None)

    async def agent_steer(self, params: QueueParams) -> QueueResult:
        return QueueResult(queued=self.sessions.get(params.session_id).steer(params.message))

    async def agent_follow_up(self, params: QueueParams) -> QueueResult:
        return QueueResult(queued=self.sessions.get(params.session_id).follow_up(params.message))

    async def agent_abort(self, params: SessionParams) -> EmptyResult:
        self.sessions.get(params.session_id).abort()
        return EmptyResult()

    async def agent_get_state(self, params: SessionParams) -> GetStateResult:
        state = self.sessions.get(params.session_id).state()
        return GetStateResult(
            session_id=state.session_id,
            is_running=state.is_running,
            provider=state.provider,
            model=state.model,
            cwd=str(state.cwd),
            message_count=state.message_count,
            pending_steering=state.pending_steering,
            pending_follow_up=state.pending_follow_up,
            steering_mode=state.steering_mode,
            follow_up_mode=state.follow_up_mode,
            thinking_level=state.thinking_level,
            effective_thinking_level=state.effective_thinking_level,
            permission_mode=state.permission_mode,
            usage=state.usage,
            context_files=[ContextFileEntry(path=str(f.path), size=f.size, truncated=f.truncated)
                           for f in state.context_files],
            refused_files=[RefusedFileEntry(path=str(f.path), reason=f.reason)
                           for f in state.refused_files],
            checkpoints=CheckpointsInfo(
                enabled=state.checkpoints_enabled, reason=state.checkpoints_reason
            ),
            plan=state.plan_items,
            sandbox=sandbox_state(state.sandbox, state.sandbox_use),
            notice=state.notice,
            **_link_fields(state.task),
            processes=state.background_processes,
        )

    async def agent_get_messages(self, params: SessionParams) -> GetMessagesResult:
        return GetMessagesResult(messages=self.sessions.get(params.session_id).messages())

    async def agent_set_queue_modes(self, params: SetQueueModesParams) -> SetQueueModesResult:
        session = self.sessions.get(params.session_id)
        steering, follow_up = session.set_queue_modes(params.steering, params.follow_up)
        return SetQueueModesResult(steering=steering, follow_up=follow_up)

    async def agent_compact(self, params: CompactParams) -> CompactResult:
        done = await self.sessions.get(params.session_id).compact(params.instructions)
        return CompactResult(
            compacted=done.compacted, summary=done.summary, tokens_before=done.tokens_before,
            tokens_after=done.tokens_after, message_count=done.message_count,
        )

    async def agent_set_permission_mode(
        self, params: SetPermissionModeParams
    ) -> SetPermissionModeResult:
        session = self.sessions.get(params.session_id)
        session.set_permission_mode(params.mode)
        return SetPermissionModeResult(mode=params.mode)

    async def models_list(self, params: NoParams) -> ModelsListResult:
        from tiller.session.model_list import models_list

        listing = await models_list(self.config)
        models = []
        for info in listing.models:
            cost, levels = info.cost, info.levels()
            models.append(ModelEntry(
                provider=info.provider, id=info.id, display_name=info.display_name,
                context_window=info.context_window, max_output_tokens=info.max_output_tokens,
                cost=ModelCostModel.model_validate({
                    "input": cost.input, "output": cost.output, "cacheRead": cost.cache_read,
                    "cacheWrite": cost.cache_write, "cacheWrite1h": cost.cache_write_1h,
                }) if cost else None,
                reasoning=info.reasoning or bool(levels and levels != ("off",)),
                thinking_levels=list(levels) if levels is not None else None,
                line=info.line, lifecycle=info.lifecycle, deprecated_at=info.deprecated_at,
                retires_at=info.retires_at, source=info.source, checked=info.checked,
            ))
        return ModelsListResult(
            providers=[ProviderEntry(**asdict(provider)) for provider in listing.providers],
            models=models)

    async def agent_set_model(self, params: SetModelParams) -> SetModelResult:
        session = self.sessions.get(params.session_id)
        notice = await session.set_model(params.provider, params.model)
        return SetModelResult(provider=session.provider, model=session.model, notice=notice)

    async def agent_set_thinking_level(
        self, params: SetThinkingLevelParams
    ) -> SetThinkingLevelResult:
        session = self.sessions.get(params.session_id)
        effective = session.set_thinking(params.level)
        return SetThinkingLevelResult(level=params.level, effective=effective.level,
                                      note=effective.note)

    async def commands_list(self, params: SessionParams) -> CommandsListResult:
        session = self.sessions.get(params.session_id)
        await session.refresh_commands()  # a template added since the last prompt is listed
        refused = [RefusedFileEntry(path=str(f.path), reason=f.reason)
                   for f in session.refused_command_files()]
        return CommandsListResult(commands=session.command_entries(), refused_files=refused)

    async def agents_list(self, params: SessionParams) -> AgentsListResult:
        agents, invalid = await self.sessions.get(params.session_id).agents()
        return AgentsListResult(
            agents=[AgentEntry(name=agent.name, description=agent.description,
                               tools=list(agent.tools) if agent.tools is not None else None,
                               model=agent.model, thinking=agent.thinking, source=agent.source,
                               path=str(agent.path) if agent.path else None)
                    for agent in agents],
            invalid_files=[RefusedFileEntry(path=str(f.path), reason=f.reason) for f in invalid])

    async def mcp_list(self, params: SessionParams) -> McpListResult:
        session = self.sessions.get(params.session_id)
        return McpListResult(servers=await session.mcp_servers())

    async def mcp_login(self, params: McpLoginParams) -> McpServerResult:
        session = self.sessions.get(params.session_id)
        return McpServerResult(server=await session.mcp_login(params.server))

    async def mcp_logout(self, params: McpLoginParams) -> McpServerResult:
        session = self.sessions.get(params.session_id)
        return McpServerResult(server=await session.mcp_logout(params.server))

    async def process_list(self, params: SessionParams) -> ProcessListResult:
        return ProcessListResult(processes=self.sessions.get(params.session_id).process_infos())

    async def process_output(self, params: ProcessOutputParams) -> ProcessOutputResult:
        session = self.sessions.get(params.session_id)
        process, output = session.process_output(params.process_id, params.lines)
        return ProcessOutputResult(process=process, output=output)

    async def process_kill(self, params: ProcessParams) -> ProcessResult:
        session = self.sessions.get(params.session_id)
        return ProcessResult(process=await session.kill_process(params.process_id))

    def history(self, session: Session) -> SessionLoadResult:
        """``session/load``'s result for a live session."""
        state, link = session.state(), session.task_link
        return SessionLoadResult.model_construct(  # the messages are valid models already
            session_id=session.id,
            cwd=str(session.cwd),
            provider=session.provider,
            model=session.model,
            messages=session.messages(),
            entry_ids=list(session.entry_ids),
            pending_steering=state.pending_steering,
            pending_follow_up=state.pending_follow_up,
            tool_calls=[ToolCallShown.model_validate(shown)
                        for shown in session.shown_tool_calls()],
            parent_session_id=link.parent_session_id if link else None,
            parent_tool_call_id=link.parent_tool_call_id if link else None,
            agent=link.agent_name if link else None,
        )

    async def _run(
        self, session: Session, message: str | list[UserContent] | None
    ) -> RunResultModel:
        """Run ``message`` (its slash command expanded) or, for None, continue, once the
        session's MCP servers are up (``Session.prepare``). ``$/cancelRequest`` for this
        request aborts the run; one that comes before the run began means it never begins
        (``aborted``, no events). AgentBusyError at once while a run is active."""
        cancelled = False

        def cancel() -> None:
            nonlocal cancelled
            cancelled = True
            if session.is_running:
                session.abort()

        with self.front.cancellable(cancel):
            session.check_idle()  # busy: refused at once, not after prepare's awaits
            content = await session.prepare(message)
            if cancelled:
                result = RunResult(stop_reason="aborted")
            elif content is None:
                result = await session.continue_()
            else:
                result = await session.prompt(content)
        return RunResultModel(
            stop_reason=result.stop_reason, error_message=result.error_message, usage=result.usage
        )

