"""A loopback HTTP server that speaks OpenAI's Chat Completions SSE wire format, for tests.

Script replies, point a client (``OpenAIProvider`` or a ``tiller --base-url`` subprocess) at
``fake.url``, and read what was sent from ``fake.requests``::

    with FakeOpenAI() as fake:
        fake.enqueue(text_reply("Hello!"), tool_call_reply([("call_1", "read", {"path": "a"})]))
        ...  # run the client against fake.url
        assert fake.requests[0]["model"] == "gpt-4o-mini"
    fake.assert_script_complete()

Each POST to ``/v1/chat/completions`` takes the next scripted reply. The script is strict: a
request with no reply left gets HTTP 500 (``fake_openai: no scripted reply for request N``, N
counting from 1) and is recorded in ``failures``; ``assert_script_complete`` fails on any failure
and on any reply never used. The ``fake_openai`` fixture in conftest.py checks this at teardown.

Replies are built by ``text_reply``, ``tool_call_reply``, ``error_reply``, ``empty_reply``,
``cut_reply``, ``stall_reply`` and ``sse_reply``. Any reply can be held by a ``gate``: the server
sends nothing after the request arrives until the gate (a ``threading.Event``) is set. Closing
the server sets every gate and ``until`` event a handler is waiting on, so nothing hangs.

Streams look like OpenAI's: ``data: <chunk JSON>`` events separated by blank lines, the first
delta carrying ``role: "assistant"``, a final chunk with ``finish_reason``, then (when the request
asked for ``stream_options.include_usage``) a chunk with ``"choices": []`` and ``usage``, then
``data: [DONE]``. Responses are HTTP/1.1 with ``Connection: close`` and no Content-Length.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

__all__ = [
    "FakeOpenAI",
    "Reply",
    "ToolCallSpec",
    "chunk",
    "cut_reply",
    "empty_reply",
    "error_reply",
    "sse_reply",
    "stall_reply",
    "text_reply",
    "tool_call_reply",
]

ToolCallSpec = tuple[str | None, str, "Mapping[str, Any] | str"]
"""``(id, name, arguments)``: arguments as a dict (sent as compact JSON) or a raw string (sent
verbatim, e.g. truncated JSON). An id of None omits ``id`` from the chunks."""

Delta = tuple[dict[str, Any], str | None]
"""One choice chunk to send: ``(delta, finish_reason)``."""


@dataclass(frozen=True)
class Reply:
    """One scripted response; build it with the ``*_reply`` functions.

    ``ending`` says what happens after ``events``: ``complete`` sends the usage chunk (if asked
    for) and ``[DONE]``; ``cut`` closes the connection; ``stall`` waits for ``until`` (or the
    server closing), then closes. Raw string events are sent verbatim as ``data:`` payloads.
    """

    events: tuple[Delta | str, ...] = ()
    ending: Literal["complete", "cut", "stall"] = "complete"
    usage: tuple[int, int, int] | None = None
    status: int = 200
    error_body: Mapping[str, Any] | None = None
    headers: tuple[tuple[str, str], ...] = ()
    gate: threading.Event | None = None
    until: threading.Event | None = None

    def released_when(self, event: threading.Event) -> Reply:
        """This reply, held until ``event`` is set (same as passing ``gate=event``)."""
        return dataclasses.replace(self, gate=event)


# ---------------------------------------------------------------------------------------------
# Reply builders


def _compact(value: Any) -> str:
    """JSON as OpenAI sends it: no spaces."""
    return json.dumps(value, separators=(",", ":"))


def _pieces(text: str, size: int) -> list[str]:
    size = max(size, 1)
    return [text[start : start + size] for start in range(0, len(text), size)]


def _text_events(text: str, chunk_size: int, reasoning: str | None) -> list[Delta]:
    events: list[Delta] = [({"role": "assistant", "content": "", "refusal": None}, None)]
    for piece in _pieces(reasoning or "", chunk_size):
        events.append(({"reasoning_content": piece}, None))
    for piece in _pieces(text, chunk_size):
        events.append(({"content": piece}, None))
    return events


def text_reply(
    text: str,
    *,
    chunk_size: int = 4,
    finish_reason: str = "stop",
    usage: tuple[int, int] = (10, 5),
    cached_tokens: int = 0,
    reasoning: str | None = None,
    gate: threading.Event | None = None,
) -> Reply:
    """``text`` streamed ``chunk_size`` characters per chunk, after ``reasoning`` (sent as
    ``delta.reasoning_content``, as DeepSeek and vLLM do). ``usage`` is (prompt, completion)
    tokens; ``cached_tokens`` goes to ``prompt_tokens_details.cached_tokens``."""
    events = [*_text_events(text, chunk_size, reasoning), ({}, finish_reason)]
    return Reply(events=tuple(events), usage=(*usage, cached_tokens), gate=gate)


def tool_call_reply(
    calls: Sequence[ToolCallSpec],
    *,
    text: str | None = None,
    chunk_size: int = 4,
    fragment_size: int = 5,
    finish_reason: str = "tool_calls",
    usage: tuple[int, int] = (10, 5),
    gate: threading.Event | None = None,
) -> Reply:
    """Optional ``text``, then each call as OpenAI streams it: a first chunk with index, id,
    type, function.name and ``arguments: ""``, then chunks with only index and an argument
    fragment of ``fragment_size`` characters."""
    events: list[Delta] = _text_events(text, chunk_size, None) if text else []
    for index, (call_id, name, arguments) in enumerate(calls):
        raw = arguments if isinstance(arguments, str) else _compact(arguments)
        opening: dict[str, Any] = {"index": index}
        if call_id is not None:
            opening["id"] = call_id
        opening.update({"type": "function", "function": {"name": name, "arguments": ""}})
        delta: dict[str, Any] = {"tool_calls": [opening]}
        if not events:
            delta = {"role": "assistant", "content": None, **delta, "refusal": None}
        events.append((delta, None))
        for fragment in _pieces(raw, fragment_size):
            fragment_call = {"index": index, "function": {"arguments": fragment}}
            events.append(({"tool_calls": [fragment_call]}, None))
    events.append(({}, finish_reason))
    return Reply(events=tuple(events), usage=(*usage, 0), gate=gate)


def error_reply(
    status: int,
    message: str,
    *,
    type: str | None = None,
    code: str | None = None,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
    gate: threading.Event | None = None,
) -> Reply:
    """HTTP ``status`` with OpenAI's error body ``{"error": {message, type, param, code}}``.
    ``type`` defaults as OpenAI's: ``server_error`` for 5xx, ``requests`` for 429, else
    ``invalid_request_error``. ``headers`` (e.g. ``retry-after``) are added to the response."""
    default_type = {429: "requests"}.get(status, "invalid_request_error")
    error_type = type or ("server_error" if status >= 500 else default_type)
    body = {"error": {"message": message, "type": error_type, "param": param, "code": code}}
    return Reply(status=status, error_body=body, headers=tuple((headers or {}).items()), gate=gate)


def empty_reply(*, gate: threading.Event | None = None) -> Reply:
    """HTTP 200 with ``text/event-stream`` headers, then the connection closes with no data."""
    return Reply(ending="cut", gate=gate)


def cut_reply(
    text: str = "This answer is cut short",
    *,
    after_chunks: int = 2,
    chunk_size: int = 4,
    gate: threading.Event | None = None,
) -> Reply:
    """The first ``after_chunks`` events of ``text_reply(text)`` (the role chunk counts), then
    the connection closes: no finish_reason, no usage, no ``[DONE]``."""
    events = _text_events(text, chunk_size, None)[:after_chunks]
    return Reply(events=tuple(events), ending="cut", gate=gate)


def stall_reply(
    text: str = "",
    *,
    chunk_size: int = 4,
    until: threading.Event | None = None,
    gate: threading.Event | None = None,
) -> Reply:
    """HTTP 200 headers, then the chunks of ``text`` if any (no finish_reason), then nothing
    until ``until`` is set or the server closes; then the connection closes."""
    events = _text_events(text, chunk_size, None) if text else []
    return Reply(events=tuple(events), ending="stall", until=until, gate=gate)


def sse_reply(
    *events: Mapping[str, Any] | str,
    done: bool = True,
    gate: threading.Event | None = None,
) -> Reply:
    """Exactly these ``data:`` events: a mapping is sent as JSON (build one with ``chunk``), a
    string verbatim (e.g. malformed JSON). Ends with ``[DONE]`` if ``done``, else just closes."""
    raw = tuple(event if isinstance(event, str) else _compact(event) for event in events)
    return Reply(events=raw, ending="complete" if done else "cut", gate=gate)


def chunk(
    delta: Mapping[str, Any] | None,
    finish_reason: str | None = None,
    *,
    usage: Mapping[str, Any] | None = None,
    model: str = "gpt-4o-mini",
    chunk_id: str = "chatcmpl-fake",
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` object; ``delta=None`` gives ``"choices": []``."""
    choices = []
    if delta is not None:
        choices = [
            {"index": 0, "delta": dict(delta), "logprobs": None, "finish_reason": finish_reason}
        ]
    return {
        "id": chunk_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": choices,
        "usage": dict(usage) if usage is not None else None,
    }


def _usage_json(prompt: int, completion: int, cached: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }


def _render(reply: Reply, request: Mapping[str, Any]) -> Iterator[str]:
    """The ``data:`` payloads of ``reply`` for ``request`` (its model, whether usage is wanted)."""
    model = str(request.get("model", "gpt-4o-mini"))
    chunk_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    options = request.get("stream_options")
    wants_usage = isinstance(options, Mapping) and bool(options.get("include_usage"))
    for event in reply.events:
        if isinstance(event, str):
            yield event
            continue
        delta, finish_reason = event
        payload = chunk(delta, finish_reason, model=model, chunk_id=chunk_id)
        if not wants_usage:
            del payload["usage"]
        yield _compact(payload)
    if reply.ending == "complete":
        if wants_usage and reply.usage is not None:
            usage = _usage_json(*reply.usage)
            yield _compact(chunk(None, usage=usage, model=model, chunk_id=chunk_id))
        yield "[DONE]"


# ---------------------------------------------------------------------------------------------
# The server


class FakeOpenAI:
    """The fake server: a ``ThreadingHTTPServer`` on 127.0.0.1 (a free port) in a daemon thread.

    Use it as a context manager, or call ``start`` and ``close``. All methods are thread-safe.
    """

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._script: deque[Reply] = deque()
        self._requests: list[dict[str, Any]] = []
        self._failures: list[str] = []
        self._waiting: set[threading.Event] = set()
        self._closed = False
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> FakeOpenAI:
        """Bind and serve in a daemon thread; return self."""
        if self._httpd is None:
            self._httpd = _Server(("127.0.0.1", 0), _Handler, self)
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.02},  # how soon ``close`` is noticed
                name="fake-openai",
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

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def url(self) -> str:
        """The base URL to give a client: ``http://127.0.0.1:PORT/v1``."""
        if self._httpd is None:
            raise RuntimeError("fake_openai: not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A copy of the JSON bodies of the chat completion requests, in arrival order."""
        with self._condition:
            return list(self._requests)

    @property
    def failures(self) -> list[str]:
        """What went wrong on the server side: unscripted or unexpected requests."""
        with self._condition:
            return list(self._failures)

    @property
    def unused_replies(self) -> list[Reply]:
        """Scripted replies no request has taken yet."""
        with self._condition:
            return list(self._script)

    def enqueue(self, *replies: Reply) -> None:
        """Append replies to the script; each request takes the next one."""
        with self._condition:
            self._script.extend(replies)

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Block until at least ``n`` requests arrived; return them all (a copy).

        Raises TimeoutError after ``timeout`` seconds.
        """
        with self._condition:
            if not self._condition.wait_for(lambda: len(self._requests) >= n, timeout):
                raise TimeoutError(
                    f"fake_openai: waited {timeout:g}s for {n} request(s), "
                    f"got {len(self._requests)}"
                )
            return list(self._requests)

    def assert_script_complete(self) -> None:
        """Fail unless every request had a scripted reply and every reply was used."""
        with self._condition:
            problems = list(self._failures)
            if self._script:
                problems.append(f"{len(self._script)} scripted reply(ies) never requested")
        if problems:
            raise AssertionError("fake_openai: " + "; ".join(problems))

    def _record_failure(self, message: str) -> None:
        with self._condition:
            self._failures.append(message)

    def _take(self, body: dict[str, Any]) -> tuple[int, Reply | None]:
        """Record a request; return its number (from 1) and its reply, if one is scripted."""
        with self._condition:
            self._requests.append(body)
            number = len(self._requests)
            reply = self._script.popleft() if self._script else None
            if reply is None:
                self._failures.append(f"no scripted reply for request {number}")
            self._condition.notify_all()
            return number, reply

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


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], handler: type[_Handler], fake: FakeOpenAI) -> None:
        self.fake = fake
        super().__init__(address, handler)


class _Handler(BaseHTTPRequestHandler):
    """Serves one request: the next scripted reply for chat completions, 404 for anything else."""

    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request log lines on stderr."""

    def do_GET(self) -> None:
        self._unexpected()

    def do_POST(self) -> None:
        self.close_connection = True
        fake = self.server.fake
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._unexpected()
            return
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"_unparsed_body": raw.decode("utf-8", "replace")}
        number, reply = fake._take(body)
        try:
            if reply is None:
                message = f"fake_openai: no scripted reply for request {number}"
                error = {"message": message, "type": "server_error", "param": None, "code": None}
                self._send_json(500, {"error": error}, ())
            else:
                self._send_reply(reply, body)
        except OSError:
            pass  # the client went away: nothing to tell it

    def _unexpected(self) -> None:
        self.close_connection = True
        self.server.fake._record_failure(f"unexpected {self.command} {self.path}")
        message = f"fake_openai: no route for {self.command} {self.path}"
        error = {"message": message, "type": "invalid_request_error", "param": None, "code": None}
        self._send_json(404, {"error": error}, ())

    def _send_json(
        self, status: int, body: Mapping[str, Any], headers: Sequence[tuple[str, str]]
    ) -> None:
        data = _compact(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_reply(self, reply: Reply, request: Mapping[str, Any]) -> None:
        """Wait for the gate, then send the error body or the event stream and its ending."""
        fake = self.server.fake
        if reply.gate is not None and not fake._wait(reply.gate):
            return
        if reply.error_body is not None:
            self._send_json(reply.status, reply.error_body, reply.headers)
            return
        self.send_response(reply.status)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        for name, value in reply.headers:
            self.send_header(name, value)
        self.end_headers()
        for payload in _render(reply, request):
            self.wfile.write(f"data: {payload}\n\n".encode())
        if reply.ending == "stall":
            fake._wait(reply.until or threading.Event())
