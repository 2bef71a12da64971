"""protocol.md's methods after ``initialize``: thin handlers over the session registry.

``tiller.fronts.tiller.front`` imports this module (and with it pydantic, the protocol's models and
the session machinery) on the first call of any of them. Each handler reads its validated params,
calls the session or its agent, and shapes the result.

One coroutine method of ``Methods`` per wire method, named after it (``handler_name``:
``agent/setModel`` is ``agent_set_model``) and annotated with its row's models of
``tiller.protocol.methods``, which also validates its params; a test fails for a handler without
a row, a row without a handler, or an annotation that is not its row's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import anyio

from tiller.config import ServerConfig
from tiller.context.confined import RefusedFile
from tiller.protocol.checkpoints import (
    ChangesParams,
    ChangesResult,
    CheckpointsInfo,
    RevertParams,
    RevertResult,
)
from tiller.protocol.methods import METHODS
from tiller.protocol.models import (
    CommandsListResult,
    CompactParams,
    CompactResult,
    ContextFileEntry,
    EmptyResult,
    GetMessagesResult,
    GetStateResult,
    McpListResult,
    ModelCostModel,
    ModelEntry,
    ModelsListResult,
    NoParams,
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
from tiller.types import RunResult, UserContent
from tiller.wire.jsonrpc import Front, Method

if TYPE_CHECKING:
    from tiller.session.registry import SessionRegistry
    from tiller.session.session import Session

__all__ = ["Methods", "handler_name"]


def handler_name(method: str) -> str:
    """The ``Methods`` attribute that serves wire method ``method``: ``session/new`` ->
    ``session_new``, ``agent/followUp`` -> ``agent_follow_up``."""
    return re.sub(r"(?<=[a-z])([A-Z])", r"_\1", method).lower().replace("/", "_")


class Methods:
    """The handlers of one ``TillerFront``: ``sessions()`` gives its registry (built on first
    use), ``front`` its connection."""

    def __init__(
        self, front: Front, config: ServerConfig, sessions: Callable[[], SessionRegistry]
    ) -> None:
        self.front = front
        self.config = config
        self._sessions = sessions

    @property
    def sessions(self) -> SessionRegistry:
        return self._sessions()

    def table(self, names: Iterable[str]) -> Mapping[str, Method]:
        """Wire name -> (its params model from ``tiller.protocol.methods``, its handler) for each
        of ``names``; the handler is the coroutine method named by ``handler_name``."""
        return {name: (METHODS[name].params, getattr(self, handler_name(name))) for name in names}

    async def session_new(self, params: SessionNewParams) -> SessionNewResult:
        return SessionNewResult(session_id=self.sessions.create(params).id)

    async def session_list(self, params: SessionListParams) -> SessionListResult:
        found, cursor = await self.sessions.list_saved(params.cwd, params.limit, params.cursor)
        infos = [SessionInfo(**vars(summary)) for summary in found]
        return SessionListResult(sessions=infos, next_cursor=cursor)

    async def session_fork(self, params: SessionForkParams) -> SessionLoadResult:
        source = self.sessions.sessions.get(params.session_id)
        source_log = source.log.path if source else None
        session = await self.sessions.fork(params.session_id, params.entry_id)
        history = self.history(session)
        if params.revert_files:
            source_log = source_log or await anyio.to_thread.run_sync(
                self.sessions.find, params.session_id
            )
            history.revert = await session.checkpoints.revert(
                params.entry_id, files=session.files, log_path=source_log
            )
        return history

    async def session_changes(self, params: ChangesParams) -> ChangesResult:
        session = self.sessions.get(params.session_id)
        return await session.checkpoints.changes(params.from_, params.to)

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
        session = self.sessions.get(params.session_id)
        return QueueResult(queued=session.enqueue("steering", params.message))

    async def agent_follow_up(self, params: QueueParams) -> QueueResult:
        session = self.sessions.get(params.session_id)
        return QueueResult(queued=session.enqueue("followUp", params.message))

    async def agent_abort(self, params: SessionParams) -> EmptyResult:
        self.sessions.get(params.session_id).agent.abort()
        return EmptyResult()

    async def agent_get_state(self, params: SessionParams) -> GetStateResult:
        session = self.sessions.get(params.session_id)
        agent = session.agent
        return GetStateResult(
            session_id=session.id,
            is_running=agent.is_running,
            provider=session.provider,
            model=session.model,
            cwd=str(session.cwd),
            message_count=len(agent.messages),
            pending_steering=len(agent.steering_queue),
            pending_follow_up=len(agent.follow_up_queue),
            steering_mode=agent.steering_mode,
            follow_up_mode=agent.follow_up_mode,
            thinking_level=session.thinking,
            permission_mode=session.gate.mode,
            usage=agent.usage,
            context_files=[ContextFileEntry(path=str(f.path), size=f.size, truncated=f.truncated)
                           for f in session.context.files],
            refused_files=_refused(session.context.refused),
            checkpoints=CheckpointsInfo(
                enabled=session.checkpoints.enabled, reason=session.checkpoints.reason
            ),
            plan=session.plan.items,
        )

    async def agent_get_messages(self, params: SessionParams) -> GetMessagesResult:
        agent = self.sessions.get(params.session_id).agent
        return GetMessagesResult(messages=list(agent.messages))

    async def agent_set_queue_modes(self, params: SetQueueModesParams) -> SetQueueModesResult:
        agent = self.sessions.get(params.session_id).agent
        if params.steering is not None:
            agent.steering_mode = params.steering
        if params.follow_up is not None:
            agent.follow_up_mode = params.follow_up
        return SetQueueModesResult(steering=agent.steering_mode, follow_up=agent.follow_up_mode)

    async def agent_compact(self, params: CompactParams) -> CompactResult:
        from tiller.agent.compaction import estimate_tokens
        from tiller.agent.model_call import model_context
        from tiller.modes import SUMMARY_PREFIX

        session = self.sessions.get(params.session_id)
        agent = session.agent
        before = estimate_tokens(model_context(agent.messages))
        compacted = await agent.compact(params.instructions)
        summary = agent.messages[0].content if compacted else None
        return CompactResult(
            compacted=compacted,
            summary=summary.removeprefix(SUMMARY_PREFIX) if isinstance(summary, str) else None,
            tokens_before=before,
            tokens_after=estimate_tokens(model_context(agent.messages)),
            message_count=len(agent.messages),
        )

    async def agent_set_permission_mode(
        self, params: SetPermissionModeParams
    ) -> SetPermissionModeResult:
        session = self.sessions.get(params.session_id)
        session.set_permission_mode(params.mode)
        return SetPermissionModeResult(mode=params.mode)

    async def models_list(self, params: NoParams) -> ModelsListResult:
        return self._models_list()

    async def agent_set_model(self, params: SetModelParams) -> SetModelResult:
        session = self.sessions.get(params.session_id)
        await session.set_model(params.provider, params.model)
        return SetModelResult(provider=session.provider, model=session.model)

    async def agent_set_thinking_level(
        self, params: SetThinkingLevelParams
    ) -> SetThinkingLevelResult:
        session = self.sessions.get(params.session_id)
        session.set_thinking(params.level)
        return SetThinkingLevelResult(level=params.level)

    async def commands_list(self, params: SessionParams) -> CommandsListResult:
        session = self.sessions.get(params.session_id)
        return CommandsListResult(commands=session.command_entries(),
                                  refused_files=_refused(session.context.catalog.refused))

    async def mcp_list(self, params: SessionParams) -> McpListResult:
        session = self.sessions.get(params.session_id)
        await session.mcp.ensure_started()
        await session.refresh_commands()  # their prompts: commands/list shows them now
        return McpListResult(servers=session.mcp.states())

    def history(self, session: Session) -> SessionLoadResult:
        """``session/load``'s result for a live session."""
        agent = session.agent
        return SessionLoadResult.model_construct(  # the messages are valid models already
            session_id=session.id,
            cwd=str(session.cwd),
            provider=session.provider,
            model=session.model,
            messages=list(agent.messages),
            entry_ids=list(session.entry_ids),
            pending_steering=len(agent.steering_queue),
            pending_follow_up=len(agent.follow_up_queue),
            tool_calls=[ToolCallShown.model_validate(shown)
                        for shown in session.shown_tool_calls()],
        )

    def _models_list(self) -> ModelsListResult:
        config = self.config
        providers = [
            ProviderEntry(
                name=settings.name,
                type=settings.type,
                base_url=settings.resolve_base_url(
                    config.env, config.base_url if name == config.provider else None
                ),
                api_key_env=settings.api_key_env,
                configured=settings.configured(
                    config.env, config.base_url if name == config.provider else None
                ),
            )
            for name, settings in sorted(config.providers.items())
        ]
        models = [
            ModelEntry(
                provider=info.provider,
                id=info.id,
                context_window=info.context_window,
                max_output_tokens=info.max_output_tokens,
                cost=ModelCostModel(**vars(info.cost)) if info.cost else None,
                reasoning=info.reasoning,
            )
            for info in config.models
        ]
        return ModelsListResult(providers=providers, models=models)

    async def _run(
        self, session: Session, message: str | list[UserContent] | None
    ) -> RunResultModel:
        """Run ``message`` (its slash command expanded) or, for None, continue, once the
        session's MCP servers are up. ``$/cancelRequest`` for this request aborts the run; one
        that comes before the run began means it never begins (``aborted``, no events)."""
        agent = session.agent
        cancelled = False

        def cancel() -> None:
            nonlocal cancelled
            cancelled = True
            if agent.is_running:
                agent.abort()

        with self.front.cancellable(cancel):
            await session.mcp.ensure_started()
            content = None if message is None else await session.expand_prompt(message)
            if cancelled:
                result = RunResult(stop_reason="aborted")
            elif content is None:
                result = await agent.continue_()
            else:
                result = await agent.prompt(content)
        return RunResultModel(
            stop_reason=result.stop_reason, error_message=result.error_message, usage=result.usage
        )


def _refused(files: Sequence[RefusedFile]) -> list[RefusedFileEntry]:
    """Refused project files (tiller.context.confined) as listed on the wire."""
    return [RefusedFileEntry(path=str(f.path), reason=f.reason) for f in files]
