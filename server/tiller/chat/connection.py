"""The server side of ``tiller chat``: ``Connection`` spawns ``python -m tiller`` in a session
of its own, opens the chat session (new, or loaded with ``--resume``) and hands the server's
events, in order, to a callback; ``ServerExited`` says the server went away. It knows nothing of
the terminal: ``tiller.chat.app`` drives it and ``tiller.chat.render`` shows what it hands on.

The provider keys do not reach the server through its environment: they leave this process's
``os.environ`` and go through an inherited pipe (``tiller.procs.send_keys``), so no process's
environment block holds them but this one's, which is non-dumpable (``tiller.__main__``).
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio

from tiller import __version__, procs
from tiller.chat.render import Event
from tiller.client import RpcError, TillerClient
from tiller.config import ServerConfig, load_config
from tiller.errors import ConfigError
from tiller.protocol.names import EVENT_METHOD
from tiller.store.private import private_file
from tiller.wire.framing import Framing

__all__ = ["UNKNOWN_SESSION", "Connection", "ServerExited"]

UNKNOWN_SESSION = -32013


class ServerExited(Exception):
    """The server closed its output: it crashed, or refused its command line. ``detail`` is
    the last of what it wrote to its log (its own error message, for a refusal)."""

    def __init__(self, code: int | None, detail: str = "") -> None:
        super().__init__(f"the server exited (code {code})" + (f": {detail}" if detail else ""))
        self.code = code


class Connection:
    """A spawned server, its chat session, and the task that hands its events to ``on_event``."""

    def __init__(
        self, client: TillerClient, on_event: Callable[[Event], None], log: Path | None = None
    ) -> None:
        self.client, self.on_event = client, on_event
        self.log = log
        self.log_start = _size(log)
        self.session_id: str | None = None
        self.initialized: dict[str, Any] = {}
        """What ``initialize`` answered (empty before ``start_session``)."""
        self.handled = 0  # how many of client.received were handed on
        self.closed = anyio.Event()
        self._progress = anyio.Event()
        self._calls: set[anyio.CancelScope] = set()

    @classmethod
    @asynccontextmanager
    async def open(
        cls, server_args: Sequence[str], on_event: Callable[[Event], None], log: Path
    ) -> AsyncIterator[Connection]:
        """Spawn the server with its logs, and anything else it writes on stderr, appended to
        ``log``: never on the terminal, where they would land inside the transcript."""
        private_file(log)
        argv = [sys.executable, "-m", "tiller", *server_args, "--log-file", str(log)]
        names = key_variables(server_args)
        keys = {name: os.environ[name] for name in names if name in os.environ}
        procs.scrub_environ(names)
        read_fd, write_fd = os.pipe()
        env = {**os.environ, procs.KEYS_FD_VARIABLE: str(read_fd)}
        try:
            with log.open("ab") as stderr:
                start = _size(log)
                process = await anyio.open_process(
                    argv, stderr=stderr, start_new_session=True, env=env, pass_fds=(read_fd,)
                )
        except BaseException:
            os.close(write_fd)
            raise
        finally:
            os.close(read_fd)
        await anyio.to_thread.run_sync(procs.send_keys, write_fd, keys)
        async with TillerClient(process, Framing.NDJSON) as client, anyio.create_task_group() as tg:
            connection = cls(client, on_event, log)
            connection.log_start = start
            tg.start_soon(connection._pump)
            try:
                yield connection
            finally:
                tg.cancel_scope.cancel()

    async def start_session(
        self, *, ask: bool = False, resume: str | None = None, cwd: str | None = None
    ) -> dict[str, Any] | None:
        """Initialize (declaring ``permissions`` if ``ask``: the Repl answers them), then create
        the session (a missing API key fails here, -32014), or with ``resume`` load a saved one:
        that id, or with "" the latest of workspace ``cwd`` (an absolute path). Returns what
        session/load returned, None for a new session."""
        params: dict[str, Any] = {"clientInfo": {"name": "tiller-chat", "version": __version__}}
        if ask:
            params["capabilities"] = {"permissions": True}
        self.initialized = await self.call("initialize", params)
        if resume is None:
            self.session_id = (await self.call("session/new", {}))["sessionId"]
            return None
        if not resume:
            listed = await self.call("session/list", {"cwd": cwd, "limit": 1})
            if not listed["sessions"]:
                raise RpcError(UNKNOWN_SESSION, f"no saved session to resume in {cwd}")
            resume = str(listed["sessions"][0]["sessionId"])
        loaded: dict[str, Any] = await self.call("session/load", {"sessionId": resume})
        self.session_id = loaded["sessionId"]
        return loaded

    async def run(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """agent/prompt or agent/continue: the result, once every event of the run is handled."""
        result: dict[str, Any] = await self.call(method, params)
        await self.caught_up(len(self.client.received))
        return result

    async def caught_up(self, count: int) -> None:
        """Wait until the first ``count`` received messages were handed on (or the server is
        gone), so that what follows is shown after them."""
        while self.handled < count and not self.closed.is_set():
            await self._progress.wait()

    async def abort(self) -> None:
        """Abort the active run; no error if it has just ended, or the server has gone."""
        with suppress(RpcError, ServerExited):
            await self.call("agent/abort")

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """``request`` in this session with no timeout (a run takes as long as it takes), that
        raises ServerExited instead of waiting forever if the server goes away."""
        if self.session_id is not None:
            params = {"sessionId": self.session_id, **(params or {})}
        with anyio.CancelScope() as scope:
            self._calls.add(scope)
            try:
                if not self.closed.is_set():
                    return await self.client.request(method, params)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError, EOFError):
                pass  # it exited before reading the request, or before answering it
            finally:
                self._calls.discard(scope)
        with anyio.move_on_after(5):
            await self.client.process.wait()
        raise ServerExited(self.client.process.returncode, self._last_log_line())

    def _last_log_line(self) -> str:
        """The last non-empty line the server wrote to its log since it started."""
        if self.log is None:
            return ""
        try:
            with self.log.open("rb") as file:
                file.seek(self.log_start)
                lines = file.read().decode(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1].strip() if lines else ""

    def answer_requests(
        self, method: str, handler: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
    ) -> None:
        """Answer the server's ``method`` requests with ``handler``, each called once the events
        sent before the request were handed on, and cancelled if the server sends
        ``$/cancelRequest`` for it (it stopped waiting: the answer would be ignored)."""

        async def answer(params: dict[str, Any]) -> dict[str, Any] | None:
            msg_id, index = self._request_of(params)
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._cancel_on_withdrawal, msg_id, index, scope)
                    await self.caught_up(index)
                    result = await handler(params)
                    tg.cancel_scope.cancel()
                    return result
            return None

        self.client.on_request(method, answer)

    def _request_of(self, params: Any) -> tuple[Any, int]:
        """The id and the index in ``received`` of the request that carried ``params``."""
        received = self.client.received
        for index in range(len(received) - 1, -1, -1):
            if received[index].get("params") is params:
                return received[index].get("id"), index
        return None, len(received)

    async def _cancel_on_withdrawal(
        self, msg_id: Any, start: int, scope: anyio.CancelScope
    ) -> None:
        def withdraws(message: dict[str, Any]) -> bool:
            params = message.get("params") or {}
            return message.get("method") == "$/cancelRequest" and params.get("id") == msg_id

        with suppress(EOFError):  # the server is gone: nobody waits for the answer either
            await self.client.wait_for(withdraws, start=start, timeout=math.inf)
        scope.cancel()

    async def _pump(self) -> None:
        """Hand each event on, in order; at the server's end of output, fail pending calls."""
        received = self.client.received
        try:
            while True:
                await self.client.wait_for(lambda _m: True, start=self.handled, timeout=math.inf)
                while self.handled < len(received):
                    message = received[self.handled]
                    self.handled += 1
                    if message.get("method") == EVENT_METHOD:
                        self.on_event(message["params"])
                self._advance()
        except EOFError:
            pass
        finally:
            self.closed.set()
            self._advance()
            for scope in self._calls:
                scope.cancel()

    def _advance(self) -> None:
        progress, self._progress = self._progress, anyio.Event()
        progress.set()


def key_variables(server_args: Sequence[str]) -> set[str]:
    """The variables holding provider keys for a server started with ``server_args``: read
    from the same config file (the built-in providers' if it cannot be read: the server will
    say why)."""
    try:
        return load_config(server_args, os.environ).key_variables()
    except (ConfigError, SystemExit):
        return ServerConfig().key_variables()


def _size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path is not None else 0
    except OSError:
        return 0
