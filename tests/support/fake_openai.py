"""A loopback HTTP server that speaks OpenAI's Chat Completions SSE wire format, for tests.

Script replies, point a client (``OpenAIProvider`` or a ``tiller --base-url`` subprocess) at
``fake.url``, and read what was sent from ``fake.requests``::

    with FakeOpenAI() as fake:
        fake.enqueue(text_reply("Hello!"), tool_call_reply([("call_1", "read", {"path": "a"})]))
        ...  # run the client against fake.url
        assert fake.requests[0]["model"] == "gpt-4o-mini"
    fake.assert_script_complete()

Each POST to ``/v1/chat/completions`` takes the next scripted reply (the serving and the script
are ``loopback.ScriptedServer``'s). The script is strict: a request with no reply left gets HTTP
500 (``fake_openai: no scripted reply for request N``, N counting from 1) and is recorded in
``failures``; ``assert_script_complete`` fails on any failure and on any reply never used. The
``fake_openai`` fixture in conftest.py checks this at teardown.

Replies are built by ``text_reply``, ``tool_call_reply``, ``error_reply``, ``empty_reply``,
``cut_reply``, ``stall_reply``, ``paused_reply`` (part of a text, then a wait) and
``sse_reply``. Any reply can be held by a ``gate``: the server sends nothing after the request
arrives until the gate (a ``threading.Event``) is set. Closing the server sets every gate and
``until`` event a handler is waiting on, so nothing hangs.

Streams look like OpenAI's: ``data: <chunk JSON>`` events separated by blank lines, the first
delta carrying ``role: "assistant"``, a final chunk with ``finish_reason``, then (when the request
asked for ``stream_options.include_usage``) a chunk with ``"choices": []`` and ``usage``, then
``data: [DONE]``. Responses are HTTP/1.1 with ``Connection: close``; a stream is sent as the API
sends it, ``Transfer-Encoding: chunked`` (tests/support/loopback.py).

What the server answers by itself, without a scripted reply (``other_requests`` records it):
``GET /v1/models`` lists ``models`` (llama-cpp-python's shape), and ``POST /v1/responses`` gets
``404 {"detail": "Not Found"}``, as a server without the Responses API (FastAPI's, like
llama-cpp-python's and vLLM's) answers. What it refuses as OpenAI does, with OpenAI's texts
(``refusals`` records it; no reply is taken): function tools with a ``reasoning_effort`` other
than ``none`` for gpt-5.2, 5.4 and 5.5, and for gpt-5.6 and the gpt-6 models even an absent
one; a ``reasoning_effort`` a model lacks; with ``strict_models``, a model not in ``models``
(404). ``flavor="llama-cpp-python"`` behaves as that server does with tools: a missing
``tool_choice`` means none (a scripted tool call goes out as its text alone), and ``auto``
with a tool call to stream is refused with its 500.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from support.loopback import ScriptedHandler, ScriptedServer
from support.loopback import compact as _compact
from support.loopback import pieces as _pieces

__all__ = [
    "FakeOpenAI",
    "Reply",
    "ToolCallSpec",
    "chunk",
    "cut_reply",
    "empty_reply",
    "error_reply",
    "paused_reply",
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
    for) and ``[DONE]``; ``ended`` ends the body there (a server that stopped early, cleanly);
    ``cut`` drops the connection mid-body (as a real cut stream: the HTTP library reports the
    incomplete chunked body); ``stall`` waits for ``until`` (or the server closing), then
    drops it. Raw string events are sent verbatim as ``data:`` payloads.
    """

    events: tuple[Delta | str, ...] = ()
    ending: Literal["complete", "ended", "cut", "stall"] = "complete"
    usage: tuple[int, int, int] | None = None
    status: int = 200
    error_body: Mapping[str, Any] | None = None
    headers: tuple[tuple[str, str], ...] = ()
    gate: threading.Event | None = None
    until: threading.Event | None = None
    pause: tuple[int, threading.Event] | None = None
    """``(n, event)``: after the first ``n`` events, wait for ``event`` (``paused_reply``)."""

    def released_when(self, event: threading.Event) -> Reply:
        """This reply, held until ``event`` is set (same as passing ``gate=event``)."""
        return dataclasses.replace(self, gate=event)


# ---------------------------------------------------------------------------------------------
# Reply builders


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


def paused_reply(
    first: str, rest: str, *, until: threading.Event, chunk_size: int = 4
) -> Reply:
    """``text_reply(first + rest)``, stopping after ``first`` (sent in chunks of
    ``chunk_size``) until ``until`` is set: what a client shows of a reply still streaming."""
    events = [*_text_events(first, chunk_size, None), *_text_events(rest, chunk_size, None)[1:],
              ({}, "stop")]
    sent_first = 1 + len(_pieces(first, chunk_size))
    return Reply(events=tuple(events), usage=(10, 5, 0), pause=(sent_first, until))


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
    """HTTP 200 with ``text/event-stream`` headers and a body that ends with no data."""
    return Reply(ending="ended", gate=gate)


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
    string verbatim (e.g. malformed JSON). Ends with ``[DONE]`` if ``done``, else the body just
    ends."""
    raw = tuple(event if isinstance(event, str) else _compact(event) for event in events)
    return Reply(events=raw, ending="complete" if done else "ended", gate=gate)


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


def _error(message: str, error_type: str, param: str | None = None,
           code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


_TOOLS_REFUSED = re.compile(r"gpt-5\.[245](-|$)")
"""Chat Completions refuses function tools with a reasoning_effort other than none."""
_TOOLS_NEED_NONE = re.compile(r"gpt-5\.6|gpt-6")
"""... and for these even an absent reasoning_effort."""
CHAT_EFFORTS = {
    "gpt-6.2-sol": ("low", "medium", "high", "xhigh", "max"),
    "gpt-6.2-astra": ("low", "medium", "high", "xhigh", "max"),
    "gpt-6.1-sol": ("low", "medium", "high", "xhigh", "max"),
    "gpt-6-astra": ("low", "medium", "high", "xhigh", "max"),
    "gpt-5.5": ("none", "low", "medium", "high", "xhigh"),
}
"""Models whose efforts are not all of none..max, as OpenAI's model pages list them."""


def quoted_list(values: Sequence[str]) -> str:
    """``'a', 'b', and 'c'``, as OpenAI's unsupported_value errors list values."""
    quoted = [f"'{value}'" for value in values]
    if len(quoted) < 3:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + ", and " + quoted[-1]


def chat_refusal(request: Mapping[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """What OpenAI's Chat Completions answers ``request`` with before generating, or None."""
    model = str(request.get("model", ""))
    effort = request.get("reasoning_effort")
    efforts = CHAT_EFFORTS.get(model)
    if efforts is not None and effort is not None and effort not in efforts:
        return 400, _error(
            f"Unsupported value: 'reasoning_effort' does not support '{effort}' with this "
            f"model. Supported values are: {quoted_list(efforts)}.",
            "invalid_request_error", "reasoning_effort", "unsupported_value")
    if not request.get("tools"):
        return None
    if _TOOLS_REFUSED.match(model) and effort not in (None, "none"):
        return 400, _error(
            f"Function tools with reasoning_effort are not supported for {model} in "
            "/v1/chat/completions. Please use /v1/responses instead.",
            "invalid_request_error", "reasoning_effort")
    if _TOOLS_NEED_NONE.match(model) and effort != "none":
        return 400, _error(
            f"Function tools with reasoning_effort are not supported for {model} in "
            "/v1/chat/completions. To use function tools, use /v1/responses or set "
            "reasoning_effort to 'none'.",
            "invalid_request_error", "reasoning_effort")
    return None


def unknown_model(model: str) -> tuple[int, dict[str, Any]]:
    """OpenAI's 404 for a model that does not exist."""
    return 404, _error(
        f"The model `{model}` does not exist or you do not have access to it.",
        "invalid_request_error", None, "model_not_found")


def models_list(models: Sequence[str], owned_by: str) -> dict[str, Any]:
    """``GET /v1/models``'s body."""
    return {"object": "list", "data": [
        {"id": model, "object": "model", "created": 1764547200, "owned_by": owned_by}
        for model in models
    ]}


def _has_tool_calls(reply: Reply) -> bool:
    return any(not isinstance(event, str) and "tool_calls" in event[0] for event in reply.events)


def _without_tool_calls(reply: Reply) -> Reply:
    """``reply`` as a server that ignored the tools sends it: its text, a plain stop."""
    events: list[Delta | str] = []
    for event in reply.events:
        if isinstance(event, str):
            events.append(event)
            continue
        delta = {key: value for key, value in event[0].items() if key != "tool_calls"}
        if delta or event[1]:
            events.append((delta, "stop" if event[1] else None))
    return dataclasses.replace(reply, events=tuple(events))


class _Handler(ScriptedHandler):
    """Serves one request: the next scripted reply for chat completions, 404 for anything else."""

    def _is_route(self) -> bool:
        return self.path.rstrip("/") == "/v1/chat/completions"

    def _error_body(self, status: int, message: str) -> dict[str, Any]:
        return _error(message, "server_error" if status >= 500 else "invalid_request_error")

    def _stream_headers(self) -> list[tuple[str, str]]:
        return [
            ("Content-Type", "text/event-stream"),
            ("Cache-Control", "no-cache"),
            ("Connection", "close"),
        ]

    def _frames(self, reply: Reply, request: Mapping[str, Any]) -> Iterator[bytes]:
        for index, payload in enumerate(_render(reply, request)):
            if reply.pause is not None and index == reply.pause[0]:
                fake = self.server.fake
                assert isinstance(fake, FakeOpenAI)
                if not fake._wait(reply.pause[1]):
                    return
            yield f"data: {payload}\n\n".encode()

    def _refuse(self, request: Mapping[str, Any]) -> tuple[int, Mapping[str, Any]] | None:
        fake = self.server.fake
        assert isinstance(fake, FakeOpenAI)
        model = str(request.get("model", ""))
        if fake.strict_models and model not in fake.models:
            return unknown_model(model)
        return chat_refusal(request)

    def _serve_other(self) -> tuple[int, Mapping[str, Any]] | None:
        fake = self.server.fake
        assert isinstance(fake, FakeOpenAI)
        path = self.path.rstrip("/")
        if self.command == "GET" and path == "/v1/models":
            return 200, models_list(fake.models, "me")
        if self.command == "POST" and path == "/v1/responses":
            return 404, {"detail": "Not Found"}
        return None

    def _send_reply(self, reply: Any, request: Mapping[str, Any]) -> None:
        fake = self.server.fake
        assert isinstance(fake, FakeOpenAI)
        if fake.flavor == "llama-cpp-python" and request.get("tools") and _has_tool_calls(reply):
            choice = request.get("tool_choice")
            if choice in (None, "none"):
                reply = _without_tool_calls(reply)
            elif choice == "auto" and request.get("stream"):
                if reply.gate is not None and not fake._wait(reply.gate):
                    return
                message = "Automatic streaming tool choice is not supported"
                self._send_json(500, _error(message, "internal_server_error"), ())
                return
        super()._send_reply(reply, request)


class FakeOpenAI(ScriptedServer[Reply]):
    """The fake Chat Completions server; ``loopback.ScriptedServer`` has the script, the
    lifecycle (a context manager, or ``start`` and ``close``) and the thread-safe methods.
    ``models`` is what ``GET /v1/models`` lists; ``strict_models`` refuses others (404);
    ``flavor`` ``llama-cpp-python`` handles tools as that server does (module docstring)."""

    label = "fake_openai"
    handler = _Handler

    def __init__(
        self,
        *,
        models: Sequence[str] = ("fake-model",),
        strict_models: bool = False,
        flavor: Literal["openai", "llama-cpp-python"] = "openai",
    ) -> None:
        super().__init__()
        self.models = tuple(models)
        self.strict_models = strict_models
        self.flavor = flavor

    @property
    def url(self) -> str:
        """The base URL to give a client: ``http://127.0.0.1:PORT/v1``."""
        return f"{self._origin}/v1"

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """The headers of each completion request (names lower-cased), in arrival order."""
        with self._condition:
            return [dict(headers) for headers in self._headers]
