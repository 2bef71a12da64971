"""The provider boundary: one ABC with one streaming method.

A provider turns a ``ModelRequest`` into a stream of ``MessageUpdate`` deltas followed by exactly
one final ``AssistantMessage``. It never raises for model or network failures: those end the
stream with an ``AssistantMessage`` whose ``stop_reason`` is ``"error"`` and whose
``error_message`` a user can act on; a transient failure (429, 5xx, connection reset, a stream
cut before the message completed) also sets ``retryable`` (and ``retry_after`` when the server
said how long to wait), and the loop retries it. Cancellation (an abort) propagates as the async
library's cancellation; the loop turns it into ``"aborted"``.
"""

from __future__ import annotations

import functools
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from dataclasses import field, replace
from typing import TYPE_CHECKING, Any, Literal, TypeAlias
from urllib.parse import urlsplit, urlunsplit

from tiller.frozen import frozen

if TYPE_CHECKING:  # annotations only: the settings (tiller.config) load without pydantic
    import ssl

    from tiller.modes import ThinkingLevel
    from tiller.types import AssistantMessage, Message, MessageUpdate, Usage

__all__ = [
    "CHARS_PER_TOKEN",
    "RETRY_HINT",
    "CacheTtl",
    "Lifecycle",
    "ModelCost",
    "ModelInfo",
    "ModelRequest",
    "Provider",
    "StreamItem",
    "ToolSpec",
    "content_chars",
    "display_url",
    "estimated_usage",
    "json_payload",
    "redact",
    "retry_after_seconds",
]

log = logging.getLogger(__name__)

RETRY_HINT = "temporary: retrying may succeed"
"""Appended to the message of a failure that ``retryable`` marks."""

Lifecycle = Literal["active", "deprecated", "retired"]
"""A model's stage as its provider says it (Anthropic's ``ModelInfo.lifecycle``)."""
CacheTtl = Literal["5m", "1h"]
"""How long a prompt-cache entry lives (Anthropic's ``cache_control.ttl``)."""


@frozen
class ToolSpec:
    """What the model is told about a tool."""

    name: str
    description: str
    parameters: dict[str, Any]


@frozen
class ModelRequest:
    """One model call: the context as the loop wants it sent."""

    messages: list[Message]
    system_prompt: str | None = None
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int | None = None
    thinking: ThinkingLevel = "off"
    cache_key: str | None = None
    """Names the conversation for the provider's prompt cache (OpenAI's ``prompt_cache_key``):
    the session's id. None: no key."""
    model: ModelInfo | None = None
    """What is known of the model (its capabilities, its lifecycle); None: nothing."""
    delta_window: float = 0.0
    """Seconds a delta may wait to reach the caller's subscribers (the front's coalescing
    window, tiller.wire.coalesce): a provider reading a network stream reads it at most once
    per window (``http.sse_events``). 0: every chunk as it arrives."""


StreamItem: TypeAlias = "MessageUpdate | AssistantMessage"


@frozen
class ModelCost:
    """Prices in USD per million tokens. ``cache_write`` is the price of a 5-minute cache
    write, ``cache_write_1h`` of a 1-hour one (None: ``cache_write``); ``input`` is paid for
    the input tokens that were neither read from nor written to the cache."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    cache_write_1h: float | None = None

    def cost_of(self, usage: Usage) -> float:
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * self.cache_read
            + usage.cache_write_tokens * self.cache_write
        ) / 1_000_000

    def at_ttl(self, ttl: CacheTtl | None) -> ModelCost:
        """These prices with cache writes at ``ttl``'s price (the 1-hour one for ``1h``)."""
        if ttl != "1h" or self.cache_write_1h is None:
            return self
        return replace(self, cache_write=self.cache_write_1h)


@frozen
class ModelInfo:
    """What Tiller knows about one model of one provider: from the built-in catalog, the config
    file's ``[[models]]`` or the provider's models endpoint (``source``).

    ``thinking_levels`` are the levels the model takes, weakest first (``off`` among them when
    its thinking can be turned off); None: not known. ``thinking_shape`` says how Anthropic is
    asked to think: ``adaptive`` (``thinking.type: adaptive`` + ``output_config.effort``) or
    ``budget`` (``thinking.type: enabled`` + ``budget_tokens``). Dates are ISO ``YYYY-MM-DD``;
    ``checked`` is when a catalog entry's facts and prices were checked against the vendor.
    """

    provider: str
    id: str
    context_window: int | None = None
    max_output_tokens: int | None = None
    cost: ModelCost | None = None
    reasoning: bool = False
    thinking_levels: tuple[ThinkingLevel, ...] | None = None
    thinking_shape: Literal["adaptive", "budget"] | None = None
    display_name: str | None = None
    line: str | None = None
    """The model line (Anthropic's ``line``: ``sonnet``, ``opus``...); None: none or unknown."""
    created: str | None = None
    lifecycle: Lifecycle | None = None
    deprecated_at: str | None = None
    retires_at: str | None = None
    """When it retires (``deprecated``) or retired (``retired``), as far as known."""
    source: Literal["catalog", "config", "provider"] = "catalog"
    checked: str | None = None
    given: frozenset[str] = frozenset()
    """Of a config file entry: the fields its keys set (they win over the provider's facts)."""

    def levels(self) -> tuple[ThinkingLevel, ...] | None:
        """The thinking levels it takes: ``thinking_levels``, else only ``off`` for a model
        known not to reason (``reasoning`` false), else None (not known)."""
        if self.thinking_levels is not None:
            return self.thinking_levels
        return None if self.reasoning else ("off",)


class Provider(ABC):
    """A model backend. ``name`` and ``model`` end up on every message it produces."""

    name: str
    model: str
    cache_ttl: CacheTtl | None = None
    """How long the prompt cache it writes lives, for pricing its writes; None: no explicit
    cache (the provider's own, if any, is priced as ``cache_write``)."""

    @abstractmethod
    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Yield deltas, then exactly one final AssistantMessage; never raise for failures."""

    async def prepare(self) -> None:
        """Get ready for ``stream`` (import the HTTP library, create the client): the cold start
        that is not the model's silence, so a stream's stall timer starts after it. Default:
        nothing. Never raises: what fails here fails the stream again, which reports it."""
        return None

    async def aclose(self) -> None:
        """Release connections. Default: nothing to release."""
        return None


# ---------------------------------------------------------------------------------------------
# Helpers every HTTP provider needs


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS context every provider's HTTP client verifies servers with, built once: httpx2's
    default (``httpx2.create_ssl_context``: ``SSL_CERT_FILE``/``SSL_CERT_DIR``, else the
    system's CA store), whose loading took a third of a first prompt when each client built
    its own (the warm-up builds it ahead: ``tiller.session.warm``)."""
    from tiller.providers.httplib import load

    load()
    import httpx2

    return httpx2.create_ssl_context()


def warm_up_request() -> ModelRequest:
    """A small request shaped like a real first call: a user message and one tool."""
    from tiller.types import UserMessage

    return ModelRequest(
        messages=[UserMessage(content="warm up")],
        tools=[ToolSpec("warm_up", "Warms up.", {"type": "object", "properties": {
            "path": {"type": "string"}}, "required": ["path"]})],
    )


def display_url(raw: str) -> str:
    """A base URL fit for an error message: no credentials, query or fragment."""
    parts = urlsplit(raw.rstrip("/"))
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def redact(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` (an API key) replaced by ``***``, should a server echo it."""
    if secret and len(secret) >= 4:
        text = text.replace(secret, "***")
    return text


CHARS_PER_TOKEN = 4
"""The estimate's rate: about 4 characters of English or code a token."""


def content_chars(content: object) -> int:
    """The characters a message's content counts for a size estimate (text, thinking, a tool
    call's name and JSON arguments; an image as ~1,200 tokens' worth)."""
    import json

    from tiller.types import ImageContent, TextContent, ThinkingContent, ToolCall

    if isinstance(content, str):
        return len(content)
    total = 0
    for block in content if isinstance(content, list) else ():
        if isinstance(block, TextContent):
            total += len(block.text)
        elif isinstance(block, ThinkingContent):
            total += len(block.thinking)
        elif isinstance(block, ToolCall):
            total += len(block.name) + len(json.dumps(block.arguments))
        elif isinstance(block, ImageContent):
            total += 4800  # ~1,200 tokens, a typical image
    return total


def estimated_usage(request: ModelRequest, message: AssistantMessage) -> Usage:
    """Usage for a reply whose server reported none: the request's characters (system prompt,
    tool specs, messages) and the reply's, at ``CHARS_PER_TOKEN``; marked ``estimated``."""
    import json

    from tiller.types import Usage

    sent = len(request.system_prompt or "")
    sent += sum(len(tool.name) + len(tool.description) + len(json.dumps(tool.parameters))
                for tool in request.tools)
    sent += sum(content_chars(m.content) for m in request.messages)
    return Usage(
        input_tokens=-(-sent // CHARS_PER_TOKEN),
        output_tokens=-(-content_chars(message.content) // CHARS_PER_TOKEN),
        estimated=True,
    )


def json_payload(data: str) -> Any:
    """One stream event's ``data:`` decoded as JSON (a lone surrogate escape read as U+FFFD:
    ``tiller.jsontext``); a ValueError (the reader's "malformed event") when it is not JSON or
    nests too deeply to decode (RecursionError otherwise)."""
    from tiller import jsontext

    try:
        return jsontext.loads(data)
    except RecursionError:
        raise ValueError("a payload nested too deeply to decode") from None


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms``, else ``retry-after`` (seconds, possibly a float,
    or an HTTP date); None when absent or unreadable."""
    if headers is None:
        return None
    try:
        if milliseconds := headers.get("retry-after-ms"):
            return max(float(milliseconds) / 1000, 0.0)
        if not (value := headers.get("retry-after")):
            return None
        try:
            return max(float(value), 0.0)
        except ValueError:
            import email.utils  # an HTTP date: rare, and the module is not needed at start-up

            when = email.utils.parsedate_to_datetime(value)
            return max(when.timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return None
