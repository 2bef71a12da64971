"""Chat Completions stream accumulation over raw chunk dicts (the OpenAI provider's hot path).

``chunk_dicts`` reads a streaming answer's events (``tiller.providers.http``) and yields each
``data:`` payload as the dict ``json.loads`` made of it: no pydantic model per chunk (that was
~60% of the server's time while streaming). An ``{"error": ...}`` payload raises
StreamErrorEvent; a payload that is not JSON, or not shaped like a chunk, raises ``ValueError``
(reported as a malformed chunk).

``MessageBuilder.feed`` absorbs one chunk dict and returns the ``MessageUpdate`` deltas it made;
``finish`` builds the final ``AssistantMessage`` and its stop reason.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from tiller.errors import StreamErrorEvent
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
    "CONTENT_FILTER_ERROR",
    "EMPTY_RESPONSE_ERROR",
    "INCOMPLETE_STREAM_ERROR",
    "MessageBuilder",
    "chunk_dicts",
]

EMPTY_RESPONSE_ERROR = "openai: the provider returned an empty response (HTTP 200 with no data)"
INCOMPLETE_STREAM_ERROR = f"openai: the stream ended before the message completed ({RETRY_HINT})"
CONTENT_FILTER_ERROR = "the provider's content filter stopped the response"


async def chunk_dicts(response: Any, window: float = 0.0) -> AsyncIterator[dict[str, Any]]:
    """The chunks of a streaming answer (``http.sse_events``, read once per ``window``) as
    dicts, up to ``[DONE]`` (the rest of the body read, ``http.drain``) or the end. An
    ``{"error": ...}`` payload raises StreamErrorEvent; one that is not a JSON object
    ValueError."""
    events = sse_events(response, window)
    async for _, data in events:
        if data.startswith("[DONE]"):
            await drain(events, response)
            return
        payload = json_payload(data)
        if not isinstance(payload, dict):
            raise ValueError(f"expected a JSON object, got {type(payload).__name__}")
        error = payload.get("error")
        if error:
            raise StreamErrorEvent(error_text(error), error)
        yield payload


def error_text(error: Any) -> str:
    """The message of a stream's ``error`` payload (a default when it has none)."""
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) and message else (
        "An error occurred during streaming")


@dataclass
class _TextBlock:
    kind: Literal["text", "thinking"]
    parts: list[str] = field(default_factory=list)


@dataclass
class _ToolBlock:
    id: str
    name: str
    server_id: str | None
    argument_parts: list[str] = field(default_factory=list)


def _object(value: Any, what: str) -> dict[str, Any]:
    """``value`` if it is a dict, ``{}`` if it is null; otherwise the chunk is malformed."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{what} is not an object")
    return value


class MessageBuilder:
    """Accumulates chunk dicts into content blocks; ``feed`` says which deltas each one made.

    Tool call ids are unique in the conversation: a call the server gave no id, or an id in
    ``taken`` (the request's calls) or already in this message, gets a new one (some local
    servers number their calls ``call_0``, ``call_1``... in every reply, or send one id twice);
    clients and the session log tell calls apart by id."""

    def __init__(self, taken: Iterable[str] = ()) -> None:
        self.taken = set(taken)
        self.blocks: list[_TextBlock | _ToolBlock] = []
        self.tool_block_by_index: dict[int, int] = {}
        self.chunk_count = 0
        self.finish_reason: str | None = None
        self.usage = Usage()
        self.usage_reported = False
        """Whether a chunk carried usage (servers that report none get an estimate)."""

    def feed(self, chunk: dict[str, Any]) -> list[MessageUpdate]:
        """Absorb one chunk (only choice 0 counts); return its deltas in order."""
        self.chunk_count += 1
        usage = chunk.get("usage")
        if usage is not None:
            self.usage = map_usage(_object(usage, "usage"))
            self.usage_reported = True
        updates: list[MessageUpdate] = []
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise ValueError("choices is not a list")
        for raw_choice in choices:
            choice = _object(raw_choice, "a choice")
            if choice.get("index", 0) != 0:
                continue
            delta = _object(choice.get("delta"), "delta")
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                updates.append(self._append_text("thinking", reasoning))
            for text in (delta.get("content"), delta.get("refusal")):
                if isinstance(text, str) and text:
                    updates.append(self._append_text("text", text))
            tool_calls = delta.get("tool_calls") or []
            if not isinstance(tool_calls, list):
                raise ValueError("tool_calls is not a list")
            for tool_call in tool_calls:
                updates.extend(self._tool_call_delta(_object(tool_call, "a tool call")))
            finish_reason = choice.get("finish_reason")
            if finish_reason:
                self.finish_reason = str(finish_reason)
        return updates

    def _append_text(self, kind: Literal["text", "thinking"], text: str) -> MessageUpdate:
        """Extend the last block if it is of ``kind``, else open a new one."""
        last = self.blocks[-1] if self.blocks else None
        if not (isinstance(last, _TextBlock) and last.kind == kind):
            last = _TextBlock(kind)
            self.blocks.append(last)
        last.parts.append(text)
        return MessageUpdate(kind=kind, index=len(self.blocks) - 1, delta=text)

    def _tool_call_delta(self, tool_call: dict[str, Any]) -> list[MessageUpdate]:
        """Open a tool call on its first chunk, then collect its argument fragments.

        A chunk whose id differs from the open call's id starts a new call even at the same
        ``index`` (some servers send every call complete at index 0).
        """
        updates: list[MessageUpdate] = []
        index = tool_call.get("index")
        key = index if isinstance(index, int) else 0
        server_id = tool_call.get("id") if isinstance(tool_call.get("id"), str) else None
        function = _object(tool_call.get("function"), "function")
        name = function.get("name") if isinstance(function.get("name"), str) else None
        fragment = function.get("arguments")
        block_index = self.tool_block_by_index.get(key, -1)
        block = self.blocks[block_index] if block_index >= 0 else None
        if not isinstance(block, _ToolBlock) or (
            server_id and block.server_id and server_id != block.server_id
        ):
            call_id = server_id if server_id and server_id not in self.taken else (
                f"call_{uuid.uuid4().hex}")
            self.taken.add(call_id)
            block = _ToolBlock(id=call_id, name=name or "", server_id=server_id)
            self.blocks.append(block)
            block_index = len(self.blocks) - 1
            self.tool_block_by_index[key] = block_index
            updates.append(
                MessageUpdate(
                    kind="toolCallStart",
                    index=block_index,
                    tool_call_id=block.id,
                    tool_name=block.name,
                )
            )
        elif name and not block.name:
            block.name = name
        if isinstance(fragment, str) and fragment:
            block.argument_parts.append(fragment)
            updates.append(MessageUpdate(kind="toolCallArgs", index=block_index, delta=fragment))
        return updates

    def finish(self, error: str | None) -> AssistantMessage:
        """The final message: blocks as content, and the stop reason the stream earned."""
        content: list[AssistantContent] = []
        for block in self.blocks:
            if isinstance(block, _ToolBlock):
                raw = "".join(block.argument_parts)
                content.append(streamed_tool_call(block.id, block.name, raw))
            elif block.kind == "text":
                content.append(TextContent(text="".join(block.parts)))
            else:
                content.append(ThinkingContent(thinking="".join(block.parts)))
        has_tool_calls = any(isinstance(block, ToolCall) for block in content)
        stop_reason, error = self._stop_reason(has_tool_calls, error)
        return AssistantMessage(
            content=content, usage=self.usage, stop_reason=stop_reason, error_message=error
        )

    def _stop_reason(
        self, has_tool_calls: bool, error: str | None
    ) -> tuple[StopReason, str | None]:
        """How the stream ended: the explicit ``error`` first, then what the chunks said."""
        if error is not None:
            return "error", error
        if self.chunk_count == 0:
            return "error", EMPTY_RESPONSE_ERROR
        if self.finish_reason is None:
            return "error", INCOMPLETE_STREAM_ERROR
        if self.finish_reason == "content_filter":
            return "error", CONTENT_FILTER_ERROR
        if self.finish_reason == "length":
            return "length", None
        if has_tool_calls or self.finish_reason in ("tool_calls", "function_call"):
            return "toolUse", None
        return "stop", None


def map_usage(usage: dict[str, Any]) -> Usage:
    """OpenAI usage as Tiller's: cached prompt tokens are split out of ``input_tokens``."""
    prompt = usage.get("prompt_tokens") or 0
    details = usage.get("prompt_tokens_details")
    cached = (details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
    completion = usage.get("completion_tokens_details")
    reasoning = completion.get("reasoning_tokens") if isinstance(completion, dict) else None
    return Usage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=usage.get("completion_tokens") or 0,
        cache_read_tokens=cached,
        reasoning_tokens=reasoning if isinstance(reasoning, int) and reasoning else None,
    )
