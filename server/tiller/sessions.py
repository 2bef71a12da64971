"""Sessions: each a live Agent with its own run, queues, event sequence and append-only log.

A session is created by ``session/new`` or, for the default session, on first use by any
``agent/*`` method without a ``sessionId``. Every message, tool start/end, run start/end and
acknowledged queued message is written to the session's log (``tiller.store``) inside ``emit``,
before the event goes out and before the step that depends on it proceeds. Logs live under
``<session_dir>/<workspace>/<id>.jsonl``; ``session_dir=None`` keeps sessions in memory.
"""

from __future__ import annotations

import hashlib
import logging
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import anyio

from tiller.agent import Agent
from tiller.config import ServerConfig, default_system_prompt
from tiller.editor import ClientFiles, ClientPermissions, ClientRequest
from tiller.errors import AgentBusyError, UnknownEntryError, UnknownSessionError
from tiller.permissions import PermissionGate, PermissionMode
from tiller.procs import ProcessScope
from tiller.protocol import EVENT_METHOD, SessionNewParams
from tiller.providers import Provider, create_provider
from tiller.settings import AgentSettings
from tiller.store import (
    Replay,
    SessionFile,
    SessionLog,
    SessionLogError,
    SessionSummary,
    interrupted_result,
    read_session_file,
    replay,
    summarize_saved,
)
from tiller.tools import default_tools
from tiller.types import (
    THINKING_LEVELS,
    AgentEnd,
    AgentEvent,
    AgentStart,
    CompactionEnd,
    MessageEnd,
    ThinkingLevel,
    ToolCall,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    UserContent,
    UserMessage,
)

__all__ = ["Session", "SessionManager", "SessionSummary", "workspace_dir_name"]

log = logging.getLogger(__name__)

Notify = Callable[[str, Any], None]


@dataclass
class Session:
    id: str
    cwd: Path
    provider: str
    model: str
    log: SessionLog
    agent: Agent = field(init=False)
    seq: int = 0
    entry_ids: list[str] = field(default_factory=list)
    """The log entry of each message in ``agent.messages`` ("" where there is none)."""
    gate: PermissionGate = field(init=False)
    explicit_mode: PermissionMode | None = None
    """The mode a client chose for this session; None follows the server's default."""
    processes: ProcessScope = field(default_factory=ProcessScope)
    """What the session's commands started; killed when the session closes."""


def workspace_dir_name(cwd: Path) -> str:
    """A readable, collision-safe folder name for a workspace: its last parts plus a hash."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", "-".join(cwd.parts[-2:])).strip("-") or "root"
    digest = hashlib.sha256(str(cwd).encode()).hexdigest()[:8]
    return f"{readable[:48]}-{digest}"


class SessionManager:
    """Creates, loads, finds and shuts down sessions; persists and routes their events."""

    def __init__(self, config: ServerConfig, notify: Notify) -> None:
        self.config = config
        self.notify = notify
        self.sessions: dict[str, Session] = {}
        self.default_id: str | None = None
        self.client_capabilities: dict[str, Any] = {}
        self.client_request: ClientRequest | None = None

    def set_client(self, capabilities: dict[str, Any], request: ClientRequest) -> None:
        """What the client said it can answer (``initialize``); applies to live sessions too."""
        self.client_capabilities = capabilities
        self.client_request = request
        for session in self.sessions.values():
            self._wire_editor(session, session.explicit_mode)

    # ------------------------------------------------------------------ creating

    def provider_factory(self, provider: str, model: str) -> Callable[[], Provider]:
        """A factory for ``provider``/``model``; the server's --base-url applies to the server's
        own provider only."""
        config = self.config
        base_url = config.base_url if provider == config.provider else None

        def build() -> Provider:
            return create_provider(
                provider, model=model, base_url=base_url, env=config.env,
                providers=config.providers,
            )

        return build

    def default_model(self, provider: str) -> str:
        settings = self.config.providers.get(provider)
        return settings.default_model if settings is not None else "default"

    def log_path(self, cwd: Path, session_id: str) -> Path | None:
        root = self.config.session_dir
        return None if root is None else root / workspace_dir_name(cwd) / f"{session_id}.jsonl"

    def create(self, params: SessionNewParams, *, validate: bool = True) -> Session:
        """A new session; with ``validate`` its provider is built now, so a missing key or an
        unknown provider fails here (ProviderNotConfiguredError) rather than at the first prompt."""
        config = self.config
        cwd = Path(params.cwd).expanduser().resolve() if params.cwd else config.cwd
        provider = params.provider or config.provider
        model = params.model or (config.model if provider == config.provider else None)
        model = model or self.default_model(provider)
        system_prompt = params.system_prompt or default_system_prompt(cwd)
        session_id = uuid.uuid4().hex
        if validate:
            self.provider_factory(provider, model)()
        header = {"id": session_id, "cwd": str(cwd), "provider": provider, "model": model,
                  "systemPrompt": system_prompt}
        session_log = SessionLog.create(self.log_path(cwd, session_id), header)
        return self._start(session_id, cwd, provider, model, system_prompt, session_log,
                           params.permission_mode)

    def _start(
        self, session_id: str, cwd: Path, provider: str, model: str, system_prompt: str,
        session_log: SessionLog, mode: PermissionMode | None = None,
    ) -> Session:
        info = self.config.model_info(provider, model)
        processes = ProcessScope()
        settings = AgentSettings(
            tools=default_tools(sanitize_env=self.config.sanitize_env, processes=processes),
            system_prompt=system_prompt,
            cwd=cwd,
            max_turns=self.config.max_turns,
            retry=self.config.retry,
            compaction=self.config.compaction,
            max_run_tokens=self.config.max_run_tokens,
        )
        session = Session(session_id, cwd, provider, model, session_log, processes=processes)
        session.agent = Agent(
            settings, self.provider_factory(provider, model), self._emitter(session),
            model_info=info, thinking=self.config.thinking,
        )
        self._wire_editor(session, mode)
        self.sessions[session_id] = session
        return session

    def _wire_editor(self, session: Session, mode: PermissionMode | None) -> None:
        """Give the session's agent the editor's files and a permission gate, as far as the
        client declared it can answer ``client/*`` requests."""
        request, caps = self.client_request, self.client_capabilities
        fs_caps = caps.get("fs")
        fs = fs_caps if isinstance(fs_caps, dict) else {}
        can_read, can_write = bool(fs.get("readTextFile")), bool(fs.get("writeTextFile"))
        files = None
        if request is not None and (can_read or can_write):
            files = ClientFiles(request, session.id, can_read, can_write)
        asker = None
        if request is not None and caps.get("permissions"):
            asker = ClientPermissions(request, session.id, self.config.permission_timeout)
        chosen = mode or self.config.permission_mode or ("ask" if asker else "auto")
        session.explicit_mode = mode

        def waiting(call: ToolCall) -> None:
            session.agent._emit(ToolExecutionUpdate(
                tool_call_id=call.id, tool_name=call.name,
                partial_result={"status": "awaitingPermission"},
            ))

        session.gate = PermissionGate(
            chosen, [session.cwd], self.config.permission_rules, asker, files, waiting
        )
        session.agent.settings = replace(
            session.agent.settings, before_tool_call=session.gate, files=files
        )

    # ------------------------------------------------------------------ using

    def get(self, session_id: str | None) -> Session:
        """The live session with that id, or the default session (created on first use)."""
        if session_id is None:
            if self.default_id is None or self.default_id not in self.sessions:
                self.default_id = self.create(SessionNewParams(), validate=False).id
            return self.sessions[self.default_id]
        session = self.sessions.get(session_id)
        if session is None:
            hint = " (session/load makes a saved session live)" if self.find(session_id) else ""
            raise UnknownSessionError(f"unknown session {session_id!r}{hint}")
        return session

    def enqueue(
        self,
        session: Session,
        queue: Literal["steering", "followUp"],
        content: str | Sequence[UserContent],
    ) -> int:
        """Log a steering or follow-up message, then queue it: once this returns, the message
        survives a crash and is delivered after a restart."""
        message = UserMessage(content=content if isinstance(content, str) else list(content))
        entry = self._append(session, "queued", queue=queue, message=message.dump())
        message.queue_id = entry.id if entry else None
        if queue == "steering":
            return session.agent.steer(message)
        return session.agent.follow_up(message)

    async def set_model(self, session: Session, provider: str, model: str | None) -> None:
        """Switch ``session`` to another provider/model between runs (the old one is closed)."""
        model = model or self.default_model(provider)
        info = self.config.model_info(provider, model)
        await session.agent.set_provider(self.provider_factory(provider, model), info)
        session.provider, session.model = provider, model
        self._append(session, "model_change", provider=provider, model=model)

    def set_thinking(self, session: Session, level: ThinkingLevel) -> None:
        session.agent.thinking = level
        self._append(session, "thinking_change", level=level)

    def _append(self, session: Session, entry_type: str, **data: Any) -> Any:
        try:
            return session.log.append(entry_type, **data)
        except OSError:
            log.exception("session %s: cannot write its log", session.id)
            return None

    def _emitter(self, session: Session) -> Callable[[AgentEvent], None]:
        def emit(event: AgentEvent) -> None:
            self._persist(session, event)
            session.seq += 1
            self.notify(EVENT_METHOD, {"sessionId": session.id, "seq": session.seq, **event.dump()})

        return emit

    def _persist(self, session: Session, event: AgentEvent) -> None:
        if isinstance(event, MessageEnd):
            extra = {}
            if isinstance(event.message, UserMessage) and event.message.queue_id:
                extra["queueId"] = event.message.queue_id
            entry = self._append(session, "message", message=event.message.dump(), **extra)
            session.entry_ids.append(entry.id if entry else "")
        elif isinstance(event, ToolExecutionStart):
            self._append(session, "tool_start", toolCallId=event.tool_call_id,
                         toolName=event.tool_name, args=event.args)
        elif isinstance(event, ToolExecutionEnd):
            self._append(session, "tool_end", toolCallId=event.tool_call_id,
                         isError=event.is_error)
        elif isinstance(event, CompactionEnd) and event.summary is not None:
            removed = event.removed_count
            first_kept = next((i for i in session.entry_ids[removed:] if i), None)
            self._append(session, "compaction", summary=event.summary,
                         firstKeptEntryId=first_kept, tokensBefore=event.tokens_before)
            session.entry_ids[:removed] = [""]
        elif isinstance(event, AgentStart):
            self._append(session, "run_start")
        elif isinstance(event, AgentEnd):
            self._append(session, "run_end", stopReason=event.stop_reason,
                         errorMessage=event.error_message)

    # ------------------------------------------------------------------ saved sessions

    def find(self, session_id: str) -> Path | None:
        """The log file of a saved session, in any workspace."""
        root = self.config.session_dir
        if root is None or not re.fullmatch(r"[0-9a-f]{8,64}", session_id):
            return None
        return next(root.glob(f"*/{session_id}.jsonl"), None)

    async def load(self, session_id: str) -> Session:
        """Make a saved session live (a live one is returned as is). Tool calls a crash left
        without a result get a synthetic error result, logged like any other message; queued
        messages that were never delivered are queued again. The file is read in a worker
        thread; a corrupt one raises SessionLogError."""
        if session_id in self.sessions:
            return self.sessions[session_id]
        path = await anyio.to_thread.run_sync(self.find, session_id)
        if path is None:
            raise UnknownSessionError(f"no saved session {session_id!r}")
        loaded, state, session_log = await anyio.to_thread.run_sync(_open_saved, path)
        if session_id in self.sessions:  # loaded by a concurrent request meanwhile
            return self.sessions[session_id]
        header = loaded.header
        cwd = Path(header.get("cwd") or self.config.cwd)
        provider = state.provider or self.config.provider
        model = state.model or self.default_model(provider)
        system_prompt = header.get("systemPrompt") or default_system_prompt(cwd)
        session = self._start(session_id, cwd, provider, model, system_prompt, session_log)
        agent = session.agent
        agent.messages.extend(state.messages)
        session.entry_ids.extend(state.entry_ids)
        agent.steering_queue.extend(state.steering)
        agent.follow_up_queue.extend(state.follow_ups)
        if state.thinking in THINKING_LEVELS:
            agent.thinking = state.thinking
        for call, started in state.interrupted:
            result = interrupted_result(call, started)
            agent.messages.append(result)
            entry = self._append(session, "message", message=result.dump())
            session.entry_ids.append(entry.id if entry else "")
        if state.open_run:
            self._append(session, "run_end", stopReason="error",
                         errorMessage="the run was interrupted by a restart")
        return session

    async def list_saved(
        self, cwd: str | None, limit: int, cursor: str | None
    ) -> tuple[list[SessionSummary], str | None]:
        """Saved sessions, most recently updated first, a page at a time (``cursor`` is the
        opaque value a previous page returned). Files are read in a worker thread; unreadable
        or corrupt ones are left out of the page (with a warning in the server log)."""
        root = self.config.session_dir
        if root is None:
            return [], None
        offset = int(cursor) if cursor and cursor.isdigit() else 0

        def scan() -> tuple[list[SessionSummary], bool]:
            folder = None if cwd is None else workspace_dir_name(Path(cwd).expanduser().resolve())
            return summarize_saved(root, folder, offset, limit)

        page, more = await anyio.to_thread.run_sync(scan)
        for summary in page:
            summary.live = summary.session_id in self.sessions
        return page, str(offset + limit) if more else None

    async def fork(self, session_id: str, entry_id: str) -> Session:
        """A new live session whose log is the source's branch up to ``entry_id``."""
        source = self.sessions.get(session_id)
        path = source.log.path if source else await anyio.to_thread.run_sync(self.find, session_id)
        if path is None:
            raise UnknownSessionError(f"unknown session {session_id!r} (or not saved)")
        new_id = uuid.uuid4().hex
        await anyio.to_thread.run_sync(self._copy_branch, path, session_id, entry_id, new_id)
        return await self.load(new_id)

    def _copy_branch(self, path: Path, session_id: str, entry_id: str, new_id: str) -> None:
        """Write session ``new_id``: the branch of ``path`` up to ``entry_id`` (blocking I/O)."""
        loaded = read_session_file(path)
        try:
            branch = loaded.branch(entry_id)
        except KeyError:
            raise UnknownEntryError(f"session {session_id!r} has no entry {entry_id!r}") from None
        cwd = Path(loaded.header.get("cwd") or self.config.cwd)
        header = {**loaded.header, "id": new_id, "parentSession": session_id,
                  "forkedFrom": entry_id}
        for key in ("type", "version", "created"):
            header.pop(key, None)
        new_log = SessionLog.create(self.log_path(cwd, new_id), header)
        for entry in branch:
            new_log.append_entry(entry)
        new_log.close()

    async def close(self, session_id: str) -> None:
        """Stop the session's run (if any), kill the processes its commands left running
        (``ProcessScope.kill``) and unload it, closing its provider; its log stays."""
        session = self.get(session_id)
        if session.agent.is_running:
            session.agent.abort()
            await session.agent.wait_idle()
        await session.processes.kill()
        session.log.close()
        del self.sessions[session_id]
        if self.default_id == session_id:
            self.default_id = None
        await session.agent.aclose()

    async def delete(self, session_id: str) -> None:
        """Close the session if live, then remove its log."""
        session = self.sessions.get(session_id)
        if session is not None and session.agent.is_running:
            raise AgentBusyError("the session has an active run: abort it first")
        path = session.log.path if session else self.find(session_id)
        if session is None and path is None:
            raise UnknownSessionError(f"unknown session {session_id!r}")
        if session is not None:
            await self.close(session_id)
        if path is not None:
            path.unlink(missing_ok=True)

    async def shutdown(self, grace: float = 10.0) -> None:
        """Abort every active run and wait (bounded) for them to wind down; close every
        session's provider."""
        running = [s.agent for s in self.sessions.values() if s.agent.is_running]
        for agent in running:
            agent.abort()
        with anyio.move_on_after(grace):
            for agent in running:
                await agent.wait_idle()
        for session in self.sessions.values():
            session.log.close()
            await session.agent.aclose()


# ---------------------------------------------------------------------------------------------
# Reading saved sessions: blocking file I/O, run in worker threads


def _open_saved(path: Path) -> tuple[SessionFile, Replay, SessionLog]:
    """Read, replay and reopen one session file; raises SessionLogError if it is unusable."""
    try:
        loaded = read_session_file(path)
        state = replay(loaded)
        return loaded, state, SessionLog.reopen(loaded)
    except OSError as exc:
        raise SessionLogError(f"cannot read the session log {path}: {exc}") from None
