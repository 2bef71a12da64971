"""The two-level agent loop of loop-semantics.md, as one function with injected stream and emit.

``run_agent_loop`` owns no state beyond one run: the caller (``Agent``) hands it the context to
extend, the queues as polling callbacks, an ``AbortSignal``, and ``emit``. Every message is
appended to ``context`` before its ``message_end`` is emitted, so an ``emit`` that persists events
persists the transcript in order. Tool execution lives in ``tiller.tools.execute``.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from tiller.abort import AbortSignal
from tiller.compaction import (
    CompactionOutcome,
    CompactionSettings,
    compact,
    estimate_tokens,
    is_context_overflow,
)
from tiller.providers.base import ModelCost, ModelRequest, StreamItem, ToolSpec
from tiller.tools.base import EditorFiles, Tool
from tiller.tools.execute import (
    AfterToolCall,
    BeforeToolCall,
    ToolBatch,
    execute_tool_calls,
    fail_tool_calls,
)
from tiller.types import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    AssistantMessage,
    CompactionEnd,
    CompactionStart,
    Message,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    RetryEnd,
    RetryScheduled,
    RunStopReason,
    TextContent,
    ThinkingContent,
    ThinkingLevel,
    ToolCall,
    ToolResultMessage,
    TurnEnd,
    TurnStart,
    Usage,
)

__all__ = [
    "LENGTH_POISON_MESSAGE",
    "AbortSignal",
    "Emit",
    "LoopConfig",
    "RunResult",
    "StreamFn",
    "model_context",
    "run_agent_loop",
]

Emit = Callable[[AgentEvent], None]
StreamFn = Callable[[ModelRequest], AsyncIterator[StreamItem]]
PollFn = Callable[[], list[Message]]

LENGTH_POISON_MESSAGE = (
    "Tool call not executed: the response hit the output token limit, so its arguments may be "
    "truncated. Re-issue the call with complete arguments (split large content into smaller "
    "calls if needed)."
)


@dataclass
class RetryPolicy:
    """Retries of one model call: exponential backoff with jitter, bounded in count and delay.

    ``delay(n)`` for retry n is ``base_delay * 2**(n-1)`` (±``jitter``), or the provider's
    ``Retry-After`` when it gave one; None when that exceeds ``max_delay`` (then give up).
    """

    max_retries: int = 3
    base_delay: float = 1.0
    max_delay: float = 60.0
    jitter: float = 0.2
    idle_timeout: float = 120.0

    def delay(self, retry: int, retry_after: float | None = None) -> float | None:
        if retry_after is not None:
            return retry_after if retry_after <= self.max_delay else None
        backoff: float = self.base_delay * 2.0 ** (retry - 1)
        backoff *= 1 + random.uniform(-self.jitter, self.jitter)
        return min(backoff, self.max_delay)


@dataclass
class LoopConfig:
    """Everything one run needs besides the context. Callbacks must not raise.

    ``poll_*`` take messages off a queue; ``has_queued`` only peeks (for the turn limit, which
    must not consume what it will not deliver)."""

    stream: StreamFn
    tools: Sequence[Tool[Any]] = ()
    system_prompt: str | None = None
    poll_steering: PollFn = field(default=lambda: [])
    poll_follow_up: PollFn = field(default=lambda: [])
    has_queued: Callable[[], bool] = field(default=lambda: False)
    before_tool_call: BeforeToolCall | None = None
    after_tool_call: AfterToolCall | None = None
    max_turns: int | None = None
    max_tokens: int | None = None
    tool_timeout: float | None = None
    thinking: ThinkingLevel = "off"
    retry: RetryPolicy = field(default_factory=lambda: RetryPolicy())
    price: ModelCost | None = None
    compaction: CompactionSettings | None = None
    context_window: int | None = None
    max_run_tokens: int | None = None
    files: EditorFiles | None = None
    cwd: Any = None
    provider_name: str = ""
    model_name: str = ""


@dataclass
class RunResult:
    """How a run ended: ``agent_end``'s payload plus the messages the run appended."""

    stop_reason: RunStopReason
    error_message: str | None = None
    usage: Usage = field(default_factory=Usage)
    messages: list[Message] = field(default_factory=list)


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


class _Run:
    """The state of one run: the context it extends, its events, and its usage."""

    def __init__(
        self, context: list[Message], config: LoopConfig, emit: Emit, abort: AbortSignal
    ) -> None:
        self.context = context
        self.config = config
        self.emit = emit
        self.abort = abort
        self.usage = Usage()
        self.new_messages: list[Message] = []
        self.turns = 0

    def append(self, message: Message) -> None:
        """Add a finished message to the context, then announce it."""
        self.context.append(message)
        self.new_messages.append(message)
        self.emit(MessageEnd(message=message))

    def at_turn_limit(self) -> bool:
        return self.config.max_turns is not None and self.turns >= self.config.max_turns

    def at_token_limit(self) -> bool:
        limit = self.config.max_run_tokens
        return limit is not None and self.usage.total_tokens >= limit

    def token_limit_message(self) -> str:
        return (
            f"stopped after {self.usage.total_tokens:,} tokens (the per-run limit is "
            f"{self.config.max_run_tokens:,}); queued messages stay queued; send agent/continue "
            "to let the agent go on"
        )

    def turn_limit_message(self) -> str:
        return (
            f"stopped after {self.turns} turns (the per-run limit); queued messages stay queued; "
            "send agent/continue to let the agent go on"
        )

    def inject(self, messages: Sequence[Message]) -> None:
        for message in messages:
            self.emit(MessageStart(message=message))
            self.append(message)

    def end(self, stop_reason: RunStopReason, error_message: str | None = None) -> RunResult:
        self.emit(AgentEnd(stop_reason=stop_reason, error_message=error_message, usage=self.usage))
        return RunResult(stop_reason, error_message, self.usage, self.new_messages)

    def build_request(self) -> ModelRequest:
        config = self.config
        return ModelRequest(
            messages=model_context(self.context),
            system_prompt=config.system_prompt,
            tools=[
                ToolSpec(tool.name, tool.description, tool.parameters_schema())
                for tool in config.tools
            ],
            max_tokens=config.max_tokens,
            thinking=config.thinking,
        )

    async def stream_assistant_response(self) -> AssistantMessage:
        """One model call, retried on transient failures per ``config.retry``.

        Emits message_start/update per attempt; a retried attempt is announced by
        ``retry_scheduled`` (its partial message is discarded, never appended). Appends the
        final message and emits its message_end. Never raises.
        """
        policy = self.config.retry
        attempt = 0
        compacted_for_overflow = False
        await self.maybe_compact()
        while True:
            final = await self.stream_once(self.build_request())
            if is_context_overflow(final) and not compacted_for_overflow:
                compacted_for_overflow = True
                if await self.compact("overflow"):
                    continue
            if final.stop_reason == "error" and final.retryable and not self.abort.aborted:
                delay = policy.delay(attempt + 1, final.retry_after)
                if attempt < policy.max_retries and delay is not None:
                    attempt += 1
                    self.emit(RetryScheduled(
                        attempt=attempt,
                        max_attempts=policy.max_retries,
                        delay_ms=int(delay * 1000),
                        error_message=final.error_message or "transient provider error",
                    ))
                    with self.abort.scope():
                        await anyio.sleep(delay)
                    if not self.abort.aborted:
                        continue
                    final = self.aborted_message()
                    self.emit(MessageStart(message=final))
            if attempt:
                success = final.stop_reason not in ("error", "aborted")
                self.emit(RetryEnd(success=success, attempt=attempt))
            final = self.priced(final)
            self.usage = self.usage.add(final.usage)
            self.append(final)
            return final

    async def maybe_compact(self) -> None:
        """Compact when the context nears the window: ``context_window`` minus the reserve
        (``reserve_tokens``, at most a quarter of the window)."""
        settings, window = self.config.compaction, self.config.context_window
        if settings is None or not settings.enabled or window is None:
            return
        reserve = min(settings.reserve_tokens, window // 4)  # small windows keep 3/4 usable
        if estimate_tokens(model_context(self.context)) > window - reserve:
            await self.compact("threshold")

    async def compact(self, reason: Literal["threshold", "overflow"]) -> bool:
        """Summarize the older context in place; True if anything was compacted."""
        settings = self.config.compaction or CompactionSettings()
        return await run_compaction(
            self.context, self.config.stream, settings, self.emit, reason, self.abort
        )

    def aborted_message(self) -> AssistantMessage:
        partial = _PartialMessage(self.config.provider_name, self.config.model_name)
        return partial.snapshot("aborted", "the run was aborted")

    def priced(self, message: AssistantMessage) -> AssistantMessage:
        price = self.config.price
        if price is None:
            return message
        usage = message.usage.model_copy(update={"cost": price.cost_of(message.usage)})
        return message.model_copy(update={"usage": usage})

    async def stream_once(self, request: ModelRequest) -> AssistantMessage:
        """One attempt: emits message_start and the deltas; returns the final message unsent.

        A stream that yields nothing for ``retry.idle_timeout`` seconds becomes a retryable
        error; an abort becomes ``aborted``; a provider that raises (a bug) becomes ``error``.
        """
        config = self.config
        idle = config.retry.idle_timeout
        partial = _PartialMessage(config.provider_name, config.model_name)
        self.emit(MessageStart(message=partial.snapshot()))
        final: AssistantMessage | None = None
        stream = config.stream(request)
        with self.abort.scope():
            try:
                while final is None:
                    with anyio.move_on_after(idle) as idle_scope:
                        item = await anext(stream)
                    if idle_scope.cancelled_caught:
                        final = partial.snapshot(
                            "error",
                            f"{config.provider_name}: the provider sent nothing for {idle:g} "
                            "seconds (stalled stream)",
                        )
                        final.retryable = True
                    elif isinstance(item, MessageUpdate):
                        partial.apply(item)
                        self.emit(item)
                    else:
                        final = item
            except StopAsyncIteration:
                pass
            except Exception as exc:  # a provider bug: the contract says it never raises
                final = partial.snapshot("error", f"provider failed: {type(exc).__name__}: {exc}")
            finally:
                with anyio.CancelScope(shield=True):
                    await _aclose(stream)
        if final is None:
            if self.abort.aborted:
                return partial.snapshot("aborted", "the run was aborted")
            final = partial.snapshot("error", "the provider ended without a message")
        return final

    async def run_tools(self, message: AssistantMessage) -> ToolBatch:
        calls = message.tool_calls
        if message.stop_reason == "length":
            batch = fail_tool_calls(calls, LENGTH_POISON_MESSAGE, self.emit)
        else:
            batch = await execute_tool_calls(
                calls,
                tools=self.config.tools,
                emit=self.emit,
                abort=self.abort,
                cwd=self.config.cwd,
                before=self.config.before_tool_call,
                after=self.config.after_tool_call,
                tool_timeout=self.config.tool_timeout,
                files=self.config.files,
            )
        for result in batch.results:
            self.emit(MessageStart(message=result))
            self.append(result)
        return batch


async def run_agent_loop(
    prompts: Sequence[Message],
    context: list[Message],
    config: LoopConfig,
    emit: Emit,
    abort: AbortSignal,
    *,
    poll_steering_first: bool = True,
) -> RunResult:
    """Run until the model stops, the turn limit is hit, an error, or an abort.

    ``prompts`` (possibly empty, for a continue) are appended to ``context`` first. Steering is
    polled before the first model call (unless ``poll_steering_first`` is false: a continue
    that already took its input off a queue) and after every turn; follow-ups only when the
    inner loop would exit. Emits exactly one ``agent_start`` and one ``agent_end``; never raises.
    """
    run = _Run(context, config, emit, abort)
    emit(AgentStart())
    pending: list[Message] = [*prompts, *(config.poll_steering() if poll_steering_first else [])]
    last_stop: RunStopReason = "stop"
    while True:
        more_tools = True
        while more_tools or pending:
            emit(TurnStart())
            run.inject(pending)
            pending = []
            run.turns += 1
            message = await run.stream_assistant_response()
            if message.stop_reason in ("error", "aborted"):
                emit(TurnEnd(message=message))
                return run.end(message.stop_reason, message.error_message)
            more_tools = False
            results: list[ToolResultMessage] = []
            if message.tool_calls:
                batch = await run.run_tools(message)
                results = batch.results
                more_tools = not batch.terminate
                if batch.aborted:
                    emit(TurnEnd(message=message, tool_results=results))
                    return run.end("aborted", "the run was aborted")
            emit(TurnEnd(message=message, tool_results=results))
            last_stop = message.stop_reason
            if abort.aborted:
                return run.end("aborted", "the run was aborted")
            if more_tools or config.has_queued():
                if run.at_turn_limit():
                    return run.end("maxTurns", run.turn_limit_message())
                if run.at_token_limit():
                    return run.end("maxTokens", run.token_limit_message())
            pending = config.poll_steering()
        follow_ups = config.poll_follow_up()
        if not follow_ups:
            break
        pending = follow_ups
    return run.end(last_stop)


async def run_compaction(
    context: list[Message],
    stream: StreamFn,
    settings: CompactionSettings,
    emit: Emit,
    reason: Literal["threshold", "overflow", "manual"],
    abort: AbortSignal,
    instructions: str | None = None,
) -> bool:
    """Compact ``context`` in place between compaction_start and compaction_end; never raises.
    True if anything was compacted."""
    before = estimate_tokens(model_context(context))
    emit(CompactionStart(reason=reason, tokens_before=before))
    outcome: CompactionOutcome | str = "compaction aborted"
    with abort.scope():
        try:
            outcome = await compact(context, stream, settings, instructions)
        except Exception as exc:  # a provider bug: report it, keep the context as it was
            outcome = f"compaction failed: {type(exc).__name__}: {exc}"
    if isinstance(outcome, str):
        emit(CompactionEnd(reason=reason, tokens_before=before, error_message=outcome))
        return False
    emit(CompactionEnd(
        reason=reason,
        tokens_before=outcome.tokens_before,
        tokens_after=outcome.tokens_after,
        removed_count=outcome.removed,
        summary=outcome.summary,
    ))
    return True


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
        self, stop_reason: Any = "stop", error_message: str | None = None
    ) -> AssistantMessage:
        content = [self.blocks[index] for index in sorted(self.blocks)]
        return AssistantMessage(
            content=[block.model_copy() for block in content],
            provider=self.provider,
            model=self.model,
            stop_reason=stop_reason,
            error_message=error_message,
        )
