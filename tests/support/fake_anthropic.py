"""A loopback HTTP server that speaks Anthropic's Messages SSE wire format, for tests.

Script replies, point a client (``AnthropicProvider`` or ``anthropic.AsyncAnthropic``) at
``fake.url`` (the SDK appends ``/v1/messages`` itself), and read what was sent from
``fake.requests`` (JSON bodies) and ``fake.request_headers``::

    with FakeAnthropic() as fake:
        fake.enqueue(text_reply("Hello!"), tool_use_reply([("toolu_1", "read", {"path": "a"})]))
        ...  # run the client against fake.url
        assert fake.requests[0]["model"] == "claude-test"
    fake.assert_script_complete()

Each POST to ``/v1/messages`` takes the next scripted reply (``loopback.ScriptedServer`` serves
and keeps the script). The script is strict: a request with no reply left gets HTTP 500 with
Anthropic's error body (``fake_anthropic: no scripted reply for request N``, N counting from 1)
and is recorded in ``failures``; ``assert_script_complete`` fails on any failure and on any reply
never used. The ``fake_anthropic`` fixture in conftest.py checks this at teardown.

Replies are built by ``text_reply``, ``tool_use_reply``, ``error_reply``, ``empty_reply``,
``cut_reply``, ``stall_reply``, ``stream_error_reply`` and ``sse_reply``. Any reply can be held by
a ``gate``: the server sends nothing after the request arrives until the gate (a
``threading.Event``) is set. Closing the server sets every gate and ``until`` event a handler is
waiting on, so nothing hangs.

Streams look like Anthropic's: ``event: <name>`` and ``data: <compact JSON>`` lines, a blank line
after each event: ``message_start`` (usage with input and cache tokens), then per content block
``content_block_start``, ``content_block_delta``s and ``content_block_stop`` (a ``ping`` after
the first block starts), then ``message_delta`` (``stop_reason`` and ``usage.output_tokens``) and
``message_stop``. Errors are JSON ``{"type": "error", "error": {"type", "message"}}`` with a
``request-id`` header. Responses are HTTP/1.1 with ``Connection: close``; streams have no
Content-Length.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from support.loopback import ScriptedHandler, ScriptedServer
from support.loopback import compact as _compact
from support.loopback import pieces as _pieces

__all__ = [
    "ERROR_TYPES",
    "Event",
    "FakeAnthropic",
    "Reply",
    "ToolUseSpec",
    "cut_reply",
    "empty_reply",
    "error_reply",
    "message_start",
    "sse_event",
    "sse_reply",
    "stall_reply",
    "stream_error_reply",
    "text_reply",
    "tool_use_reply",
]

ToolUseSpec = tuple[str, str, "Mapping[str, Any] | str"]
"""``(id, name, input)``: input as a dict (sent as compact JSON fragments) or a raw string (sent
verbatim, e.g. truncated JSON)."""

Event = tuple[str, "Mapping[str, Any] | str"]
"""One SSE event: ``(event name, data)``; data as a mapping (sent as compact JSON) or a string
(sent verbatim, e.g. malformed JSON)."""

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
"""Anthropic's ``error.type`` per HTTP status; other statuses use ``api_error``."""


@dataclass(frozen=True)
class Reply:
    """One scripted response; build it with the ``*_reply`` functions.

    ``events`` are sent in order; then ``ending`` says what happens: ``close`` closes the
    connection; ``stall`` waits for ``until`` (or the server closing), then closes. A
    ``message_start`` whose message has ``"model": None`` gets the request's model.
    """

    events: tuple[Event, ...] = ()
    ending: Literal["close", "stall"] = "close"
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


def message_start(usage: tuple[int, int] = (10, 1), cache: tuple[int, int] = (0, 0)) -> Event:
    """``message_start`` with an empty message; ``usage`` is (input, output) tokens and
    ``cache`` is (cache read, cache write) tokens."""
    message: dict[str, Any] = {
        "id": f"msg_fake{uuid.uuid4().hex[:20]}",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": None,
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage[0],
            "cache_creation_input_tokens": cache[1],
            "cache_read_input_tokens": cache[0],
            "output_tokens": usage[1],
        },
    }
    return sse_event("message_start", message=message)


def sse_event(name: str, **fields: Any) -> Event:
    """One event as Anthropic sends it: the data's ``type`` is the event's name."""
    return (name, {"type": name, **fields})


def _block(
    index: int, block: Mapping[str, Any], deltas: Sequence[Mapping[str, Any]]
) -> list[Event]:
    """One content block: start, its deltas, stop (a ``ping`` follows the first start)."""
    events = [sse_event("content_block_start", index=index, content_block=dict(block))]
    if index == 0:
        events.append(sse_event("ping"))
    events += [sse_event("content_block_delta", index=index, delta=dict(d)) for d in deltas]
    return [*events, sse_event("content_block_stop", index=index)]


def _thinking_block(index: int, thinking: str, signature: str | None, size: int) -> list[Event]:
    deltas: list[Mapping[str, Any]] = [
        {"type": "thinking_delta", "thinking": piece} for piece in _pieces(thinking, size)
    ]
    if signature is not None:
        deltas.append({"type": "signature_delta", "signature": signature})
    return _block(index, {"type": "thinking", "thinking": "", "signature": ""}, deltas)


def _text_block(index: int, text: str, size: int) -> list[Event]:
    deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(text, size)]
    return _block(index, {"type": "text", "text": ""}, deltas)


def _ending(stop_reason: str | None, output_tokens: int) -> list[Event]:
    """``message_delta`` with the stop reason and cumulative output tokens, ``message_stop``."""
    delta = {"stop_reason": stop_reason, "stop_sequence": None}
    return [
        sse_event("message_delta", delta=delta, usage={"output_tokens": output_tokens}),
        sse_event("message_stop"),
    ]


def _text_events(
    text: str, chunk_size: int, thinking: str | None, signature: str | None
) -> list[Event]:
    """The content blocks of a text reply: an optional thinking block, then a text block."""
    events: list[Event] = []
    if thinking is not None:
        events += _thinking_block(0, thinking, signature, chunk_size)
    return events + _text_block(1 if thinking is not None else 0, text, chunk_size)


def text_reply(
    text: str,
    *,
    chunk_size: int = 4,
    stop_reason: str = "end_turn",
    usage: tuple[int, int] = (10, 5),
    cache: tuple[int, int] = (0, 0),
    thinking: str | None = None,
    signature: str | None = "sig-fake",
    gate: threading.Event | None = None,
) -> Reply:
    """``text`` streamed ``chunk_size`` characters per ``text_delta``, after a thinking block
    when ``thinking`` is given (its ``thinking_delta``s, then a ``signature_delta`` with
    ``signature`` unless None). ``usage`` is (input, output) tokens; ``cache`` is (cache read,
    cache write) tokens, reported in ``message_start``."""
    events = [
        message_start((usage[0], 1), cache),
        *_text_events(text, chunk_size, thinking, signature),
        *_ending(stop_reason, usage[1]),
    ]
    return Reply(events=tuple(events), gate=gate)


def tool_use_reply(
    calls: Sequence[ToolUseSpec],
    *,
    text: str | None = None,
    chunk_size: int = 4,
    fragment_size: int = 5,
    stop_reason: str = "tool_use",
    usage: tuple[int, int] = (10, 5),
    thinking: str | None = None,
    signature: str | None = "sig-fake",
    gate: threading.Event | None = None,
) -> Reply:
    """Optional thinking and ``text`` blocks, then one ``tool_use`` block per call as Anthropic
    streams it: ``content_block_start`` with id, name and ``input: {}``, then
    ``input_json_delta``s of ``fragment_size`` characters of the input JSON."""
    events: list[Event] = [message_start((usage[0], 1))]
    index = 0
    if thinking is not None:
        events += _thinking_block(index, thinking, signature, chunk_size)
        index += 1
    if text is not None:
        events += _text_block(index, text, chunk_size)
        index += 1
    for call_id, name, arguments in calls:
        raw = arguments if isinstance(arguments, str) else _compact(arguments)
        block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        deltas = [
            {"type": "input_json_delta", "partial_json": piece}
            for piece in ["", *_pieces(raw, fragment_size)]  # Anthropic opens with ""
        ]
        events += _block(index, block, deltas)
        index += 1
    events += _ending(stop_reason, usage[1])
    return Reply(events=tuple(events), gate=gate)


def error_reply(
    status: int,
    message: str,
    *,
    type: str | None = None,
    headers: Mapping[str, str] | None = None,
    gate: threading.Event | None = None,
) -> Reply:
    """HTTP ``status`` with Anthropic's error body ``{"type": "error", "error": {type,
    message}}``; ``type`` defaults from ``ERROR_TYPES``. ``headers`` (e.g. ``retry-after``) are
    added to the response, after a ``request-id``."""
    error_type = type or ERROR_TYPES.get(status, "api_error")
    body = {"type": "error", "error": {"type": error_type, "message": message}}
    all_headers = [("request-id", f"req_fake{uuid.uuid4().hex[:20]}"), *(headers or {}).items()]
    return Reply(status=status, error_body=body, headers=tuple(all_headers), gate=gate)


def empty_reply(*, gate: threading.Event | None = None) -> Reply:
    """HTTP 200 with ``text/event-stream`` headers, then the connection closes with no event."""
    return Reply(gate=gate)


def cut_reply(
    text: str = "This answer is cut short",
    *,
    after_events: int = 4,
    chunk_size: int = 4,
    gate: threading.Event | None = None,
) -> Reply:
    """The first ``after_events`` events of ``text_reply(text)`` (``message_start``,
    ``content_block_start`` and ``ping`` count), then the connection closes: no
    ``message_delta``, no ``message_stop``."""
    events = text_reply(text, chunk_size=chunk_size).events[:after_events]
    return Reply(events=events, gate=gate)


def stall_reply(
    text: str = "",
    *,
    chunk_size: int = 4,
    until: threading.Event | None = None,
    gate: threading.Event | None = None,
) -> Reply:
    """HTTP 200 headers, then (if ``text``) ``message_start``, a text block's start, ``ping``
    and its deltas, then nothing until ``until`` is set or the server closes; then the
    connection closes."""
    events: list[Event] = []
    if text:
        events = [message_start(), *_text_block(0, text, chunk_size)[:-1]]
    return Reply(events=tuple(events), ending="stall", until=until, gate=gate)


def stream_error_reply(
    text: str = "Partial answer",
    *,
    type: str = "overloaded_error",
    message: str = "Overloaded",
    chunk_size: int = 4,
    gate: threading.Event | None = None,
) -> Reply:
    """HTTP 200, ``message_start`` and the start and deltas of a text block with ``text``, then
    an ``error`` event ``{"type": "error", "error": {type, message}}`` (as Anthropic sends when
    it overloads mid-stream), then the connection closes."""
    error = sse_event("error", error={"type": type, "message": message})
    events = [message_start(), *_text_block(0, text, chunk_size)[:-1], error]
    return Reply(events=tuple(events), gate=gate)


def sse_reply(*events: Event, gate: threading.Event | None = None) -> Reply:
    """Exactly these events (build them with ``sse_event``), then the connection closes."""
    return Reply(events=tuple(events), gate=gate)


def _render(reply: Reply, request: Mapping[str, Any]) -> Iterator[str]:
    """The SSE frames of ``reply`` for ``request`` (its model fills ``message_start``)."""
    model = str(request.get("model", "claude-fake"))
    for name, data in reply.events:
        if isinstance(data, str):
            yield f"event: {name}\ndata: {data}\n\n"
            continue
        if name == "message_start" and data["message"].get("model") is None:
            data = {**data, "message": {**data["message"], "model": model}}
        yield f"event: {name}\ndata: {_compact(data)}\n\n"


# ---------------------------------------------------------------------------------------------
# The server


def _error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


class _Handler(ScriptedHandler):
    """Serves one request: the next scripted reply for ``/v1/messages``, 404 for anything else."""

    def _is_route(self) -> bool:
        return self.path.split("?")[0].rstrip("/") == "/v1/messages"

    def _error_body(self, status: int, message: str) -> dict[str, Any]:
        return _error_body("api_error" if status >= 500 else "not_found_error", message)

    def _stream_headers(self) -> list[tuple[str, str]]:
        return [
            ("Content-Type", "text/event-stream; charset=utf-8"),
            ("Cache-Control", "no-cache"),
            ("Connection", "close"),
            ("request-id", f"req_fake{uuid.uuid4().hex[:20]}"),
        ]

    def _frames(self, reply: Reply, request: Mapping[str, Any]) -> Iterator[bytes]:
        for frame in _render(reply, request):
            yield frame.encode()


class FakeAnthropic(ScriptedServer[Reply]):
    """The fake Messages server, which also records ``request_headers``; the script, lifecycle
    and thread-safe methods are ``loopback.ScriptedServer``'s."""

    label = "fake_anthropic"
    handler = _Handler

    @property
    def url(self) -> str:
        """The base URL to give a client: ``http://127.0.0.1:PORT`` (no ``/v1``)."""
        return self._origin

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """The headers of each message request (names lower-cased), in arrival order."""
        with self._condition:
            return [dict(headers) for headers in self._headers]
