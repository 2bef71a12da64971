"""Messages API stream accumulation over raw event dicts (the Anthropic provider's hot path).

``event_dicts`` reads a streaming answer's events (``tiller.providers.http``), skipping ``ping``
and unnamed ones, and yields each event's ``data:`` as the dict ``json.loads`` made of it: no
pydantic model per event; after ``message_stop`` it reads the rest of the body (``http.drain``).
An ``error`` event raises StreamErrorEvent (its body the event's payload); a payload that is not
a JSON object, or an event not shaped as the API documents, raises ``ValueError`` (reported as a
malformed stream event).

``MessageBuilder.feed`` absorbs one event dict and returns the ``MessageUpdate`` deltas it made;
``finish`` builds the final ``AssistantMessage`` and its stop reason (see anthropic.py's
docstring for the decisions).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from tiller import jsontext
from tiller.errors import StreamErrorEvent
from tiller.frozen import frozen
from tiller.providers.anthropic_request import REDACTED_THINKING_PREFIX
from tiller.providers.base import RETRY_HINT, json_payload
from tiller.providers.http import drain, sse_events
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

__all__ = [
    "EMPTY_RESPONSE_ERROR",
    "INCOMPLETE_STREAM_ERROR",
    "REFUSAL_ERROR",
    "Failure",
    "MessageBuilder",
    "event_dicts",
]

EMPTY_RESPONSE_ERROR = (
    f"anthropic: the provider returned an empty response (HTTP 200 with no events) ({RETRY_HINT})"
)
INCOMPLETE_STREAM_ERROR = f"anthropic: the stream ended before the message completed ({RETRY_HINT})"
REFUSAL_ERROR = "anthropic: the model refused to continue (stop_reason: refusal)"


@frozen
class Failure:
    """What went wrong, as the final message will say it."""

    message: str
    retryable: bool = False
    retry_after: float | None = None


async def event_dicts(response: Any, window: float = 0.0) -> AsyncIterator[dict[str, Any]]:
    """The events of a streaming Messages answer (``http.sse_events``, read once per
    ``window``) as dicts (``ping`` and unnamed ones left out), up to ``message_stop`` (the rest
    of the body read) or the end."""
    events = sse_events(response, window)
    async for name, data in events:
        if name in ("ping", ""):
            continue
        if name == "error":
            try:
                body: Any = jsontext.loads(data)
                message = f"{body}"
            except ValueError:
                body, message = data, data
            raise StreamErrorEvent(message, body)
        payload = json_payload(data)
        if not isinstance(payload, dict):
            raise ValueError(f"expected a JSON object, got {type(payload).__name__}")
        yield payload
        if payload.get("type") == "message_stop":
            await drain(events, response)
            return


@dataclass
class _TextBlock:
    kind: Literal["text", "thinking"]
    parts: list[str] = field(default_factory=list)
    signature: str | None = None


@dataclass
class _ToolBlock:
    id: str
    name: str
    initial_input: dict[str, Any]
    argument_parts: list[str] = field(default_factory=list)


class MessageBuilder:
    """Accumulates event dicts into content blocks; ``feed`` says which deltas each made."""

    def __init__(self) -> None:
        self.blocks: list[_TextBlock | _ToolBlock] = []
        self.block_by_index: dict[int, int] = {}
        self.event_count = 0
        self.stopped = False
        self.stop_reason: str | None = None
        self.refusal_explanation: str | None = None
        self.usage = Usage()

    def feed(self, event: dict[str, Any]) -> list[MessageUpdate]:
        """Absorb one event; return its deltas in order. ValueError if it is ill-shaped."""
        self.event_count += 1
        try:
            return self._feed(event)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{event.get('type')} event: {type(exc).__name__}: {exc}") from None

    def _feed(self, event: dict[str, Any]) -> list[MessageUpdate]:
        kind = event.get("type")
        if kind == "message_start":
            self._absorb_usage(event["message"].get("usage") or {})
        elif kind == "content_block_start":
            return self._start_block(event["index"], event["content_block"])
        elif kind == "content_block_delta":
            return self._delta(event["index"], event["delta"])
        elif kind == "message_delta":
            delta = event["delta"]
            self.stop_reason = delta.get("stop_reason") or self.stop_reason
            details = delta.get("stop_details")
            if isinstance(details, dict) and details.get("explanation"):
                self.refusal_explanation = str(details["explanation"])
            self._absorb_usage(event.get("usage") or {})
        elif kind == "message_stop":
            self.stopped = True
        return []

    def _absorb_usage(self, usage: dict[str, Any]) -> None:
        """Take the counts ``usage`` reports (cumulative), keeping those it leaves out."""
        counts = {
            "input_tokens": usage.get("input_tokens"),
            "output_tokens": usage.get("output_tokens"),
            "cache_read_tokens": usage.get("cache_read_input_tokens"),
            "cache_write_tokens": usage.get("cache_creation_input_tokens"),
        }
        known = {name: value for name, value in counts.items() if isinstance(value, int)}
        if known:
            self.usage = self.usage.model_copy(update=known)

    def _start_block(self, index: int, block: dict[str, Any]) -> list[MessageUpdate]:
        """Open the block Anthropic numbered ``index``; skip kinds Tiller cannot represent."""
        position = len(self.blocks)
        kind = block.get("type")
        if kind == "tool_use":
            given = block.get("input")
            tool = _ToolBlock(id=block["id"], name=block["name"],
                              initial_input=given if isinstance(given, dict) else {})
            self.blocks.append(tool)
            self.block_by_index[index] = position
            update = MessageUpdate(
                kind="toolCallStart", index=position, tool_call_id=tool.id, tool_name=tool.name
            )
            return [update]
        if kind == "redacted_thinking":
            signature = REDACTED_THINKING_PREFIX + block["data"]
            self.blocks.append(_TextBlock("thinking", signature=signature))
            self.block_by_index[index] = position
            return []
        if kind == "text":
            opened, initial = _TextBlock("text"), block.get("text")
        elif kind == "thinking":
            opened = _TextBlock("thinking", signature=block.get("signature"))
            initial = block.get("thinking")
        else:
            return []
        self.blocks.append(opened)
        self.block_by_index[index] = position
        return [self._append(position, initial)] if isinstance(initial, str) and initial else []

    def _delta(self, index: int, delta: dict[str, Any]) -> list[MessageUpdate]:
        """Apply one ``content_block_delta`` to the block opened for ``index``."""
        position = self.block_by_index.get(index)
        if position is None:
            return []
        block = self.blocks[position]
        kind = delta.get("type")
        if isinstance(block, _ToolBlock):
            fragment = delta.get("partial_json")
            if kind == "input_json_delta" and isinstance(fragment, str) and fragment:
                block.argument_parts.append(fragment)
                return [MessageUpdate(kind="toolCallArgs", index=position, delta=fragment)]
            return []
        if kind == "signature_delta":
            block.signature = (block.signature or "") + str(delta["signature"])
            return []
        text = delta.get("text") if kind == "text_delta" else (
            delta.get("thinking") if kind == "thinking_delta" else None
        )
        if isinstance(text, str) and text:
            return [self._append(position, text)]
        return []

    def _append(self, position: int, text: str) -> MessageUpdate:
        block = self.blocks[position]
        assert isinstance(block, _TextBlock)
        block.parts.append(text)
        return MessageUpdate(kind=block.kind, index=position, delta=text)

    def finish(self, failure: Failure | None) -> AssistantMessage:
        """The final message: blocks as content, and the stop reason the stream earned."""
        content: list[AssistantContent] = []
        for block in self.blocks:
            if isinstance(block, _ToolBlock):
                raw = "".join(block.argument_parts)
                content.append(
                    streamed_tool_call(block.id, block.name, raw)
                    if raw.strip()
                    else ToolCall(id=block.id, name=block.name, arguments=block.initial_input)
                )
            elif block.kind == "text":
                content.append(TextContent(text="".join(block.parts)))
            else:
                thinking = "".join(block.parts)
                content.append(
                    ThinkingContent(thinking=thinking, signature=block.signature or None)
                )
        has_tool_calls = any(isinstance(block, ToolCall) for block in content)
        stop_reason, failure = self._stop_reason(has_tool_calls, failure)
        return AssistantMessage(
            content=content,
            usage=self.usage,
            stop_reason=stop_reason,
            error_message=failure.message if failure else None,
            retryable=failure.retryable if failure else False,
            retry_after=failure.retry_after if failure else None,
        )

    def _stop_reason(
        self, has_tool_calls: bool, failure: Failure | None
    ) -> tuple[StopReason, Failure | None]:
        """How the stream ended: the explicit ``failure`` first, then what the events said."""
        if failure is not None:
            return "error", failure
        if self.event_count == 0:
            return "error", Failure(EMPTY_RESPONSE_ERROR, retryable=True)
        if not self.stopped:
            return "error", Failure(INCOMPLETE_STREAM_ERROR, retryable=True)
        if self.stop_reason == "refusal":
            explanation = f": {self.refusal_explanation}" if self.refusal_explanation else ""
            return "error", Failure(REFUSAL_ERROR + explanation)
        if self.stop_reason in ("max_tokens", "model_context_window_exceeded"):
            return "length", None
        if has_tool_calls or self.stop_reason == "tool_use":
            return "toolUse", None
        return "stop", None
