"""The JSON-RPC surface: thin handlers that validate params, call the agent, and shape results.

Each method validates its params into a ``protocol`` model (failure: -32602 naming the field),
turns ``RequestError``s into their documented codes, and never leaks a traceback: unexpected
failures are logged and answered -32603 with a one-line message. pygls dispatches; the stdio
framing and message validation live in ``transport``.
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import logging
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
from pydantic import BaseModel, ValidationError
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcServerError,
)
from pygls.protocol import JsonRPCProtocol, default_converter
from pygls.server import JsonRPCServer

from tiller import PROTOCOL_VERSION, __version__
from tiller.agent import Agent
from tiller.compaction import SUMMARY_PREFIX, estimate_tokens
from tiller.config import ServerConfig
from tiller.errors import RequestError
from tiller.loop import RunResult, model_context
from tiller.protocol import (
    EVENT_METHOD,
    CompactParams,
    CompactResult,
    GetMessagesResult,
    GetStateResult,
    InitializeParams,
    InitializeResult,
    ModelCostModel,
    ModelEntry,
    ModelsListResult,
    PromptParams,
    ProviderEntry,
    QueueParams,
    QueueResult,
    RunResultModel,
    ServerInfo,
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
)
from tiller.session import EditorClient, Session
from tiller.sessions import SessionRegistry
from tiller.transport import Framing, Selector, serve_stdio
from tiller.types import AgentEvent, WireModel

__all__ = ["TillerServer"]

log = logging.getLogger(__name__)

P = TypeVar("P", bound=BaseModel)
Handler = Callable[[P], Awaitable[WireModel | None]]


class _Protocol(JsonRPCProtocol):
    """pygls's protocol without its error reporting: rpc logs what matters itself."""


class _Server(JsonRPCServer):
    def report_server_error(self, error: Exception, source: Any) -> None:
        log.debug("pygls reported %s", error)


def _invalid_params(error: ValidationError) -> JsonRpcInvalidParams:
    problems = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "params"
        problems.append(f"{where}: {item['msg']}")
    return JsonRpcInvalidParams("Invalid params: " + "; ".join(problems))


class EventNotifier:
    """A session's events as ``agent/event`` notifications, numbered from 1 (``seq``)."""

    def __init__(self, session_id: str, notify: Callable[[str, Any], None]) -> None:
        self.session_id = session_id
        self.notify = notify
        self.seq = 0

    def __call__(self, event: AgentEvent) -> None:
        self.seq += 1
        self.notify(EVENT_METHOD, {"sessionId": self.session_id, "seq": self.seq, **event.dump()})


class TillerServer:
    """One stdio server process: sessions plus the methods of protocol.md."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.server = _Server(_Protocol, default_converter)
        self.sessions = SessionRegistry(config, self._attach)
        self.runs_by_request: dict[Any, Agent] = {}
        self._client_ids = itertools.count(1)
        self._register_all()

    def notify(self, method: str, params: Any) -> None:
        self.server.protocol.notify(method, params)

    def _attach(self, session: Session) -> None:
        """Send the session's events as ``agent/event`` notifications."""
        session.subscribe(EventNotifier(session.id, self.notify))

    def cancel_request(self, msg_id: Any) -> None:
        """``$/cancelRequest``: aborts the run of a pending agent/prompt or agent/continue."""
        agent = self.runs_by_request.get(msg_id)
        if agent is not None and agent.is_running:
            agent.abort()

    def _warm_up_provider_sdk(self) -> None:
        """Import the default provider's SDK in a worker thread while the client gets ready,
        so the first prompt does not pay for it (~0.5 s for openai; see bench/)."""
        settings = self.config.providers.get(self.config.provider)
        module = settings.type if settings else None
        if module not in ("openai", "anthropic") or module in sys.modules:
            return

        def load() -> None:
            try:
                importlib.import_module(str(module))
            except ImportError:
                log.debug("warm-up import of %s failed", module, exc_info=True)

        threading.Thread(target=load, name="tiller-warm-up", daemon=True).start()

    async def client_request(self, method: str, params: dict[str, Any], timeout: float) -> Any:
        """Send a server-to-client request and await the answer. An error answer raises its
        JsonRpcException; no answer within ``timeout`` raises TimeoutError. On timeout or
        cancellation the client is told with ``$/cancelRequest``."""
        # String ids: pygls keeps outgoing and incoming request ids in the same tables, so an
        # integer id would collide with the client's own request ids.
        msg_id = f"tiller-{next(self._client_ids)}"
        protocol = self.server.protocol
        future = protocol.send_request(method, params, msg_id=msg_id)
        try:
            with anyio.fail_after(timeout):
                return await asyncio.wrap_future(future)
        finally:
            if not future.done() or future.cancelled():  # we stopped waiting: tell the client
                future.cancel()
                protocol._request_futures.pop(msg_id, None)
                self.notify("$/cancelRequest", {"id": msg_id})

    async def serve(self, stdin: Any = None, stdout: Any = None) -> None:
        """Serve until end of input (or SIGTERM/SIGHUP), then abort runs (killing their
        processes) and return."""
        framing = None if self.config.framing == "auto" else Framing(self.config.framing)
        switched: list[TillerServer] = []
        try:
            async with anyio.create_task_group() as group:

                async def stop_on_signal() -> None:
                    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
                        async for _ in signals:
                            group.cancel_scope.cancel()
                            return

                group.start_soon(stop_on_signal)
                await serve_stdio(self.server.protocol, self.cancel_request, framing, stdin,
                                  stdout, select=self._select_protocol(switched))
                group.cancel_scope.cancel()
        finally:
            await self.sessions.shutdown()
            for other in switched:
                await other.sessions.shutdown()

    # --- ACP detection (tiller.acp) ------------------------------------------------------
    def _select_protocol(self, switched: list[TillerServer]) -> Selector | None:
        """A first ``initialize`` whose ``params.protocolVersion`` is an integer comes from an
        ACP client: the connection is then served by ``tiller.acp.AcpServer`` (appended to
        ``switched`` so ``serve`` shuts its sessions down too)."""

        def select(first: dict[str, Any]) -> tuple[JsonRPCProtocol, Callable[[Any], None]] | None:
            from tiller.acp import AcpServer, is_acp_initialize

            if not is_acp_initialize(first):
                return None
            acp = AcpServer(self.config)
            switched.append(acp)
            return acp.server.protocol, acp.cancel_request

        return select
    # --- end of ACP detection ------------------------------------------------------------

    def method(self, name: str, params_model: type[P]) -> Callable[[Handler[P]], Handler[P]]:
        """Register ``fn`` as JSON-RPC method ``name`` with params validated as ``params_model``."""

        def register(fn: Handler[P]) -> Handler[P]:
            async def handle(raw: Any) -> Any:
                if raw is None:
                    raw = {}
                if not isinstance(raw, dict):
                    raise JsonRpcInvalidParams("Invalid params: params must be an object")
                try:
                    params = params_model.model_validate(raw)
                except ValidationError as exc:
                    raise _invalid_params(exc) from None
                try:
                    result = await fn(params)
                except RequestError as exc:
                    raise JsonRpcServerError(  # type: ignore[no-untyped-call]
                        exc.message, exc.code, exc.data
                    ) from None
                except JsonRpcException:
                    raise
                except Exception as exc:
                    log.exception("%s failed", name)
                    raise JsonRpcInternalError(
                        f"internal error in {name}: {type(exc).__name__}: {exc}"
                    ) from None
                return result.dump() if result is not None else None

            self.server.feature(name)(handle)
            return fn

        return register

    def _register_all(self) -> None:
        m = self.method

        @m("initialize", InitializeParams)
        async def initialize(params: InitializeParams) -> InitializeResult:
            self.sessions.set_client(EditorClient(self.client_request, params.capabilities))
            self._warm_up_provider_sdk()
            return InitializeResult(
                server_info=ServerInfo(name="tiller", version=__version__),
                protocol_version=PROTOCOL_VERSION,
                capabilities={
                    "agent": {"steer": True, "followUp": True, "continue": True, "abort": True},
                    "queueModes": ["one-at-a-time", "all"],
                    "permissionModes": ["ask", "acceptEdits", "auto", "readonly"],
                    "sessions": {
                        "new": True, "list": True, "load": True, "fork": True,
                        "persistent": self.config.session_dir is not None,
                    },
                },
            )

        @m("session/new", SessionNewParams)
        async def session_new(params: SessionNewParams) -> SessionNewResult:
            return SessionNewResult(session_id=self.sessions.create(params).id)

        @m("session/list", SessionListParams)
        async def session_list(params: SessionListParams) -> SessionListResult:
            found, cursor = self.sessions.list_saved(params.cwd, params.limit, params.cursor)
            infos = [SessionInfo(**vars(summary)) for summary in found]
            return SessionListResult(sessions=infos, next_cursor=cursor)

        @m("session/load", SessionIdParams)
        async def session_load(params: SessionIdParams) -> SessionLoadResult:
            return self._history(self.sessions.load(params.session_id))

        @m("session/fork", SessionForkParams)
        async def session_fork(params: SessionForkParams) -> SessionLoadResult:
            return self._history(self.sessions.fork(params.session_id, params.entry_id))

        @m("session/close", SessionIdParams)
        async def session_close(params: SessionIdParams) -> WireModel:
            await self.sessions.close(params.session_id)
            return WireModel()

        @m("session/delete", SessionIdParams)
        async def session_delete(params: SessionIdParams) -> WireModel:
            await self.sessions.delete(params.session_id)
            return WireModel()

        @m("agent/prompt", PromptParams)
        async def prompt(params: PromptParams) -> RunResultModel:
            agent = self.sessions.get(params.session_id).agent
            return await self._run(agent, agent.prompt(params.message))

        @m("agent/continue", SessionParams)
        async def continue_(params: SessionParams) -> RunResultModel:
            agent = self.sessions.get(params.session_id).agent
            return await self._run(agent, agent.continue_())

        @m("agent/steer", QueueParams)
        async def steer(params: QueueParams) -> QueueResult:
            session = self.sessions.get(params.session_id)
            return QueueResult(queued=session.enqueue("steering", params.message))

        @m("agent/followUp", QueueParams)
        async def follow_up(params: QueueParams) -> QueueResult:
            session = self.sessions.get(params.session_id)
            return QueueResult(queued=session.enqueue("followUp", params.message))

        @m("agent/abort", SessionParams)
        async def abort(params: SessionParams) -> WireModel:
            self.sessions.get(params.session_id).agent.abort()
            return WireModel()

        @m("agent/getState", SessionParams)
        async def get_state(params: SessionParams) -> GetStateResult:
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
            )

        @m("agent/getMessages", SessionParams)
        async def get_messages(params: SessionParams) -> GetMessagesResult:
            agent = self.sessions.get(params.session_id).agent
            return GetMessagesResult(messages=list(agent.messages))

        @m("agent/setQueueModes", SetQueueModesParams)
        async def set_queue_modes(params: SetQueueModesParams) -> SetQueueModesResult:
            agent = self.sessions.get(params.session_id).agent
            if params.steering is not None:
                agent.steering_mode = params.steering
            if params.follow_up is not None:
                agent.follow_up_mode = params.follow_up
            return SetQueueModesResult(steering=agent.steering_mode, follow_up=agent.follow_up_mode)

        @m("agent/compact", CompactParams)
        async def compact(params: CompactParams) -> CompactResult:
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

        @m("agent/setPermissionMode", SetPermissionModeParams)
        async def set_permission_mode(params: SetPermissionModeParams) -> SetPermissionModeResult:
            session = self.sessions.get(params.session_id)
            session.set_permission_mode(params.mode)
            return SetPermissionModeResult(mode=params.mode)

        @m("models/list", SessionParams)
        async def models_list(params: SessionParams) -> ModelsListResult:
            return self._models_list()

        @m("agent/setModel", SetModelParams)
        async def set_model(params: SetModelParams) -> SetModelResult:
            session = self.sessions.get(params.session_id)
            session.set_model(params.provider, params.model)
            return SetModelResult(provider=session.provider, model=session.model)

        @m("agent/setThinkingLevel", SetThinkingLevelParams)
        async def set_thinking_level(params: SetThinkingLevelParams) -> SetThinkingLevelResult:
            session = self.sessions.get(params.session_id)
            session.set_thinking(params.level)
            return SetThinkingLevelResult(level=params.level)

    def _history(self, session: Session) -> SessionLoadResult:
        agent = session.agent
        return SessionLoadResult(
            session_id=session.id,
            cwd=str(session.cwd),
            provider=session.provider,
            model=session.model,
            messages=list(agent.messages),
            entry_ids=list(session.entry_ids),
            pending_steering=len(agent.steering_queue),
            pending_follow_up=len(agent.follow_up_queue),
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
                configured=settings.type == "local"
                or settings.has_key(config.env)
                or (settings.type == "openai" and settings.resolve_base_url(
                    config.env, config.base_url if name == config.provider else None
                ) is not None),
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

    async def _run(self, agent: Agent, run: Awaitable[RunResult]) -> RunResultModel:
        """Await a run, letting ``$/cancelRequest`` for this request abort it."""
        msg_id = self.server.protocol.msg_id
        self.runs_by_request[msg_id] = agent
        try:
            result = await run
        finally:
            self.runs_by_request.pop(msg_id, None)
        return RunResultModel(
            stop_reason=result.stop_reason, error_message=result.error_message, usage=result.usage
        )
