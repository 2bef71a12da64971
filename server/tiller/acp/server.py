"""ACP mode: the Agent Client Protocol (v1, NDJSON on stdio) over Tiller's one agent core.

``tiller --acp`` serves it from the first message on; without the flag a first ``initialize``
whose ``params.protocolVersion`` is an integer selects it (``is_acp_initialize``, used by
``tiller.__main__``). ``AcpFront`` serves ACP's methods on a ``tiller.front.Front`` over the
same session registry, Sessions, Agents, logs, permission gates and editor file access as
Tiller's own front, so there is no second loop. It adds three thin pieces:

* events -> ``session/update``: it subscribes to each session's typed events and sends what
  ``tiller.acp.updates.UpdateMapper`` makes of them;
* the editor: Tiller's ``client/*`` requests become ACP's (``tiller.acp.editor``);
* turns: ``session/prompt`` runs ``Agent.prompt`` and answers with the ACP stop reason. A prompt
  that arrives while the session's turn runs is queued as steering and answered when that turn
  ends, with the same outcome; ``session/cancel`` aborts the run and every such prompt is
  answered ``cancelled``. A run that ends in ``error`` is answered with JSON-RPC error -32020.

When the permission gate lets a call run (the Session's ``on_tool_cleared`` seam),
``_cleared`` snapshots the file a call that changes files (``write``/``edit``, as its tool
describes itself) is about to change, for whole-file diffs, and reports the call ``in_progress``.
protocol.md's "ACP" section is the contract.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass, field
from typing import Any

import anyio
from pygls.exceptions import JsonRpcInvalidParams

from tiller import __version__
from tiller.acp.auth import ConfigLoader, auth_methods, config_loader, method_id, missing_key
from tiller.acp.editor import AcpEditorBridge, BridgedSession, read_snapshot
from tiller.acp.params import (
    AcpAuthenticateParams,
    AcpCancelRequestParams,
    AcpFollowUpParams,
    AcpInitializeParams,
    AcpInitializeResult,
    AcpLoadSessionParams,
    AcpNewSessionParams,
    AcpPromptParams,
    AcpPromptResult,
    AcpSessionParams,
    AcpSessionResult,
    AcpSetModeParams,
    AuthRequiredError,
    ResourceNotFoundError,
    acp_error,
)
from tiller.acp.updates import (
    UpdateMapper,
    acp_stop_reason,
    available_commands,
    user_content,
)
from tiller.config import ServerConfig
from tiller.errors import AgentBusyError, RunFailedError
from tiller.front import Front
from tiller.mcp.config import parse_server_list
from tiller.protocol import (
    ChangesParams,
    ChangesResult,
    QueueResult,
    RevertParams,
    RevertResult,
    SessionNewParams,
)
from tiller.session import EditorClient, Session
from tiller.sessions import SessionRegistry
from tiller.tools.base import describe
from tiller.tools.files import resolve_path
from tiller.types import AgentEvent, CommandsChanged, RunResult, ToolCall, UserContent, WireModel

__all__ = ["ACP_PROTOCOL_VERSION", "AcpFront", "ResourceNotFoundError", "is_acp_initialize"]

log = logging.getLogger(__name__)

ACP_PROTOCOL_VERSION = 1

MODES: list[dict[str, str]] = [
    {"id": "ask", "name": "Ask",
     "description": "Ask before file changes, commands and anything outside the workspace"},
    {"id": "acceptEdits", "name": "Accept edits",
     "description": "Change workspace files freely; ask before commands; nothing outside"},
    {"id": "auto", "name": "Auto", "description": "Run every tool without asking"},
    {"id": "readonly", "name": "Read-only",
     "description": "Read and search only: no file changes, no commands"},
]
"""ACP session modes: Tiller's permission modes (protocol.md, "Permissions")."""


def is_acp_initialize(message: dict[str, Any]) -> bool:
    """True for ACP's ``initialize`` request: ``params.protocolVersion`` is an integer (Tiller's
    own ``initialize`` has no such field)."""
    params = message.get("params")
    version = params.get("protocolVersion") if isinstance(params, dict) else None
    return (message.get("method") == "initialize" and "id" in message
            and isinstance(version, int) and not isinstance(version, bool))


@dataclass
class _Turn:
    """One session's running turn: what every session/prompt waiting on it is answered with."""

    done: anyio.Event = field(default_factory=anyio.Event)
    result: RunResult | None = None
    error: Exception | None = None
    cancelled: bool = False


# ------------------------------------------------------------------------------ the server


class AcpFront:
    """ACP v1 over one session registry, served by ``front``; see the module docstring and
    protocol.md, "ACP". A server request we stop waiting for is withdrawn with ACP's
    ``$/cancel_request``."""

    def __init__(self, config: ServerConfig, argv: tuple[str, ...] | None = None) -> None:
        self.config = config
        self.reload_config: ConfigLoader = config_loader(argv, config)
        """``authenticate`` re-reads the configuration with it (``argv``: the command line)."""
        self.mappers: dict[str, UpdateMapper] = {}
        self.turns: dict[str, _Turn] = {}
        self.sessions = SessionRegistry(config, self._attach)
        self.front = Front(
            self.sessions.shutdown,
            cancel_notice=("$/cancel_request", "requestId"),
            translate=acp_error,
        )
        self.editor = AcpEditorBridge(self.front.client_request, self._session_info)
        self._register()

    def send_update(self, session_id: str, update: dict[str, Any]) -> None:
        self.front.notify("session/update", {"sessionId": session_id, "update": update})

    def cancel(self, session_id: str) -> None:
        """``session/cancel``: abort the session's run; its prompts are answered ``cancelled``."""
        turn, session = self.turns.get(session_id), self.sessions.sessions.get(session_id)
        if turn is None or session is None:
            return
        turn.cancelled = True
        if session.agent.is_running:
            session.agent.abort()

    # -------------------------------------------------------------------------- sessions

    def _session_info(self, session_id: str) -> BridgedSession:
        session = self.sessions.get(session_id)
        return BridgedSession(session.cwd, session.files, session.tools)

    def _attach(self, session: Session) -> None:
        """Map a session going live to ``session/update``s, and run ``_cleared`` for each
        call the permission gate lets through."""
        mapper = self.mappers.setdefault(session.id, UpdateMapper(session.cwd, session.tools))

        def send(event: AgentEvent) -> None:
            if isinstance(event, CommandsChanged):
                self.send_update(session.id, available_commands(event.commands))
            for update in mapper.on_event(event):
                self.send_update(session.id, update)

        session.subscribe(send)
        session.on_tool_cleared(functools.partial(self._cleared, session))

    async def _cleared(self, session: Session, call: ToolCall, args: dict[str, Any]) -> None:
        """A call is about to run: snapshot the file it changes (if it changes files), report
        in_progress."""
        mapper = self.mappers[session.id]
        info = describe(session.tools, call.name)
        path = info.raw_path(args) if info.changes_files else None
        if path is not None:
            target = resolve_path(path, session.cwd)
            taken, text = await read_snapshot(session.files, target)
            if taken:
                mapper.snapshots[call.id] = text
        self.send_update(session.id, {"sessionUpdate": "tool_call_update",
                                      "toolCallId": call.id, "status": "in_progress"})

    def _announce_commands(self, session: Session) -> None:
        """Send ``available_commands_update`` (if the session has commands) just after the
        response being prepared: two hops through the event loop put it behind pygls's
        send-the-response callback."""
        commands = session.command_entries()
        if not commands:
            return
        update = available_commands(commands)
        loop = asyncio.get_running_loop()
        loop.call_soon(loop.call_soon, self.send_update, session.id, update)

    def _modes(self, session: Session) -> dict[str, Any]:
        return {"currentModeId": session.gate.mode, "availableModes": MODES}

    def _content(self, blocks: list[dict[str, Any]]) -> list[UserContent]:
        try:
            return user_content(blocks)
        except ValueError as exc:
            raise JsonRpcInvalidParams(f"Invalid params: {exc}") from None

    # -------------------------------------------------------------------------- turns

    async def _prompt(self, session: Session, content: list[UserContent]) -> AcpPromptResult:
        """Run a turn, or join the running one as steering; answer when it ends."""
        with self.front.cancellable(functools.partial(self.cancel, session.id)):
            await session.mcp.ensure_started()  # an MCP prompt's command needs its server
            message = await session.expand_prompt(content)
            turn = self.turns.get(session.id)
            if turn is not None:
                session.enqueue("steering", message)
                await turn.done.wait()
            else:
                turn = self.turns[session.id] = _Turn()
                try:
                    turn.result = await session.agent.prompt(message)
                except Exception as exc:
                    turn.error = exc
                finally:
                    del self.turns[session.id]
                    turn.done.set()
        return self._answer(turn)

    def _answer(self, turn: _Turn) -> AcpPromptResult:
        """The session/prompt result for a finished turn (raises for a failed one)."""
        if turn.cancelled:
            return AcpPromptResult(stop_reason="cancelled")
        if turn.error is not None:
            raise turn.error
        result = turn.result
        assert result is not None
        usage = result.usage.dump()
        stop = acp_stop_reason(result.stop_reason)
        if stop is None:
            message = result.error_message or "the run failed"
            raise RunFailedError(message, {"stopReason": result.stop_reason,
                                           "errorMessage": message, "usage": usage})
        meta: dict[str, Any] = {"stopReason": result.stop_reason, "usage": usage}
        if result.error_message:
            meta["errorMessage"] = result.error_message
        return AcpPromptResult(stop_reason=stop, _meta={"tiller": meta})

    # -------------------------------------------------------------------------- methods

    def _register(self) -> None:
        """ACP's methods (agent side)."""
        add = self.front.register
        add("initialize", AcpInitializeParams, self.initialize)
        add("authenticate", AcpAuthenticateParams, self.authenticate)
        add("session/new", AcpNewSessionParams, self.session_new)
        add("session/load", AcpLoadSessionParams, self.session_load)
        add("session/prompt", AcpPromptParams, self.session_prompt)
        add("session/cancel", AcpSessionParams, self.session_cancel)
        add("$/cancel_request", AcpCancelRequestParams, self.cancel_request)
        add("session/set_mode", AcpSetModeParams, self.session_set_mode)
        add("_tiller/followUp", AcpFollowUpParams, self.follow_up)
        add("_tiller/changes", ChangesParams, self.changes)
        add("_tiller/revert", RevertParams, self.revert)

    async def initialize(self, params: AcpInitializeParams) -> AcpInitializeResult:
        fs = params.client_capabilities.get("fs")
        fs = fs if isinstance(fs, dict) else {}
        self.sessions.set_client(EditorClient(self.editor, {
            "permissions": True, "fs": {"readTextFile": fs.get("readTextFile") is True,
                                        "writeTextFile": fs.get("writeTextFile") is True},
        }))
        return AcpInitializeResult(
            protocol_version=ACP_PROTOCOL_VERSION,
            agent_capabilities={
                "loadSession": True,
                "promptCapabilities": {"image": True, "audio": False,
                                       "embeddedContext": True},
                "mcpCapabilities": {"http": True, "sse": True},
            },
            agent_info={"name": "tiller", "title": "Tiller", "version": __version__},
            auth_methods=auth_methods(self.config),
        )

    async def authenticate(self, params: AcpAuthenticateParams) -> WireModel:
        """Re-read the configuration; succeed once the default provider has its key."""
        config = await anyio.to_thread.run_sync(self.reload_config)
        variable = missing_key(config)
        if variable is not None:
            if params.method_id != method_id(variable):
                raise JsonRpcInvalidParams(f"Invalid params: methodId: unknown method "
                                           f"{params.method_id!r}")
            raise AuthRequiredError(f"{variable} is still not set", {"envVar": variable})
        self.config = self.sessions.config = config
        return WireModel()

    async def session_new(self, params: AcpNewSessionParams) -> AcpSessionResult:
        variable = missing_key(self.config)
        if variable is not None:
            raise AuthRequiredError(f"authentication required: set {variable}",
                                    {"authMethods": auth_methods(self.config)})
        session = self.sessions.create(
            SessionNewParams(cwd=params.cwd, mcp_servers=params.mcp_servers)
        )
        self._announce_commands(session)
        return AcpSessionResult(session_id=session.id, modes=self._modes(session))

    async def session_load(self, params: AcpLoadSessionParams) -> AcpSessionResult:
        servers = parse_server_list(params.mcp_servers, "session/load: mcpServers")
        session = await self.sessions.load(params.session_id)
        await session.mcp.add(servers)
        for update in self.mappers[session.id].replay(session.agent.messages):
            self.send_update(session.id, update)
        self._announce_commands(session)
        return AcpSessionResult(modes=self._modes(session))

    async def session_prompt(self, params: AcpPromptParams) -> AcpPromptResult:
        session = self.sessions.get(params.session_id)
        return await self._prompt(session, self._content(params.prompt))

    async def session_cancel(self, params: AcpSessionParams) -> None:
        self.cancel(params.session_id)

    async def cancel_request(self, params: AcpCancelRequestParams) -> None:
        self.front.cancel_request(params.request_id)

    async def session_set_mode(self, params: AcpSetModeParams) -> WireModel:
        session = self.sessions.get(params.session_id)
        session.set_permission_mode(params.mode_id)
        return WireModel()

    async def follow_up(self, params: AcpFollowUpParams) -> QueueResult:
        session = self.sessions.get(params.session_id)
        prompt = params.prompt
        content = prompt if isinstance(prompt, str) else self._content(prompt)
        return QueueResult(queued=session.enqueue("followUp", content))

    async def changes(self, params: ChangesParams) -> ChangesResult:
        """``session/changes`` of Tiller's protocol."""
        session = self.sessions.get(params.session_id)
        return await session.checkpoints.changes(params.from_, params.to)

    async def revert(self, params: RevertParams) -> RevertResult:
        """``session/revert`` of Tiller's protocol (files through ``fs/write_text_file``)."""
        session = self.sessions.get(params.session_id)
        if session.agent.is_running:
            raise AgentBusyError("the session has an active run: cancel it before a revert")
        return await session.checkpoints.revert(
            params.entry_id, params.paths, force=params.force, files=session.files
        )
