"""protocol.md's methods after ``initialize``: thin handlers over the session registry.

``tiller.fronts.tiller.front`` imports this module (and with it pydantic, the protocol's models and
the session machinery) on the first call of any of them. Each handler reads its validated params,
calls the session or its agent, and shapes the result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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
from tiller.protocol.models import (
    CommandsListResult,
    CompactParams,
    CompactResult,
    ContextFileEntry,
    GetMessagesResult,
    GetStateResult,
    McpListResult,
    ModelCostModel,
    ModelEntry,
    ModelsListResult,
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
from tiller.types import RunResult, UserContent, WireModel
from tiller.wire.jsonrpc import Front, Method

if TYPE_CHECKING:
    from tiller.session.registry import SessionRegistry
    from tiller.session.session import Session

__all__ = ["Methods"]


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

    def table(self) -> Mapping[str, Method]:
        """Every method but ``initialize`` and ``session/load`` (``tiller.fronts.tiller.front``
        serves them): wire name -> (params model, handler)."""
        return {
            "session/new": (SessionNewParams, self.session_new),
            "session/list": (SessionListParams, self.session_list),
            "session/fork": (SessionForkParams, self.session_fork),
            "session/close": (SessionIdParams, self.session_close),
            "session/delete": (SessionIdParams, self.session_delete),
            "session/changes": (ChangesParams, self.session_changes),
            "session/revert": (RevertParams, self.session_revert),
            "agent/prompt": (PromptParams, self.prompt),
            "agent/continue": (SessionParams, self.continue_),
            "agent/steer": (QueueParams, self.steer),
            "agent/followUp": (QueueParams, self.follow_up),
            "agent/abort": (SessionParams, self.abort),
            "agent/getState": (SessionParams, self.get_state),
            "agent/getMessages": (SessionParams, self.get_messages),
            "agent/setQueueModes": (SetQueueModesParams, self.set_queue_modes),
            "agent/compact": (CompactParams, self.compact),
            "agent/setPermissionMode": (SetPermissionModeParams, self.set_permission_mode),
            "models/list": (SessionParams, self.models_list),
            "agent/setModel": (SetModelParams, self.set_model),
            "agent/setThinkingLevel": (SetThinkingLevelParams, self.set_thinking_level),
            "commands/list": (SessionParams, self.commands_list),
            "mcp/list": (SessionParams, self.mcp_list),
        }

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

    async def session_close(self, params: SessionIdParams) -> WireModel:
        await self.sessions.close(params.session_id)
        return WireModel()

    async def session_delete(self, params: SessionIdParams) -> WireModel:
        await self.sessions.delete(params.session_id)
        return WireModel()

    async def prompt(self, params: PromptParams) -> RunResultModel:
        return await self._run(self.sessions.get(params.session_id), params.message)

    async def continue_(self, params: SessionParams) -> RunResultModel:
        return await self._run(self.sessions.get(params.session_id), None)

    async def steer(self, params: QueueParams) -> QueueResult:
        session = self.sessions.get(params.session_id)
        return QueueResult(queued=session.enqueue("steering", params.message))

    async def follow_up(self, params: QueueParams) -> QueueResult:
        session = self.sessions.get(params.session_id)
        return QueueResult(queued=session.enqueue("followUp", params.message))

    async def abort(self, params: SessionParams) -> WireModel:
        self.sessions.get(params.session_id).agent.abort()
        return WireModel()

    async def get_state(self, params: SessionParams) -> GetStateResult:
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

    async def get_messages(self, params: SessionParams) -> GetMessagesResult:
        agent = self.sessions.get(params.session_id).agent
        return GetMessagesResult(messages=list(agent.messages))

    async def set_queue_modes(self, params: SetQueueModesParams) -> SetQueueModesResult:
        agent = self.sessions.get(params.session_id).agent
        if params.steering is not None:
            agent.steering_mode = params.steering
        if params.follow_up is not None:
            agent.follow_up_mode = params.follow_up
        return SetQueueModesResult(steering=agent.steering_mode, follow_up=agent.follow_up_mode)

    async def compact(self, params: CompactParams) -> CompactResult:
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

    async def set_permission_mode(self, params: SetPermissionModeParams) -> SetPermissionModeResult:
        session = self.sessions.get(params.session_id)
        session.set_permission_mode(params.mode)
        return SetPermissionModeResult(mode=params.mode)

    async def models_list(self, params: SessionParams) -> ModelsListResult:
        return self._models_list()

    async def set_model(self, params: SetModelParams) -> SetModelResult:
        session = self.sessions.get(params.session_id)
        await session.set_model(params.provider, params.model)
        return SetModelResult(provider=session.provider, model=session.model)

    async def set_thinking_level(self, params: SetThinkingLevelParams) -> SetThinkingLevelResult:
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
