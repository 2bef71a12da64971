"""A loopback HTTP server that speaks OpenAI's Responses API as OpenAI does in December 2026.

Script replies, point a client (``OpenAIProvider`` or ``tiller --base-url``) at ``fake.url``,
read what was sent from ``fake.requests``::

    with FakeResponses() as fake:
        fake.enqueue(response_reply(reasoning("Look first."), function_call("ls", {})))
        ...  # run the client against fake.url
    fake.assert_script_complete()

Each POST to ``/v1/responses`` that OpenAI would accept takes the next scripted reply
(``loopback.ScriptedServer``'s strict script). ``GET /v1/models`` lists the known models.

Streams are OpenAI's, field for field (``openai.types.responses.*_event``): ``event: <type>``
and ``data: <compact JSON>`` lines and a blank line per event, ``sequence_number`` counting
from 0: ``response.created`` and ``response.in_progress`` (the response object, empty
``output``, no usage), then per output item ``response.output_item.added``; for a reasoning
item per summary part ``response.reasoning_summary_part.added``, the
``response.reasoning_summary_text.delta``s, ``.done`` and ``response.reasoning_summary_part.done``;
for a message ``response.content_part.added``, ``response.output_text.delta``s, ``.done`` and
``response.content_part.done``; for a function call the ``response.function_call_arguments``
deltas and ``.done``; then ``response.output_item.done`` with the whole item (a reasoning
item's ``encrypted_content`` whole only there: the added item carries a prefix, as OpenAI
warns it may); and at the end ``response.completed`` (or ``response.incomplete``,
``response.failed``, ``error``) with the usage. Delta events carry ``obfuscation`` padding
unless ``stream_options.include_obfuscation`` is false.

What it refuses as OpenAI does, with OpenAI's texts (recorded in ``refusals``, no reply taken):
an unknown model (404 ``model_not_found``); ``reasoning`` on a model without it, an effort the
model lacks (``unsupported_value``), encrypted reasoning for a model without it; and, walking
the ``input``: a reasoning item without its encrypted content under ``store: false`` (404 "Item
with id ... not found"), with content other than what was issued ("could not be verified"),
or not followed by the item that followed it ("without its required following item"); a
function call or message item (by id) not preceded by its reasoning item ("without its required
'reasoning' item"); a ``function_call_output`` before its call ("No tool call found"); a call
without an output ("No tool output found"). Reasoning items of another model are withheld, as
OpenAI does, and listed in the response's ``input_transformations`` (and ``withheld``).
"""

from __future__ import annotations

import base64
import dataclasses
import os
import re
import secrets
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from support.fake_openai import models_list, quoted_list, unknown_model
from support.loopback import ScriptedHandler, ScriptedServer
from support.loopback import compact as _compact
from support.loopback import pieces as _pieces

__all__ = [
    "MODELS",
    "FakeResponses",
    "Item",
    "Reply",
    "cut_reply",
    "empty_reply",
    "error_event_reply",
    "error_reply",
    "failed_reply",
    "function_call",
    "incomplete_reply",
    "message",
    "reasoning",
    "reasoning_items",
    "response_reply",
    "sse_reply",
    "stall_reply",
]

_LOW_UP = ("low", "medium", "high", "xhigh", "max")
_ALL = ("none", "low", "medium", "high", "xhigh", "max")
_TO_XHIGH = ("none", "low", "medium", "high", "xhigh")
MODELS: dict[str, tuple[str, ...] | None] = {
    "gpt-6.2-sol": _LOW_UP, "gpt-6.2-astra": _LOW_UP, "gpt-6.1-sol": _LOW_UP,
    "gpt-6-astra": _LOW_UP, "gpt-6.1-terra": _ALL, "gpt-6-sol": _ALL, "gpt-6-luna": _ALL,
    "gpt-5.6": _ALL, "gpt-5.6-sol": _ALL, "gpt-5.6-terra": _ALL, "gpt-5.6-luna": _ALL,
    "gpt-5.5": _TO_XHIGH, "gpt-5.4": _TO_XHIGH, "gpt-5.4-mini": _TO_XHIGH, "gpt-5.2": _TO_XHIGH,
    "gpt-4.1": None, "gpt-4o-mini": None,
}
"""The models it serves and the reasoning efforts each takes (None: no reasoning), as OpenAI's
model pages list them on 2026-12-01."""


# ---------------------------------------------------------------------------------------------
# Output items and replies


@dataclass(frozen=True)
class Item:
    """One output item to stream: ``reasoning`` (summary parts), ``message`` (text, phase) or
    ``function_call`` (name, arguments as sent, call id)."""

    kind: Literal["reasoning", "message", "function_call"]
    summary: tuple[str, ...] = ()
    text: str = ""
    phase: str | None = None
    name: str = ""
    arguments: str = ""
    call_id: str | None = None


def reasoning(*summary: str) -> Item:
    """A reasoning item whose summary has these parts (none: an empty summary)."""
    return Item("reasoning", summary=summary)


def message(text: str, phase: str | None = "final_answer") -> Item:
    return Item("message", text=text, phase=phase)


def function_call(
    name: str, arguments: Mapping[str, Any] | str, call_id: str | None = None
) -> Item:
    """A function call; dict arguments are sent as compact JSON, a string as it is."""
    raw = arguments if isinstance(arguments, str) else _compact(dict(arguments))
    return Item("function_call", name=name, arguments=raw, call_id=call_id)


@dataclass(frozen=True)
class Reply:
    """One scripted response. ``ending``: ``completed``, ``incomplete``, ``failed`` or
    ``error`` (that event after the items), ``ended`` (the body ends after ``after_events``
    events), ``cut`` (the connection drops after them, mid-body, as a real cut stream: the HTTP
    library reports the incomplete chunked body) or ``stall`` (nothing more until ``until``,
    then it drops). ``raw`` replaces the rendered events with exactly these (``sse_reply``)."""

    items: tuple[Item, ...] = ()
    ending: Literal["completed", "incomplete", "failed", "error", "ended", "cut",
                    "stall"] = "completed"
    incomplete_reason: str = "max_output_tokens"
    error_code: str | None = None
    error_message: str = ""
    after_events: int | None = None
    usage: tuple[int, int] = (100, 20)
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    chunk_size: int = 4
    raw: tuple[Mapping[str, Any] | str, ...] | None = None
    status: int = 200
    error_body: Mapping[str, Any] | None = None
    headers: tuple[tuple[str, str], ...] = ()
    gate: threading.Event | None = None
    until: threading.Event | None = None

    def released_when(self, event: threading.Event) -> Reply:
        return dataclasses.replace(self, gate=event)


def response_reply(
    *items: Item,
    usage: tuple[int, int] = (100, 20),
    cached_tokens: int = 0,
    cache_write_tokens: int = 0,
    reasoning_tokens: int = 0,
    chunk_size: int = 4,
    gate: threading.Event | None = None,
) -> Reply:
    """The items streamed, then ``response.completed`` with ``usage`` (input, output)."""
    return Reply(items=items, usage=usage, cached_tokens=cached_tokens,
                 cache_write_tokens=cache_write_tokens, reasoning_tokens=reasoning_tokens,
                 chunk_size=chunk_size, gate=gate)


def incomplete_reply(*items: Item, reason: str = "max_output_tokens") -> Reply:
    return Reply(items=items, ending="incomplete", incomplete_reason=reason)


def failed_reply(code: str, text: str, *items: Item) -> Reply:
    """The items, then ``response.failed`` with ``error: {code, message}``."""
    return Reply(items=items, ending="failed", error_code=code, error_message=text)


def error_event_reply(code: str | None, text: str, *items: Item) -> Reply:
    """The items, then an ``error`` event (``code``, ``message``, ``param``)."""
    return Reply(items=items, ending="error", error_code=code, error_message=text)


def cut_reply(*items: Item, after_events: int) -> Reply:
    return Reply(items=items, ending="cut", after_events=after_events)


def stall_reply(*items: Item, after_events: int = 0, until: threading.Event | None = None,
                gate: threading.Event | None = None) -> Reply:
    return Reply(items=items, ending="stall", after_events=after_events, until=until, gate=gate)


def empty_reply() -> Reply:
    """HTTP 200 with the stream's headers and a body that ends with no event."""
    return Reply(ending="ended", after_events=0)


def sse_reply(*events: Mapping[str, Any] | str) -> Reply:
    """Exactly these events (a mapping goes out as ``event: <its type>`` and its JSON, a string
    as ``data: <string>``), then the body ends."""
    return Reply(raw=events, ending="ended")


def error_reply(status: int, text: str, *, type: str | None = None, code: str | None = None,
                param: str | None = None, headers: Mapping[str, str] | None = None) -> Reply:
    """HTTP ``status`` with OpenAI's error body."""
    error_type = type or ("server_error" if status >= 500 else
                          "requests" if status == 429 else "invalid_request_error")
    body = {"error": {"message": text, "type": error_type, "param": param, "code": code}}
    return Reply(status=status, error_body=body, headers=tuple((headers or {}).items()))


# ---------------------------------------------------------------------------------------------
# Refusals


def _error(status: int, text: str, param: str | None = "input", code: str | None = None,
           error_type: str = "invalid_request_error") -> tuple[int, dict[str, Any]]:
    return status, {"error": {"message": text, "type": error_type, "param": param, "code": code}}


def _family(model: str) -> str:
    """A model without its snapshot date: OpenAI accepts one's reasoning items for the other."""
    return re.sub(r"-\d{4}-\d{2}-\d{2}$", "", model)


# ---------------------------------------------------------------------------------------------
# The server


class _Handler(ScriptedHandler):
    def _is_route(self) -> bool:
        return self.path.rstrip("/") == "/v1/responses"

    def _error_body(self, status: int, text: str) -> dict[str, Any]:
        error_type = "server_error" if status >= 500 else "invalid_request_error"
        return {"error": {"message": text, "type": error_type, "param": None, "code": None}}

    def _stream_headers(self) -> list[tuple[str, str]]:
        return [("Content-Type", "text/event-stream; charset=utf-8"),
                ("Cache-Control", "no-cache"), ("Connection", "close"),
                ("x-request-id", f"req_{secrets.token_hex(16)}")]

    def _serve_other(self) -> tuple[int, Mapping[str, Any]] | None:
        if self.command == "GET" and self.path.rstrip("/") == "/v1/models":
            return 200, models_list(list(self._fake.models), "system")
        return None

    @property
    def _fake(self) -> FakeResponses:
        fake = self.server.fake
        assert isinstance(fake, FakeResponses)
        return fake

    def _refuse(self, request: Mapping[str, Any]) -> tuple[int, Mapping[str, Any]] | None:
        return self._fake.refusal(request)

    def _frames(self, reply: Reply, request: Mapping[str, Any]) -> Iterator[bytes]:
        for name, data in self._fake.render(reply, request):
            head = f"event: {name}\n" if name else ""
            yield f"{head}data: {data}\n\n".encode()


class FakeResponses(ScriptedServer[Reply]):
    """The fake Responses API; ``loopback.ScriptedServer`` has the script and the lifecycle.
    ``models`` maps the models it serves to their efforts (default ``MODELS``)."""

    label = "fake_openai_responses"
    handler = _Handler

    def __init__(self, *, models: Mapping[str, tuple[str, ...] | None] | None = None) -> None:
        super().__init__()
        self.models = dict(MODELS if models is None else models)
        self._issued: dict[str, dict[str, Any]] = {}
        self.withheld: list[str] = []
        """Reasoning item ids withheld from the model (another model's), in arrival order."""

    @property
    def url(self) -> str:
        return f"{self._origin}/v1"

    @property
    def issued(self) -> dict[str, dict[str, Any]]:
        """Every output item sent, by id: ``{"kind", "item", "model", "reasoning",
        "following"}`` (a copy)."""
        with self._condition:
            return {key: dict(value) for key, value in self._issued.items()}

    # -- what OpenAI refuses ---------------------------------------------------------------

    def refusal(self, request: Mapping[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """The error OpenAI answers ``request`` with before generating, or None."""
        model = str(request.get("model", ""))
        if model not in self.models:
            return unknown_model(model)
        efforts = self.models[model]
        settings = request.get("reasoning")
        if isinstance(settings, Mapping) and settings.get("effort") is not None:
            effort = settings["effort"]
            if efforts is None:
                return _error(400, "Unsupported parameter: 'reasoning.effort' is not supported "
                              "with this model.", "reasoning.effort", "unsupported_parameter")
            if effort not in efforts:
                return _error(400, f"Unsupported value: '{effort}' is not supported with the "
                              f"'{model}' model. Supported values are: {quoted_list(efforts)}.",
                              "reasoning.effort", "unsupported_value")
        if efforts is None and "reasoning.encrypted_content" in (request.get("include") or []):
            return _error(400, "Encrypted content is not supported with this model.", "include")
        items = request.get("input")
        if isinstance(items, list):
            return self._input_refusal(items, model, request.get("store") is False)
        return None

    def _input_refusal(
        self, items: list[Any], model: str, stateless: bool
    ) -> tuple[int, dict[str, Any]] | None:
        with self._condition:
            issued = dict(self._issued)
        calls: set[str] = set()
        outputs = {str(item.get("call_id")) for item in items
                   if isinstance(item, dict) and item.get("type") == "function_call_output"}
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                continue
            kind, item_id = item.get("type"), item.get("id")
            if kind == "function_call_output":
                if str(item.get("call_id")) not in calls:
                    return _error(400, "No tool call found for function call output with "
                                  f"call_id {item.get('call_id')}.")
                continue
            if kind == "function_call":
                calls.add(str(item.get("call_id")))
                if str(item.get("call_id")) not in outputs:
                    return _error(400, f"No tool output found for function call "
                                  f"{item.get('call_id')}.")
            known = issued.get(str(item_id)) if item_id else None
            if kind == "reasoning":
                refusal = self._reasoning_refusal(item, known, items, index, model, stateless)
                if refusal is not None:
                    return refusal
            elif known is not None and known["reasoning"] is not None:
                if _family(known["model"]) != _family(model):
                    continue
                if not _preceded_by(items, index, known["reasoning"], issued):
                    return _error(400, f"Item '{item_id}' of type '{kind}' was provided without "
                                  f"its required 'reasoning' item: '{known['reasoning']}'.")
        return None

    def _reasoning_refusal(
        self, item: dict[str, Any], known: dict[str, Any] | None, items: list[Any], index: int,
        model: str, stateless: bool,
    ) -> tuple[int, dict[str, Any]] | None:
        item_id = item.get("id")
        content = item.get("encrypted_content")
        if known is None or (stateless and not content):
            return _error(404, f"Item with id '{item_id}' not found. Items are not persisted "
                          "when `store` is set to false. Try again with `store` set to true, "
                          "or remove this item from your input.")
        if content != known["item"].get("encrypted_content"):
            shown = f"{str(content)[:4]}...{str(content)[-4:]}"
            return _error(400, f"The encrypted content {shown} could not be verified.", None,
                          "invalid_encrypted_content")
        if _family(known["model"]) != _family(model):
            with self._condition:
                self.withheld.append(str(item_id))
            return None
        following = known["following"]
        after = items[index + 1] if index + 1 < len(items) else None
        if following is not None and not (isinstance(after, dict) and after.get("id") == following):
            return _error(400, f"Item '{item_id}' of type 'reasoning' was provided without its "
                          "required following item.")
        return None

    # -- streams ---------------------------------------------------------------------------

    def render(self, reply: Reply, request: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        """``(event name, data)`` of each event of ``reply`` for ``request``, in order."""
        if reply.raw is not None:
            for event in reply.raw:
                if isinstance(event, str):
                    yield "", event
                else:
                    yield str(event.get("type", "")), _compact(dict(event))
            return
        events = list(self._events(reply, request))
        limit = reply.after_events if reply.ending in ("ended", "cut", "stall") else None
        for number, (name, payload) in enumerate(events[:limit]):
            yield name, _compact({"type": name, "sequence_number": number, **payload})

    def _events(
        self, reply: Reply, request: Mapping[str, Any]
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        model = str(request.get("model", ""))
        stateless = request.get("store") is False
        encrypted = "reasoning.encrypted_content" in (request.get("include") or []) or not stateless
        options = request.get("stream_options")
        padded = not (isinstance(options, Mapping) and options.get("include_obfuscation") is False)
        response = self._response(request)
        yield "response.created", {"response": response}
        yield "response.in_progress", {"response": response}
        output: list[dict[str, Any]] = []
        for index, spec in enumerate(reply.items):
            yield from self._item_events(spec, index, reply.chunk_size, encrypted, padded, output)
        self._remember(output, model)
        usage = {
            "input_tokens": reply.usage[0],
            "input_tokens_details": {"cached_tokens": reply.cached_tokens,
                                     "cache_write_tokens": reply.cache_write_tokens},
            "output_tokens": reply.usage[1],
            "output_tokens_details": {"reasoning_tokens": reply.reasoning_tokens},
            "total_tokens": sum(reply.usage),
        }
        final = {**response, "output": output, "usage": usage}
        if self.withheld:
            final["input_transformations"] = [
                {"id": rs_id, "action": "removed", "reason": "model_mismatch",
                 "type": "reasoning"} for rs_id in self.withheld]
        if reply.ending == "incomplete":
            final.update(status="incomplete",
                         incomplete_details={"reason": reply.incomplete_reason})
            yield "response.incomplete", {"response": final}
        elif reply.ending == "failed":
            final.update(status="failed", usage=None,
                         error={"code": reply.error_code, "message": reply.error_message})
            yield "response.failed", {"response": final}
        elif reply.ending == "error":
            yield "error", {"code": reply.error_code, "message": reply.error_message,
                            "param": None}
        elif reply.ending == "completed":
            final.update(status="completed", completed_at=int(time.time()))
            yield "response.completed", {"response": final}

    def _item_events(
        self, spec: Item, index: int, size: int, encrypted: bool, padded: bool,
        output: list[dict[str, Any]],
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        at = {"output_index": index}

        def delta(text: str) -> dict[str, Any]:
            return {"delta": text, **({"obfuscation": _padding(text)} if padded else {})}

        if spec.kind == "reasoning":
            item_id = f"rs_{secrets.token_hex(25)}"
            content = _encrypted_content() if encrypted else None
            added = {"id": item_id, "type": "reasoning", "summary": [],
                     "encrypted_content": content[: len(content) // 2] if content else None}
            yield "response.output_item.added", {**at, "item": added}
            for number, part in enumerate(spec.summary):
                where = {"item_id": item_id, **at, "summary_index": number}
                yield "response.reasoning_summary_part.added", {
                    **where, "part": {"type": "summary_text", "text": ""}}
                for piece in _pieces(part, size):
                    yield "response.reasoning_summary_text.delta", {**where, **delta(piece)}
                yield "response.reasoning_summary_text.done", {**where, "text": part}
                yield "response.reasoning_summary_part.done", {
                    **where, "part": {"type": "summary_text", "text": part}}
            item = {"id": item_id, "type": "reasoning", "encrypted_content": content,
                    "summary": [{"type": "summary_text", "text": part} for part in spec.summary]}
        elif spec.kind == "message":
            item_id = f"msg_{secrets.token_hex(25)}"
            phase = {"phase": spec.phase} if spec.phase else {}
            yield "response.output_item.added", {**at, "item": {
                "id": item_id, "type": "message", "status": "in_progress", "content": [],
                "role": "assistant", **phase}}
            where = {"item_id": item_id, **at, "content_index": 0}
            part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
            yield "response.content_part.added", {**where, "part": part}
            for piece in _pieces(spec.text, size):
                yield "response.output_text.delta", {**where, **delta(piece), "logprobs": []}
            yield "response.output_text.done", {**where, "text": spec.text, "logprobs": []}
            yield "response.content_part.done", {**where, "part": {**part, "text": spec.text}}
            item = {"id": item_id, "type": "message", "status": "completed",
                    "content": [{**part, "text": spec.text}], "role": "assistant", **phase}
        else:
            item_id = f"fc_{secrets.token_hex(25)}"
            call_id = spec.call_id or f"call_{secrets.token_urlsafe(18)[:24]}"
            base = {"id": item_id, "type": "function_call", "call_id": call_id,
                    "name": spec.name}
            yield "response.output_item.added", {**at, "item": {
                **base, "status": "in_progress", "arguments": ""}}
            where = {"item_id": item_id, **at}
            for piece in _pieces(spec.arguments, max(size, 1)):
                yield "response.function_call_arguments.delta", {**where, **delta(piece)}
            yield "response.function_call_arguments.done", {**where, "arguments": spec.arguments}
            item = {**base, "status": "completed", "arguments": spec.arguments}
        output.append(item)
        yield "response.output_item.done", {**at, "item": item}

    def _remember(self, output: list[dict[str, Any]], model: str) -> None:
        """Record each item sent and what it pairs with: a reasoning item the item after it,
        any other item the reasoning item before it."""
        with self._condition:
            last_reasoning: str | None = None
            for index, item in enumerate(output):
                following = output[index + 1]["id"] if index + 1 < len(output) else None
                is_reasoning = item["type"] == "reasoning"
                self._issued[item["id"]] = {
                    "kind": item["type"], "item": item, "model": model,
                    "reasoning": None if is_reasoning else last_reasoning,
                    "following": following if is_reasoning else None,
                }
                if is_reasoning:
                    last_reasoning = item["id"]

    def _response(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The response object as ``response.created`` shows it."""
        reasoning_settings = request.get("reasoning")
        return {
            "id": f"resp_{secrets.token_hex(25)}", "object": "response",
            "created_at": int(time.time()), "status": "in_progress", "background": False,
            "error": None, "incomplete_details": None,
            "instructions": request.get("instructions"),
            "max_output_tokens": request.get("max_output_tokens"), "max_tool_calls": None,
            "model": request.get("model"), "output": [], "parallel_tool_calls": True,
            "previous_response_id": None, "prompt_cache_key": request.get("prompt_cache_key"),
            "reasoning": {"effort": (reasoning_settings or {}).get("effort"),
                          "summary": (reasoning_settings or {}).get("summary")},
            "safety_identifier": None, "service_tier": "default",
            "store": request.get("store", True), "temperature": 1.0,
            "text": {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": request.get("tool_choice", "auto"),
            "tools": request.get("tools", []), "top_logprobs": 0, "top_p": 0.98,
            "truncation": "disabled", "usage": None, "user": None, "metadata": {},
        }


def _preceded_by(items: list[Any], index: int, reasoning_id: str,
                 issued: Mapping[str, dict[str, Any]]) -> bool:
    """Whether item ``index`` comes after its reasoning item, with only items of the same
    response (its siblings, by id) between them."""
    for earlier in range(index - 1, -1, -1):
        item = items[earlier]
        if not isinstance(item, dict):
            return False
        if item.get("id") == reasoning_id:
            return True
        sibling = issued.get(str(item.get("id")))
        if sibling is None or sibling["reasoning"] != reasoning_id:
            return False
    return False


def _encrypted_content() -> str:
    """An opaque blob shaped like OpenAI's (a Fernet token: ``gAAAAAB`` and base64)."""
    return "gAAAAAB" + base64.urlsafe_b64encode(os.urandom(480)).decode()


def _padding(text: str) -> str:
    """``obfuscation``: random characters that even out the event's size."""
    return secrets.token_urlsafe(12)[: max(16 - len(text), 1)]


def reasoning_items(request: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The reasoning items of a request's ``input``, in order."""
    return [item for item in request.get("input") or []
            if isinstance(item, dict) and item.get("type") == "reasoning"]

