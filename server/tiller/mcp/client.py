"""The MCP servers of one session (``McpServers``), each one connection (``McpServer``).

Lifecycle: nothing starts until the session first needs its tools (``ensure_started``: the
first prompt, or ``mcp/list``); then every enabled server starts at once, each bounded by its
``startup_timeout``. A server that fails to start is ``failed`` with the error and the tail of
its stderr; the others work. Each connection runs in a task of its own (the SDK's transports
are context managers that must be left in the task that entered them); ``close`` ends them.
Stdio servers run in a process group of their own (the SDK starts them in a new session) and
carry the session's ``ProcessScope`` tag, so ``ProcessScope.kill`` and the server's shutdown
(EOF, SIGTERM, SIGHUP: ``kill_descendants``) find them even if a graceful close did not.

Protocol: the SDK's ``Client`` in its ``auto`` mode: ``server/discover`` first, so a server of
the 2026-07-28 revision is spoken to statelessly, and the ``initialize`` handshake for older
ones. Tiller advertises elicitation (form and URL) and nothing the 2026-07-28 revision
deprecates (no roots, no sampling, no logging).

Tools: ``tools`` is the session's own tool list, changed in place, so the model request, the
permission gate and the tool runner all see the MCP tools of the servers that are ready. A
change of a server's tool list (``notifications/tools/list_changed``; on 2026-07-28 the same
event on a ``subscriptions/listen`` stream) re-lists them; a call that caused one returns only
after the list is refreshed, so the next model call sees it. While a ready server offers
resources, the session has the two resource tools of tiller.mcp.resources too.

Prompts: a server that advertises the ``prompts`` capability has its prompts listed after its
tools (``prompts``), again when they change; ``get_prompt`` fetches one. Every change of a
server's prompts (listed, changed, gone with the server) calls ``McpServers``' ``on_prompts``
(tiller.mcp.prompts turns them into slash commands).

Elicitation: a server's ``elicitation/create`` (a server-to-client request, or on 2026-07-28 an
input request inside a call's result) goes to the session's ``McpUser`` (tiller.mcp.elicit);
while the user is asked, the tool timeouts of the server's calls stand still.

OAuth (tiller.mcp.oauth): an HTTP or SSE server that answers 401 is ``needsAuth`` when no
stored token works; ``login`` runs the browser step (the URL goes to ``McpUser.open_url``, the
redirect comes back to a loopback listener), ``logout`` revokes and forgets the tokens. A
stored token is refreshed when it has expired; one the server refuses mid-session (revoked)
makes the server ``needsAuth`` again, and the call that met it an error result saying so.

Every change of a server's status or tools is published as an ``McpStatus`` event.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import math
import os
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from tiller import __version__
from tiller.errors import ConfigError, ToolError
from tiller.mcp.config import McpServerConfig
from tiller.mcp.elicit import Elicitation, ElicitationUnavailable, McpUser, NoUser
from tiller.mcp.oauth import CallbackListener, LoginRefused, TokenFile, free_port, provider, revoke
from tiller.mcp.resources import ListResourcesTool, ReadResourceTool, ResourceTool
from tiller.mcp.tool import McpTool, mcp_tool, unique_names
from tiller.procs import ProcessScope
from tiller.tools.base import Tool
from tiller.types import McpRenamedTool, McpServerState, McpStatus, McpStatusName

if TYPE_CHECKING:  # the SDK is imported when a server starts (it costs ~0.5 s)
    import mcp.types as mcp_types
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.client import Client
    from mcp.client.session import ClientRequestContext, IncomingMessage
    from mcp.shared.auth import AuthorizationCodeResult

__all__ = ["McpHost", "McpServer", "McpServers"]

log = logging.getLogger(__name__)

_STDERR_TAIL = 2000
"""How much of a failed server's stderr its status shows (characters, the end)."""

_CALL_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("mcp_call", default=None)
"""The tool call a server request is being made for (where the SDK runs it in the call's task:
the 2026-07-28 input requests)."""


def _describe(exc: BaseException) -> str:
    """A one-line reason for ``exc``; an exception group shows its first leaf."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, (OSError, ToolError, LoginRefused)) \
        else f"{type(exc).__name__}: {text}"


@dataclass
class McpHost:
    """What a session's servers share: its workspace and process scope, where OAuth tokens are
    kept, how long a login waits for the user, and the user (changed when a client
    connects)."""

    cwd: Path
    scope: ProcessScope
    auth_dir: Path
    user: McpUser = field(default_factory=NoUser)
    login_timeout: float = 300.0


@dataclass
class _Login:
    """An interactive login in progress: its redirect listener."""

    listener: CallbackListener


class _Halt(Exception):
    """The connection was ended for ``status`` (``needsAuth``, ``failed``) with ``reason``."""

    def __init__(self, status: McpStatusName, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class McpServer:
    """One server's connection, status, tools and prompts. ``on_change`` is called
    (synchronously) after every change of status or tools."""

    def __init__(
        self, config: McpServerConfig, *, host: McpHost,
        on_change: Callable[[McpServer], None],
        on_prompts: Callable[[], None] = lambda: None,
    ) -> None:
        self.config = config
        self.name = config.name
        self.host = host
        self.on_change = on_change
        self.on_prompts = on_prompts
        self.status: McpStatusName = "stopped"
        self.error: str | None = None
        self.auth_url: str | None = None
        """While a login waits for the browser: the authorization URL."""
        self.protocol_version: str | None = None
        self.tools: list[McpTool] = []
        self.prompts: list[mcp_types.Prompt] = []
        """The server's prompts while it is ready (none without the prompts capability)."""
        self._has_prompts = False
        self._has_resources = False
        self._prompts_stale = False
        self._prompts_refreshing: asyncio.Task[None] | None = None
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._end = asyncio.Event()
        """Set when the connection must end: a close, or a halt (``_halted``)."""
        self._halted: _Halt | None = None
        self._stopping = False
        self._refreshing: asyncio.Task[None] | None = None
        self._stale = False
        self._stderr: IO[str] | None = None
        self._pids: list[int] = []
        self._login: _Login | None = None
        self._auth: OAuthClientProvider | None = None
        self._calls: dict[str, anyio.CancelScope] = {}
        """The calls in flight, by tool call id: their timeouts."""
        self._asking = 0
        self._left: dict[str, float] = {}

    def state(self) -> McpServerState:
        """The server as ``mcp/list`` and ``mcp_status`` show it."""
        renamed = [McpRenamedTool(tool=tool.remote_name, name=tool.name)
                   for tool in self.tools if tool.name != tool.natural_name]
        return McpServerState(
            name=self.name, transport=self.config.transport, status=self.status,
            error=self.error, tools=[tool.name for tool in self.tools], renamed=renamed or None,
            auth_url=self.auth_url if self.status == "needsAuth" else None,
            protocol_version=self.protocol_version if self.status == "ready" else None,
        )

    @property
    def offers_resources(self) -> bool:
        return self.status == "ready" and self._has_resources

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

    def _token_file(self) -> TokenFile:
        assert self.config.url is not None
        return TokenFile(self.host.auth_dir / "mcp-oauth", self.config.url)

    # ------------------------------------------------------------------ lifecycle

    async def start(self, timeout: float | None = None,
                    late: tuple[McpStatusName, str] | None = None) -> None:
        """Connect, bounded by ``timeout`` (default ``startup_timeout``); never raises (a
        failure, or a server that needs a login, is the status). ``late``: the status (and
        reason) to take when the time runs out (default: ``failed``, "did not start")."""
        timeout = self.config.startup_timeout if timeout is None else timeout
        self._ready, self._end, self._halted, self._stopping = (
            asyncio.Event(), asyncio.Event(), None, False)
        self._set("starting")
        self._task = asyncio.create_task(self._run(), name=f"mcp-{self.name}")
        with anyio.move_on_after(timeout):
            await self._ready.wait()
        halted = self._halted
        if halted is not None:
            await self._cancel()
            self._set(halted.status, halted.reason)
        elif not self._ready.is_set():
            await self._cancel()
            if late is not None:
                self._set(*late)
            else:
                self._fail(f"did not start within {timeout:g} seconds")

    def _halt(self, status: McpStatusName, reason: str) -> None:
        """End the connection from inside it (the auth flow): ``start``, ``call`` and the
        connection's task see it and stop."""
        if self._halted is None:
            self._halted = _Halt(status, reason)
        self._ready.set()
        self._end.set()
        for scope in self._calls.values():
            scope.cancel()

    async def _cancel(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _disconnect(self) -> None:
        """End the connection, keeping the status as it is."""
        self._stopping = True
        self._end.set()
        task = self._task
        if task is not None:
            with anyio.move_on_after(5):
                await asyncio.shield(task)
        await self._cancel()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    async def close(self) -> None:
        """End the connection (a stdio server's process group with it); status ``stopped``."""
        await self._disconnect()
        if self.status not in ("failed", "stopped"):
            self._set("stopped")

    async def restart(self, timeout: float | None = None) -> None:
        await self._disconnect()
        await self.start(timeout)

    async def _run(self) -> None:
        from mcp.client.client import Client
        from mcp.types import Implementation

        try:
            async with AsyncExitStack() as stack:
                client = Client(
                    self._transport(), mode="auto", message_handler=self._on_message,
                    elicitation_callback=self._elicit, cache=None,
                    client_info=Implementation(name="tiller", version=__version__),
                )
                await stack.enter_async_context(client)
                self._client = client
                self.protocol_version = client.protocol_version
                capabilities = client.server_capabilities
                self._has_prompts = capabilities.prompts is not None
                self._has_resources = capabilities.resources is not None
                await self._list_tools()
                if self._has_prompts:
                    await self._list_prompts()
                self._remember_revocation()
                async with anyio.create_task_group() as group:
                    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

                    if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                        group.start_soon(self._listen, client, capabilities)
                    self.auth_url = None
                    self._set("ready")
                    self._ready.set()
                    await self._end.wait()
                    group.cancel_scope.cancel()
        except Exception as exc:
            log.info("MCP server %s: %s", self.name, _describe(exc), exc_info=True)
            if not self._stopping and self._halted is None:
                self._fail(_describe(exc))
        finally:
            self._client = None
            halted = self._halted
            if halted is not None and self._ready.is_set() and self.status == "ready":
                self._set(halted.status, halted.reason)
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
                env=self.host.scope.environ(config.env),
                cwd=str(self.host.cwd / config.cwd) if config.cwd else str(self.host.cwd),
            )
            async with AsyncExitStack() as stack:
                with self.host.scope.spawning():  # no orphan reaping may take its exit status
                    streams = await stack.enter_async_context(
                        stdio_client(params, errlog=self._stderr)
                    )
                    self._pids = self.host.scope.adopt_leaders()
                yield streams
            self.host.scope.release(self._pids)  # the SDK has waited for its own process
            return
        assert config.url is not None
        headers = dict(config.headers)
        token = os.environ.get(config.bearer_token_env) if config.bearer_token_env else None
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._auth = self._oauth() if config.uses_oauth else None
        if config.transport == "sse":
            async with sse_client(config.url, headers=headers, auth=self._auth) as streams:
                yield streams
            return
        async with create_mcp_http_client(headers=headers, auth=self._auth) as http, \
                streamable_http_client(config.url, http_client=http) as streams:
            yield streams

    def _oauth(self) -> OAuthClientProvider:
        """The OAuth provider of this connection (tiller.mcp.oauth): interactive during a
        ``login``, else a stored token or nothing (``needsAuth``)."""
        store = self._token_file()
        if self._login is not None:
            port = self._login.listener.port
        else:
            port = self.config.oauth_callback_port or store.redirect_port() or free_port()
        return provider(self.config, store, port=port, on_redirect=self._on_redirect,
                        on_callback=self._on_callback, on_error=self._on_auth_error)

    def _remember_revocation(self) -> None:
        """Keep the authorization server's revocation endpoint, for ``logout``."""
        metadata = self._auth.context.oauth_metadata if self._auth is not None else None
        endpoint = metadata.revocation_endpoint if metadata is not None else None
        if endpoint is not None:
            self._token_file().update(revocationEndpoint=str(endpoint))

    async def _on_redirect(self, url: str) -> None:
        """The auth flow needs the user: show the URL during a login, else stop here."""
        if self._login is None:
            self._halt("needsAuth", "the server needs you to sign in (mcp/login)")
            await anyio.sleep_forever()
        self.auth_url = url
        self._set("needsAuth", "waiting for the sign-in in the browser")
        shown = await self.host.user.open_url(self.name, url, f"Sign in to MCP server {self.name}")
        if not shown:
            log.warning("MCP server %s: open this URL to sign in: %s", self.name, url)

    async def _on_callback(self) -> AuthorizationCodeResult:
        assert self._login is not None
        return await self._login.listener.wait()

    def _on_auth_error(self, exc: BaseException) -> None:
        """The auth flow failed (a refused login, a registration or token error)."""
        self._halt("failed", f"OAuth: {_describe(exc)}")

    async def login(self) -> None:
        """Sign in again through the browser: the stored tokens are dropped, a loopback
        listener takes the redirect, and the connection starts over (bounded by
        ``startup_timeout`` plus the host's ``login_timeout``). Never raises for the flow's
        failures (they are the status); ToolError when the server does not use OAuth or the
        configured callback port is taken."""
        self._check_oauth()
        await self._disconnect()
        store = self._token_file()
        await anyio.to_thread.run_sync(store.forget_tokens)
        wanted = self.config.oauth_callback_port or store.redirect_port()
        try:
            listener = await CallbackListener.open(wanted)
        except OSError as exc:
            if self.config.oauth_callback_port:
                raise ToolError(f"MCP server {self.name}: the OAuth callback port "
                                f"{wanted} is taken: {exc}") from None
            await anyio.to_thread.run_sync(store.forget_client)  # register anew, another port
            listener = await CallbackListener.open(None)
        self._login = _Login(listener)
        waited = self.host.login_timeout
        try:
            await self.start(self.config.startup_timeout + waited, late=(
                "needsAuth", f"the sign-in did not finish within {waited:g} seconds"))
        finally:
            self._login = None
            self.auth_url = None
            await listener.close()

    def _check_oauth(self) -> None:
        if not self.config.uses_oauth:
            why = ("a stdio server" if self.config.transport == "stdio" else
                   "oauth = false" if not self.config.oauth else "it sends its own Authorization")
            raise ToolError(f"MCP server {self.name} does not use OAuth ({why})")

    async def logout(self) -> None:
        """Revoke the stored tokens (where the authorization server says how), forget them,
        and connect again (a server that needs a token is then ``needsAuth``)."""
        self._check_oauth()
        await self._disconnect()
        store = self._token_file()
        endpoint = (await anyio.to_thread.run_sync(store.load)).get("revocationEndpoint")
        await revoke(store, endpoint if isinstance(endpoint, str) else None)
        await self.start()

    # ------------------------------------------------------------------ what the server says

    async def _elicit(
        self, context: ClientRequestContext, params: Any
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        """An ``elicitation/create``: ask the user (the calls' timeouts wait meanwhile)."""
        import mcp.types as mcp_types

        call_id = _CALL_ID.get()
        if call_id is None and len(self._calls) == 1:
            call_id = next(iter(self._calls))
        request = Elicitation(
            server=self.name, mode=params.mode, message=params.message,
            requested_schema=getattr(params, "requested_schema", None),
            url=getattr(params, "url", None),
            elicitation_id=getattr(params, "elicitation_id", None),
            tool_call_id=call_id,
        )
        with self._user_time():
            try:
                answer = await self.host.user.elicit(request)
            except ElicitationUnavailable as exc:
                return mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST, message=str(exc))
        return mcp_types.ElicitResult(action=answer.action, content=answer.content)

    @contextlib.contextmanager
    def _user_time(self) -> Iterator[None]:
        """While the user is asked, the deadlines of the calls in flight stand still."""
        now = anyio.current_time()
        if self._asking == 0:
            for call_id, scope in self._calls.items():
                self._left[call_id] = scope.deadline - now
                scope.deadline = math.inf
        self._asking += 1
        try:
            yield
        finally:
            self._asking -= 1
            if self._asking == 0:
                now = anyio.current_time()
                for call_id, scope in self._calls.items():
                    scope.deadline = now + self._left.pop(call_id, self.config.tool_timeout)
                self._left.clear()

    async def _on_message(self, message: IncomingMessage) -> None:
        """Never blocks: a flood of notifications costs one re-listing at a time."""
        import mcp.types as mcp_types

        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._tools_changed()
        elif isinstance(message, mcp_types.PromptListChangedNotification):
            self._prompts_changed()
        elif isinstance(message, Exception):
            log.info("MCP server %s: transport error: %s", self.name, message)

    async def _listen(self, client: Client, capabilities: mcp_types.ServerCapabilities) -> None:
        """A 2026-07-28 server's list changes, from its ``subscriptions/listen`` stream."""
        from mcp.shared.subscriptions import PromptsListChanged, ToolsListChanged

        tools = bool(capabilities.tools and capabilities.tools.list_changed)
        prompts = bool(capabilities.prompts and capabilities.prompts.list_changed)
        if not (tools or prompts):
            return
        try:
            async with client.listen(tools_list_changed=tools,
                                     prompts_list_changed=prompts) as subscription:
                async for event in subscription:
                    if isinstance(event, ToolsListChanged):
                        self._tools_changed()
                    elif isinstance(event, PromptsListChanged):
                        self._prompts_changed()
        except Exception as exc:
            log.info("MCP server %s: no change notifications: %s", self.name, _describe(exc))

    def _tools_changed(self) -> None:
        self._stale = True
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.create_task(self._relist())

    def _prompts_changed(self) -> None:
        self._prompts_stale = True
        if self._prompts_refreshing is None or self._prompts_refreshing.done():
            self._prompts_refreshing = asyncio.create_task(self._relist_prompts())

    async def _relist(self) -> None:
        """List the tools again until no list change came in meanwhile."""
        while self._stale and self._client is not None:
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
        """List the prompts again until no list change came in meanwhile."""
        while self._prompts_stale and self._client is not None and self._has_prompts:
            self._prompts_stale = False
            before = list(self.prompts)
            try:
                await self._list_prompts()
            except Exception as exc:
                log.warning("MCP server %s: listing its prompts failed: %s", self.name, exc)
                return
            if self.status == "ready" and before != self.prompts:
                self.on_prompts()

    async def _paginate(self, fetch: Callable[[str | None], Awaitable[Any]],
                        field_name: str) -> list[Any]:
        """Every item of a paginated MCP listing: ``fetch(cursor)`` per page, ``field_name``
        holds the page's items; the whole walk is bounded by the server's start-up timeout."""
        listed: list[Any] = []
        cursor: str | None = None
        with anyio.fail_after(self.config.startup_timeout):
            while True:
                page = await fetch(cursor)
                listed.extend(getattr(page, field_name))
                cursor = page.next_cursor
                if not cursor:
                    return listed

    def _connected(self) -> Client:
        client = self._client
        assert client is not None
        return client

    async def _list_prompts(self) -> None:
        client = self._connected()
        self.prompts = await self._paginate(
            lambda cursor: client.list_prompts(cursor=cursor), "prompts")

    def _listing(self) -> list[tuple[str, str, dict[str, Any]]]:
        return [(tool.natural_name, tool.description, tool.input_schema) for tool in self.tools]

    async def _list_tools(self) -> None:
        client = self._connected()
        listed: list[mcp_types.Tool] = await self._paginate(
            lambda cursor: client.list_tools(cursor=cursor), "tools")
        self.tools = [mcp_tool(self, tool, read_only=self.config.read_only)
                      for tool in listed if self.config.offers(tool.name)]

    # ------------------------------------------------------------------ calls

    def _live(self) -> Client:
        """The connected client; ToolError naming the server and why when it is not ready."""
        client = self._client
        if client is None or self.status != "ready":
            why = f": {self.error}" if self.error else ""
            raise ToolError(f"MCP server {self.name} is not running ({self.status}{why})")
        return client

    async def _bounded(self, what: str, call_id: str | None,
                       request: Callable[[Client], Awaitable[Any]]) -> Any:
        """Run ``request`` on the live client within ``tool_timeout`` (standing still while
        the user is asked), ended early when the connection halts. ToolError naming the
        server for a timeout, a halt, a server gone (it is then ``failed``) or an error
        answer."""
        client = self._live()
        timeout = self.config.tool_timeout
        key = call_id or f"{what}-{id(request)}"
        token = _CALL_ID.set(call_id)
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + timeout) as scope:
                self._calls[key] = scope
                return await request(client)
            if self._halted is not None:
                raise ToolError(f"MCP server {self.name} stopped during {what}: "
                                f"{self._halted.reason}")
            raise ToolError(f"MCP server {self.name}: {what} timed out after {timeout:g} seconds")
        except ToolError:
            raise
        except Exception as exc:
            if self._halted is not None:
                raise ToolError(f"MCP server {self.name} stopped during {what}: "
                                f"{self._halted.reason}") from None
            gone = self._task is None or self._task.done() or _closed(exc)
            if gone:
                self._fail(f"the connection ended during {what}: {_describe(exc)}")
                self._end.set()
            raise ToolError(f"MCP server {self.name} failed on {what}: {_describe(exc)}") from None
        finally:
            _CALL_ID.reset(token)
            self._calls.pop(key, None)
            self._left.pop(key, None)

    async def call(self, tool: str, arguments: dict[str, Any],
                   call_id: str | None = None) -> mcp_types.CallToolResult:
        """Call ``tool`` (see ``_bounded``); a list change the call caused is in place when
        it returns."""
        result: mcp_types.CallToolResult = await self._bounded(
            tool, call_id, lambda client: client.call_tool(tool, arguments))
        await anyio.lowlevel.checkpoint()  # a list change that came with the result is seen
        refreshing = self._refreshing
        if refreshing is not None and not refreshing.done():
            with anyio.move_on_after(self.config.startup_timeout):
                await asyncio.shield(refreshing)
        return result

    async def get_prompt(self, prompt: str, arguments: dict[str, str]) -> mcp_types.GetPromptResult:
        """``prompts/get`` (see ``_bounded``)."""
        result: mcp_types.GetPromptResult = await self._bounded(
            f"prompt {prompt}", None, lambda client: client.get_prompt(prompt, arguments))
        return result

    async def list_resources(self) -> list[mcp_types.Resource]:
        """Every resource the server lists (see ``_bounded``)."""
        listed: list[mcp_types.Resource] = await self._bounded(
            "resources/list", None, lambda client: self._paginate(
                lambda cursor: client.list_resources(cursor=cursor), "resources"))
        return listed

    async def list_resource_templates(self) -> list[mcp_types.ResourceTemplate]:
        """Every resource template the server lists (see ``_bounded``)."""
        listed: list[mcp_types.ResourceTemplate] = await self._bounded(
            "resources/templates/list", None, lambda client: self._paginate(
                lambda cursor: client.list_resource_templates(cursor=cursor),
                "resource_templates"))
        return listed

    async def read_resource(self, uri: str) -> mcp_types.ReadResourceResult:
        """``resources/read`` (see ``_bounded``)."""
        result: mcp_types.ReadResourceResult = await self._bounded(
            f"reading {uri}", None, lambda client: client.read_resource(uri))
        return result


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
        self, configs: list[McpServerConfig], *, tools: list[Tool[Any]], host: McpHost,
        publish: Callable[[McpStatus], None],
        on_prompts: Callable[[], None] = lambda: None,
    ) -> None:
        self._tools = tools
        self.host = host
        self.on_prompts = on_prompts
        """Called (synchronously) whenever a server's prompts change."""
        self._publish = publish
        self._resource_tools: list[ResourceTool] = [ListResourcesTool(self),
                                                    ReadResourceTool(self)]
        by_name = {config.name: config for config in configs}  # a later entry wins
        self.servers = [self._server(config) for config in by_name.values() if config.enabled]
        self._started: asyncio.Event | None = None

    def _server(self, config: McpServerConfig) -> McpServer:
        return McpServer(config, host=self.host, on_change=self._changed,
                         on_prompts=self._prompts_changed)

    def _changed(self, server: McpServer) -> None:
        builtin = [tool for tool in self._tools
                   if not isinstance(tool, (McpTool, ResourceTool))]
        before = {other.name: [tool.name for tool in other.tools] for other in self.servers}
        mcp_tools: list[McpTool] = [tool for other in self.servers for tool in other.tools]
        for tool, name in zip(mcp_tools, unique_names([t.natural_name for t in mcp_tools]),
                              strict=True):
            if name != tool.name and name != tool.natural_name:
                log.warning("MCP server %s: its tool %r is offered as %s (%s is another "
                            "tool's)", tool.caller.name, tool.remote_name, name,
                            tool.natural_name)
            type(tool).name = name  # each tool is a class of its own (mcp_tool)
        resources: list[Tool[Any]] = (list(self._resource_tools)
                                      if any(s.offers_resources for s in self.servers) else [])
        self._tools[:] = [*builtin, *mcp_tools, *resources]
        for other in self.servers:  # a rename can change another server's names
            if other is server or before[other.name] != [tool.name for tool in other.tools]:
                self._publish(McpStatus(server=other.state()))

    def _prompts_changed(self) -> None:
        self.on_prompts()

    def named(self, name: str) -> McpServer | None:
        return next((server for server in self.servers if server.name == name), None)

    async def account(
        self, name: str, act: Callable[[McpServer], Awaitable[None]]
    ) -> McpServerState:
        """``act`` on server ``name`` once the servers are up (``McpServer.login`` or
        ``logout``); its state after. ConfigError, the caller's params' fault, for a name no
        server has or a ToolError of ``act`` (a server that does not use OAuth...)."""
        await self.ensure_started()
        server = self.named(name)
        if server is None:
            known = ", ".join(other.name for other in self.servers) or "none"
            raise ConfigError(f"server: the session has no MCP server {name!r} (it has: {known})")
        try:
            await act(server)
        except ToolError as exc:
            raise ConfigError(f"server: {exc}") from None
        return server.state()

    async def add(self, configs: list[McpServerConfig]) -> None:
        """Add servers to a live session (ACP's ``session/load``); a name it has already is
        kept as it is. When the others have started (or are starting), the new ones start
        now."""
        known = {server.name for server in self.servers}
        added = [self._server(config) for config in configs
                 if config.enabled and config.name not in known]
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
