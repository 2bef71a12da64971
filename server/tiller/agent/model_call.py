"""The model call: one streamed assistant response, and the seam that retry and compaction wrap.

A ``ModelCall`` is what the loop awaits once per turn: given the context, it calls the model,
emits ``message_start`` and the deltas, and returns the final message without appending it; it
never raises. ``streaming_call`` makes the plain call from a ``ModelSpec``; the Agent wraps it
(``tiller.agent.retry.with_retry``, ``tiller.agent.compaction.with_compaction``,
``tiller.agent.pricing.priced``), the way pi wraps its stream function, so the loop knows none of
them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import anyio

from tiller.agent.abort import AbortSignal
from tiller.frozen import frozen
from tiller.modes import ThinkingLevel
from tiller.providers.base import ModelInfo, ModelRequest, StreamItem, ToolSpec, estimated_usage
from tiller.tools.base import Tool
from tiller.types import (
    AgentEvent,
    AssistantMessage,
    Message,
    MessageStart,
    MessageUpdate,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
)

__all__ = [
    "MAX_MESSAGE_CHARS",
    "Emit",
    "ModelCall",
    "ModelSpec",
    "StreamFn",
    "aborted_message",
    "model_context",
    "stream_once",
    "streaming_call",
]

MAX_MESSAGE_CHARS = 8_000_000
"""The most characters of text, thinking and tool-call arguments one assistant message may
stream (about 2 million tokens: far past any model's output limit). Past it the call ends with
an error: a runaway or hostile stream must not grow the server's memory without bound."""

Emit = Callable[[AgentEvent], None]
StreamFn = Callable[[ModelRequest], AsyncIterator[StreamItem]]
ModelCall = Callable[[list[Message]], Awaitable[AssistantMessage]]
"""One model call on a context (which a wrapper may shorten in place): emits message_start and
the deltas, returns the final message unappended, never raises."""


@frozen
class ModelSpec:
    """What a model call sends and stamps besides the messages: the provider's stream and names
    (on every message), the request's fixed parts (``cache_key``: the prompt cache's name for
    the conversation), and the stall timeout (``idle_timeout``), which starts after
    ``prepare`` (the provider's cold start: its HTTP library imported, its client made)."""

    stream: StreamFn
    provider: str
    model: str
    system_prompt: str | None = None
    tools: Sequence[Tool[Any]] = ()
    thinking: ThinkingLevel = "off"
    idle_timeout: float = 120.0
    cache_key: str | None = None
    info: ModelInfo | None = None
    """What is known of the model; it goes with each request (``ModelRequest.model``)."""
    prepare: Callable[[], Awaitable[None]] | None = None
    delta_window: float = 0.0
    """How late a delta may reach ``emit`` (``ModelRequest.delta_window``)."""

    def request(self, context: Sequence[Message]) -> ModelRequest:
        """The request for ``context``: what ``model_context`` keeps of it, with the tools."""
        return ModelRequest(
            messages=model_context(context),
            system_prompt=self.system_prompt,
            tools=[
                ToolSpec(tool.name, tool.model_description(), tool.parameters_schema())
                for tool in self.tools
            ],
            thinking=self.thinking,
            cache_key=self.cache_key,
            model=self.info,
            delta_window=self.delta_window,
        )


def model_context(messages: Sequence[Message]) -> list[Message]:
    """The messages to send to the model: assistant messages that ended in ``error`` or
    ``aborted`` stay in the transcript but are not resent, nor are tool results answering them."""
    kept: list[Message] = []
    live_call_ids: set[str] = set()
    for message in messages:
        if isinstance(message, AssistantMessage):
            if message.stop_reason in ("error", "aborted"):
                continue
            live_call_ids.update(call.id for call in message.tool_calls)
        elif isinstance(message, ToolResultMessage) and message.tool_call_id not in live_call_ids:
            continue
        kept.append(message)
    return kept


def aborted_message(provider: str, model: str) -> AssistantMessage:
    """The empty assistant message a run aborted before the model answered ends with."""
    return _PartialMessage(provider, model).snapshot("aborted", "the run was aborted")


def streaming_call(spec: ModelSpec, emit: Emit, abort: AbortSignal) -> ModelCall:
    """The plain model call: one attempt per call (``stream_once``), nothing retried."""

    async def call(context: list[Message]) -> AssistantMessage:
        return await stream_once(spec, spec.request(context), emit, abort)

    return call


async def stream_once(
    spec: ModelSpec, request: ModelRequest, emit: Emit, abort: AbortSignal
) -> AssistantMessage:
    """One attempt: emits message_start and the deltas; returns the final message unsent.

    A stream that yields nothing for ``spec.idle_timeout`` seconds from the request on (after
    ``spec.prepare``) becomes a retryable error; one whose deltas pass ``MAX_MESSAGE_CHARS``
    an error (not retryable) at that delta; an abort becomes ``aborted``; a provider that
    raises (a bug) becomes ``error``.
    """
    idle = spec.idle_timeout
    partial = _PartialMessage(spec.provider, spec.model)
    emit(MessageStart(message=partial.snapshot()))
    final: AssistantMessage | None = None
    if spec.prepare is not None:
        with abort.scope():
            await spec.prepare()
        if abort.aborted:
            return partial.snapshot("aborted", "the run was aborted")
    stream = spec.stream(request)
    size = 0
    with abort.scope():
        stall = _StallWatch(idle)
        try:
            with stall.scope:
                while final is None:
                    item = await anext(stream)
                    stall.fed()
                    if isinstance(item, MessageUpdate):
                        size += len(item.delta or "")
                        if size > MAX_MESSAGE_CHARS:
                            final = partial.snapshot("error", (
                                f"{spec.provider}: the model's message passed "
                                f"{MAX_MESSAGE_CHARS:,} characters (text, thinking and tool-call "
                                "arguments together); the call was ended there"))
                            break
                        partial.apply(item)
                        emit(item)
                    else:
                        final = item
        except StopAsyncIteration:
            pass
        except Exception as exc:  # a provider bug: the contract says it never raises
            final = partial.snapshot("error", f"provider failed: {type(exc).__name__}: {exc}")
        finally:
            stall.stop()
            with anyio.CancelScope(shield=True):
                await _aclose(stream)
        if stall.scope.cancelled_caught:
            final = partial.snapshot(
                "error",
                f"{spec.provider}: the provider sent nothing for {idle:g} "
                "seconds (stalled stream)",
            )
            final.retryable = True
    if final is None:
        if abort.aborted:
            return _aborted(partial, request)
        final = partial.snapshot("error", "the provider ended without a message")
    return final


def _aborted(partial: _PartialMessage, request: ModelRequest) -> AssistantMessage:
    """The message an abort cut short. Providers report usage at the end, which never came:
    when the model had begun to answer, the usage is estimated from the request and what
    streamed (``estimated: true``), so an aborted run does not show 0 tokens."""
    message = partial.snapshot("aborted", "the run was aborted")
    if partial.blocks:
        message.usage = estimated_usage(request, message)
    return message


class _StallWatch:
    """Cancels ``scope`` once ``idle`` seconds pass without a ``fed()``: one timer, re-armed
    at the deadline it finds, instead of a cancel scope and a timer per streamed item (the
    per-token cost that mattered at 100 tokens/s)."""

    def __init__(self, idle: float) -> None:
        self.idle = idle
        self.scope = anyio.CancelScope()
        self._loop = asyncio.get_running_loop()
        self._last = self._loop.time()
        self._timer: asyncio.TimerHandle | None = self._loop.call_at(self._last + idle,
                                                                      self._check)

    def fed(self) -> None:
        self._last = self._loop.time()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        due = self._last + self.idle
        if self._loop.time() >= due:
            self._timer = None
            self.scope.cancel()
        else:
            self._timer = self._loop.call_at(due, self._check)


async def _aclose(stream: AsyncIterator[StreamItem]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        try:
            await aclose()
        except Exception:
            pass  # closing a stream that already failed: nothing left to report


class _PartialMessage:
    """Assembles streamed deltas into an AssistantMessage, for aborts and message_start."""

    def __init__(self, provider: str, model: str) -> None:
        self.provider = provider
        self.model = model
        self.blocks: dict[int, TextContent | ThinkingContent | ToolCall] = {}
        self.raw_args: dict[int, str] = {}

    def apply(self, update: MessageUpdate) -> None:
        delta = update.delta or ""
        block = self.blocks.get(update.index)
        if update.kind == "text":
            if isinstance(block, TextContent):
                block.text += delta
            else:
                self.blocks[update.index] = TextContent(text=delta)
        elif update.kind == "thinking":
            if isinstance(block, ThinkingContent):
                block.thinking += delta
            else:
                self.blocks[update.index] = ThinkingContent(thinking=delta)
        elif update.kind == "toolCallStart":
            self.blocks[update.index] = ToolCall(
                id=update.tool_call_id or "", name=update.tool_name or ""
            )
        else:
            self.raw_args[update.index] = self.raw_args.get(update.index, "") + delta

    def snapshot(
        self, stop_reason: StopReason = "stop", error_message: str | None = None
    ) -> AssistantMessage:
        content = [self.blocks[index] for index in sorted(self.blocks)]
        return AssistantMessage(
            content=[block.model_copy() for block in content],
            provider=self.provider,
            model=self.model,
            stop_reason=stop_reason,
            error_message=error_message,
        )
