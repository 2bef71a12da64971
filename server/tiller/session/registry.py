"""The session registry: new, load, list, fork, close and delete; each session a ``Session``.

A session is created by ``session/new`` or, for the default session, on first use by any
``agent/*`` method without a ``sessionId``. Its log (``tiller.store.log``, written by
``tiller.store.recorder``) lives under ``<session_dir>/<workspace>/<id>.jsonl``;
``session_dir=None`` keeps sessions in memory. The front that owns the registry attaches to
each session as it goes live (``on_start``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from tiller.checkpoints.checkpoints import forget_session
from tiller.config import ServerConfig, config_dir, workspace_folder
from tiller.context.agents import AgentDefinition, select_tools
from tiller.context.project import ProjectContext, PromptSettings
from tiller.errors import AgentBusyError, SessionLogError, UnknownEntryError, UnknownSessionError
from tiller.frozen import frozen
from tiller.mcp.config import McpServerConfig, parse_server_list
from tiller.modes import PermissionMode, SandboxMode, ThinkingLevel
from tiller.protocol.checkpoints import RevertResult
from tiller.sandbox.settings import SandboxSettings
from tiller.session.session import EditorClient, ProviderFactory, Session, provider_factory
from tiller.session.subagents import TaskLink, TaskSetup
from tiller.store.log import SessionLog, read_session_file
from tiller.store.saved import (
    SavedSession,
    SessionSummary,
    find_log,
    log_path,
    open_saved,
    parent_of,
    quiet_gc,
    saved_logs,
    summarize,
)

if TYPE_CHECKING:
    from tiller.store.replay import Replay

__all__ = ["SessionRegistry", "SessionSpec"]


@frozen
class SessionSpec:
    """What a new session is asked to be; every field left None takes the configuration's
    value. ``mcp_servers`` are in ACP's shape (checked by tiller.mcp.config, errors naming
    ``source``)."""

    cwd: str | None = None
    provider: str | None = None
    model: str | None = None
    thinking_level: ThinkingLevel | None = None
    system_prompt: str | None = None
    append_system_prompt: str | None = None
    context_files: bool = True
    permission_mode: PermissionMode | None = None
    mcp_servers: Sequence[Mapping[str, Any]] = ()
    source: str = "session/new"
    sandbox_mode: SandboxMode | None = None
    sandbox_network: bool | None = None


class SessionRegistry:
    """The live sessions by id, and the saved ones on disk. ``on_start`` is called with each
    session as it goes live (created, loaded or forked), before it runs anything; ``providers``
    builds every session's provider."""

    def __init__(
        self, config: ServerConfig, on_start: Callable[[Session], None] = lambda _session: None,
        providers: ProviderFactory = provider_factory,
    ) -> None:
        self.config = config
        self.providers = providers
        self.on_start = on_start
        self._live: dict[str, Session] = {}
        self.default_id: str | None = None
        self.client: EditorClient | None = None
        self._opening: anyio.Lock | None = None
        self._served: anyio.Event | None = None
        self.unusable: dict[str, SessionLogError] = {}
        """Sessions whose log could not go live after ``session/load`` answered (``adopt``)."""

    def set_client(self, client: EditorClient) -> None:
        """What the client said it can answer (``initialize``); applies to live sessions too."""
        self.client = client
        for session in self._live.values():
            session.connect_editor(client, session.explicit_mode)

    async def ready(self) -> None:
        """Once per process, before sessions are created: when the server's provider is an
        OpenAI-compatible one the user pointed at a server (``--base-url``, the provider's URL
        variable, or a configured URL with no default model) and no model is configured, the
        model is the one that server serves (``providers.served``). Later calls wait for the
        first."""
        if self._served is not None:
            await self._served.wait()
            return
        self._served = anyio.Event()
        try:
            config = self.config
            settings = config.providers.get(config.provider)
            if config.model is not None or settings is None or settings.type != "openai":
                return
            from_user = config.base_url or (
                config.env.get(settings.base_url_env) if settings.base_url_env else None)
            url = from_user or (settings.base_url if settings.default_model == "default"
                                else None)
            if not url:
                return
            from tiller.providers.served import served_model

            key = config.env.get(settings.api_key_env) if settings.api_key_env else None
            model = await served_model(url, key, settings.default_model)
            if model is not None:
                config.model = model
        finally:
            self._served.set()

    def set_config(self, config: ServerConfig) -> None:
        """Sessions created or loaded from now on use ``config`` (ACP's ``authenticate`` read it
        anew); live ones keep the one they were made with."""
        self.config = config

    def create(self, params: SessionSpec, *, validate: bool = True) -> Session:
        """A new session; with ``validate`` its provider is built now, so a missing key or an
        unknown provider fails here (ProviderNotConfiguredError) rather than at the first prompt.
        A ``cwd`` that is not a folder is a ConfigError (a client's: -32602), as ``--cwd``'s."""
        config = self.config
        cwd = workspace_folder(params.cwd, "cwd") if params.cwd else config.cwd
        provider = params.provider or config.provider
        chosen = params.model or (config.model if provider == config.provider else None)
        model = chosen or config.default_model(provider)
        prompt = PromptSettings(params.system_prompt or None, params.append_system_prompt,
                                params.context_files)
        mcp_servers = parse_server_list(list(params.mcp_servers), f"{params.source}: mcpServers")
        session_id = uuid.uuid4().hex
        if validate:
            self.providers(config, provider, model)()
        header = {"id": session_id, "cwd": str(cwd), "provider": provider, "model": model,
                  **prompt.header()}
        session_log = SessionLog.create(log_path(self.config.session_dir, cwd, session_id), header)
        sandbox = config.sandbox
        if params.sandbox_mode is not None:
            sandbox = replace(sandbox, mode=params.sandbox_mode)
        if params.sandbox_network is not None:
            sandbox = replace(sandbox, network=params.sandbox_network)
        session = self._start(session_log, session_id, cwd, provider, model, prompt,
                              params.permission_mode, mcp_servers, model_default=chosen is None,
                              sandbox=sandbox)
        if params.thinking_level is not None:
            session.set_thinking(params.thinking_level)
        return session

    def _start(
        self, session_log: SessionLog, session_id: str, cwd: Path, provider: str, model: str,
        prompt: PromptSettings, mode: PermissionMode | None = None,
        mcp_servers: list[McpServerConfig] | None = None, *, model_default: bool = False,
        sandbox: SandboxSettings | None = None, task: TaskSetup | None = None,
    ) -> Session:
        context = ProjectContext(cwd, config_dir(self.config), prompt)
        session = Session(
            self.config, session_log, session_id=session_id, cwd=cwd, provider=provider,
            model=model, context=context, client=self.client, mode=mode,
            providers=self.providers, mcp_servers=mcp_servers or [],
            model_default=model_default, sandbox=sandbox, task=task, children=self,
        )
        self._live[session_id] = session
        self.on_start(session)
        return session

    def spawn(self, parent: Session, agent: AgentDefinition, tool_call_id: str) -> Session:
        """A new live child session of ``parent`` for ``agent`` (tiller.session.subagents): the
        parent's workspace, permission mode, sandbox and roots; the agent's system prompt (with
        the context files), tools, model and thinking level, else the parent's; the run limits
        of ``[tasks]``. Its log header records the link. Raises ProviderNotConfiguredError
        when the agent's provider cannot be used."""
        config = self.config
        provider = agent.provider or parent.provider
        model = agent.model or (parent.model if provider == parent.provider
                                else config.default_model(provider))
        self.providers(config, provider, model)()  # an unusable provider fails here
        depth = (parent.task_link.depth if parent.task_link is not None else 0) + 1
        base = [tool.name for tool in parent.tools]
        given, withheld = select_tools(agent, base)
        link = TaskLink(parent.id, tool_call_id, agent.name, depth, tuple(given))
        prompt = PromptSettings(f"{agent.prompt}\n\nThe workspace is {parent.cwd}.", None, True)
        session_id = uuid.uuid4().hex
        header = {"id": session_id, "cwd": str(parent.cwd), "provider": provider,
                  "model": model, **prompt.header(), "task": link.header()}
        session_log = SessionLog.create(log_path(config.session_dir, parent.cwd, session_id),
                                        header)
        setup = TaskSetup(link, parent.shared_tools(), agent.max_turns or config.tasks.max_turns,
                          config.tasks.max_tokens, withheld)
        child = self._start(session_log, session_id, parent.cwd, provider, model, prompt,
                            parent.permission_mode, sandbox=parent.sandbox.settings,
                            task=setup)
        child.set_extra_roots(parent.extra_roots)
        if agent.thinking is not None or parent.thinking != child.thinking:
            child.set_thinking(agent.thinking or parent.thinking)
        return child

    async def close_child(self, child: Session) -> None:
        """Unload a child session once its task is over (its log stays); nothing when it is no
        longer live (the server is shutting down)."""
        if self._live.get(child.id) is child:
            await self.close(child.id)

    def live(self) -> list[Session]:
        """The live sessions, in the order they went live."""
        return list(self._live.values())

    def lookup(self, session_id: str) -> Session | None:
        """The live session with that id, None if it is not live (never created, loaded or
        raised for: ``get`` does that)."""
        return self._live.get(session_id)

    def get(self, session_id: str | None) -> Session:
        """The live session with that id, or the default session (created on first use)."""
        if session_id is None:
            if self.default_id is None or self.default_id not in self._live:
                self.default_id = self.create(SessionSpec(), validate=False).id
            return self._live[self.default_id]
        session = self._live.get(session_id)
        if session is None and session_id in self.unusable:
            raise self.unusable[session_id]
        if session is None:
            hint = " (session/load makes a saved session live)" if self.find(session_id) else ""
            raise UnknownSessionError(f"unknown session {session_id!r}{hint}")
        return session

    # ------------------------------------------------------------------ saved sessions

    def find(self, session_id: str) -> Path | None:
        """The log file of a saved session, in any workspace."""
        return find_log(self.config.session_dir, session_id)

    async def load(self, session_id: str) -> Session:
        """Make a saved session live (a live one is returned as is): ``open_saved`` in a worker
        thread, then ``adopt``; one at a time (two openings of a log could both repair it).
        Raises UnknownSessionError, or SessionLogError for an unusable log."""
        if self._opening is None:
            self._opening = anyio.Lock()
        async with self._opening:
            if session_id in self._live:
                return self._live[session_id]
            saved = await anyio.to_thread.run_sync(
                open_saved, self.config.session_dir, session_id)
            return await self.adopt(saved)

    async def adopt(self, saved: SavedSession) -> Session:
        """Make an opened saved session live: its messages validated (``tiller.store.replay``, in a
        worker thread), the session built and started. A log whose messages are not valid
        raises SessionLogError (its log closed) and is remembered as ``unusable`` until a later
        load succeeds. A session made live meanwhile (a concurrent load) is kept, ``saved``
        closed."""
        session_id = saved.id
        try:
            state = await anyio.to_thread.run_sync(_validated, saved)
        except SessionLogError as exc:
            saved.log.close()
            self.unusable[session_id] = exc
            raise
        if session_id in self._live:  # made live meanwhile: keep that one
            saved.log.close()
            return self._live[session_id]
        self.unusable.pop(session_id, None)
        cwd, provider, model = saved.settings(self.config)
        prompt = PromptSettings.from_header(saved.file.header)
        link = TaskLink.from_header(saved.file.header.get("task"))
        task = None if link is None else TaskSetup(
            link, max_turns=self.config.tasks.max_turns, max_tokens=self.config.tasks.max_tokens)
        with quiet_gc():
            session = self._start(saved.log, session_id, cwd, provider, model, prompt,
                                  task=task)
            session.restore(state)
        return session

    async def list_saved(
        self, cwd: str | None, limit: int, cursor: str | None
    ) -> tuple[list[SessionSummary], str | None]:
        """Saved sessions, most recently updated first, a page at a time (``cursor`` is the
        opaque value a previous page returned); a child session (a subagent's) is not on a
        page of its own but in its parent's ``children``, oldest first. Files are read in a
        worker thread; unreadable or corrupt ones are left out of the page (with a warning in
        the server log)."""
        offset = int(cursor) if cursor and cursor.isdigit() else 0
        live = set(self._live)

        def scan() -> tuple[list[SessionSummary], bool]:
            every = saved_logs(self.config.session_dir, cwd)
            ids = {path.stem for path in every}
            children: dict[str, list[Path]] = {}
            files = []
            for path in every:  # a child is listed under its parent, when that is there
                parent = parent_of(path)
                if parent is not None and parent in ids:
                    children.setdefault(parent, []).insert(0, path)  # oldest first
                else:
                    files.append(path)
            def with_children(path: Path) -> SessionSummary | None:
                summary = summarize(path, live)
                if summary is not None:
                    summary.children = [child for below in children.get(summary.session_id, [])
                                        if (child := with_children(below)) is not None]
                return summary

            page = [summary for path in files[offset : offset + limit]
                    if (summary := with_children(path)) is not None]
            return page, offset + limit < len(files)

        page, more = await anyio.to_thread.run_sync(scan)
        return page, str(offset + limit) if more else None

    async def fork(
        self, session_id: str, entry_id: str, *, revert_files: bool = False
    ) -> tuple[Session, RevertResult | None]:
        """A new live session whose log is the source's branch up to ``entry_id``; with
        ``revert_files``, the files the source's agent changed after ``entry_id`` put back too
        (``Session.revert`` with the source's checkpoints), and what that did."""
        source = self._live.get(session_id)
        path = source.log.path if source else await anyio.to_thread.run_sync(self.find, session_id)
        if path is None:
            raise UnknownSessionError(f"unknown session {session_id!r} (or not saved)")
        if source is not None and not source.log.written:  # no message yet: no entry
            raise UnknownEntryError(f"session {session_id!r} has no entry {entry_id!r}")
        if revert_files and source is not None and source.is_running:
            # Refused before anything is forked: rewinding files under a running command.
            raise AgentBusyError("the session has an active run: abort it before a fork "
                                 "with revertFiles")
        new_id = uuid.uuid4().hex
        await anyio.to_thread.run_sync(self._copy_branch, path, session_id, entry_id, new_id)
        session = await self.load(new_id)
        if not revert_files:
            return session, None
        return session, await session.revert(entry_id, None, force=False, stop="abort",
                                             log_path=path)

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
        new_log = SessionLog.create(log_path(self.config.session_dir, cwd, new_id), header)
        for entry in branch:
            new_log.append_entry(entry)
        new_log.close()

    async def close(self, session_id: str) -> None:
        """Stop the session's run (if any), kill the processes its commands left running and
        unload it, closing its provider (``Session.close``); its log stays."""
        session = self.get(session_id)
        await session.close()
        self._live.pop(session_id, None)  # a shutdown may have cleared it meanwhile
        if self.default_id == session_id:
            self.default_id = None

    async def delete(self, session_id: str) -> None:
        """Close the session if live, then remove its log."""
        session = self._live.get(session_id)
        if session is not None and session.is_running:
            raise AgentBusyError("the session has an active run: abort it first")
        path = session.log.path if session else self.find(session_id)
        if session is None and path is None:
            raise UnknownSessionError(f"unknown session {session_id!r}")
        if session is not None:
            await self.close(session_id)
        if path is not None:
            path.unlink(missing_ok=True)
            # Its snapshots too: what no other session of the workspace references.
            await anyio.to_thread.run_sync(forget_session, path, session_id)

    async def shutdown(self, grace: float = 10.0) -> None:
        """Abort every active run at once, give them ``grace`` seconds together to wind down,
        and close every session (``Session.close``); none is live afterwards."""
        sessions = list(self._live.values())
        for session in sessions:
            if session.is_running:
                session.abort()
        deadline = anyio.current_time() + grace
        for session in sessions:
            await session.close(grace=max(0.0, deadline - anyio.current_time()))
        self._live.clear()
        self.default_id = None


def _validated(saved: SavedSession) -> Replay:
    """``saved``'s outline as models (blocking: run it in a worker thread), the collector
    paused meanwhile (``quiet_gc``)."""
    from tiller.store.replay import validated  # its models' adapter: built on the first load

    with quiet_gc():
        return validated(saved.file, saved.outline)

