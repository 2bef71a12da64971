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

It also refuses what the real API refuses, with its texts, before any reply is taken (the
request is recorded, in ``requests`` and ``refusals``; the reply stays for the next request): a
model its ``models`` table lists as retired (404 ``not_found_error`` ``model: <id>``);
``thinking.type: enabled`` on a model that does not accept it (400: ``"thinking.type.enabled" is
not supported for this model. Use "thinking.type.adaptive" and "output_config.effort" to control
thinking behavior.``) and ``thinking.type: adaptive`` on one that does not (400: ``adaptive
thinking is not supported on this model``); more than 4 ``cache_control`` blocks (400: ``A
maximum of 4 blocks with cache_control may be provided. Found N.``); a tool whose
``input_schema`` has ``oneOf``, ``allOf`` or ``anyOf`` at its top level (400:
``tools.N.custom.input_schema: input_schema does not support oneOf, allOf, or anyOf at the top
level``). Ids the table does not list are accepted.

``GET /v1/models`` lists ``models`` (``anthropic_model`` builds entries shaped as the SDK's
``ModelInfo``: capabilities, context window, output limit, line, lifecycle and its dates),
active and deprecated ones unless ``lifecycle[]`` asks for others, paginated by ``limit`` and
``after_id``; ``GET /v1/models/{id}`` returns one. ``models_requests`` counts them.

Usage is the real accounting of the request (``anthropic_cache.CacheLedger``: prefixes cached at
``cache_control`` breakpoints, read back within their TTL, each model's minimum cacheable
length from ``min_cache_tokens``), unless a reply gives ``usage``/``cache`` explicitly.

Replies are built by ``text_reply``, ``tool_use_reply``, ``error_reply``, ``empty_reply``,
``cut_reply``, ``stall_reply``, ``stream_error_reply`` and ``sse_reply``. Any reply can be held by
a ``gate``: the server sends nothing after the request arrives until the gate (a
``threading.Event``) is set. Closing the server sets every gate and ``until`` event a handler is
waiting on, so nothing hangs.

Streams look like Anthropic's: ``event: <name>`` and ``data: <compact JSON>`` lines, a blank line
after each event: ``message_start`` (usage with input and cache tokens, the cache writes by
TTL, the service tier), then per content block ``content_block_start``,
``content_block_delta``s and ``content_block_stop`` (a ``ping`` after the first block starts),
then ``message_delta`` (``stop_reason`` and the cumulative usage) and ``message_stop``.
Errors are JSON ``{"type": "error", "error": {"type", "message"}}`` with a ``request-id``
header. Responses are HTTP/1.1 with ``Connection: close``; a stream is sent as the API sends it,
``Transfer-Encoding: chunked`` (tests/support/loopback.py).
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qs

from support.anthropic_cache import CacheLedger, CacheUsage, cache_control_count
from support.loopback import ScriptedHandler, ScriptedServer
from support.loopback import compact as _compact
from support.loopback import pieces as _pieces

__all__ = [
    "ADAPTIVE_ONLY_ERROR",
    "CACHE_LIMIT_ERROR",
    "DEFAULT_MODELS",
    "ERROR_TYPES",
    "NO_ADAPTIVE_ERROR",
    "Event",
    "FakeAnthropic",
    "Reply",
    "ToolUseSpec",
    "anthropic_model",
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

ADAPTIVE_ONLY_ERROR = ('"thinking.type.enabled" is not supported for this model. Use '
                       '"thinking.type.adaptive" and "output_config.effort" to control thinking '
                       'behavior.')
NO_ADAPTIVE_ERROR = "adaptive thinking is not supported on this model"
CACHE_LIMIT_ERROR = "A maximum of 4 blocks with cache_control may be provided. Found {}."
TOP_LEVEL_UNION_ERROR = ("tools.{}.custom.input_schema: input_schema does not support oneOf, "
                         "allOf, or anyOf at the top level")
_LEVELS = ("low", "medium", "high", "xhigh", "max")


def anthropic_model(
    model_id: str, *, display_name: str | None = None, created_at: str = "2026-01-01",
    line: str | None = None, lifecycle: str = "active", deprecated_at: str | None = None,
    retires_at: str | None = None, max_input_tokens: int = 1_000_000,
    max_tokens: int = 128_000, thinking: Sequence[str] = ("adaptive", "disabled"),
    efforts: Sequence[str] = _LEVELS,
) -> dict[str, Any]:
    """One entry of ``GET /v1/models`` as the SDK's ``ModelInfo`` (every capability key is
    present, as the API promises): ``thinking`` names the ``thinking.type`` values the model
    accepts (``adaptive``, ``enabled``, ``disabled``, ``between_tools``; empty: no thinking),
    ``efforts`` the ``output_config.effort`` levels. Dates are ``YYYY-MM-DD``."""

    def supported(flag: bool) -> dict[str, bool]:
        return {"supported": flag}

    def stamp(day: str | None) -> str | None:
        return f"{day}T00:00:00Z" if day else None

    thinks = bool(thinking) and thinking != ("disabled",)
    capabilities = {
        "batch": supported(True), "citations": supported(True),
        "code_execution": supported(True),
        "context_management": {"supported": True, "clear_thinking_20251015": supported(True),
                               "clear_tool_uses_20250919": supported(True),
                               "compact_20260112": supported(True)},
        "effort": {"supported": bool(efforts),
                   **{level: supported(level in efforts) for level in _LEVELS}},
        "image_input": supported(True), "pdf_input": supported(True),
        "server_tools": {"supported": True, "code_execution": supported(True),
                         "web_search": supported(True)},
        "structured_outputs": supported(True),
        "thinking": {"supported": thinks, "types": {
            kind: supported(kind in thinking or (kind == "disabled" and not thinks))
            for kind in ("adaptive", "between_tools", "disabled", "enabled")}},
    }
    return {
        "id": model_id, "type": "model", "display_name": display_name or model_id,
        "created_at": stamp(created_at), "capabilities": capabilities, "line": line,
        "lifecycle": lifecycle, "deprecated_at": stamp(deprecated_at),
        "retires_at": stamp(retires_at), "max_input_tokens": max_input_tokens,
        "max_tokens": max_tokens,
    }


DEFAULT_MODELS: tuple[dict[str, Any], ...] = (
    anthropic_model("claude-fable-5-2", display_name="Claude Fable 5.2", line="fable",
                    created_at="2026-11-09", thinking=("adaptive",)),
    anthropic_model("claude-haiku-5-5", display_name="Claude Haiku 5.5", line="haiku",
                    created_at="2026-10-07"),
    anthropic_model("claude-sonnet-5-5", display_name="Claude Sonnet 5.5", line="sonnet",
                    created_at="2026-09-29"),
    anthropic_model("claude-opus-5-5", display_name="Claude Opus 5.5", line="opus",
                    created_at="2026-09-23", thinking=("adaptive",)),
    anthropic_model("claude-opus-5", display_name="Claude Opus 5", line="opus",
                    created_at="2026-07-24"),
    anthropic_model("claude-sonnet-5", display_name="Claude Sonnet 5", line="sonnet",
                    created_at="2026-06-30"),
    anthropic_model("claude-opus-4-5", display_name="Claude Opus 4.5", line="opus",
                    created_at="2025-11-01", lifecycle="deprecated",
                    deprecated_at="2026-11-23", retires_at="2027-01-22",
                    max_input_tokens=200_000, max_tokens=64_000,
                    thinking=("enabled", "disabled"), efforts=()),
    anthropic_model("claude-haiku-4-5", display_name="Claude Haiku 4.5", line="haiku",
                    created_at="2025-10-01", max_input_tokens=200_000, max_tokens=64_000,
                    thinking=("enabled", "disabled"), efforts=()),
    anthropic_model("claude-sonnet-4-5", display_name="Claude Sonnet 4.5", line="sonnet",
                    created_at="2025-09-29", lifecycle="retired", deprecated_at="2026-08-28",
                    retires_at="2026-11-30", max_input_tokens=200_000, max_tokens=64_000,
                    thinking=("enabled", "disabled"), efforts=()),
    anthropic_model("claude-sonnet-4-20250514", display_name="Claude Sonnet 4", line="sonnet",
                    created_at="2025-05-22", lifecycle="retired", deprecated_at="2026-04-14",
                    retires_at="2026-06-15", max_input_tokens=200_000, max_tokens=64_000,
                    thinking=("enabled", "disabled"), efforts=()),
)
"""The fake's model table by default: December 2026's lineup, newest first, with a deprecated
and two retired models."""

MIN_CACHE_TOKENS = {"claude-opus-5": 512, "claude-fable-5-2": 512, "claude-opus-4-5": 4096,
                    "claude-haiku-4-5": 4096}
"""The minimum cacheable prompt length per model (the others: 1,024 tokens)."""


@dataclass(frozen=True)
class Reply:
    """One scripted response; build it with the ``*_reply`` functions.

    ``events`` are sent in order; then ``ending`` says what happens: ``close`` ends the body;
    ``cut`` drops the connection mid-body (as a real cut stream: the HTTP library reports the
    incomplete chunked body); ``stall`` waits for ``until`` (or the server closing), then drops
    it. A ``message_start`` whose message has ``"model": None`` gets the request's model.
    """

    events: tuple[Event, ...] = ()
    ending: Literal["close", "cut", "stall"] = "close"
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


def message_start(
    usage: tuple[int, int] | None = (10, 1), cache: tuple[int, int] | None = (0, 0)
) -> Event:
    """``message_start`` with an empty message; ``usage`` is (input, output) tokens and
    ``cache`` is (cache read, cache write) tokens; None: the server's accounting of the
    request (and ``usage`` None marks the reply's ``message_delta`` to carry it too)."""
    if usage is None or cache is None:
        return sse_event("message_start", message={**_empty_message(), "usage": None})
    message: dict[str, Any] = {
        **_empty_message(),
        "usage": {
            "input_tokens": usage[0],
            "cache_creation_input_tokens": cache[1],
            "cache_read_input_tokens": cache[0],
            "output_tokens": usage[1],
        },
    }
    return sse_event("message_start", message=message)


def _empty_message() -> dict[str, Any]:
    return {"id": f"msg_fake{uuid.uuid4().hex[:20]}", "type": "message", "role": "assistant",
            "content": [], "model": None, "stop_reason": None, "stop_sequence": None}


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


def _ending(stop_reason: str | None, output_tokens: int | None) -> list[Event]:
    """``message_delta`` with the stop reason and the cumulative usage (None: the accounting's,
    filled in when sent), ``message_stop``."""
    delta = {"stop_reason": stop_reason, "stop_sequence": None}
    usage = {"output_tokens": output_tokens} if output_tokens is not None else None
    return [
        sse_event("message_delta", delta=delta, usage=usage),
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
    usage: tuple[int, int] | None = None,
    cache: tuple[int, int] | None = None,
    thinking: str | None = None,
    signature: str | None = "sig-fake",
    gate: threading.Event | None = None,
) -> Reply:
    """``text`` streamed ``chunk_size`` characters per ``text_delta``, after a thinking block
    when ``thinking`` is given (its ``thinking_delta``s, then a ``signature_delta`` with
    ``signature`` unless None). ``usage`` is (input, output) tokens; ``cache`` is (cache read,
    cache write) tokens, reported in ``message_start``; None (both): the server's accounting
    of the request, and output tokens from the reply's length."""
    scripted = usage is not None or cache is not None
    usage = usage or (10, 5)
    events = [
        message_start((usage[0], 1), cache or (0, 0)) if scripted else message_start(None),
        *_text_events(text, chunk_size, thinking, signature),
        *_ending(stop_reason, usage[1] if scripted else None),
    ]
    return Reply(events=tuple(events), gate=gate)


def tool_use_reply(
    calls: Sequence[ToolUseSpec],
    *,
    text: str | None = None,
    chunk_size: int = 4,
    fragment_size: int = 5,
    stop_reason: str = "tool_use",
    usage: tuple[int, int] | None = None,
    thinking: str | None = None,
    signature: str | None = "sig-fake",
    gate: threading.Event | None = None,
) -> Reply:
    """Optional thinking and ``text`` blocks, then one ``tool_use`` block per call as Anthropic
    streams it: ``content_block_start`` with id, name and ``input: {}``, then
    ``input_json_delta``s of ``fragment_size`` characters of the input JSON. ``usage`` None:
    the server's accounting (see ``text_reply``)."""
    events: list[Event] = [message_start((usage[0], 1)) if usage else message_start(None)]
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
    events += _ending(stop_reason, usage[1] if usage else None)
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
    """HTTP 200 with ``text/event-stream`` headers and a body that ends with no event."""
    return Reply(gate=gate)


def cut_reply(
    text: str = "This answer is cut short",
    *,
    after_events: int = 4,
    chunk_size: int = 4,
    gate: threading.Event | None = None,
) -> Reply:
    """The first ``after_events`` events of ``text_reply(text)`` (``message_start``,
    ``content_block_start`` and ``ping`` count), then the connection drops: no
    ``message_delta``, no ``message_stop``."""
    events = text_reply(text, chunk_size=chunk_size).events[:after_events]
    return Reply(events=events, ending="cut", gate=gate)


def stall_reply(
    text: str = "",
    *,
    chunk_size: int = 4,
    until: threading.Event | None = None,
    gate: threading.Event | None = None,
) -> Reply:
    """HTTP 200 headers, then (if ``text``) ``message_start``, a text block's start, ``ping``
    and its deltas, then nothing until ``until`` is set or the server closes; then the
    connection drops."""
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
    it overloads mid-stream), then the body ends."""
    error = sse_event("error", error={"type": type, "message": message})
    events = [message_start(), *_text_block(0, text, chunk_size)[:-1], error]
    return Reply(events=tuple(events), gate=gate)


def sse_reply(*events: Event, gate: threading.Event | None = None) -> Reply:
    """Exactly these events (build them with ``sse_event``), then the body ends."""
    return Reply(events=tuple(events), gate=gate)


def _output_tokens(reply: Reply) -> int:
    """What the reply's deltas hold, in tokens (4 characters each)."""
    chars = 0
    for name, data in reply.events:
        if name == "content_block_delta" and isinstance(data, Mapping):
            delta = data["delta"]
            chars += len(str(delta.get("text") or delta.get("thinking")
                             or delta.get("partial_json") or ""))
    return max(1, -(-chars // 4))


def _render(reply: Reply, request: Mapping[str, Any],
            accounting: CacheUsage | None) -> Iterator[str]:
    """The SSE frames of ``reply`` for ``request`` (its model fills ``message_start``; its
    ``accounting`` the usage left to the server)."""
    model = str(request.get("model", "claude-fake"))
    output = _output_tokens(reply)
    for name, data in reply.events:
        if isinstance(data, str):
            yield f"event: {name}\ndata: {data}\n\n"
            continue
        if name == "message_start" and data["message"].get("model") is None:
            data = {**data, "message": {**data["message"], "model": model}}
        if accounting is not None and name == "message_start" and data["message"]["usage"] is None:
            data = {**data, "message": {**data["message"], "usage": accounting.usage(1)}}
        if accounting is not None and name == "message_delta" and data.get("usage", 0) is None:
            usage = {key: value for key, value in accounting.usage(output).items()
                     if key not in ("cache_creation", "service_tier")}
            data = {**data, "usage": usage}
        yield f"event: {name}\ndata: {_compact(data)}\n\n"


# ---------------------------------------------------------------------------------------------
# The server


def _error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


class _Handler(ScriptedHandler):
    """Serves one request: the next scripted reply for ``/v1/messages`` (or the API's refusal),
    the model list for ``GET /v1/models``, 404 for anything else."""

    def _is_route(self) -> bool:
        return self.path.split("?")[0].rstrip("/") == "/v1/messages"

    def _fake(self) -> FakeAnthropic:
        fake = self.server.fake
        assert isinstance(fake, FakeAnthropic)
        return fake

    def _refuse(self, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]] | None:
        fake = self._fake()
        model = fake.model(str(body.get("model")))
        found = cache_control_count(body)
        if found > 4:
            return 400, _error_body("invalid_request_error", CACHE_LIMIT_ERROR.format(found))
        for index, tool in enumerate(body.get("tools") or []):
            schema = tool.get("input_schema") if isinstance(tool, dict) else None
            if isinstance(schema, dict) and any(k in schema for k in ("oneOf", "allOf", "anyOf")):
                return 400, _error_body("invalid_request_error",
                                        TOP_LEVEL_UNION_ERROR.format(index))
        if model is None:
            return None
        if model["lifecycle"] == "retired":
            return 404, _error_body("not_found_error", f"model: {model['id']}")
        kinds = model["capabilities"]["thinking"]["types"]
        sent = (body.get("thinking") or {}).get("type")
        if sent == "enabled" and not kinds["enabled"]["supported"]:
            return 400, _error_body("invalid_request_error", ADAPTIVE_ONLY_ERROR)
        if sent == "adaptive" and not kinds["adaptive"]["supported"]:
            return 400, _error_body("invalid_request_error", NO_ADAPTIVE_ERROR)
        return None

    def _serve_other(self) -> tuple[int, dict[str, Any]] | None:
        path, _, query = self.path.partition("?")
        path = path.rstrip("/")
        if self.command != "GET" or (path != "/v1/models" and not path.startswith("/v1/models/")):
            return None
        fake = self._fake()
        with fake._condition:
            fake.models_requests.append(self.path)
        if path.startswith("/v1/models/"):
            model = fake.model(path.removeprefix("/v1/models/"))
            if model is None:
                return 404, _error_body("not_found_error", f"model: {path.rsplit('/', 1)[1]}")
            return 200, model
        params = parse_qs(query)
        wanted = set(params.get("lifecycle[]", []) + params.get("lifecycle", [])) or {
            "active", "deprecated"}
        listed = [m for m in fake.models_snapshot() if m["lifecycle"] in wanted]
        if after := params.get("after_id", [None])[0]:
            ids = [m["id"] for m in listed]
            listed = listed[ids.index(after) + 1:] if after in ids else []
        limit = int(params.get("limit", ["20"])[0])
        page = listed[:limit]
        return 200, {"data": page, "has_more": len(listed) > limit,
                     "first_id": page[0]["id"] if page else None,
                     "last_id": page[-1]["id"] if page else None}

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
        fake = self._fake()
        model = str(request.get("model"))
        accounting = fake.ledger.account(request, MIN_CACHE_TOKENS.get(model, 1024))
        with fake._condition:
            fake.usages.append(accounting)
        for frame in _render(reply, request, accounting):
            yield frame.encode()


class FakeAnthropic(ScriptedServer[Reply]):
    """The fake Messages server, which also records ``request_headers``; the script, lifecycle
    and thread-safe methods are ``loopback.ScriptedServer``'s. ``models`` is its model table
    (``DEFAULT_MODELS``; replace or extend it), ``ledger`` its prompt cache, ``usages`` the
    accounting of each streamed request, ``models_requests`` the paths of model-list GETs."""

    label = "fake_anthropic"
    handler = _Handler

    def __init__(self) -> None:
        super().__init__()
        self.models: list[dict[str, Any]] = [dict(model) for model in DEFAULT_MODELS]
        self.ledger = CacheLedger()
        self.usages: list[CacheUsage] = []
        self.models_requests: list[str] = []

    def model(self, model_id: str) -> dict[str, Any] | None:
        """The table's entry for ``model_id``, if it lists it."""
        return next((m for m in self.models_snapshot() if m["id"] == model_id), None)

    def models_snapshot(self) -> list[dict[str, Any]]:
        with self._condition:
            return list(self.models)

    @property
    def url(self) -> str:
        """The base URL to give a client: ``http://127.0.0.1:PORT`` (no ``/v1``)."""
        return self._origin

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """The headers of each message request (names lower-cased), in arrival order."""
        with self._condition:
            return [dict(headers) for headers in self._headers]
