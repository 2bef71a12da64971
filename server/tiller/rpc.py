"""The JSON-RPC surface: thin handlers that validate params, call the agent, and shape results.

Each method validates its params into a ``protocol`` model (failure: -32602 naming the field),
turns ``RequestError``s into their documented codes, and never leaks a traceback: unexpected
failures are logged and answered -32603 with a one-line message. pygls dispatches; the stdio
framing and message validation live in ``transport``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

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
from tiller.config import ServerConfig
from tiller.errors import RequestError
from tiller.loop import RunResult
from tiller.protocol import (
    GetMessagesResult,
    GetStateResult,
    InitializeParams,
    InitializeResult,
    PromptParams,
    QueueParams,
    QueueResult,
    RunResultModel,
    ServerInfo,
    SessionNewParams,
    SessionNewResult,
    SessionParams,
    SetQueueModesParams,
    SetQueueModesResult,
)
from tiller.sessions import SessionManager
from tiller.transport import Framing, serve_stdio
from tiller.types import WireModel

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


class TillerServer:
    """One stdio server process: sessions plus the methods of protocol.md."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.server = _Server(_Protocol, default_converter)
        self.sessions = SessionManager(config, self.notify)
        self.runs_by_request: dict[Any, Agent] = {}
        self.client_capabilities: dict[str, Any] = {}
        self._register_all()

    def notify(self, method: str, params: Any) -> None:
        self.server.protocol.notify(method, params)

    def cancel_request(self, msg_id: Any) -> None:
        """``$/cancelRequest``: aborts the run of a pending agent/prompt or agent/continue."""
        agent = self.runs_by_request.get(msg_id)
        if agent is not None and agent.is_running:
            agent.abort()

    async def serve(self, stdin: Any = None, stdout: Any = None) -> None:
        """Serve until end of input, then abort runs (killing their processes) and return."""
        framing = None if self.config.framing == "auto" else Framing(self.config.framing)
        try:
            await serve_stdio(self.server.protocol, self.cancel_request, framing, stdin, stdout)
        finally:
            await self.sessions.shutdown()

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
            self.client_capabilities = params.capabilities
            return InitializeResult(
                server_info=ServerInfo(name="tiller", version=__version__),
                protocol_version=PROTOCOL_VERSION,
                capabilities={
                    "agent": {"steer": True, "followUp": True, "continue": True, "abort": True},
                    "queueModes": ["one-at-a-time", "all"],
                    "sessions": {"new": True},
                },
            )

        @m("session/new", SessionNewParams)
        async def session_new(params: SessionNewParams) -> SessionNewResult:
            return SessionNewResult(session_id=self.sessions.create(params).id)

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
            agent = self.sessions.get(params.session_id).agent
            return QueueResult(queued=agent.steer(params.message))

        @m("agent/followUp", QueueParams)
        async def follow_up(params: QueueParams) -> QueueResult:
            agent = self.sessions.get(params.session_id).agent
            return QueueResult(queued=agent.follow_up(params.message))

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
