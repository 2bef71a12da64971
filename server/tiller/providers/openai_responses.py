"""OpenAI's Responses API stream: its events, read as raw dicts (the OpenAI provider's hot
path), as ``MessageUpdate`` deltas and one final ``AssistantMessage``.

``response.output_item.added`` opens a content block per output item (reasoning -> thinking,
message -> text, function_call -> tool call; other kinds, such as hosted tools Tiller never
asks for, are skipped), the text, refusal, reasoning-summary, reasoning-text and
function-call-argument deltas extend it, ``response.output_item.done`` completes it (what it
holds that was never streamed becomes a delta), and ``response.completed`` /
``response.incomplete`` / ``response.failed`` / ``error`` end the stream. Summary parts of one
reasoning item are joined with a blank line. The final message keeps the output items as
``response_items`` (``openai_request`` sends them back).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from tiller.errors import StreamErrorEvent
from tiller.frozen import frozen
from tiller.providers.base import RETRY_HINT, json_payload
from tiller.providers.http import sse_events
from tiller.providers.openai_stream import (
    CONTENT_FILTER_ERROR,
    EMPTY_RESPONSE_ERROR,
    INCOMPLETE_STREAM_ERROR,
    error_text,
)
from tiller.providers.tool_arguments import streamed_tool_call
from tiller.types import (
    AssistantContent,
    AssistantMessage,
    MessageUpdate,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)

__all__ = ["TRANSIENT_CODES", "Failure", "ResponsesBuilder", "event_dicts", "map_usage"]

TRANSIENT_CODES = frozenset({"server_error", "rate_limit_exceeded", "vector_store_timeout"})
"""``ResponseError`` codes for which the same request may succeed later."""
_SUMMARY_SEPARATOR = "\n\n"
_UPDATE_KINDS: dict[str, Literal["thinking", "text", "toolCallArgs"]] = {
    "thinking": "thinking", "text": "text", "tool": "toolCallArgs"}



async def event_dicts(response: Any, window: float = 0.0) -> AsyncIterator[dict[str, Any]]:
    """The events of a streaming ``/responses`` answer (``http.sse_events``, read once per
    ``window``) as dicts. A payload that is not a typed JSON object raises ``ValueError``; an
    untyped ``{"error": ...}`` (a proxy's) raises StreamErrorEvent."""
    async for _, data in sse_events(response, window):
        if data.startswith("[DONE]"):
            return
        payload = json_payload(data)
        if not isinstance(payload, dict):
            raise ValueError(f"expected a JSON object, got {type(payload).__name__}")
        if "type" not in payload:
            error = payload.get("error")
            if error:
                raise StreamErrorEvent(error_text(error), error)
            raise ValueError("an event without a type")
        yield payload


@dataclass(eq=False)
class _Block:
    kind: Literal["thinking", "text", "tool"]
    index: int
    parts: list[str] = field(default_factory=list)
    call_id: str = ""
    name: str = ""
    summaries: int = 0
    item: dict[str, Any] | None = None


@frozen
class Failure:
    """How the stream itself said it failed (``response.failed``, ``error``)."""

    message: str
    retryable: bool


class ResponsesBuilder:
    """Absorbs Responses events; ``feed`` returns the deltas each one made, ``finish`` the
    final message with its stop reason, usage and ``response_items``."""

    def __init__(self) -> None:
        self.blocks: list[_Block] = []
        self._by_output: dict[int, int] = {}
        self.event_count = 0
        self.status: str | None = None
        """``completed``, ``incomplete`` or ``failed`` once the response said so."""
        self.incomplete_reason: str | None = None
        self.failure: Failure | None = None
        self.usage: Usage | None = None

    @property
    def ended(self) -> bool:
        return self.status is not None or self.failure is not None

    def feed(self, event: dict[str, Any]) -> list[MessageUpdate]:
        """Absorb one event; return its deltas in order."""
        self.event_count += 1
        kind = event["type"]
        if kind.endswith(".delta"):
            return self._delta(kind, event)
        if kind == "response.output_item.added":
            return self._added(event)
        if kind == "response.output_item.done":
            return self._done(event)
        if kind == "response.reasoning_summary_part.added":
            block = self._block(event, "thinking")
            if block is not None:
                block.summaries += 1
                if block.summaries > 1 and block.parts:
                    return [self._extend(block, _SUMMARY_SEPARATOR)]
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self._ended(kind, _object(event.get("response"), "response"))
        elif kind == "error":
            self._error(event)
        return []

    # -- events ----------------------------------------------------------------------------

    def _delta(self, kind: str, event: dict[str, Any]) -> list[MessageUpdate]:
        delta = event.get("delta")
        if not isinstance(delta, str) or not delta:
            return []
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            block = self._block(event, "text")
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            block = self._block(event, "thinking")
        elif kind == "response.function_call_arguments.delta":
            block = self._block(event, "tool")
        else:
            return []
        return [self._extend(block, delta)] if block is not None else []

    def _added(self, event: dict[str, Any]) -> list[MessageUpdate]:
        item = _object(event.get("item"), "item")
        kind = {"reasoning": "thinking", "message": "text",
                "function_call": "tool"}.get(str(item.get("type")))
        output_index = event.get("output_index")
        if kind is None or not isinstance(output_index, int):
            return []
        block = _Block(kind, len(self.blocks))  # type: ignore[arg-type]
        self.blocks.append(block)
        self._by_output[output_index] = block.index
        if kind != "tool":
            return []
        block.call_id = str(item.get("call_id") or item.get("id") or "")
        block.name = str(item.get("name") or "")
        return [MessageUpdate(kind="toolCallStart", index=block.index,
                              tool_call_id=block.call_id, tool_name=block.name)]

    def _done(self, event: dict[str, Any]) -> list[MessageUpdate]:
        """Keep the finished item; what it holds that was never streamed becomes a delta."""
        item = _object(event.get("item"), "item")
        index = self._by_output.get(event.get("output_index", -1))
        if index is None:
            return []
        block = self.blocks[index]
        streamed = "".join(block.parts)
        if block.kind == "thinking":
            final = _SUMMARY_SEPARATOR.join(
                str(part.get("text", "")) for part in item.get("summary") or []
                if isinstance(part, dict)
            ) or "".join(str(part.get("text", "")) for part in item.get("content") or []
                         if isinstance(part, dict))
            block.item = item
        elif block.kind == "text":
            final = "".join(str(part.get("text") or part.get("refusal") or "")
                            for part in item.get("content") or [] if isinstance(part, dict))
            block.item = {key: value for key, value in item.items() if key != "content"}
        else:
            final = str(item.get("arguments") or "")
            block.call_id = str(item.get("call_id") or block.call_id)
            block.name = str(item.get("name") or block.name)
            block.item = item
        if final.startswith(streamed) and len(final) > len(streamed):
            return [self._extend(block, final[len(streamed):])]
        if final and final != streamed:
            block.parts = [final]  # the item is the truth; the deltas were not
        return []

    def _ended(self, kind: str, response: dict[str, Any]) -> None:
        self.status = kind.removeprefix("response.")
        if (usage := response.get("usage")) is not None:
            self.usage = map_usage(_object(usage, "usage"))
        if self.status == "incomplete":
            details = _object(response.get("incomplete_details"), "incomplete_details")
            self.incomplete_reason = str(details.get("reason") or "unknown")
        elif self.status == "failed":
            error = _object(response.get("error"), "error")
            code = error.get("code")
            message = str(error.get("message") or "the response failed")
            text = f"openai: the response failed: {code}: {message}" if code else (
                f"openai: the response failed: {message}")
            retryable = code in TRANSIENT_CODES
            self.failure = Failure(f"{text} ({RETRY_HINT})" if retryable else text, retryable)

    def _error(self, event: dict[str, Any]) -> None:
        inner = event.get("error")
        error = inner if isinstance(inner, dict) else event
        code = error.get("code")
        message = str(error.get("message") or "An error occurred during streaming")
        retryable = code is None or code in TRANSIENT_CODES or error.get("type") == "server_error"
        text = f"openai: the provider reported an error mid-stream: {message}"
        self.failure = Failure(f"{text} ({RETRY_HINT})" if retryable else text, retryable)

    # -- blocks ----------------------------------------------------------------------------

    def _block(self, event: dict[str, Any], kind: str) -> _Block | None:
        index = self._by_output.get(event.get("output_index", -1))
        if index is None:
            return None
        block = self.blocks[index]
        return block if block.kind == kind else None

    def _extend(self, block: _Block, text: str) -> MessageUpdate:
        block.parts.append(text)
        return MessageUpdate(kind=_UPDATE_KINDS[block.kind], index=block.index, delta=text)

    # -- the end ---------------------------------------------------------------------------

    def finish(self, error: str | None) -> AssistantMessage:
        """The final message: the blocks as content, their items, the stop reason earned."""
        content: list[AssistantContent] = []
        for block in self.blocks:
            text = "".join(block.parts)
            if block.kind == "thinking":
                content.append(ThinkingContent(thinking=text))
            elif block.kind == "text":
                content.append(TextContent(text=text))
            else:
                content.append(streamed_tool_call(block.call_id, block.name, text))
        stop_reason, error = self._stop_reason(content, error)
        items = [block.item for block in self.blocks]
        return AssistantMessage(
            content=content, usage=self.usage or Usage(), stop_reason=stop_reason,
            error_message=error,
            response_items=None if any(item is None for item in items) or not items
            else [item for item in items if item is not None],
        )

    def _stop_reason(
        self, content: list[AssistantContent], error: str | None
    ) -> tuple[StopReason, str | None]:
        if error is not None:
            return "error", error
        if self.failure is not None:
            return "error", self.failure.message
        if self.event_count == 0:
            return "error", EMPTY_RESPONSE_ERROR
        if self.status is None:
            return "error", INCOMPLETE_STREAM_ERROR
        if self.status == "incomplete":
            if self.incomplete_reason == "max_output_tokens":
                return "length", None
            if self.incomplete_reason == "content_filter":
                return "error", CONTENT_FILTER_ERROR
            return "error", f"openai: the response is incomplete: {self.incomplete_reason}"
        if any(isinstance(block, ToolCall) for block in content):
            return "toolUse", None
        return "stop", None

    @property
    def retryable(self) -> bool:
        """Whether the error ``finish`` reports (without an explicit one) may pass on a retry."""
        if self.failure is not None:
            return self.failure.retryable
        return self.event_count == 0 or self.status is None


def _object(value: Any, what: str) -> dict[str, Any]:
    """``value`` if it is a dict, ``{}`` if it is null; otherwise the event is malformed."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{what} is not an object")
    return value


def map_usage(usage: dict[str, Any]) -> Usage:
    """Responses usage as Tiller's: cache reads and writes are split out of ``input_tokens``;
    ``reasoning_tokens`` (part of ``output_tokens``) is kept."""
    details = usage.get("input_tokens_details")
    details = details if isinstance(details, dict) else {}
    cached = details.get("cached_tokens") or 0
    written = details.get("cache_write_tokens") or 0
    output_details = usage.get("output_tokens_details")
    reasoning = output_details.get("reasoning_tokens") if isinstance(output_details, dict) else None
    return Usage(
        input_tokens=max((usage.get("input_tokens") or 0) - cached - written, 0),
        output_tokens=usage.get("output_tokens") or 0,
        cache_read_tokens=cached,
        cache_write_tokens=written,
        reasoning_tokens=reasoning if isinstance(reasoning, int) and reasoning else None,
    )
