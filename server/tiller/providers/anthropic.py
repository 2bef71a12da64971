"""Anthropic Messages provider: Claude through the streaming Messages API.

``AnthropicProvider.stream`` sends one ``POST /v1/messages`` with ``stream: true`` (over
``tiller.providers.http``, which says why not the ``anthropic`` SDK), maps the raw
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
* Credentials: ``api_key`` (else ``ANTHROPIC_API_KEY``) as ``x-api-key``, else
  ``ANTHROPIC_AUTH_TOKEN`` as a bearer token, else a ``headers`` entry that carries one; with
  none, nothing is sent and the final message says what to set. The SDK's credential profiles
  (``ANTHROPIC_PROFILE``, ``ANTHROPIC_CONFIG_DIR``) are not read.
* Tool call ids are sanitized to ``[A-Za-z0-9_-]`` (what the API accepts) in ``tool_use`` and
  ``tool_result`` alike, so a history from another provider still pairs up.
* The thinking shape (adaptive or a budget) comes from the model's capabilities
  (``anthropic_request``). A 400 that refuses the shape sent (``"thinking.type.enabled" is not
  supported for this model``, ``adaptive thinking is not supported on this model``) gets one
  retry with the other shape, which is then remembered for that model and URL
  (``_SHAPES``, for the life of the process).

The request conversion (``build_request_params``) lives in ``anthropic_request`` and is
re-exported here. The HTTP library is imported on first use, never at module import.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from http import HTTPStatus
from typing import Any

import anyio

from tiller.errors import (
    HttpConnectionError,
    HttpStatusError,
    HttpTimeoutError,
    StreamErrorEvent,
)
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
    StreamItem,
    retry_after_seconds,
)
from tiller.providers.http import HttpEndpoint, HttpProvider, request_headers, warm_up
from tiller.types import (
    AssistantMessage,
)

__all__ = ["API_VERSION", "DEFAULT_BASE_URL", "AnthropicProvider", "api_headers"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
"""Where calls go when neither ``base_url`` nor ``ANTHROPIC_BASE_URL`` says otherwise."""
API_VERSION = "2023-06-01"
"""The ``anthropic-version`` header: the Messages API's only version."""
NO_KEY = "anthropic: no API key: set ANTHROPIC_API_KEY"
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


class AnthropicProvider(HttpProvider):
    """Streams the Anthropic Messages API.

    ``base_url`` and ``api_key`` left as None fall back to ``ANTHROPIC_BASE_URL`` (else
    ``DEFAULT_BASE_URL``) and ``ANTHROPIC_API_KEY`` (the module docstring has the rest of the
    credentials rule). ``headers`` are sent with every request. An injected ``http_client`` (an
    ``httpx2.AsyncClient``) is used as is and not closed by ``aclose``. ``default_max_tokens``
    is sent when the request sets no ``max_tokens`` (the API requires one). ``cache_ttl`` is the
    life of the prompt cache its breakpoints ask for. A failure is reported at once: retrying
    is the loop's.
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
        self.model = model
        self._default_max_tokens = default_max_tokens
        self.cache_ttl: CacheTtl = cache_ttl
        self._request_timeout = request_timeout
        key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        token = None if key else os.environ.get("ANTHROPIC_AUTH_TOKEN")
        self._secret = key or token
        sent = api_headers(headers, key, token)
        self._credentials = "x-api-key" in sent or "authorization" in sent
        base = base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        self._endpoint = HttpEndpoint(base, headers=sent, timeout=request_timeout,
                                      http_client=http_client)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Yield deltas, then exactly one final AssistantMessage; never raise for failures."""
        builder = MessageBuilder()
        if not self._credentials:
            yield self._final(builder, _Failure(NO_KEY))
            return
        response: Any = None
        failure: _Failure | None = None
        try:
            response = await self._create(request)
            async for event in event_dicts(response, request.delta_window):
                for update in builder.feed(event):
                    yield update
        except Exception as exc:
            failure = self._describe_failure(exc, started=response is not None)
        finally:
            if response is not None:
                with anyio.CancelScope(shield=True):
                    await response.aclose()
        yield self._final(builder, failure)

    async def _create(self, request: ModelRequest) -> Any:
        """The streaming ``POST /v1/messages``, retried once with the other thinking shape when
        the API refuses the one sent (then remembered)."""
        where = (self._display_url(), self.model)
        params = self._params(request, _SHAPES.get(where))
        try:
            return await self._endpoint.open_stream("/v1/messages", params)
        except HttpStatusError as exc:
            shape = _corrected_shape(_error_field(exc.body, "message") or str(exc), params) \
                if exc.status == 400 else None
            if shape is None:
                raise
            _SHAPES[where] = shape
            return await self._endpoint.open_stream("/v1/messages", self._params(request, shape))

    def _params(self, request: ModelRequest, shape: ThinkingShape | None) -> dict[str, Any]:
        return build_request_params(request, self.model, self._default_max_tokens, shape=shape,
                                    cache_ttl=self.cache_ttl)

    def _final(self, builder: MessageBuilder, failure: _Failure | None) -> AssistantMessage:
        message = builder.finish(failure)
        message.provider = self.name
        message.model = self.model
        return message

    def _describe_failure(self, exc: Exception, *, started: bool) -> _Failure:
        """A user-actionable failure for an exception raised while calling or streaming."""
        url = self._display_url()
        if isinstance(exc, (HttpStatusError, StreamErrorEvent)):
            failure = _status_failure(exc)
        elif isinstance(exc, HttpTimeoutError):
            what = "the stream stalled" if started else "no response"
            limit = f"{self._request_timeout:g}s"
            message = f"anthropic: {what}: nothing received from {url} within {limit}"
            failure = _Failure(f"{message} ({RETRY_HINT})", retryable=True)
        elif isinstance(exc, HttpConnectionError):
            cause = exc.__cause__ or exc
            if started:
                message = f"anthropic: the connection to {url} broke mid-stream: {cause}"
            else:
                message = f"anthropic: cannot connect to {url}: {cause}"
            failure = _Failure(f"{message} ({RETRY_HINT})", retryable=True)
        elif isinstance(exc, ValueError):
            failure = _Failure(f"anthropic: the provider sent a malformed stream event: {exc}")
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


def api_headers(given: Mapping[str, str] | None, key: str | None,
                token: str | None = None) -> dict[str, str]:
    """What every call to Anthropic's API sends (``request_headers``): the API version and the
    credential, ``key`` as ``x-api-key`` or else ``token`` as a bearer, under the config's
    ``given`` headers."""
    credential = ({"x-api-key": key} if key else
                  {"authorization": f"Bearer {token}"} if token else {})
    return request_headers(given, {"anthropic-version": API_VERSION, **credential})


def _error_field(body: Any, name: str) -> str | None:
    """``error.<name>`` of an error body (``{"type": "error", "error": {...}}``), if a string."""
    error = body.get("error") if isinstance(body, dict) else None
    value = error.get(name) if isinstance(error, dict) else None
    return value if isinstance(value, str) else None


def _status_failure(exc: HttpStatusError | StreamErrorEvent) -> _Failure:
    """A failure from an HTTP error status, or from an ``error`` event mid-stream (status 200).

    ``anthropic: 429 Too Many Requests: <provider's message> (<hint>)``; retryable for the
    transient statuses and error types, with ``retry_after`` from the response headers.
    """
    status = exc.status if isinstance(exc, HttpStatusError) else 200
    body = exc.body
    error_type = _error_field(body, "type")
    fallback = exc.message if isinstance(exc, StreamErrorEvent) else (
        f"Error code: {status}" + (f" - {body}" if body is not None else ""))
    detail = _error_field(body, "message") or (
        body.strip()[:500] if isinstance(body, str) else "") or fallback
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
    headers = exc.headers if isinstance(exc, HttpStatusError) else None
    retry_after = retry_after_seconds(headers) if retryable else None
    return _Failure(f"{message} ({hint})" if hint else message, retryable, retry_after)


def warm(base_url: str | None = None) -> None:
    """``http.warm_up`` for a first call to ``base_url`` (None: the default)."""
    from tiller.providers.base import warm_up_request

    warm_up(base_url or DEFAULT_BASE_URL, "/v1/messages",
            build_request_params(warm_up_request(), "warm-up"), event_dicts,
            b'event: message_stop\ndata: {"type": "message_stop"}\n\n')
