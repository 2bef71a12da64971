"""OpenAI provider: the Responses API, and Chat Completions for servers that speak only it
(Ollama, vLLM, llama.cpp's server, LM Studio, OpenRouter...).

``OpenAIProvider.stream`` sends one streaming call (params from ``openai_request``), maps its
events (read as plain dicts by ``openai_responses`` or ``openai_stream``) to ``MessageUpdate``
deltas, then yields exactly one final ``AssistantMessage``. Every failure (HTTP status,
connection, timeout, an empty or cut stream, a ``response.failed`` / ``response.incomplete`` /
``error`` event, a malformed event) becomes that final message with ``stop_reason="error"``
and an ``error_message`` that starts with ``openai:`` and never contains the API key; the
transient ones (408, 409, 429, 5xx, a broken or silent connection, an empty or cut stream, an
error event that names no lasting cause) are ``retryable`` (``openai_errors``). Cancellation
propagates; the response is closed.

Which API (``api``): ``responses``, ``chat``, or ``auto`` (the default): the Responses API,
and Chat Completions from then on for a server that answers 404 or 405 on ``/responses`` (no
such route; a 404 about the model is not that), remembered per base URL for the life of the
process (``chat_only_servers``).

One corrected retry, remembered by the provider for its model, when the server refuses a
knob before streaming: on the Responses API a reasoning effort the model lacks (the effort
it names as nearest is sent instead), reasoning or encrypted reasoning for a model without
them (left out); on Chat Completions a 400 that names ``reasoning_effort`` (``none`` is sent;
if that is refused too, the error says what to set).

Usage the server does not report is estimated (``base.estimated_usage``, marked
``estimated``). The calls go over ``tiller.providers.http`` (httpx2), not the ``openai`` SDK
(that module says why); the HTTP library is imported on first use, never at module import.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal

import anyio

from tiller.errors import (
    HttpConnectionError,
    HttpStatusError,
    HttpTimeoutError,
    StreamErrorEvent,
)
from tiller.providers.base import (
    RETRY_HINT,
    ModelRequest,
    StreamItem,
    estimated_usage,
)
from tiller.providers.http import HttpEndpoint, HttpProvider, drain, request_headers, warm_up
from tiller.providers.openai_errors import (
    is_transient,
    retry_after,
    route_missing,
    status_details,
    status_error_message,
    supported_values,
)
from tiller.providers.openai_models import (
    accepted_efforts,
    effort_for,
    level_effort,
    reasons,
)
from tiller.providers.openai_request import (
    build_request_params,
    build_responses_params,
    replays_items,
)
from tiller.providers.openai_responses import ResponsesBuilder, event_dicts
from tiller.providers.openai_stream import (
    EMPTY_RESPONSE_ERROR,
    INCOMPLETE_STREAM_ERROR,
    MessageBuilder,
    chunk_dicts,
)
from tiller.types import AssistantMessage, Message, ToolCall

__all__ = ["DEFAULT_BASE_URL", "Api", "OpenAIProvider", "api_headers", "chat_only_servers"]

log = logging.getLogger(__name__)

Api = Literal["auto", "responses", "chat"]
DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""Where calls go when neither ``base_url`` nor ``OPENAI_BASE_URL`` says otherwise."""
TRANSIENT_STREAM_ERRORS = (EMPTY_RESPONSE_ERROR, INCOMPLETE_STREAM_ERROR)
_chat_only: set[str] = set()


def chat_only_servers() -> frozenset[str]:
    """The base URLs found to have no Responses API in this process (``api = "auto"``)."""
    return frozenset(_chat_only)


class OpenAIProvider(HttpProvider):
    """Streams the Responses API or Chat Completions (``api``) from an OpenAI-compatible server.

    ``base_url`` and ``api_key`` left as None fall back to ``OPENAI_BASE_URL`` (else
    ``DEFAULT_BASE_URL``) and ``OPENAI_API_KEY``; no key at all sends no ``Authorization``
    header (local servers take none). ``headers`` go with every call. An injected
    ``http_client`` (an ``httpx2.AsyncClient``) is used as is and not closed by ``aclose``.
    A failure is reported at once: retrying is the loop's.
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
        api: Api = "auto",
    ) -> None:
        self.model = model
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._secret = self._api_key
        self._request_timeout = request_timeout
        base = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        self._endpoint = HttpEndpoint(base, headers=api_headers(headers, self._api_key),
                                      timeout=request_timeout,
                                      http_client=http_client)
        self.api: Api = api
        self._efforts = accepted_efforts(model)
        """The reasoning efforts the model takes: () none, None unknown (corrected on a 400)."""
        self._reasoning = reasons(model) is not False
        self._encrypted = True
        self._chat_effort: str | None = None
        """The ``reasoning_effort`` Chat Completions got after it refused what we sent."""
        self._told_dropped: set[str] = set()

    def uses_responses(self) -> bool:
        """Whether the next call goes to the Responses API."""
        return self.api == "responses" or (
            self.api == "auto" and self.base_url not in _chat_only)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Yield deltas, then exactly one final AssistantMessage; never raise for failures."""
        if self.uses_responses():
            response, failure = await self._open_responses(request)
            if response is not None or failure is not None:
                async for item in self._read_responses(request, response, failure):
                    yield item
                return
        async for item in self._chat(request):
            yield item

    def _finished(
        self, request: ModelRequest, message: AssistantMessage, failure: Exception | None,
        stream_retryable: bool, usage_reported: bool,
    ) -> AssistantMessage:
        """The final message of a stream, stamped with this provider and model. A failed one
        says whether a retry may succeed (from ``failure``, the exception it ended in, else
        ``stream_retryable``: the stream's error event said so); a complete one without
        ``usage_reported`` gets usage estimated from the characters."""
        message.provider = self.name
        message.model = self.model
        if message.stop_reason == "error":
            if failure is not None:
                message.retryable = is_transient(failure)
                message.retry_after = retry_after(failure)
            else:
                message.retryable = stream_retryable
        elif not usage_reported:
            message.usage = estimated_usage(request, message)
        return message

    # ------------------------------------------------------------------ the Responses API

    async def _open_responses(self, request: ModelRequest) -> tuple[Any, Exception | None]:
        """The stream, or the failure that opening it ended in; (None, None) when the server
        has no Responses API and ``api`` is ``auto`` (remembered: Chat Completions it is)."""
        for attempt in (1, 2):
            params = self._responses_params(request)
            try:
                return await self._endpoint.open_stream("/responses", params), None
            except Exception as exc:
                if self.api == "auto" and route_missing(exc):
                    _chat_only.add(self.base_url)
                    log.info("openai: %s has no Responses API (%s on /responses): using Chat "
                             "Completions for it from now on", self._display_url(),
                             getattr(exc, "status", "?"))
                    return None, None
                if attempt == 1 and self._correct_responses(exc, params):
                    continue
                return None, exc
        raise AssertionError("unreachable")

    def _responses_params(self, request: ModelRequest) -> dict[str, Any]:
        effort = None
        if self._reasoning and self._efforts != ():
            effort = effort_for(request.thinking, self._efforts)
        params = build_responses_params(
            request, self.model, provider=self.name, effort=effort,
            encrypted_reasoning=effort is not None and self._encrypted,
        )
        self._tell_dropped(request.messages)
        return params

    def _tell_dropped(self, messages: list[Message]) -> None:
        """Log, once per model they came from, replies whose reasoning is not sent back."""
        for message in messages:
            if not isinstance(message, AssistantMessage) or not message.response_items:
                continue
            source = f"{message.provider}/{message.model}"
            if source in self._told_dropped or replays_items(message, self.name, self.model):
                continue
            self._told_dropped.add(source)
            log.info("openai: the reasoning of earlier replies from %s is not sent to %s/%s "
                     "(another provider or model family); their text and calls are",
                     source, self.name, self.model)

    def _correct_responses(self, exc: Exception, params: dict[str, Any]) -> bool:
        """Adjust what the next request sends after a 400 that refused a reasoning knob;
        True if there is something to retry with."""
        status, message, param = status_details(exc)
        if status != 400:
            return False
        lowered, where = message.lower(), (param or "").lower()
        if "include" in params and (where == "include" or "encrypted content is not" in lowered):
            self._encrypted = False
        elif where.startswith("reasoning") or (
            lowered.startswith("unsupported") and "reasoning" in lowered
        ):
            if "reasoning" not in params:
                return False
            supported = supported_values(message)
            sent = params["reasoning"].get("effort")
            if supported and sent not in supported:
                self._efforts = supported
            else:
                self._reasoning = False
        else:
            return False
        log.info("openai: %s refused the request (%s); retrying it adjusted", self.model, message)
        return True

    async def _read_responses(
        self, request: ModelRequest, response: Any, failure: Exception | None
    ) -> AsyncIterator[StreamItem]:
        builder = ResponsesBuilder()
        error = None
        if failure is not None:
            error = self._describe_failure(failure, started=False, api="responses")
        else:
            try:
                events = event_dicts(response, request.delta_window)
                async for event in events:
                    for update in builder.feed(event):
                        yield update
                    if builder.ended:
                        await drain(events, response)
                        break
            except Exception as exc:
                failure = exc
                error = self._describe_failure(exc, started=True, api="responses")
            finally:
                with anyio.CancelScope(shield=True):
                    await response.aclose()
        yield self._finished(
            request, builder.finish(error), failure, builder.retryable, builder.usage is not None
        )

    # ------------------------------------------------------------------ Chat Completions

    async def _chat(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        response: Any = None
        failure: Exception | None = None
        for attempt in (1, 2):
            effort = self._chat_effort_for(request)
            params = build_request_params(request, self.model, effort=effort)
            try:
                response = await self._endpoint.open_stream("/chat/completions", params)
                break
            except Exception as exc:
                if attempt == 1 and self._correct_chat(exc, params):
                    continue
                failure = exc
                break
        builder = MessageBuilder(taken=(
            block.id for message in request.messages if isinstance(message, AssistantMessage)
            for block in message.content if isinstance(block, ToolCall)))
        error = None
        if failure is not None:
            error = self._describe_failure(failure, started=False, api="chat")
        else:
            try:
                async for chunk in chunk_dicts(response, request.delta_window):
                    for update in builder.feed(chunk):
                        yield update
            except Exception as exc:
                failure = exc
                error = self._describe_failure(exc, started=True, api="chat")
            finally:
                with anyio.CancelScope(shield=True):
                    await response.aclose()
        message = builder.finish(error)
        yield self._finished(
            request, message, failure, message.error_message in TRANSIENT_STREAM_ERRORS,
            builder.usage_reported,
        )

    def _chat_effort_for(self, request: ModelRequest) -> str | None:
        """``reasoning_effort`` for Chat Completions: the corrected one once a 400 asked for
        it; for a model known to reason the level's (``off`` is ``none``); for an unknown
        model the level's unless ``off`` (local servers may know no such knob)."""
        if self._chat_effort is not None:
            return self._chat_effort
        if self._efforts == ():
            return None
        if self._efforts is None:
            return None if request.thinking == "off" else level_effort(request.thinking)
        return effort_for(request.thinking, self._efforts)

    def _correct_chat(self, exc: Exception, params: dict[str, Any]) -> bool:
        """After a 400 that names ``reasoning_effort``: send ``none`` from now on (or, when the
        error lists the values the model takes and ``none`` is not one, the nearest of them to
        what was sent), if that is not what was refused."""
        status, message, param = status_details(exc)
        if status != 400 or not ("reasoning_effort" in message or param == "reasoning_effort"):
            return False
        sent = params.get("reasoning_effort")
        supported = supported_values(message)
        fixed = "none" if not supported or "none" in supported else effort_for(
            "off" if sent in (None, "none") else str(sent), supported)
        if fixed == sent:
            return False
        self._chat_effort = fixed
        log.warning("openai: %s refused reasoning_effort %s on Chat Completions (%s); sending "
                    "%r instead", self.model, sent or "(absent)", message, fixed)
        return True

    # ------------------------------------------------------------------ failures

    def _describe_failure(self, exc: Exception, *, started: bool, api: Api) -> str:
        """A user-actionable message for an exception raised while calling or streaming."""
        url = self._display_url()
        if isinstance(exc, HttpStatusError):
            message = status_error_message(exc.status, exc.body, f"Error code: {exc.status}",
                                           self._api_hint(exc, api))
        elif isinstance(exc, HttpTimeoutError):
            what = "the stream stalled" if started else "no response"
            message = (
                f"openai: {what}: nothing received from {url} within "
                f"{self._request_timeout:g}s ({RETRY_HINT})"
            )
        elif isinstance(exc, HttpConnectionError):
            cause = exc.__cause__ or exc
            if started:
                message = f"openai: the connection to {url} broke mid-stream: {cause}"
                message += f" ({RETRY_HINT})"
            else:
                message = f"openai: cannot connect to {url}: {cause}"
        elif isinstance(exc, StreamErrorEvent):
            message = f"openai: the provider reported an error mid-stream: {exc.message}"
        elif isinstance(exc, ValueError):
            message = f"openai: the provider sent a malformed stream chunk: {exc}"
        else:
            message = f"openai: unexpected failure: {type(exc).__name__}: {exc}"
        return self._redact(message)

    def _api_hint(self, exc: Exception, api: Api) -> str | None:
        """What to set when a refusal is about the API Tiller spoke, or None."""
        status, detail, param = status_details(exc)
        if api == "responses" and route_missing(exc):
            return ('this server has no Responses API: set api = "chat" for this provider in '
                    "the config file")
        if api == "chat" and status == 400 and (
            "reasoning_effort" in detail or param == "reasoning_effort"
        ):
            supported = supported_values(detail)
            if supported and self._chat_effort is None:
                levels = ", ".join("off" if e == "none" else e for e in supported)
                return f"set the thinking level to one of: {levels}"
            return ('this model takes tools only on the Responses API: set api = "responses" '
                    "for this provider in the config file")
        return None


def api_headers(given: Mapping[str, str] | None, key: str | None) -> dict[str, str]:
    """What every call to an OpenAI-compatible server sends (``request_headers``): ``key`` as a
    bearer token (none without one: local servers take none) under the config's ``given``."""
    return request_headers(given, {"authorization": f"Bearer {key}"} if key else {})


def warm(base_url: str | None = None) -> None:
    """``http.warm_up`` for a first call to ``base_url`` (None: the default), and the Responses
    API's params built once."""
    from tiller.providers.base import warm_up_request

    request = warm_up_request()
    warm_up(base_url or DEFAULT_BASE_URL, "/chat/completions",
            build_request_params(request, "warm-up"), chunk_dicts, b"data: [DONE]\n\n")
    build_responses_params(request, "warm-up", provider="warm-up", effort=None,
                           encrypted_reasoning=False)
