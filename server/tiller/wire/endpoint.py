"""One JSON-RPC 2.0 peer over a framed writer: requests dispatched to handlers, responses
matched to the requests we sent.

The transport (``tiller.wire.transport``) validates what arrives and calls ``on_request``,
``on_notification`` or ``on_response``; everything that goes out is one JSON body handed to the
writer (``tiller.wire.stdio.FramedWriter``), which frames it.

- A request runs its handler in a task of its own (a long ``agent/prompt`` never blocks an
  ``agent/steer``), in arrival order, and is answered exactly once: the handler's result, the
  ``RequestError`` it raised (its code, message and data), -32601 for a method nobody serves,
  -32603 for anything else (logged; no traceback goes out), -32800 if its task was cancelled
  before answering (a front cancels the work a request started, not its task: see
  ``tiller.wire.jsonrpc.Front.cancellable``).
- A notification runs its handler the same way; an unknown one is logged and dropped.
- ``request`` sends a request of ours and returns the future its answer resolves (an error
  answer sets ``ClientAnswerError``). Our ids are strings (``tiller-N``), the client's are its
  own: the two never share a table.

``current_id()`` is the id of the request whose handler is running (a context variable, so it
is right in every task the handler awaits). ``wait_idle`` lets work in a worker thread (a
warm-up) give way to the client's requests.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from tiller.errors import ClientAnswerError, MethodNotFound, RequestError

__all__ = ["REQUEST_CANCELLED", "Endpoint", "RawHandler", "SerializedResult", "Writer"]

log = logging.getLogger(__name__)

REQUEST_CANCELLED = -32800
"""The code of a request answered because it was cancelled before its handler answered."""

RawHandler = Callable[[Any], Awaitable[Any]]
"""A method's handler as the endpoint calls it: the raw params in (None if absent), a
``SerializedResult``, a JSON-ready value or None out."""

Writer = Callable[[bytes], None]


class SerializedResult(bytes):
    """A handler's result already serialized as JSON: sent as is. ``then``, if set, runs in a
    task of its own once the response has been written."""

    then: Callable[[], Awaitable[None]] | None = None


_current_id: contextvars.ContextVar[Any] = contextvars.ContextVar("tiller_request_id",
                                                                  default=None)


def current_id() -> Any:
    """The id of the request whose handler is running here (None outside one)."""
    return _current_id.get()


class Endpoint:
    """Our side of one JSON-RPC connection; see the module docstring."""

    def __init__(self) -> None:
        self.methods: dict[str, RawHandler] = {}
        self.write: Writer | None = None
        """Where bodies go; set by the transport when it starts serving."""
        self._pending: dict[Any, asyncio.Future[Any]] = {}
        """Our requests, by id, waiting for their answers."""
        self.running: dict[Any, asyncio.Task[Any]] = {}
        """The client's requests whose handlers have not answered yet, by id."""
        self._idle = threading.Event()
        """Set while ``running`` is empty, or once the connection ended."""
        self._idle.set()
        self._closed = False
        self._tasks: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------------ what arrives

    def on_request(self, msg_id: Any, method: str, params: Any) -> None:
        handler = self.methods.get(method)
        if handler is None:
            log.warning("request %r: unknown method %r", msg_id, method)
            self._send_error(msg_id, MethodNotFound(f"Method Not Found: {method}"))
            return
        token = _current_id.set(msg_id)
        try:
            task = asyncio.ensure_future(handler(params))
        finally:
            _current_id.reset(token)
        self.running[msg_id] = task
        self._idle.clear()
        task.add_done_callback(lambda done: self._answer(msg_id, done))

    def on_notification(self, method: str, params: Any) -> None:
        handler = self.methods.get(method)
        if handler is None:
            if not method.startswith("$/"):
                log.warning("ignoring the notification of an unknown method %r", method)
            return
        self._keep(asyncio.ensure_future(handler(params)), f"notification {method}")

    def on_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        """An answer to one of our requests (``error``: its error object, a dict)."""
        future = self._pending.pop(msg_id, None)
        if future is None or future.done():
            log.warning("dropped a response to %r, which no request of ours is waiting for",
                        msg_id)
            return
        if error is not None:
            error = error if isinstance(error, dict) else {}
            future.set_exception(ClientAnswerError(
                _as_int(error.get("code"), -32603), str(error.get("message", "")),
                error.get("data")))
        else:
            future.set_result(result)

    # ------------------------------------------------------------------ what goes out

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._send(message)

    def request(self, method: str, params: Any, msg_id: str) -> asyncio.Future[Any]:
        """Send our request ``msg_id``; the future resolves with the answer's result."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = future
        self._send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return future

    def forget(self, msg_id: str) -> None:
        """Stop waiting for our request ``msg_id`` (a late answer is logged and dropped)."""
        future = self._pending.pop(msg_id, None)
        if future is not None and not future.done():
            future.cancel()

    def wait_idle(self) -> bool:
        """From a worker thread: block while a handler of the client's requests runs, so work
        that can wait (a warm-up, between its steps) leaves them the interpreter. Whether to go
        on: False once the connection ended."""
        self._idle.wait()
        return not self._closed

    def close(self) -> None:
        """The connection ended: our requests still waiting get ``ConnectionError``, and
        ``wait_idle`` no longer waits."""
        self._closed = True
        self._idle.set()
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(ConnectionError("the client disconnected"))

    # ------------------------------------------------------------------ helpers

    def _answer(self, msg_id: Any, task: asyncio.Task[Any]) -> None:
        if self.running.get(msg_id) is task:
            del self.running[msg_id]
            if not self.running:
                self._idle.set()
        if task.cancelled():
            self._send({"jsonrpc": "2.0", "id": msg_id, "error": {
                "code": REQUEST_CANCELLED, "message": f'Request with id "{msg_id}" is canceled'}})
            return
        error = task.exception()
        if isinstance(error, RequestError):
            self._send_error(msg_id, error)
            return
        if error is not None:
            log.error("request %r failed", msg_id, exc_info=error)
            self._send({"jsonrpc": "2.0", "id": msg_id, "error": {
                "code": -32603, "message": f"internal error: {type(error).__name__}: {error}"}})
            return
        result = task.result()
        if isinstance(result, SerializedResult):
            self._write(b"".join((b'{"jsonrpc":"2.0","id":', json.dumps(msg_id).encode(),
                                  b',"result":', result, b"}")))
            if result.then is not None:
                self._keep(asyncio.ensure_future(result.then()), "after the response")
            return
        self._send({"jsonrpc": "2.0", "id": msg_id, "result": result})

    def _send_error(self, msg_id: Any, error: RequestError) -> None:
        body: dict[str, Any] = {"code": error.code, "message": error.message}
        if error.data is not None:
            body["data"] = error.data
        self._send({"jsonrpc": "2.0", "id": msg_id, "error": body})

    def _send(self, message: dict[str, Any]) -> None:
        self._write(json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode())

    def _write(self, body: bytes) -> None:
        if self.write is not None:
            self.write(body)

    def _keep(self, task: asyncio.Task[Any], what: str) -> None:
        """Hold a reference to ``task`` until it ends; log what it raised."""
        self._tasks.add(task)

        def done(task: asyncio.Task[Any]) -> None:
            self._tasks.discard(task)
            if not task.cancelled() and task.exception() is not None:
                log.error("%s failed", what, exc_info=task.exception())

        task.add_done_callback(done)


def _as_int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
