"""Anthropic Messages provider: Claude through the ``anthropic`` SDK's streaming Messages API.

``AnthropicProvider.stream`` sends one ``messages.create(stream=True)`` call, maps the raw
stream events (read as plain dicts by ``anthropic_stream``) to ``MessageUpdate`` deltas, then
yields exactly one final ``AssistantMessage``. Every failure (HTTP status, connection, timeout,
an ``error`` event mid-stream, an empty or truncated stream, a refusal) becomes that final
message with ``stop_reason="error"`` and an ``error_message`` that starts with ``anthropic:``
and never contains the API key. Transient ones (408, 409, 429, 5xx, 529, ``overloaded_error``,
connection errors, timeouts, an empty 200 stream, a stream cut before ``message_stop``) also set
``retryable``, and ``retry_after`` when the server sent ``retry-after``. Cancellation
propagates; the response is closed.

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
* The thinking shape (adaptive or a budget) comes from the model's capabilities
  (``anthropic_request``). A 400 that refuses the shape sent (``"thinking.type.enabled" is not
  supported for this model``, ``adaptive thinking is not supported on this model``) gets one
  retry with the other shape, which is then remembered for that model and URL
  (``_SHAPES``, for the life of the process).

The request conversion (``build_request_params``) lives in ``anthropic_request`` and is
re-exported here. The ``anthropic`` SDK is imported on first use, never at module import (it
costs ~770 ms).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Literal

import anyio

from tiller.providers.anthropic_request import (
    ThinkingShape,
    build_request_params,
)
from tiller.providers.anthropic_stream import Failure as _Failure
from tiller.providers.anthropic_stream import (
    MessageBuilder,
    event_dicts,
)
from tiller.providers.base import (
    RETRY_HINT,
    CacheTtl,
    ModelRequest,
    SdkProvider,
    StreamItem,
    retry_after_seconds,
    warm_sdk,
    warm_up_request,
)
from tiller.types import (
    AssistantMessage,
)

if TYPE_CHECKING:
    from anthropic import APIStatusError, AsyncAnthropic

__all__ = ["AnthropicProvider"]

INSTALL = "pip install anthropic"
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
_SHAPES: dict[tuple[str, str], ThinkingShape] = {}
"""(base URL, model) -> the thinking shape a 400 taught (see the module docstring)."""


class AnthropicProvider(SdkProvider):
    """Streams the Anthropic Messages API.

    ``base_url`` and ``api_key`` left as None fall back to the SDK's defaults (which read
    ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY``). ``headers`` are sent with every request.
    An injected ``http_client`` (an ``httpx2.AsyncClient``) is used as is and not closed by
    ``aclose``. ``default_max_tokens`` is sent when the request sets no ``max_tokens`` (the API
    requires one). ``cache_ttl`` is the life of the prompt cache its breakpoints ask for. The
    SDK's own retries are off: a failure is reported at once.
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
        cache_ttl: CacheTtl = "5m",
    ) -> None:
        super().__init__(
            model=model, base_url=base_url, api_key=api_key, http_client=http_client,
            headers=headers, request_timeout=request_timeout,
        )
        self._default_max_tokens = default_max_tokens
        self.cache_ttl: CacheTtl = cache_ttl
        self._client: AsyncAnthropic | None = None

    def _get_client(self) -> AsyncAnthropic:
        """The SDK client, created (and the SDK imported) on first use."""
        if self._client is None:
            import anthropic

            self._client = anthropic.AsyncAnthropic(
                api_key=self._api_key,
                base_url=self._base_url,
                http_client=self._http(anthropic),
                default_headers=self._headers or None,
                timeout=self._request_timeout,
                max_retries=0,
            )
        return self._client

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Yield deltas, then exactly one final AssistantMessage; never raise for failures."""
        builder = MessageBuilder()
        try:
            client = self._get_client()
        except Exception as exc:  # e.g. a credentials profile that cannot be loaded
            yield self._final(builder, self._describe_failure(exc, started=False))
            return
        response: Any = None
        failure: _Failure | None = None
        try:
            response = await self._create(client, request)
            async for event in event_dicts(response):
                for update in builder.feed(event):
                    yield update
        except Exception as exc:
            failure = self._describe_failure(exc, started=response is not None)
        finally:
            if response is not None:
                with anyio.CancelScope(shield=True):
                    await response.close()
        yield self._final(builder, failure)

    async def _create(self, client: AsyncAnthropic, request: ModelRequest) -> Any:
        """``messages.create``, retried once with the other thinking shape when the API
        refuses the one sent (then remembered)."""
        import anthropic

        where = (self._display_url(), self.model)
        params = self._params(request, _SHAPES.get(where))
        try:
            return await client.messages.create(**params)
        except anthropic.BadRequestError as exc:
            shape = _corrected_shape(exc.api_message or str(exc), params)
            if shape is None:
                raise
            _SHAPES[where] = shape
            return await client.messages.create(**self._params(request, shape))

    def _params(self, request: ModelRequest, shape: ThinkingShape | None) -> dict[str, Any]:
        return build_request_params(request, self.model, self._default_max_tokens, shape=shape,
                                    cache_ttl=self.cache_ttl)

    def _final(self, builder: MessageBuilder, failure: _Failure | None) -> AssistantMessage:
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


def _corrected_shape(message: str, params: dict[str, Any]) -> ThinkingShape | None:
    """The shape to retry with when ``message`` (a 400's) refuses the thinking ``params`` sent."""
    sent = (params.get("thinking") or {}).get("type")
    text = message.lower()
    if sent == "enabled" and "thinking.type.enabled" in text and "not supported" in text:
        return "adaptive"
    if sent == "adaptive" and "adaptive" in text and "not supported" in text:
        return "budget"
    return None


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


def warm(base_url: str | None = None) -> None:
    """``warm_sdk`` for Anthropic's SDK: a first ``messages.create`` with the params our
    builder makes (``base_url`` does not matter: the SDK's client always has TLS)."""
    import anthropic

    warm_sdk(anthropic.AsyncAnthropic, anthropic.DefaultAsyncHttpxClient, [
        ("messages.create", build_request_params(warm_up_request(), "warm-up")),
    ])
