"""Anthropic Messages provider: Claude through the ``anthropic`` SDK's streaming Messages API.

``AnthropicProvider.stream`` sends one ``messages.create(stream=True)`` call, maps the raw stream
events to ``MessageUpdate`` deltas, then yields exactly one final ``AssistantMessage``. Every
failure (HTTP status, connection, timeout, an ``error`` event mid-stream, an empty or truncated
stream, a refusal) becomes that final message with ``stop_reason="error"`` and an
``error_message`` that starts with ``anthropic:`` and never contains the API key. Transient ones
(408, 409, 429, 5xx, 529, ``overloaded_error``, connection errors, timeouts, an empty 200 stream,
a stream cut before ``message_stop``) also set ``retryable``, and ``retry_after`` when the server
sent ``retry-after``. Cancellation propagates; the response is closed.

Every ``MessageUpdate.index`` is the index of its block in the final message. Block kinds Tiller
has no type for (server tools and their results) are skipped, so Anthropic's indices are remapped.

Decisions:
* Thinking goes back to the API only with its signature (the API rejects unsigned thinking). A
  ``ThinkingContent`` without one (from another provider, or cut before its ``signature_delta``)
  is dropped, not sent as text: as text, private reasoning would read as something said.
* ``redacted_thinking`` becomes ``ThinkingContent(thinking="", signature="redacted_thinking:" +
  data)`` and is sent back unchanged; it has no delta. Signatures are base64: no ambiguity.
* A 200 response with no events is a retryable error: in practice a proxy hiccup.
* Tool call ids are sanitized to ``[A-Za-z0-9_-]`` (what the API accepts) in ``tool_use`` and
  ``tool_result`` alike, so a history from another provider still pairs up.

The request conversion (``build_request_params``) lives in ``anthropic_request`` and is
re-exported here. The ``anthropic`` SDK is imported on first use, never at module import (it
costs ~770 ms).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Literal

import anyio

from tiller.providers.anthropic_request import (
    REDACTED_THINKING_PREFIX,
    THINKING_BUDGETS,
    build_request_params,
)
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
    MessageUpdate,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)

if TYPE_CHECKING:
    from anthropic import APIStatusError, AsyncAnthropic
    from anthropic.types import (
        ContentBlock,
        MessageDeltaUsage,
        RawContentBlockDelta,
        RawMessageStreamEvent,
    )
    from anthropic.types import Usage as AnthropicUsage

__all__ = [
    "EMPTY_RESPONSE_ERROR",
    "INCOMPLETE_STREAM_ERROR",
    "REDACTED_THINKING_PREFIX",
    "THINKING_BUDGETS",
    "AnthropicProvider",
    "build_request_params",
]

INSTALL = "pip install anthropic"
RETRY_HINT = "temporary: retrying may succeed"
EMPTY_RESPONSE_ERROR = (
    f"anthropic: the provider returned an empty response (HTTP 200 with no events) ({RETRY_HINT})"
)
INCOMPLETE_STREAM_ERROR = f"anthropic: the stream ended before the message completed ({RETRY_HINT})"
REFUSAL_ERROR = "anthropic: the model refused to continue (stop_reason: refusal)"
CONTEXT_TOO_LONG_HINT = "the context is too long for the model: start a new session"
RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
RETRYABLE_TYPES = frozenset({"rate_limit_error", "api_error", "overloaded_error", "timeout_error"})
_ERROR_HINTS = {
    401: "check ANTHROPIC_API_KEY",
    403: "check ANTHROPIC_API_KEY and the model's access rights",
    404: "check the model name and the base URL",
    429: f"rate limited; {RETRY_HINT}",
    529: f"the API is overloaded; {RETRY_HINT}",
}


@dataclass(frozen=True)
class _Failure:
    """What went wrong, as the final message will say it."""

    message: str
    retryable: bool = False
    retry_after: float | None = None


class AnthropicProvider(SdkProvider):
    """Streams the Anthropic Messages API.

    ``base_url`` and ``api_key`` left as None fall back to the SDK's defaults (which read
    ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY``). ``headers`` are sent with every request.
    An injected ``http_client`` (an ``httpx2.AsyncClient``) is used as is and not closed by
    ``aclose``. ``default_max_tokens`` is sent when the request sets no ``max_tokens`` (the API
    requires one). The SDK's own retries are off: a failure is reported at once.
    """

    name = "anthropic"

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        http_client: Any = None,
        headers: Mapping[str, str] | None = None,
        request_timeout: float = 600.0,
        default_max_tokens: int = 8192,
    ) -> None:
        super().__init__(
            model=model, base_url=base_url, api_key=api_key, http_client=http_client,
            headers=headers, request_timeout=request_timeout,
        )
        self._default_max_tokens = default_max_tokens
        self._client: AsyncAnthropic | None = None

    def _get_client(self) -> AsyncAnthropic:
        """The SDK client, created (and the SDK imported) on first use."""
        if self._client is None:
            import anthropic

            self._client = anthropic.AsyncAnthropic(
                api_key=self._api_key,
                base_url=self._base_url,
                http_client=self._http_client,
                default_headers=self._headers or None,
                timeout=self._request_timeout,
                max_retries=0,
            )
        return self._client

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Yield deltas, then exactly one final AssistantMessage; never raise for failures."""
        builder = _MessageBuilder()
        try:
            client = self._get_client()
        except Exception as exc:  # e.g. a credentials profile that cannot be loaded
            yield self._final(builder, self._describe_failure(exc, started=False))
            return
        params = build_request_params(request, self.model, self._default_max_tokens)
        response: Any = None
        failure: _Failure | None = None
        try:
            response = await client.messages.create(**params)
            async for event in response:
                for update in builder.feed(event):
                    yield update
        except Exception as exc:
            failure = self._describe_failure(exc, started=response is not None)
        finally:
            if response is not None:
                with anyio.CancelScope(shield=True):
                    await response.close()
        yield self._final(builder, failure)

    def _final(self, builder: _MessageBuilder, failure: _Failure | None) -> AssistantMessage:
        message = builder.finish(failure)
        message.provider = self.name
        message.model = self.model
        return message

    def _describe_failure(self, exc: Exception, *, started: bool) -> _Failure:
        """A user-actionable failure for an exception raised while calling or streaming.

        Mid-stream transport errors reach us as the SDK's HTTP library's own exceptions (it does
        not wrap them), so they are recognized by class name rather than by importing it.
        """
        if isinstance(exc, ImportError):
            return _Failure(f"anthropic: the anthropic SDK is not installed ({exc}): {INSTALL}")
        import anthropic

        url = self._display_url()
        transport = _transport_error_kind(exc)
        if isinstance(exc, anthropic.APIStatusError):
            failure = _status_failure(exc)
        elif isinstance(exc, anthropic.APITimeoutError) or transport == "timeout":
            what = "the stream stalled" if started else "no response"
            limit = f"{self._request_timeout:g}s"
            message = f"anthropic: {what}: nothing received from {url} within {limit}"
            failure = _Failure(f"{message} ({RETRY_HINT})", retryable=True)
        elif isinstance(exc, anthropic.APIConnectionError) or transport == "transport":
            cause = exc.__cause__ or exc
            if started:
                message = f"anthropic: the connection to {url} broke mid-stream: {cause}"
            else:
                message = f"anthropic: cannot connect to {url}: {cause}"
            failure = _Failure(f"{message} ({RETRY_HINT})", retryable=True)
        elif isinstance(exc, anthropic.APIError):
            failure = _Failure(f"anthropic: the provider sent an invalid response: {exc.message}")
        elif isinstance(exc, ValueError):
            failure = _Failure(f"anthropic: the provider sent a malformed stream event: {exc}")
        elif isinstance(exc, anthropic.CredentialsError):
            failure = _Failure(
                f"anthropic: cannot load credentials: {exc} (check ANTHROPIC_API_KEY)"
            )
        elif isinstance(exc, TypeError) and "authentication" in str(exc):
            failure = _Failure("anthropic: no API key: set ANTHROPIC_API_KEY")
        else:
            failure = _Failure(f"anthropic: unexpected failure: {type(exc).__name__}: {exc}")
        return _Failure(self._redact(failure.message), failure.retryable, failure.retry_after)


def _transport_error_kind(exc: BaseException) -> Literal["timeout", "transport"] | None:
    """``timeout`` or ``transport`` for an httpx(2)/httpcore(2) transport error, else None."""
    names = {
        cls.__name__
        for cls in type(exc).__mro__
        if cls.__module__.split(".")[0] in ("httpx", "httpx2", "httpcore", "httpcore2")
    }
    if "TimeoutException" in names:
        return "timeout"
    if "TransportError" in names or isinstance(exc, OSError):
        return "transport"
    return None


def _status_failure(exc: APIStatusError) -> _Failure:
    """A failure from an HTTP error status, or from an ``error`` event mid-stream (status 200).

    ``anthropic: 429 Too Many Requests: <provider's message> (<hint>)``; retryable for the
    transient statuses and error types, with ``retry_after`` from the response headers.
    """
    status = exc.status_code
    error_type = str(exc.type) if exc.type else None
    detail = exc.api_message or (exc.body.strip()[:500] if isinstance(exc.body, str) else "")
    detail = detail or exc.message
    retryable = status in RETRYABLE_STATUSES or error_type in RETRYABLE_TYPES
    if status < 400:
        message = f"anthropic: the provider reported an error mid-stream: {error_type}: {detail}"
    else:
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = "Overloaded" if status == 529 else "HTTP error"
        message = f"anthropic: {status} {phrase}: {detail}"
    if status == 413 or "prompt is too long" in detail.lower():
        hint = CONTEXT_TOO_LONG_HINT
    elif error_type == "overloaded_error":
        hint = _ERROR_HINTS[529]
    else:
        hint = _ERROR_HINTS.get(status) or (RETRY_HINT if retryable else "")
    retry_after = retry_after_seconds(exc.response.headers) if retryable else None
    return _Failure(f"{message} ({hint})" if hint else message, retryable, retry_after)


# ---------------------------------------------------------------------------------------------
# Stream accumulation


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


class _MessageBuilder:
    """Accumulates raw stream events into content blocks; ``feed`` says which deltas each made."""

    def __init__(self) -> None:
        self.blocks: list[_TextBlock | _ToolBlock] = []
        self.block_by_index: dict[int, int] = {}
        self.event_count = 0
        self.stopped = False
        self.stop_reason: str | None = None
        self.refusal_explanation: str | None = None
        self.usage = Usage()

    def feed(self, event: RawMessageStreamEvent) -> list[MessageUpdate]:
        """Absorb one event; return its deltas in order (``ping`` never reaches us)."""
        self.event_count += 1
        if event.type == "message_start":
            self._absorb_usage(event.message.usage)
        elif event.type == "content_block_start":
            return self._start_block(event.index, event.content_block)
        elif event.type == "content_block_delta":
            return self._delta(event.index, event.delta)
        elif event.type == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            details = event.delta.stop_details
            if details is not None and details.explanation:
                self.refusal_explanation = details.explanation
            self._absorb_usage(event.usage)
        elif event.type == "message_stop":
            self.stopped = True
        return []

    def _absorb_usage(self, usage: AnthropicUsage | MessageDeltaUsage) -> None:
        """Take the counts ``usage`` reports (cumulative), keeping those it leaves out."""
        counts = {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_input_tokens,
            "cache_write_tokens": usage.cache_creation_input_tokens,
        }
        known = {name: value for name, value in counts.items() if value is not None}
        self.usage = self.usage.model_copy(update=known)

    def _start_block(self, index: int, block: ContentBlock) -> list[MessageUpdate]:
        """Open the block Anthropic numbered ``index``; skip kinds Tiller cannot represent."""
        position = len(self.blocks)
        if block.type == "tool_use":
            given = block.input if isinstance(block.input, dict) else {}
            self.blocks.append(_ToolBlock(id=block.id, name=block.name, initial_input=given))
            self.block_by_index[index] = position
            update = MessageUpdate(
                kind="toolCallStart", index=position, tool_call_id=block.id, tool_name=block.name
            )
            return [update]
        if block.type == "redacted_thinking":
            signature = REDACTED_THINKING_PREFIX + block.data
            self.blocks.append(_TextBlock("thinking", signature=signature))
            self.block_by_index[index] = position
            return []
        if block.type == "text":
            opened, initial = _TextBlock("text"), block.text
        elif block.type == "thinking":
            opened, initial = _TextBlock("thinking", signature=block.signature), block.thinking
        else:
            return []
        self.blocks.append(opened)
        self.block_by_index[index] = position
        return [self._append(position, initial)] if initial else []

    def _delta(self, index: int, delta: RawContentBlockDelta) -> list[MessageUpdate]:
        """Apply one ``content_block_delta`` to the block opened for ``index``."""
        position = self.block_by_index.get(index)
        if position is None:
            return []
        block = self.blocks[position]
        if isinstance(block, _ToolBlock):
            if delta.type == "input_json_delta" and delta.partial_json:
                block.argument_parts.append(delta.partial_json)
                return [
                    MessageUpdate(kind="toolCallArgs", index=position, delta=delta.partial_json)
                ]
            return []
        if delta.type == "signature_delta":
            block.signature = (block.signature or "") + delta.signature
        elif delta.type == "text_delta" and delta.text:
            return [self._append(position, delta.text)]
        elif delta.type == "thinking_delta" and delta.thinking:
            return [self._append(position, delta.thinking)]
        return []

    def _append(self, position: int, text: str) -> MessageUpdate:
        block = self.blocks[position]
        assert isinstance(block, _TextBlock)
        block.parts.append(text)
        return MessageUpdate(kind=block.kind, index=position, delta=text)

    def finish(self, failure: _Failure | None) -> AssistantMessage:
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
        self, has_tool_calls: bool, failure: _Failure | None
    ) -> tuple[StopReason, _Failure | None]:
        """How the stream ended: the explicit ``failure`` first, then what the events said."""
        if failure is not None:
            return "error", failure
        if self.event_count == 0:
            return "error", _Failure(EMPTY_RESPONSE_ERROR, retryable=True)
        if not self.stopped:
            return "error", _Failure(INCOMPLETE_STREAM_ERROR, retryable=True)
        if self.stop_reason == "refusal":
            explanation = f": {self.refusal_explanation}" if self.refusal_explanation else ""
            return "error", _Failure(REFUSAL_ERROR + explanation)
        if self.stop_reason in ("max_tokens", "model_context_window_exceeded"):
            return "length", None
        if has_tool_calls or self.stop_reason == "tool_use":
            return "toolUse", None
        return "stop", None
