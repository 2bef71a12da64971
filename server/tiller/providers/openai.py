"""OpenAI-compatible Chat Completions provider: OpenAI, OpenRouter, Ollama, vLLM, llama.cpp.

``OpenAIProvider.stream`` sends one streaming ``chat.completions.create`` call and maps the SSE
chunks (read as plain dicts by ``openai_stream``) to ``MessageUpdate`` deltas, then yields
exactly one final ``AssistantMessage``. Every failure (HTTP status, connection, timeout, empty
or truncated stream, malformed chunk) becomes that final message with ``stop_reason="error"``
and an ``error_message`` that starts with ``openai:`` and never contains the API key.
Cancellation propagates; the response is closed.

Content block indices: a block is appended when its kind first appears. A text or thinking delta
extends the last block if that block is of the same kind, otherwise it opens a new block (so
text after a tool call opens a new text block). Tool call deltas go to the block opened for their
OpenAI ``index``. Every ``MessageUpdate.index`` is the index of its block in the final message.

The ``openai`` SDK is imported on first use, never at module import (it costs ~300 ms).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import anyio

from tiller.providers.base import (
    RETRY_HINT,
    ModelRequest,
    SdkProvider,
    StreamItem,
    retry_after_seconds,
)
from tiller.providers.openai_stream import (
    EMPTY_RESPONSE_ERROR,
    INCOMPLETE_STREAM_ERROR,
    MessageBuilder,
    chunk_dicts,
)
from tiller.types import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ToolResultMessage,
    UserMessage,
)

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["OpenAIProvider", "build_request_params"]

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
        builder = MessageBuilder()
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
            async for chunk in chunk_dicts(response):
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

    def _final(self, builder: MessageBuilder, error: str | None) -> AssistantMessage:
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
    """A string stays a string, and so does text-only content (local servers prefer it): its
    blocks are separated by a blank line, as separate blocks read (a prompt, then an attached
    file or resource, must not run into each other)."""
    if isinstance(content, str):
        return content
    if all(isinstance(block, TextContent) for block in content):
        return "\n\n".join(block.text for block in content if isinstance(block, TextContent))
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append({"type": "text", "text": block.text})
        else:
            url = f"data:{block.mime_type};base64,{block.data}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts
