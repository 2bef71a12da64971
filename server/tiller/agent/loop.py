"""The two-level agent loop of docs/loop.md, as one function with injected model call and emit.

``run_agent_loop`` owns no state beyond one run: the caller (``Agent``) hands it the context to
extend, the settings, the model call (already wrapped for retry, compaction and pricing, see
``tiller.agent.model_call``), the queues as polling callbacks, an ``AbortSignal``, and ``emit``.
Every message is appended to ``context`` before its ``message_end`` is emitted, so an ``emit`` that
persists events persists the transcript in order. Tool execution lives in
``tiller.agent.tool_batch``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import field

from tiller.agent.abort import AbortSignal
from tiller.agent.model_call import Emit, ModelCall
from tiller.agent.run_hooks import MAX_STOP_CONTINUATIONS
from tiller.agent.settings import AgentSettings
from tiller.agent.tool_batch import ToolBatch, execute_tool_calls, fail_tool_calls
from tiller.frozen import frozen
from tiller.types import (
    AgentEnd,
    AgentStart,
    AssistantMessage,
    Message,
    MessageEnd,
    MessageStart,
    RunResult,
    RunStopReason,
    ToolResultMessage,
    TurnEnd,
    TurnStart,
    Usage,
    UserMessage,
)

__all__ = ["LENGTH_POISON_MESSAGE", "Queues", "run_agent_loop"]

PollFn = Callable[[], list[Message]]

LENGTH_POISON_MESSAGE = (
    "Tool call not executed: the response hit the output token limit, so its arguments may be "
    "truncated. Re-issue the call with complete arguments (split large content into smaller "
    "calls if needed)."
)


@frozen
class Queues:
    """The Agent's steering and follow-up queues, as callbacks that must not raise.

    ``poll_*`` take messages off a queue; ``has_queued`` only peeks (for the turn limit, which
    must not consume what it will not deliver)."""

    poll_steering: PollFn = field(default=lambda: [])
    poll_follow_up: PollFn = field(default=lambda: [])
    has_queued: Callable[[], bool] = field(default=lambda: False)


class _Run:
    """The state of one run: the context it extends, its events, and its usage."""

    def __init__(
        self,
        context: list[Message],
        settings: AgentSettings,
        call_model: ModelCall,
        emit: Emit,
        abort: AbortSignal,
    ) -> None:
        self.context = context
        self.settings = settings
        self.call_model = call_model
        self.emit = emit
        self.abort = abort
        self.usage = Usage()
        self.new_messages: list[Message] = []
        self.turns = 0
        self.continued = 0
        """How often the Stop hooks sent the agent on."""

    def append(self, message: Message) -> None:
        """Add a finished message to the context, then announce it."""
        self.context.append(message)
        self.new_messages.append(message)
        self.emit(MessageEnd(message=message))

    def at_turn_limit(self) -> bool:
        return self.settings.max_turns is not None and self.turns >= self.settings.max_turns

    def at_token_limit(self) -> bool:
        limit = self.settings.max_run_tokens
        return limit is not None and self.usage.total_tokens >= limit

    def token_limit_message(self) -> str:
        return (
            f"stopped after {self.usage.total_tokens:,} tokens (the per-run limit is "
            f"{self.settings.max_run_tokens:,}); queued messages stay queued; send agent/continue "
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

    async def stream_assistant_response(self) -> AssistantMessage:
        """One model call (retried, compacted and priced by the wrappers around it); appends
        the final message and emits its message_end. Never raises."""
        final = await self.call_model(self.context)
        self.usage = self.usage.add(final.usage)
        self.append(final)
        return final

    async def after_batch(
        self, message: AssistantMessage, results: list[ToolResultMessage]
    ) -> list[Message]:
        """The PostToolBatch hooks' messages for the model (none without hooks)."""
        hooks = self.settings.run_hooks
        if hooks is None:
            return []
        with self.abort.scope():
            return await hooks.after_batch(message, results)
        return []  # aborted

    async def go_on(self, message: AssistantMessage) -> list[Message]:
        """When the run would end after ``message``: the Stop hooks' reason to go on, as a
        user message, within the bound and the turn limit; else []."""
        hooks = self.settings.run_hooks
        if hooks is None or self.continued >= MAX_STOP_CONTINUATIONS or self.at_turn_limit():
            return []
        reason = None
        with self.abort.scope():
            reason = await hooks.before_stop(message, self.continued)
        if reason is None or self.abort.aborted:
            return []
        self.continued += 1
        return [UserMessage(content=f"A Stop hook asks you to go on: {reason}")]

    async def run_tools(self, message: AssistantMessage) -> ToolBatch:
        """Run the message's tool calls (or fail them all after a length stop); append the
        results in source order."""
        calls = message.tool_calls
        if message.stop_reason == "length":
            batch = fail_tool_calls(calls, LENGTH_POISON_MESSAGE, self.settings, self.emit)
        else:
            batch = await execute_tool_calls(calls, self.settings, self.emit, self.abort)
        for result in batch.results:
            if result.usage is not None:  # a subagent's model calls: this run's spending too
                self.usage = self.usage.add(result.usage)
            self.emit(MessageStart(message=result))
            self.append(result)
        return batch


async def run_agent_loop(
    prompts: Sequence[Message],
    context: list[Message],
    settings: AgentSettings,
    call_model: ModelCall,
    queues: Queues,
    emit: Emit,
    abort: AbortSignal,
    *,
    poll_steering_first: bool = True,
) -> RunResult:
    """Run until the model stops, the turn limit is hit, an error, or an abort.

    ``prompts`` (possibly empty, for a continue) are appended to ``context`` first. Steering is
    polled before the first model call (unless ``poll_steering_first`` is false: a continue
    that already took its input off a queue) and after every turn; follow-ups only when the
    inner loop would exit, and then the Stop hooks (``settings.run_hooks``). Emits exactly one
    ``agent_start`` and one ``agent_end``; never raises.
    """
    run = _Run(context, settings, call_model, emit, abort)
    emit(AgentStart())
    pending: list[Message] = [*prompts, *(queues.poll_steering() if poll_steering_first else [])]
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
            if more_tools or queues.has_queued():
                if run.at_turn_limit():
                    return run.end("maxTurns", run.turn_limit_message())
                if run.at_token_limit():
                    return run.end("maxTokens", run.token_limit_message())
            if message.tool_calls and more_tools:
                pending = await run.after_batch(message, results)
                if abort.aborted:
                    return run.end("aborted", "the run was aborted")
            pending = [*pending, *queues.poll_steering()]
        follow_ups = queues.poll_follow_up() or await run.go_on(message)
        if abort.aborted:
            return run.end("aborted", "the run was aborted")
        if not follow_ups:
            break
        pending = follow_ups
    return run.end(last_stop)
