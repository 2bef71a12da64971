"""The scaffolding shared by the loopback fakes of model APIs (``fake_openai``, ``fake_anthropic``).

``ScriptedServer`` is a ``ThreadingHTTPServer`` on 127.0.0.1 (a free port) in a daemon thread,
with a strict script of replies: each request to the fake's one route takes the next reply; a
request with no reply left gets HTTP 500 and is recorded in ``failures``, as is a request to any
other route (HTTP 404). ``assert_script_complete`` fails on any failure and on any reply never
used. ``route(match, *replies)`` gives the requests ``match`` accepts a script of their own
(checked before the main one, first matching route first): what a test that runs several
conversations at once (a session and its subagents) scripts by content, not arrival order; a
matching request finding its route's script empty is a failure too. A reply can be held by a
``gate`` and a stream can ``stall`` until an ``until`` event;
closing the server sets every event a handler is waiting on, so nothing hangs. A request the
real API refuses (``_refuse``) is answered with that error without taking a reply, recorded in
``requests`` and ``refusals``; requests off the route that the API answers by itself
(``_serve_other``: a models list, a missing route's 404) go to ``other_requests``.

``ScriptedHandler`` serves one request. A fake subclasses it to say which path is its route
(``_is_route``), what its error bodies look like (``_error_body``), which headers start a stream
(``_stream_headers``), how a reply renders to bytes (``_frames``), and optionally what it
refuses (``_refuse``) and answers off the route (``_serve_other``); the server subclass names
its handler (``handler``), its messages' prefix (``label``) and its ``url``. ``compact`` and
``pieces`` help the fakes build their streams.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

__all__ = [
    "LoopbackHTTPServer",
    "ScriptedHandler",
    "ScriptedReply",
    "ScriptedServer",
    "compact",
    "pieces",
]


def compact(value: Any) -> str:
    """JSON as the model APIs send it: no spaces."""
    return json.dumps(value, separators=(",", ":"))


def pieces(text: str, size: int) -> list[str]:
    """``text`` in consecutive pieces of ``size`` characters (at least 1); the last may be short."""
    size = max(size, 1)
    return [text[start : start + size] for start in range(0, len(text), size)]


class ScriptedReply(Protocol):
    """What the shared handler reads of a fake's ``Reply``."""

    @property
    def ending(self) -> str: ...
    @property
    def status(self) -> int: ...
    @property
    def error_body(self) -> Mapping[str, Any] | None: ...
    @property
    def headers(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def gate(self) -> threading.Event | None: ...
    @property
    def until(self) -> threading.Event | None: ...


ReplyT = TypeVar("ReplyT", bound=ScriptedReply)

DROPPED = frozenset({"cut", "stall"})
"""The ``ending``s whose connection drops mid-body (no chunked terminator: the HTTP library
reports an incomplete body, as it does when a real stream is cut); any other ends the body."""


class ScriptedServer(Generic[ReplyT]):
    """The fake server: a ``ThreadingHTTPServer`` on 127.0.0.1 (a free port) in a daemon thread.

    Use it as a context manager, or call ``start`` and ``close``. All methods are thread-safe.
    """

    label: ClassVar[str]
    """The prefix of error messages, e.g. ``fake_openai``; the thread is named after it."""
    handler: ClassVar[type[ScriptedHandler]]

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._script: deque[ReplyT] = deque()
        self._routes: list[tuple[Callable[[dict[str, Any]], bool], deque[ReplyT]]] = []
        self._requests: list[dict[str, Any]] = []
        self._headers: list[dict[str, str]] = []
        self._refusals: list[tuple[int, int, str]] = []
        self._other: list[tuple[str, str]] = []
        self._failures: list[str] = []
        self._waiting: set[threading.Event] = set()
        self._closed = False
        self._httpd: LoopbackHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        """Bind and serve in a daemon thread; return self."""
        if self._httpd is None:
            self._httpd = LoopbackHTTPServer(("127.0.0.1", 0), self.handler, self)
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.02},  # how soon ``close`` is noticed
                name=self.label.replace("_", "-"),
                daemon=True,
            )
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and release every handler waiting on a gate or stall. Idempotent."""
        with self._condition:
            self._closed = True
            waiting, self._waiting = list(self._waiting), set()
            self._condition.notify_all()
        for event in waiting:
            event.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def _origin(self) -> str:
        """``http://127.0.0.1:PORT``; RuntimeError before ``start``."""
        if self._httpd is None:
            raise RuntimeError(f"{self.label}: not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A copy of the JSON bodies of the requests to the route, in arrival order."""
        with self._condition:
            return list(self._requests)

    @property
    def refusals(self) -> list[tuple[int, int, str]]:
        """``(request number from 1, status, message)`` of each request refused as the API
        would (a copy); refused requests are in ``requests`` too."""
        with self._condition:
            return list(self._refusals)

    @property
    def other_requests(self) -> list[tuple[str, str]]:
        """``(method, path)`` of the requests off the route answered by ``_serve_other``."""
        with self._condition:
            return list(self._other)

    @property
    def failures(self) -> list[str]:
        """What went wrong on the server side: unscripted or unexpected requests."""
        with self._condition:
            return list(self._failures)

    @property
    def unused_replies(self) -> list[ReplyT]:
        """Scripted replies no request has taken yet (the routes' after the main script's)."""
        with self._condition:
            return [*self._script, *(reply for _match, queue in self._routes for reply in queue)]

    def enqueue(self, *replies: ReplyT) -> None:
        """Append replies to the script; each request takes the next one."""
        with self._condition:
            self._script.extend(replies)

    def route(self, match: Callable[[dict[str, Any]], bool], *replies: ReplyT) -> None:
        """The requests whose JSON body ``match`` accepts take ``replies``, in order, instead
        of the main script's (a route added before another is tried first)."""
        with self._condition:
            self._routes.append((match, deque(replies)))

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Block until at least ``n`` requests arrived; return them all (a copy).

        Raises TimeoutError after ``timeout`` seconds.
        """
        with self._condition:
            if not self._condition.wait_for(lambda: len(self._requests) >= n, timeout):
                raise TimeoutError(
                    f"{self.label}: waited {timeout:g}s for {n} request(s), "
                    f"got {len(self._requests)}"
                )
            return list(self._requests)

    def assert_script_complete(self) -> None:
        """Fail unless every request had a scripted reply and every reply was used."""
        with self._condition:
            problems = list(self._failures)
            if self._script:
                problems.append(f"{len(self._script)} scripted reply(ies) never requested")
            for number, (_match, queue) in enumerate(self._routes, start=1):
                if queue:
                    problems.append(f"{len(queue)} reply(ies) of route {number} never requested")
        if problems:
            raise AssertionError(f"{self.label}: " + "; ".join(problems))

    def _record_failure(self, message: str) -> None:
        with self._condition:
            self._failures.append(message)

    def _take(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, ReplyT | None]:
        """Record a request; return its number (from 1) and its reply, if one is scripted."""
        with self._condition:
            self._requests.append(body)
            self._headers.append(headers)
            number = len(self._requests)
            script = next((queue for match, queue in self._routes if match(body)), self._script)
            reply = script.popleft() if script else None
            if reply is None:
                self._failures.append(f"no scripted reply for request {number}")
            self._condition.notify_all()
            return number, reply

    def _refused(self, body: dict[str, Any], headers: dict[str, str], status: int,
                 message: str) -> None:
        with self._condition:
            self._requests.append(body)
            self._headers.append(headers)
            self._refusals.append((len(self._requests), status, message))
            self._condition.notify_all()

    def _answered_other(self, method: str, path: str) -> None:
        with self._condition:
            self._other.append((method, path))

    def _wait(self, event: threading.Event) -> bool:
        """Wait until ``event`` is set or the server closes; True unless it closed."""
        with self._condition:
            if self._closed:
                return False
            self._waiting.add(event)
        event.wait()
        with self._condition:
            self._waiting.discard(event)
            return not self._closed


class LoopbackHTTPServer(ThreadingHTTPServer):
    """The HTTP server of a ``ScriptedServer``, which handlers reach as ``self.server.fake``."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # socketserver's 5 refuses connections when 50 sessions call at once

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[ScriptedHandler],
        fake: ScriptedServer[Any],
    ) -> None:
        self.fake = fake
        super().__init__(address, handler)


class ScriptedHandler(BaseHTTPRequestHandler):
    """Serves one request: the next scripted reply on the fake's route, 404 for anything else."""

    protocol_version = "HTTP/1.1"
    server: LoopbackHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request log lines on stderr."""

    # What a fake's handler says -----------------------------------------------------------

    def _is_route(self) -> bool:
        """Whether ``self.path`` is the route that takes scripted replies."""
        raise NotImplementedError

    def _error_body(self, status: int, message: str) -> Mapping[str, Any]:
        """The JSON error body the API sends with ``status`` (404 or 500 here)."""
        raise NotImplementedError

    def _stream_headers(self) -> Sequence[tuple[str, str]]:
        """The headers of a streamed reply, before the reply's own."""
        raise NotImplementedError

    def _frames(self, reply: Any, request: Mapping[str, Any]) -> Iterable[bytes]:
        """The bytes of ``reply``'s stream for ``request``, one write each."""
        raise NotImplementedError

    def _refuse(self, request: Mapping[str, Any]) -> tuple[int, Mapping[str, Any]] | None:
        """The error (status, JSON body) the real API answers ``request`` with before it
        generates anything, or None. Default: none."""
        return None

    def _serve_other(self) -> tuple[int, Mapping[str, Any]] | None:
        """The answer (status, JSON body) to a request off the route that the API gives by
        itself (``self.command``, ``self.path``), or None: an unexpected request."""
        return None

    # The shared serving -----------------------------------------------------------------

    def do_GET(self) -> None:
        self.close_connection = True
        if not self._other_answered():
            self._unexpected()

    def _other_answered(self) -> bool:
        answer = self._serve_other()
        if answer is None:
            return False
        self.server.fake._answered_other(self.command, self.path)
        try:
            self._send_json(answer[0], answer[1], ())
        except OSError:
            pass
        return True

    def do_POST(self) -> None:
        self.close_connection = True
        fake = self.server.fake
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self._is_route():
            if not self._other_answered():
                self._unexpected()
            return
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"_unparsed_body": raw.decode("utf-8", "replace")}
        headers = {name.lower(): value for name, value in self.headers.items()}
        refusal = self._refuse(body)
        if refusal is not None:
            status, error = refusal
            inner = error.get("error")
            message = str(inner.get("message") if isinstance(inner, Mapping) else error)
            fake._refused(body, headers, status, message)
            try:
                self._send_json(status, error, ())
            except OSError:
                pass
            return
        number, reply = fake._take(body, headers)
        try:
            if reply is None:
                message = f"{fake.label}: no scripted reply for request {number}"
                self._send_json(500, self._error_body(500, message), ())
            else:
                self._send_reply(reply, body)
        except OSError:
            pass  # the client went away: nothing to tell it

    def _unexpected(self) -> None:
        self.close_connection = True
        fake = self.server.fake
        fake._record_failure(f"unexpected {self.command} {self.path}")
        message = f"{fake.label}: no route for {self.command} {self.path}"
        self._send_json(404, self._error_body(404, message), ())

    def _send_json(
        self, status: int, body: Mapping[str, Any], headers: Sequence[tuple[str, str]]
    ) -> None:
        data = compact(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_reply(self, reply: Any, request: Mapping[str, Any]) -> None:
        """Wait for the gate, then send the error body or the event stream and its ending."""
        fake = self.server.fake
        if reply.gate is not None and not fake._wait(reply.gate):
            return
        if reply.error_body is not None:
            self._send_json(reply.status, reply.error_body, reply.headers)
            return
        # Chunked, as the APIs stream (unless a test sets a Content-Length of its own): a
        # reply that ends cleanly ends its body; a cut one drops the connection mid-body.
        chunked = not any(name.lower() == "content-length" for name, _ in reply.headers)
        self.send_response(reply.status)
        for name, value in [*self._stream_headers(), *reply.headers,
                            *([("Transfer-Encoding", "chunked")] if chunked else [])]:
            self.send_header(name, value)
        self.end_headers()
        for frame in self._frames(reply, request):
            if not frame:
                continue  # an empty chunk would end the body
            self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame) if chunked else frame)
            self.wfile.flush()
        if reply.ending == "stall":
            fake._wait(reply.until or threading.Event())
        elif chunked and reply.ending not in DROPPED:
            self.wfile.write(b"0\r\n\r\n")
