"""ACP mode: the Agent Client Protocol (v1, NDJSON on stdio) over Tiller's one agent core.

``tiller --acp`` serves it from the first message on; without the flag a first ``initialize``
whose ``params.protocolVersion`` is an integer selects it (``is_acp_initialize``, used by
``tiller.__main__``). ``AcpFront`` serves ACP's methods on a ``tiller.wire.jsonrpc.Front`` over the
same session registry, Sessions, Agents, logs, permission gates and editor file access as
Tiller's own front, so there is no second loop. It adds three thin pieces:

* events -> ``session/update``: it subscribes to each session's typed events and sends what
  ``tiller.fronts.acp.updates.UpdateMapper`` makes of them;
* the editor: Tiller's ``client/*`` requests become ACP's (``tiller.fronts.acp.editor``);
* turns: ``session/prompt`` runs ``Session.prompt`` (``tiller.fronts.acp.turns``: a prompt during a
  turn steers it).

Around them: ``auth`` (the env_var method), ``options`` (config options), ``sessions``
(``session/list`` entries, titles, usage) and ``params`` (the wire models and ACP's codes).

When the permission gate lets a call run (the Session's ``on_tool_cleared`` seam),
``_cleared`` snapshots the file a call that changes files (``write``/``edit``, as its tool
describes itself) is about to change, for whole-file diffs, and reports the call ``in_progress``.
protocol.md's "ACP" section is the contract.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from pydantic_core import to_json

from tiller import __version__
from tiller.config import ServerConfig
from tiller.errors import AuthRequiredError, InvalidParams
from tiller.fronts.acp.auth import ConfigLoader, auth_methods, config_loader, method_id, missing_key
from tiller.fronts.acp.children import ChildProgress
from tiller.fronts.acp.editor import AcpEditorBridge, BridgedSession, read_snapshot
from tiller.fronts.acp.options import (
    MODES,
    OptionError,
    config_options,
    offered_models,
    set_option,
    usable_providers,
)
from tiller.fronts.acp.params import (
    AcpAuthenticateParams,
    AcpCancelRequestParams,
    AcpConfigResult,
    AcpFollowUpParams,
    AcpInitializeParams,
    AcpInitializeResult,
    AcpListParams,
    AcpListResult,
    AcpLoadSessionParams,
    AcpNewSessionParams,
    AcpPromptParams,
    AcpPromptResult,
    AcpResumeParams,
    AcpSessionParams,
    AcpSessionResult,
    AcpSetConfigParams,
    AcpSetModeParams,
    AcpSteeringParams,
    AcpSteeringResult,
    acp_error,
)
from tiller.fronts.acp.sessions import LIST_PAGE, session_info
from tiller.fronts.acp.terminal import AcpTerminal
from tiller.fronts.acp.turns import IDLE_BEHAVIORS, Turns
from tiller.fronts.acp.updates import (
    UpdateMapper,
    available_commands,
    plan_update,
    prompt_message,
    user_content,
)
from tiller.protocol.checkpoints import ChangesParams, ChangesResult, RevertParams, RevertResult
from tiller.session.registry import SessionRegistry, SessionSpec
from tiller.session.session import EditorClient, Session
from tiller.session.warm import import_ahead, prepare_provider
from tiller.tools.base import describe
from tiller.tools.files import resolve_path
from tiller.types import (
    AgentEvent,
    AssistantMessage,
    CommandsChanged,
    MessageUpdate,
    ToolCall,
    UserContent,
    UserMessage,
    WireModel,
)
from tiller.wire.coalesce import DEFAULT_WINDOW, Coalescer
from tiller.wire.endpoint import SerializedResult
from tiller.wire.jsonrpc import Front

if TYPE_CHECKING:
    from tiller.protocol.models import QueueResult

__all__ = ["ACP_PROTOCOL_VERSION", "AcpFront", "is_acp_initialize"]

log = logging.getLogger(__name__)

ACP_PROTOCOL_VERSION = 1

V1_UPDATES = frozenset({"session_info_update", "config_option_update", "usage_update"})
"""Session updates that ACP's v1 schema has and no earlier version does: sent only to a client
whose ``initialize`` declared ``protocolVersion`` 1 or later (a client still on 0, the pre-1.0
protocol, carries on after our answer of 1 at its own risk, but gets none of these)."""

CHUNKS = {"text": "agent_message_chunk", "thinking": "agent_thought_chunk"}
"""The streamed deltas merged within ``DEFAULT_WINDOW`` (``tiller.wire.coalesce``) before they
go out as these ``session/update`` kinds."""


def is_acp_initialize(message: dict[str, Any]) -> bool:
    """True for ACP's ``initialize`` request: ``params.protocolVersion`` is an integer (Tiller's
    own ``initialize`` has no such field)."""
    params = message.get("params")
    version = params.get("protocolVersion") if isinstance(params, dict) else None
    return (message.get("method") == "initialize" and "id" in message
            and isinstance(version, int) and not isinstance(version, bool))


def _roots(directories: list[str]) -> list[Path]:
    """``additionalDirectories`` as paths (resolved); each must be absolute (-32602)."""
    for index, directory in enumerate(directories):
        if not Path(directory).is_absolute():
            raise InvalidParams(f"Invalid params: additionalDirectories[{index}]: "
                                       f"not an absolute path: {directory!r}")
    return [Path(directory).resolve() for directory in directories]


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
        self.client_terminals = False
        """The client declared ``terminal: true``: ``bash`` runs in its terminals."""
        self.client_version = ACP_PROTOCOL_VERSION
        """The ``protocolVersion`` the client's ``initialize`` declared."""
        self.turns = Turns()
        self.sessions = SessionRegistry(config, self._attach)
        self.front = Front(
            self.sessions.shutdown,
            cancel_notice=("$/cancel_request", "requestId"),
            translate=acp_error,
        )
        self.editor = AcpEditorBridge(self.front.client_request, self._session_info)
        self._chunks: dict[str, Coalescer] = {}
        """Per session: its streamed text and thought deltas, merged (``CHUNKS``)."""
        self._background: set[asyncio.Task[None]] = set()
        self._warmed = False
        self._register()

    def send_update(self, session_id: str, update: dict[str, Any]) -> None:
        """Send one ``session/update``, unless the client's protocol version lacks its kind
        (``V1_UPDATES``)."""
        if self.client_version < 1 and update.get("sessionUpdate") in V1_UPDATES:
            return
        chunks = self._chunks.get(session_id)
        if chunks is not None:  # a merged chunk held back goes first
            chunks.flush()
        self.front.write_message(to_json({"jsonrpc": "2.0", "method": "session/update",
                                          "params": {"sessionId": session_id, "update": update}}))

    def _chunk_writer(self, session_id: str) -> Coalescer:
        """The session's merged ``agent_message_chunk``/``agent_thought_chunk`` updates, each
        written as one preformatted body."""
        prefix = ('{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
                  f'{json.dumps(session_id)},"update":{{"sessionUpdate":"')

        def write(kind: Hashable, text: str) -> None:
            body = (f'{prefix}{kind}","content":{{"type":"text","text":'
                    f'{json.dumps(text, ensure_ascii=False)}}}}}}}}}')
            self.front.write_message(body.encode())

        return Coalescer(write, lambda: DEFAULT_WINDOW)

    def cancel(self, session_id: str) -> None:
        """``session/cancel``: abort the session's run; its prompts are answered ``cancelled``."""
        session = self.sessions.lookup(session_id)
        if session is not None:
            self.turns.cancel(session)

    # -------------------------------------------------------------------------- sessions

    def _session_info(self, session_id: str) -> BridgedSession:
        session = self.sessions.get(session_id)
        return BridgedSession(session.cwd, session.files, session.tools)

    def _attach(self, session: Session) -> None:
        """Map a session going live to ``session/update``s, and run ``_cleared`` for each
        call the permission gate lets through. A subagent's session is not one the client
        knows: its events become progress of its parent's ``task`` call
        (tiller.fronts.acp.children)."""
        session.set_delta_window(DEFAULT_WINDOW)
        link = session.task_link
        if link is not None:  # a subagent's: its progress goes to the parent's task call
            progress = ChildProgress(link.parent_tool_call_id, link.agent_name, session.tools)

            def report(event: AgentEvent) -> None:
                for update in progress.on_event(event):
                    self.send_update(link.parent_session_id, update)

            session.subscribe(report)
            return
        mapper = self.mappers[session.id] = UpdateMapper(
            session.cwd, session.tools, context_window=lambda: session.context_window)
        chunks = self._chunks[session.id] = self._chunk_writer(session.id)

        def send(event: AgentEvent) -> None:
            if isinstance(event, MessageUpdate) and event.delta and event.kind in CHUNKS:
                chunks.add(CHUNKS[event.kind], event.delta)
                return
            if isinstance(event, CommandsChanged):
                self.send_update(session.id, available_commands(event.commands))
            for update in mapper.on_event(event):
                self.send_update(session.id, update)

        session.subscribe(send)
        session.on_tool_cleared(functools.partial(self._cleared, session))
        if self.client_terminals:
            session.use_terminal(AcpTerminal(self.front.client_request, session.id))

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
        response being prepared: two hops through the event loop put it behind the endpoint's
        send-the-response callback (``tiller.wire.endpoint``)."""
        commands = session.command_entries()
        if not commands:
            return
        update = available_commands(commands)
        loop = asyncio.get_running_loop()
        loop.call_soon(loop.call_soon, self.send_update, session.id, update)

    def _modes(self, session: Session) -> dict[str, Any]:
        return {"currentModeId": session.permission_mode, "availableModes": MODES}

    def _result(self, session: Session, *, new: bool = False) -> AcpSessionResult:
        """``session/new``/``load``/``resume``'s result: modes and config options (the models
        as last listed; a list older than a day is asked for after the answer)."""
        offered, own = offered_models(self.config, session), (session.provider, session.model)
        task = asyncio.get_running_loop().create_task(
            self._refresh_models(session, offered, own))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return AcpSessionResult(session_id=session.id if new else None,
                                modes=self._modes(session),
                                config_options=config_options(self.config, session))

    async def _refresh_models(self, session: Session, sent: frozenset[tuple[str, str]],
                              own: tuple[str, str]) -> None:
        """Ask the usable providers for their models (unless listed within the day); if that
        offers a model the answer did not, or takes one away (not the session's own, which
        the client may have changed meanwhile), send a ``config_option_update``."""
        try:
            async with anyio.create_task_group() as group:
                for name in usable_providers(self.config, session):
                    group.start_soon(session.directory.refresh, name)
            now = offered_models(self.config, session)
            gone = sent - now - {own, (session.provider, session.model)}
            if now - sent or gone:
                self._options_changed(session, False)
        except Exception:  # background work: logged, never raised
            log.exception("refreshing the model lists for session %s failed", session.id)

    def _options_changed(self, session: Session, mode_changed: bool) -> None:
        """Tell the client the session's options (and, if it changed, its mode) changed."""
        options = config_options(self.config, session)
        self.send_update(session.id, {"sessionUpdate": "config_option_update",
                                      "configOptions": options})
        if mode_changed:
            self.send_update(session.id, {"sessionUpdate": "current_mode_update",
                                          "currentModeId": session.permission_mode})

    async def _went_live(self, session: Session, params: AcpLoadSessionParams,
                         where: str) -> None:
        """A saved session made live by load/resume: its roots, MCP servers, title and cost."""
        session.set_extra_roots(_roots(params.additional_directories))
        await session.add_mcp_servers(params.mcp_servers, f"{where}: mcpServers")
        mapper, messages = self.mappers[session.id], session.messages()
        mapper.titled = any(isinstance(message, UserMessage) for message in messages)
        mapper.cost = sum(m.usage.cost for m in messages if isinstance(m, AssistantMessage))

    def _content(self, blocks: list[dict[str, Any]]) -> list[UserContent]:
        try:
            return user_content(blocks)
        except ValueError as exc:
            raise InvalidParams(f"Invalid params: {exc}") from None

    # -------------------------------------------------------------------------- turns

    async def _prompt(self, session: Session, blocks: list[dict[str, Any]]) -> AcpPromptResult:
        """Run a turn, or join the running one as steering; answer when it ends."""
        content = self._content(blocks)
        with self.front.cancellable(functools.partial(self.cancel, session.id)):
            with self.turns.preparing(session) as ready:
                message = prompt_message(blocks, await session.prepare(content))
                await self.turns.in_order(session, ready)
            if ready.cancelled:  # cancelled while getting ready: the turn never starts
                return AcpPromptResult(stop_reason="cancelled")
            try:
                return await self.turns.prompt(session, message)
            finally:  # the turn's last chunk before its answer
                if (chunks := self._chunks.get(session.id)) is not None:
                    chunks.flush()

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
        add("session/set_config_option", AcpSetConfigParams, self.session_set_config_option)
        add("session/list", AcpListParams, self.session_list)
        add("session/resume", AcpResumeParams, self.session_resume)
        add("session/close", AcpSessionParams, self.session_close)
        add("_tiller/followUp", AcpFollowUpParams, self.follow_up)
        add("_session/steering", AcpSteeringParams, self.steering)
        add("_tiller/changes", ChangesParams, self.changes)
        add("_tiller/revert", RevertParams, self.revert)

    async def initialize(self, params: AcpInitializeParams) -> SerializedResult:
        """Take the client's capabilities; once answered, get ready for the first prompt
        (``warm``)."""
        fs = params.client_capabilities.get("fs")
        fs = fs if isinstance(fs, dict) else {}
        asks = params.client_capabilities.get("elicitation")
        asks = asks if isinstance(asks, dict) else {}
        self.sessions.set_client(EditorClient(self.editor, {
            "permissions": True, "fs": {"readTextFile": fs.get("readTextFile") is True,
                                        "writeTextFile": fs.get("writeTextFile") is True},
            # ACP advertises a mode with an object ({} included), not with true
            "elicitation": {mode: isinstance(asks.get(mode), dict) for mode in ("form", "url")},
        }))
        self.client_terminals = params.client_capabilities.get("terminal") is True
        self.client_version = params.protocol_version
        for session in self.sessions.live():
            terminal = AcpTerminal(self.front.client_request, session.id)
            session.use_terminal(terminal if self.client_terminals else None)
        result = SerializedResult(AcpInitializeResult(
            protocol_version=ACP_PROTOCOL_VERSION,
            agent_capabilities={
                "loadSession": True,
                "promptCapabilities": {"image": True, "audio": False,
                                       "embeddedContext": True},
                "mcpCapabilities": {"http": True, "sse": True},
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {},
                                        "additionalDirectories": {}},
            },
            agent_info={"name": "tiller", "title": "Tiller", "version": __version__},
            auth_methods=auth_methods(self.config),
            _meta={"steering": {"supported": True}},
        ).model_dump_json(by_alias=True, exclude_none=True).encode())
        result.then = self.warm
        return result

    async def warm(self) -> None:
        """Get ready for the first prompt (as Tiller's front does after its ``initialize``):
        the session's modules and models, the provider's HTTP library and its TLS context,
        built in a worker thread (``tiller.session.warm``) that gives way to every request
        (``session/new`` does what it needs itself), then the served model learnt. Runs once;
        never raises."""
        if self._warmed:
            return
        self._warmed = True
        try:
            proceed = self.front.endpoint.wait_idle  # session/new does not wait for us
            took = await anyio.to_thread.run_sync(import_ahead, (), (), proceed)
            took += await anyio.to_thread.run_sync(prepare_provider, self.config, proceed)
            await self.sessions.ready()
            log.debug("warmed up for the first prompt (imports: %.0f ms)", took * 1000)
        except Exception:
            log.debug("warming up failed; the first prompt does it", exc_info=True)

    async def authenticate(self, params: AcpAuthenticateParams) -> WireModel:
        """Re-read the configuration; succeed once the default provider has its key."""
        config = await anyio.to_thread.run_sync(self.reload_config)
        variable = missing_key(config)
        if variable is not None:
            if params.method_id != method_id(variable):
                raise InvalidParams(f"Invalid params: methodId: unknown method "
                                           f"{params.method_id!r}")
            raise AuthRequiredError(f"{variable} is still not set", {"envVar": variable})
        self.config = config
        self.sessions.set_config(config)
        for session in self.sessions.live():  # other models may be usable now
            self._options_changed(session, mode_changed=False)
        return WireModel()

    async def session_new(self, params: AcpNewSessionParams) -> AcpSessionResult:
        variable = missing_key(self.config)
        if variable is not None:
            raise AuthRequiredError(f"authentication required: set {variable}",
                                    {"authMethods": auth_methods(self.config)})
        roots = _roots(params.additional_directories)
        await self.sessions.ready()
        session = self.sessions.create(
            SessionSpec(cwd=params.cwd, mcp_servers=params.mcp_servers)
        )
        session.set_extra_roots(roots)
        self._announce_commands(session)
        return self._result(session, new=True)

    async def session_load(self, params: AcpLoadSessionParams) -> AcpSessionResult:
        session = await self.sessions.load(params.session_id)
        await self._went_live(session, params, "session/load")
        for update in self.mappers[session.id].replay(session.messages()):
            self.send_update(session.id, update)
        plan = session.state().plan_items
        if plan:
            self.send_update(session.id, plan_update(plan))
        self._announce_commands(session)
        return self._result(session)

    async def session_resume(self, params: AcpResumeParams) -> AcpSessionResult:
        """Like ``session/load`` without the replay: the client still shows the history."""
        session = await self.sessions.load(params.session_id)
        await self._went_live(session, params, "session/resume")
        self._announce_commands(session)
        return self._result(session)

    async def session_list(self, params: AcpListParams) -> AcpListResult:
        if params.cursor is not None and not params.cursor.isdigit():
            raise InvalidParams("Invalid params: cursor: not a cursor this agent gave")
        page, cursor = await self.sessions.list_saved(params.cwd, LIST_PAGE, params.cursor)
        return AcpListResult(sessions=[session_info(s) for s in page], next_cursor=cursor)

    async def session_close(self, params: AcpSessionParams) -> WireModel:
        """Cancel the session's turn (its prompts are answered ``cancelled``) and unload it."""
        self.cancel(params.session_id)
        await self.sessions.close(params.session_id)
        self.mappers.pop(params.session_id, None)
        if (chunks := self._chunks.pop(params.session_id, None)) is not None:
            chunks.flush()
        return WireModel()

    async def session_set_config_option(self, params: AcpSetConfigParams) -> AcpConfigResult:
        session = self.sessions.get(params.session_id)
        mode = session.permission_mode
        try:
            await set_option(self.config, session, params.config_id, params.value)
        except OptionError as exc:
            raise InvalidParams(f"Invalid params: {exc}") from None
        self._options_changed(session, session.permission_mode != mode)
        return AcpConfigResult(config_options=config_options(self.config, session))

    async def session_prompt(self, params: AcpPromptParams) -> AcpPromptResult:
        session = self.sessions.get(params.session_id)
        return await self._prompt(session, params.prompt)

    async def session_cancel(self, params: AcpSessionParams) -> None:
        self.cancel(params.session_id)

    async def cancel_request(self, params: AcpCancelRequestParams) -> None:
        self.front.cancel_request(params.request_id)

    async def session_set_mode(self, params: AcpSetModeParams) -> WireModel:
        session = self.sessions.get(params.session_id)
        session.set_permission_mode(params.mode_id)
        self._options_changed(session, mode_changed=False)
        return WireModel()

    async def steering(self, params: AcpSteeringParams) -> AcpSteeringResult:
        """``_session/steering``: into the running turn, or per ``idleBehavior`` when idle."""
        session = self.sessions.get(params.session_id)
        options = (params.meta or {}).get("steering") or {}
        idle = options.get("idleBehavior", "startNewTurn") if isinstance(options, dict) else None
        if idle not in IDLE_BEHAVIORS:
            raise InvalidParams("Invalid params: _meta.steering.idleBehavior: one of "
                                       + ", ".join(IDLE_BEHAVIORS))
        content = self._content(params.prompt)
        with self.turns.preparing(session) as ready:
            message = prompt_message(params.prompt, await session.prepare(content))
            await self.turns.in_order(session, ready)
        if ready.cancelled:  # a session/cancel while it got ready: nothing is consumed
            return AcpSteeringResult(outcome="promptRequired", reason="cancelled")
        outcome, reason = self.turns.steering(session, message, idle)
        return AcpSteeringResult(outcome=outcome, reason=reason)

    async def follow_up(self, params: AcpFollowUpParams) -> QueueResult:
        session = self.sessions.get(params.session_id)
        prompt = params.prompt
        content = prompt if isinstance(prompt, str) else prompt_message(
            prompt, self._content(prompt))
        await self.turns.in_order(session)  # after the prompts that came before it
        from tiller.protocol.models import QueueResult  # Tiller's models: not an ACP start's cost

        return QueueResult(queued=session.follow_up(content))

    async def changes(self, params: ChangesParams) -> ChangesResult:
        """``session/changes`` of Tiller's protocol."""
        return await self.sessions.get(params.session_id).changes(params.from_, params.to)

    async def revert(self, params: RevertParams) -> RevertResult:
        """``session/revert`` of Tiller's protocol (files through ``fs/write_text_file``)."""
        return await self.sessions.get(params.session_id).revert(
            params.entry_id, params.paths, force=params.force, stop="cancel")
