"""The MCP servers of one session (``McpServers``), each one connection (``McpServer``).

Lifecycle: nothing starts until the session first needs its tools (``ensure_started``: the
first prompt, or ``mcp/list``); then every enabled server starts at once, each bounded by its
``startup_timeout``. A server that fails to start is ``failed`` with the error and the tail of
its stderr; the others work. Each connection runs in a task of its own (the SDK's transports
are context managers that must be left in the task that entered them); ``close`` ends them.
Stdio servers run in a process group of their own (the SDK starts them in a new session) and
carry the session's ``ProcessScope`` tag, so ``ProcessScope.kill`` and the server's shutdown
(EOF, SIGTERM, SIGHUP: ``kill_descendants``) find them even if a graceful close did not.

Tools: ``tools`` is the session's own tool list, changed in place, so the model request, the
permission gate and the tool runner all see the MCP tools of the servers that are ready. A
``notifications/tools/list_changed`` re-lists the server's tools; a call that caused one
returns only after the list is refreshed, so the next model call sees it.

Prompts: a server that advertises the ``prompts`` capability has its prompts listed after its
tools (``prompts``), again on ``notifications/prompts/list_changed``; ``get_prompt`` fetches
one. Every change of a server's prompts (listed, changed, gone with the server) calls
``McpServers``' ``on_prompts`` (tiller.mcp.prompts turns them into slash commands).

Every change of a server's status or tools is published as an ``McpStatus`` event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import anyio

from tiller.errors import ToolError
from tiller.mcp.config import McpServerConfig
from tiller.mcp.tool import McpTool, mcp_tool, unique_names
from tiller.procs import ProcessScope
from tiller.tools.base import Tool
from tiller.types import McpRenamedTool, McpServerState, McpStatus, McpStatusName

if TYPE_CHECKING:  # the SDK is imported when a server starts (it costs ~0.5 s)
    import mcp.types as mcp_types
    from mcp.client.session import ClientRequestContext, ClientSession, IncomingMessage

__all__ = ["McpServer", "McpServers"]

log = logging.getLogger(__name__)

_STDERR_TAIL = 2000
"""How much of a failed server's stderr its status shows (characters, the end)."""


def _describe(exc: BaseException) -> str:
    """A one-line reason for ``exc``; an exception group shows its first leaf."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, (OSError, ToolError)) else f"{type(exc).__name__}: {text}"


class McpServer:
    """One server's connection, status and tools. ``on_change`` is called (synchronously)
    after every change of status or tools."""

    def __init__(
        self, config: McpServerConfig, *, cwd: Path, scope: ProcessScope,
        on_change: Callable[[McpServer], None],
        on_prompts: Callable[[], None] = lambda: None,
    ) -> None:
        self.config = config
        self.on_prompts = on_prompts
        self.name = config.name
        self.cwd = cwd
        self.scope = scope
        self.on_change = on_change
        self.status: McpStatusName = "stopped"
        self.error: str | None = None
        self.tools: list[McpTool] = []
        self.prompts: list[mcp_types.Prompt] = []
        """The server's prompts while it is ready (none without the prompts capability)."""
        self._has_prompts = False
        self._prompts_stale = False
        self._prompts_refreshing: asyncio.Task[None] | None = None
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._refreshing: asyncio.Task[None] | None = None
        self._stale = False
        self._stderr: IO[str] | None = None
        self._pids: list[int] = []

    def state(self) -> McpServerState:
        """The server as ``mcp/list`` and ``mcp_status`` show it."""
        renamed = [McpRenamedTool(tool=tool.remote_name, name=tool.name)
                   for tool in self.tools if tool.name != tool.natural_name]
        return McpServerState(
            name=self.name, transport=self.config.transport, status=self.status,
            error=self.error, tools=[tool.name for tool in self.tools], renamed=renamed or None,
        )

    def _set(self, status: McpStatusName, error: str | None = None) -> None:
        self.status, self.error = status, error
        lost_prompts = status != "ready" and bool(self.prompts)
        if status != "ready":
            self.tools, self.prompts = [], []
        self.on_change(self)
        if (status == "ready" and self.prompts) or lost_prompts:
            self.on_prompts()

    def _fail(self, reason: str) -> None:
        tail = self._stderr_tail()
        self._set("failed", f"{reason}\nstderr: {tail}" if tail else reason)

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self._stderr.flush()
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(size - _STDERR_TAIL * 4, 0))
            return self._stderr.read()[-_STDERR_TAIL:].strip()
        return ""

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Connect, bounded by ``startup_timeout``; never raises (a failure is the status)."""
        self._set("starting")
        self._task = asyncio.create_task(self._run(), name=f"mcp-{self.name}")
        with anyio.move_on_after(self.config.startup_timeout):
            await self._ready.wait()
        if not self._ready.is_set():
            await self._cancel()
            self._fail(f"did not start within {self.config.startup_timeout:g} seconds")

    async def _cancel(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def close(self) -> None:
        """End the connection (a stdio server's process group with it); status ``stopped``."""
        self._stop.set()
        task = self._task
        if task is not None:
            with anyio.move_on_after(5):
                await asyncio.shield(task)
        await self._cancel()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        if self.status not in ("failed", "stopped"):
            self._set("stopped")

    async def _run(self) -> None:
        from mcp.client.session import ClientSession

        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                session = await stack.enter_async_context(ClientSession(
                    read, write, message_handler=self._on_message,
                    list_roots_callback=self._roots,
                ))
                initialized = await session.initialize()
                self._session = session
                self._has_prompts = initialized.capabilities.prompts is not None
                await self._list_tools()
                if self._has_prompts:
                    await self._list_prompts()
                self._set("ready")
                self._ready.set()
                await self._stop.wait()
        except Exception as exc:
            log.info("MCP server %s: %s", self.name, _describe(exc), exc_info=True)
            if not self._stop.is_set():
                self._fail(_describe(exc))
        finally:
            self._session = None
            self._ready.set()

    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        from mcp.client.sse import sse_client
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        config = self.config
        if config.transport == "stdio":
            assert config.command is not None
            self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
            params = StdioServerParameters(
                command=config.command, args=list(config.args),
                env=self.scope.environ(config.env),
                cwd=str(self.cwd / config.cwd) if config.cwd else str(self.cwd),
            )
            async with AsyncExitStack() as stack:
                with self.scope.spawning():  # no orphan reaping may take its exit status
                    streams = await stack.enter_async_context(
                        stdio_client(params, errlog=self._stderr)
                    )
                    self._pids = self.scope.adopt_leaders()
                yield streams
            self.scope.release(self._pids)  # the SDK has waited for its own process
            return
        assert config.url is not None
        headers = dict(config.headers)
        token = os.environ.get(config.bearer_token_env) if config.bearer_token_env else None
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if config.transport == "sse":
            async with sse_client(config.url, headers=headers) as streams:
                yield streams
            return
        async with create_mcp_http_client(headers=headers) as http, \
                streamable_http_client(config.url, http_client=http) as streams:
            yield streams

    async def _roots(self, context: ClientRequestContext) -> mcp_types.ListRootsResult:
        """The session's workspace, as MCP roots."""
        import mcp.types as mcp_types

        return mcp_types.ListRootsResult(
            roots=[mcp_types.Root(uri=self.cwd.as_uri(), name=self.cwd.name)]  # type: ignore[arg-type]
        )

    async def _on_message(self, message: IncomingMessage) -> None:
        """Never blocks: a flood of notifications costs one re-listing at a time."""
        import mcp.types as mcp_types

        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._stale = True
            if self._refreshing is None or self._refreshing.done():
                self._refreshing = asyncio.create_task(self._relist())
        elif isinstance(message, mcp_types.PromptListChangedNotification):
            self._prompts_stale = True
            if self._prompts_refreshing is None or self._prompts_refreshing.done():
                self._prompts_refreshing = asyncio.create_task(self._relist_prompts())
        elif isinstance(message, Exception):
            log.info("MCP server %s: transport error: %s", self.name, message)

    async def _relist(self) -> None:
        """List the tools again until no list_changed came in meanwhile."""
        while self._stale and self._session is not None:
            self._stale = False
            before = self._listing()
            try:
                await self._list_tools()
            except Exception as exc:
                log.warning("MCP server %s: listing its tools failed: %s", self.name, exc)
                return
            changed = before != self._listing()
            if self.status == "ready" and changed:
                self.on_change(self)

    async def _relist_prompts(self) -> None:
        """List the prompts again until no list_changed came in meanwhile."""
        while self._prompts_stale and self._session is not None and self._has_prompts:
            self._prompts_stale = False
            before = list(self.prompts)
            try:
                await self._list_prompts()
            except Exception as exc:
                log.warning("MCP server %s: listing its prompts failed: %s", self.name, exc)
                return
            if self.status == "ready" and before != self.prompts:
                self.on_prompts()

    async def _paginate(self, fetch: Callable[[Any], Awaitable[Any]], field: str) -> list[Any]:
        """Every item of a paginated MCP listing: ``fetch(params)`` per page, ``field`` holds the
        page's items; the whole walk is bounded by the server's start-up timeout."""
        import mcp.types as mcp_types

        listed: list[Any] = []
        cursor: str | None = None
        with anyio.fail_after(self.config.startup_timeout):
            while True:
                params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await fetch(params)
                listed.extend(getattr(page, field))
                cursor = page.next_cursor
                if not cursor:
                    return listed

    async def _list_prompts(self) -> None:
        session = self._session
        assert session is not None
        self.prompts = await self._paginate(
            lambda params: session.list_prompts(params=params), "prompts")

    def _listing(self) -> list[tuple[str, str, dict[str, Any]]]:
        return [(tool.natural_name, tool.description, tool.input_schema) for tool in self.tools]

    async def _list_tools(self) -> None:
        session = self._session
        assert session is not None
        listed: list[mcp_types.Tool] = await self._paginate(
            lambda params: session.list_tools(params=params), "tools")
        self.tools = [mcp_tool(self, tool, read_only=self.config.read_only)
                      for tool in listed if self.config.offers(tool.name)]

    # ------------------------------------------------------------------ calls

    def _live_session(self) -> ClientSession:
        """The connected session; ToolError naming the server and why when it is not ready."""
        session = self._session
        if session is None or self.status != "ready":
            why = f": {self.error}" if self.error else ""
            raise ToolError(f"MCP server {self.name} is not running ({self.status}{why})")
        return session

    async def call(self, tool: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """Call ``tool`` within ``tool_timeout``; raises ToolError naming the server when the
        server is not running, too slow, or gone mid-call (it is then ``failed``)."""
        session = self._live_session()
        timeout = self.config.tool_timeout
        try:
            with anyio.fail_after(timeout):
                result = await session.call_tool(tool, arguments)
        except TimeoutError:
            raise ToolError(
                f"MCP server {self.name}: {tool} timed out after {timeout:g} seconds"
            ) from None
        except Exception as exc:
            gone = self._task is None or self._task.done() or _closed(exc)
            if gone:
                self._fail(f"the connection ended during {tool}: {_describe(exc)}")
                self._stop.set()
            raise ToolError(f"MCP server {self.name} failed on {tool}: {_describe(exc)}") from None
        refreshing = self._refreshing
        if refreshing is not None and not refreshing.done():
            with anyio.move_on_after(self.config.startup_timeout):
                await asyncio.shield(refreshing)
        return result


    async def get_prompt(self, prompt: str, arguments: dict[str, str]) -> mcp_types.GetPromptResult:
        """``prompts/get`` within ``tool_timeout``; raises ToolError naming the server when the
        server is not running, too slow, or answers with an error."""
        session = self._live_session()
        timeout = self.config.tool_timeout
        try:
            with anyio.fail_after(timeout):
                return await session.get_prompt(prompt, arguments)
        except TimeoutError:
            raise ToolError(
                f"MCP server {self.name}: prompt {prompt} timed out after {timeout:g} seconds"
            ) from None
        except Exception as exc:
            raise ToolError(
                f"MCP server {self.name} failed on prompt {prompt}: {_describe(exc)}"
            ) from None


def _closed(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection is gone (not an error the server answered)."""
    import mcp.types as mcp_types
    from mcp.shared.exceptions import MCPError

    if isinstance(exc, MCPError):
        return exc.code == mcp_types.CONNECTION_CLOSED
    return isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError,
                            anyio.EndOfStream, OSError))


class McpServers:
    """The MCP servers of one session (see the module docstring): ``configs`` in order, a
    later entry replacing an earlier one of the same name, disabled ones left out. ``tools``
    is the session's tool list (changed in place); ``publish`` gets an ``McpStatus`` per
    change."""

    def __init__(
        self, configs: list[McpServerConfig], *, tools: list[Tool[Any]], cwd: Path,
        scope: ProcessScope, publish: Callable[[McpStatus], None],
        on_prompts: Callable[[], None] = lambda: None,
    ) -> None:
        self._tools = tools
        self.on_prompts = on_prompts
        """Called (synchronously) whenever a server's prompts change."""
        self._publish = publish
        self._cwd, self._scope = cwd, scope
        by_name = {config.name: config for config in configs}  # a later entry wins
        self.servers = [
            McpServer(config, cwd=cwd, scope=scope, on_change=self._changed,
                      on_prompts=self._prompts_changed)
            for config in by_name.values() if config.enabled
        ]
        self._started: asyncio.Event | None = None

    def _changed(self, server: McpServer) -> None:
        builtin = [tool for tool in self._tools if not isinstance(tool, McpTool)]
        before = {other.name: [tool.name for tool in other.tools] for other in self.servers}
        mcp_tools: list[McpTool] = [tool for other in self.servers for tool in other.tools]
        for tool, name in zip(mcp_tools, unique_names([t.natural_name for t in mcp_tools]),
                              strict=True):
            if name != tool.name and name != tool.natural_name:
                log.warning("MCP server %s: its tool %r is offered as %s (%s is another "
                            "tool's)", tool.caller.name, tool.remote_name, name,
                            tool.natural_name)
            type(tool).name = name  # each tool is a class of its own (mcp_tool)
        self._tools[:] = [*builtin, *mcp_tools]
        for other in self.servers:  # a rename can change another server's names
            if other is server or before[other.name] != [tool.name for tool in other.tools]:
                self._publish(McpStatus(server=other.state()))

    def _prompts_changed(self) -> None:
        self.on_prompts()

    async def add(self, configs: list[McpServerConfig]) -> None:
        """Add servers to a live session (ACP's ``session/load``); a name it has already is
        kept as it is. When the others have started (or are starting), the new ones start
        now."""
        known = {server.name for server in self.servers}
        added = [
            McpServer(config, cwd=self._cwd, scope=self._scope, on_change=self._changed,
                      on_prompts=self._prompts_changed)
            for config in configs if config.enabled and config.name not in known
        ]
        self.servers += added
        if self._started is not None:
            async with anyio.create_task_group() as group:
                for server in added:
                    group.start_soon(server.start)

    def states(self) -> list[McpServerState]:
        return [server.state() for server in self.servers]

    async def ensure_started(self) -> None:
        """Start every server once, in parallel; later calls wait for that start to end."""
        if self._started is not None:
            await self._started.wait()
            return
        self._started = asyncio.Event()
        try:
            async with anyio.create_task_group() as group:
                for server in self.servers:
                    group.start_soon(server.start)
        finally:
            self._started.set()

    async def close(self) -> None:
        """Stop every server (never raises)."""
        for server in self.servers:
            try:
                await server.close()
            except Exception:
                log.exception("MCP server %s: closing failed", server.name)
