"""OpenAI-compatible Chat Completions provider: OpenAI, OpenRouter, Ollama, vLLM, llama.cpp.

``OpenAIProvider.stream`` sends one streaming ``chat.completions.create`` call and maps the SSE
chunks to ``MessageUpdate`` deltas, then yields exactly one final ``AssistantMessage``. Every
failure (HTTP status, connection, timeout, empty or truncated stream, malformed chunk) becomes
that final message with ``stop_reason="error"`` and an ``error_message`` that starts with
``openai:`` and never contains the API key. Cancellation propagates; the response is closed.

Content block indices: a block is appended when its kind first appears. A text or thinking delta
extends the last block if that block is of the same kind, otherwise it opens a new block (so
text after a tool call opens a new text block). Tool call deltas go to the block opened for their
OpenAI ``index``. Every ``MessageUpdate.index`` is the index of its block in the final message.

The ``openai`` SDK is imported on first use, never at module import (it costs ~300 ms).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Literal

import anyio

from tiller.providers.base import (
    ModelRequest,
    SdkProvider,
    StreamItem,
    retry_after_seconds,
)
from tiller.providers.tool_arguments import streamed_tool_call
from tiller.types import (
    AssistantContent,
    AssistantMessage,
    ImageContent,
    Message,
    MessageUpdate,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletionChunk
    from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall
    from openai.types.completion_usage import CompletionUsage

__all__ = ["OpenAIProvider", "build_request_params"]

RETRY_HINT = "temporary: retrying may succeed"
EMPTY_RESPONSE_ERROR = "openai: the provider returned an empty response (HTTP 200 with no data)"
INCOMPLETE_STREAM_ERROR = f"openai: the stream ended before the message completed ({RETRY_HINT})"
CONTENT_FILTER_ERROR = "the provider's content filter stopped the response"
TRANSIENT_STREAM_ERRORS = (EMPTY_RESPONSE_ERROR, INCOMPLETE_STREAM_ERROR)
_ERROR_HINTS = {
    401: "check OPENAI_API_KEY",
    403: "check OPENAI_API_KEY and the model's access rights",
    404: "check the model name and the base URL",
    408: RETRY_HINT,
    409: RETRY_HINT,
    429: f"rate limited; {RETRY_HINT}",
}


class OpenAIProvider(SdkProvider):
    """Streams Chat Completions from any OpenAI-compatible server.

    ``base_url`` and ``api_key`` left as None fall back to the SDK's defaults (which read
    ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``). An injected ``http_client`` (an
    ``httpx2.AsyncClient``) is used as is and not closed by ``aclose``. The SDK's own retries
    are off: a failure is reported at once.
    """

    name = "openai"

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        http_client: Any = None,
        request_timeout: float = 600.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            model=model, base_url=base_url, api_key=api_key, http_client=http_client,
            headers=headers, request_timeout=request_timeout,
        )
        self._client: AsyncOpenAI | None = None

    def _get_client(self) -> AsyncOpenAI:
        """The SDK client, created (and the SDK imported) on first use."""
        if self._client is None:
            import openai

            self._client = openai.AsyncOpenAI(
                api_key=self._api_key,
                base_url=self._base_url,
                http_client=self._http_client,
                timeout=self._request_timeout,
                max_retries=0,
                default_headers=self._headers or None,
            )
        return self._client

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Yield deltas, then exactly one final AssistantMessage; never raise for failures."""
        builder = _MessageBuilder()
        try:
            client = self._get_client()
        except Exception as exc:  # the SDK refuses to build a client without credentials
            yield self._final(builder, self._redact(f"openai: {exc}"))
            return
        params = build_request_params(request, self.model)
        response: Any = None
        error: str | None = None
        failure: Exception | None = None
        try:
            response = await client.chat.completions.create(**params)
            async for chunk in response:
                for update in builder.feed(chunk):
                    yield update
        except Exception as exc:
            failure = exc
            error = self._describe_failure(exc, started=response is not None)
        finally:
            if response is not None:
                with anyio.CancelScope(shield=True):
                    await response.close()
        message = self._final(builder, error)
        if message.stop_reason == "error":
            if failure is not None:
                message.retryable = _is_transient(failure)
                message.retry_after = _retry_after(failure)
            else:
                message.retryable = message.error_message in TRANSIENT_STREAM_ERRORS
        yield message

    def _final(self, builder: _MessageBuilder, error: str | None) -> AssistantMessage:
        message = builder.finish(error)
        message.provider = self.name
        message.model = self.model
        return message

    def _describe_failure(self, exc: Exception, *, started: bool) -> str:
        """A user-actionable message for an exception raised while calling or streaming."""
        import openai

        url = self._display_url()
        if isinstance(exc, openai.APIStatusError):
            message = _status_error_message(exc.status_code, exc.body, exc.message)
        elif isinstance(exc, openai.APITimeoutError):
            what = "the stream stalled" if started else "no response"
            message = (
                f"openai: {what}: nothing received from {url} within "
                f"{self._request_timeout:g}s ({RETRY_HINT})"
            )
        elif isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            if started:
                message = f"openai: the connection to {url} broke mid-stream: {cause}"
                message += f" ({RETRY_HINT})"
            else:
                message = f"openai: cannot connect to {url}: {cause}"
        elif isinstance(exc, openai.APIError):
            message = f"openai: the provider reported an error mid-stream: {exc.message}"
        elif isinstance(exc, ValueError):
            message = f"openai: the provider sent a malformed stream chunk: {exc}"
        else:
            message = f"openai: unexpected failure: {type(exc).__name__}: {exc}"
        return self._redact(message)


def _is_transient(exc: Exception) -> bool:
    """Whether retrying the same request may succeed: rate limits, server errors, timeouts,
    broken connections and errors reported mid-stream. Malformed chunks are not transient."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return isinstance(exc, openai.APIError)  # timeouts, connection errors, mid-stream errors


def _retry_after(exc: Exception) -> float | None:
    """Seconds from the failed response's ``retry-after-ms`` or ``retry-after`` header."""
    return retry_after_seconds(getattr(getattr(exc, "response", None), "headers", None))


def _status_error_message(status: int, body: object, fallback: str) -> str:
    """``openai: 401 Unauthorized: <provider's message> (<hint>)`` from an HTTP error."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "HTTP error"
    detail = fallback
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            detail = inner["message"]
        elif isinstance(inner, str):
            detail = inner
    elif isinstance(body, str) and body.strip():
        detail = body.strip()[:500]
    hint = _ERROR_HINTS.get(status) or (f"provider failure; {RETRY_HINT}" if status >= 500 else "")
    message = f"openai: {status} {phrase}: {detail}"
    return f"{message} ({hint})" if hint else message


# ---------------------------------------------------------------------------------------------
# Request conversion


def build_request_params(request: ModelRequest, model: str) -> dict[str, Any]:
    """The keyword arguments of ``chat.completions.create`` for ``request`` (streaming on)."""
    messages: list[dict[str, Any]] = []
    if request.system_prompt:
        messages.append({"role": "system", "content": request.system_prompt})
    messages.extend(_convert_message(message) for message in request.messages)
    params: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in request.tools
        ]
    if request.max_tokens is not None:
        params["max_tokens"] = request.max_tokens
    if request.thinking != "off":
        params["reasoning_effort"] = request.thinking  # reasoning models only (o-series, gpt-5)
    return params


def _convert_message(message: Message) -> dict[str, Any]:
    """One Tiller message as one Chat Completions message."""
    if isinstance(message, UserMessage):
        return {"role": "user", "content": _user_content(message.content)}
    if isinstance(message, ToolResultMessage):
        text = message.text
        if any(isinstance(block, ImageContent) for block in message.content):
            text = f"{text}\n[image omitted]" if text else "[image omitted]"
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": text}
    result: dict[str, Any] = {"role": "assistant", "content": message.text}
    if message.tool_calls:
        result["content"] = message.text or None
        result["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in message.tool_calls
        ]
    return result


def _user_content(content: str | list[TextContent | ImageContent]) -> str | list[dict[str, Any]]:
    """A string stays a string, and so does text-only content (local servers prefer it)."""
    if isinstance(content, str):
        return content
    if all(isinstance(block, TextContent) for block in content):
        return "".join(block.text for block in content if isinstance(block, TextContent))
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append({"type": "text", "text": block.text})
        else:
            url = f"data:{block.mime_type};base64,{block.data}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


# ---------------------------------------------------------------------------------------------
# Stream accumulation


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


class _MessageBuilder:
    """Accumulates chunks into content blocks; ``feed`` says which deltas each chunk made."""

    def __init__(self) -> None:
        self.blocks: list[_TextBlock | _ToolBlock] = []
        self.tool_block_by_index: dict[int, int] = {}
        self.chunk_count = 0
        self.finish_reason: str | None = None
        self.usage = Usage()

    def feed(self, chunk: ChatCompletionChunk) -> list[MessageUpdate]:
        """Absorb one chunk (only choice 0 counts); return its deltas in order."""
        self.chunk_count += 1
        if chunk.usage is not None:
            self.usage = _map_usage(chunk.usage)
        updates: list[MessageUpdate] = []
        for choice in chunk.choices or []:
            if getattr(choice, "index", 0) != 0:
                continue
            delta = choice.delta
            if delta is not None:
                reasoning = getattr(delta, "reasoning_content", None) or getattr(
                    delta, "reasoning", None
                )
                if isinstance(reasoning, str) and reasoning:
                    updates.append(self._append_text("thinking", reasoning))
                for text in (delta.content, delta.refusal):
                    if isinstance(text, str) and text:
                        updates.append(self._append_text("text", text))
                for tool_call in delta.tool_calls or []:
                    updates.extend(self._tool_call_delta(tool_call))
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        return updates

    def _append_text(self, kind: Literal["text", "thinking"], text: str) -> MessageUpdate:
        """Extend the last block if it is of ``kind``, else open a new one."""
        last = self.blocks[-1] if self.blocks else None
        if not (isinstance(last, _TextBlock) and last.kind == kind):
            last = _TextBlock(kind)
            self.blocks.append(last)
        last.parts.append(text)
        return MessageUpdate(kind=kind, index=len(self.blocks) - 1, delta=text)

    def _tool_call_delta(self, tool_call: ChoiceDeltaToolCall) -> list[MessageUpdate]:
        """Open a tool call on its first chunk, then collect its argument fragments.

        A chunk whose id differs from the open call's id starts a new call even at the same
        ``index`` (some servers send every call complete at index 0).
        """
        updates: list[MessageUpdate] = []
        key = tool_call.index if isinstance(tool_call.index, int) else 0
        function = tool_call.function
        name = function.name if function is not None else None
        fragment = function.arguments if function is not None else None
        block_index = self.tool_block_by_index.get(key, -1)
        block = self.blocks[block_index] if block_index >= 0 else None
        if not isinstance(block, _ToolBlock) or (
            tool_call.id and block.server_id and tool_call.id != block.server_id
        ):
            call_id = tool_call.id or f"call_{uuid.uuid4().hex}"
            block = _ToolBlock(id=call_id, name=name or "", server_id=tool_call.id)
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
        if fragment:
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


def _map_usage(usage: CompletionUsage) -> Usage:
    """OpenAI usage as Tiller's: cached prompt tokens are split out of ``input_tokens``."""
    prompt = usage.prompt_tokens or 0
    details = usage.prompt_tokens_details
    cached = (details.cached_tokens or 0) if details is not None else 0
    return Usage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=usage.completion_tokens or 0,
        cache_read_tokens=cached,
    )
