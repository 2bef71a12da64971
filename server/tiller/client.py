"""``TillerClient``: an async client that spawns ``tiller`` and speaks JSON-RPC to it over stdio.

Scripts and tests use it: ``request`` awaits a response (raising ``RpcError`` for an error
response, ``EOFError`` if the server exits first) with no time limit unless the caller gives
one; when the caller's limit fires, or the caller is cancelled, ``$/cancelRequest`` tells the
server (which aborts a run it was awaiting). ``prompt``, ``steer``, ``follow_up`` and ``abort``
wrap the ``agent/*`` methods; ``session_events`` iterates over one session's events as they
come. Every message the server sends is kept in ``received``, events in ``events``, and
``wait_event``/``wait_for`` await a message matching a predicate instead of sleeping.
Server-to-client requests are answered by handlers registered with ``on_request``.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from tiller.protocol.names import EVENT_METHOD
from tiller.wire.framing import FramedReader, Framing, frame

__all__ = ["RpcError", "TillerClient"]

Message = dict[str, Any]
CANCEL_METHOD = "$/cancelRequest"
RequestHandler = Callable[[Any], Awaitable[Any]]


class RpcError(Exception):
    """An error response: ``code``, ``message`` and optional ``data`` as the server sent them."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data


class TillerClient:
    """One spawned server. Use ``async with await TillerClient.spawn(...) as client``."""

    def __init__(self, process: anyio.abc.Process, framing: Framing) -> None:
        self.process = process
        self.framing = framing
        self.received: list[Message] = []
        self.handlers: dict[str, RequestHandler] = {}
        self._ids = itertools.count(1)
        self._pending: dict[Any, anyio.Event] = {}
        self._responses: dict[Any, Message] = {}
        self._changed = anyio.Event()
        self._group: anyio.abc.TaskGroup | None = None
        self._eof = False

    @classmethod
    async def spawn(
        cls,
        args: Sequence[str] = (),
        *,
        framing: str = "ndjson",
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        command: Sequence[str] | None = None,
        stderr: Any = None,
    ) -> TillerClient:
        """Start ``tiller ARGS`` (``command`` overrides how; default: this Python's -m tiller)."""
        argv = [*(command or [sys.executable, "-m", "tiller"]), *args]
        process = await anyio.open_process(
            argv, env=env, cwd=cwd, stderr=stderr if stderr is not None else sys.stderr
        )
        return cls(process, Framing(framing))

    async def __aenter__(self) -> TillerClient:
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._read_loop)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
        assert self._group is not None
        self._group.cancel_scope.cancel()
        await self._group.__aexit__(exc_type, exc, tb)

    # ---------------------------------------------------------------- sending

    async def send_raw(self, data: bytes) -> None:
        """Write bytes to the server's stdin exactly as given (for malformed-input tests)."""
        assert self.process.stdin is not None
        await self.process.stdin.send(data)

    async def send(self, message: Message) -> None:
        await self.send_raw(frame(json.dumps(message).encode(), self.framing))

    async def notify(self, method: str, params: Any = None) -> None:
        message: Message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    def next_id(self) -> int:
        return next(self._ids)

    async def request(
        self, method: str, params: Any = None, *, msg_id: Any = None,
        timeout: float | None = None,
    ) -> Any:
        """Send a request and await its response; raise RpcError for an error response.

        ``timeout`` (seconds; default none: a run takes as long as it takes) raises
        TimeoutError after sending ``$/cancelRequest``; so does being cancelled. EOFError if
        the server closes its output before answering."""
        response = await self.request_raw(method, params, msg_id=msg_id, timeout=timeout)
        if "error" in response:
            error = response["error"]
            raise RpcError(error["code"], error["message"], error.get("data"))
        return response.get("result")

    async def request_raw(
        self, method: str, params: Any = None, *, msg_id: Any = None,
        timeout: float | None = None,
    ) -> Message:
        """Send a request and return the whole response message (see ``request``)."""
        msg_id = self.next_id() if msg_id is None else msg_id
        done = self._pending[msg_id] = anyio.Event()
        message: Message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await self.send(message)
            with anyio.fail_after(math.inf if timeout is None else timeout):
                await done.wait()
        except BaseException:
            if msg_id not in self._responses and not self._eof:
                with anyio.CancelScope(shield=True), anyio.move_on_after(1):
                    await self.notify(CANCEL_METHOD, {"id": msg_id})
            raise
        finally:
            self._pending.pop(msg_id, None)
        if msg_id not in self._responses:
            raise EOFError(f"the server closed its output before answering {method}")
        return self._responses.pop(msg_id)

    # ---------------------------------------------------------------- the agent

    async def prompt(
        self, message: str, *, session_id: str | None = None, timeout: float | None = None,
        **params: Any,
    ) -> Any:
        """``agent/prompt``: start a run and await its result (``stopReason``, ``usage``...);
        ``params`` adds other fields of the method (``images``...)."""
        return await self.request(
            "agent/prompt", _agent_params(session_id, message=message, **params), timeout=timeout
        )

    async def steer(self, message: str, *, session_id: str | None = None) -> Any:
        """``agent/steer``: a message for the running agent, delivered after its tool batch."""
        return await self.request("agent/steer", _agent_params(session_id, message=message))

    async def follow_up(self, message: str, *, session_id: str | None = None) -> Any:
        """``agent/followUp``: a message for when the agent would stop; extends the run."""
        return await self.request("agent/followUp", _agent_params(session_id, message=message))

    async def abort(self, *, session_id: str | None = None) -> Any:
        """``agent/abort``: stop the active run (RpcError -32011 when nothing runs)."""
        return await self.request("agent/abort", _agent_params(session_id))

    def session_events(
        self, session_id: str | None = None, *, replay: bool = False
    ) -> AsyncIterator[Message]:
        """The params of each ``agent/event`` of ``session_id`` (every session's for None)
        from now on (with ``replay``, from the first received), as they arrive; it ends when
        the server closes its output. Create it before the request whose events you want."""
        start = 0 if replay else len(self.received)

        async def events() -> AsyncIterator[Message]:
            index = start
            while True:
                while index < len(self.received):
                    message = self.received[index]
                    index += 1
                    params = message.get("params")
                    if message.get("method") == EVENT_METHOD and isinstance(params, dict) and (
                        session_id is None or params.get("sessionId") == session_id
                    ):
                        yield params
                if self._eof:
                    return
                await self._changed.wait()

        return events()

    def on_request(self, method: str, handler: RequestHandler) -> None:
        """Answer server-to-client requests for ``method`` with ``await handler(params)``."""
        self.handlers[method] = handler

    # ---------------------------------------------------------------- receiving

    @property
    def events(self) -> list[Message]:
        """The params of every ``agent/event`` notification so far, in arrival order."""
        return [m["params"] for m in self.received if m.get("method") == EVENT_METHOD]

    async def wait_for(
        self, predicate: Callable[[Message], bool], *, start: int = 0, timeout: float = 30
    ) -> Message:
        """The first received message at index >= ``start`` that matches ``predicate``."""
        with anyio.fail_after(timeout):
            while True:
                for message in self.received[start:]:
                    if predicate(message):
                        return message
                if self._eof:
                    raise EOFError("the server closed its output")
                changed = self._changed
                await changed.wait()

    async def wait_event(
        self, event_type: str, *, start: int = 0, timeout: float = 30, **fields: Any
    ) -> Message:
        """The first ``agent/event`` of ``event_type`` whose params include ``fields``."""

        def matches(message: Message) -> bool:
            if message.get("method") != EVENT_METHOD:
                return False
            params = message["params"]
            return params.get("type") == event_type and all(
                params.get(key) == value for key, value in fields.items()
            )

        message = await self.wait_for(matches, start=start, timeout=timeout)
        params: Message = message["params"]
        return params

    async def close(self, timeout: float = 15) -> int:
        """Close the server's stdin and wait for it to exit; returns its exit code."""
        if self.process.stdin is not None:
            with anyio.move_on_after(1):
                await self.process.stdin.aclose()
        with anyio.move_on_after(timeout):
            return await self.process.wait()
        self.process.kill()
        return await self.process.wait()

    async def _read_loop(self) -> None:
        assert self.process.stdout is not None
        stdout = BufferedByteReceiveStream(self.process.stdout)

        async def read(n: int) -> bytes:
            try:
                return await stdout.receive(n)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return b""

        reader = FramedReader(read, self.framing)
        while (body := await reader.read()) is not None:
            self._handle(json.loads(body))
        self._eof = True
        for done in self._pending.values():
            done.set()  # no answer will come: request_raw raises EOFError
        self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    def _handle(self, message: Message) -> None:
        self.received.append(message)
        if "method" not in message:
            msg_id = message.get("id")
            if msg_id in self._pending:
                self._responses[msg_id] = message
                self._pending[msg_id].set()
        elif "id" in message and self._group is not None:
            self._group.start_soon(self._answer, message)
        self._wake()

    async def _answer(self, message: Message) -> None:
        handler = self.handlers.get(message["method"])
        reply: Message = {"jsonrpc": "2.0", "id": message["id"]}
        if handler is None:
            reply["error"] = {"code": -32601, "message": f"no handler for {message['method']}"}
        else:
            try:
                reply["result"] = await handler(message.get("params"))
            except RpcError as exc:
                reply["error"] = {"code": exc.code, "message": exc.message}
            except Exception as exc:
                reply["error"] = {"code": -32603, "message": str(exc)}
        await self.send(reply)


def _agent_params(session_id: str | None, **fields: Any) -> Message:
    """An ``agent/*`` method's params: ``fields``, in ``session_id`` if one is given."""
    return {**({"sessionId": session_id} if session_id else {}), **fields}
