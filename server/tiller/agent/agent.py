"""``Agent``: the thin stateful owner of one conversation: its messages, queues and abort.

The loop itself is stateless (``tiller.agent.loop``); the Agent hands it the context, its settings,
the model call (streamed, retried, compacted and priced: ``_model_call``), the steering and
follow-up queues as polling callbacks and a fresh ``AbortSignal`` per run. Only one run is active at
a time; ``prompt`` while busy raises ``AgentBusyError``.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Protocol

import anyio

from tiller.agent.abort import AbortSignal
from tiller.agent.compaction import run_compaction, with_compaction
from tiller.agent.loop import Queues, run_agent_loop
from tiller.agent.model_call import Emit, ModelCall, ModelSpec, model_context, streaming_call
from tiller.agent.pricing import priced
from tiller.agent.retry import with_retry
from tiller.agent.settings import AgentSettings
from tiller.config import CompactionSettings
from tiller.errors import AgentBusyError, CannotContinueError, NoActiveRunError
from tiller.modes import QueueMode, ThinkingLevel
from tiller.providers.base import ModelInfo, ModelRequest, Provider, StreamItem
from tiller.providers.levels import effective_level
from tiller.types import (
    AgentSettled,
    AssistantMessage,
    Message,
    RunResult,
    Usage,
    UserContent,
    UserMessage,
)

__all__ = ["Agent", "ModelGuard"]

log = logging.getLogger(__name__)


class ModelGuard(Protocol):
    """What the session knows of its model that the Agent asks before and after model calls.

    ``before_run`` is awaited before each run starts (it may look the model up, replace the
    provider, publish notices); ``refusal`` is an error that ends every model call of the run
    before it is sent (a retired model), or None; ``explain`` is given each call that failed
    and returns it, its ``error_message`` perhaps made clearer. None of them may raise."""

    async def before_run(self) -> None: ...

    def refusal(self) -> str | None: ...

    async def explain(self, message: AssistantMessage) -> AssistantMessage: ...


class Agent:
    """One conversation. ``emit`` receives every event of every run, in order.

    ``settings`` is replaced as a whole between runs (``dataclasses.replace``); a run keeps the
    settings it started with. ``provider_factory`` is called lazily, on the first run, and may
    raise ``ProviderNotConfiguredError``; ``model_info`` (the catalog entry, if any) gives the
    prices and the context window. The provider, ``model_info`` and ``thinking`` change between
    runs (``set_provider``; ``thinking`` is read when a run starts)."""

    def __init__(
        self,
        settings: AgentSettings,
        provider_factory: Callable[[], Provider],
        emit: Emit,
        *,
        model_info: ModelInfo | None = None,
        thinking: ThinkingLevel = "off",
        guard: ModelGuard | None = None,
    ) -> None:
        self.settings = settings
        self.model_info = model_info
        self.thinking: ThinkingLevel = thinking
        self.guard = guard
        self._preparing = False
        self._provider_factory = provider_factory
        self._emit = emit
        self.messages: list[Message] = []
        self.steering_queue: deque[UserMessage] = deque()
        self.follow_up_queue: deque[UserMessage] = deque()
        self.steering_mode: QueueMode = "one-at-a-time"
        self.follow_up_mode: QueueMode = "one-at-a-time"
        self.usage = Usage()
        self._provider: Provider | None = None
        self._abort: AbortSignal | None = None
        self._idle = anyio.Event()
        self._idle.set()

    @property
    def is_running(self) -> bool:
        return self._abort is not None

    @property
    def provider(self) -> Provider:
        """The provider, created on first use (may raise ProviderNotConfiguredError)."""
        if self._provider is None:
            self._provider = self._provider_factory()
        return self._provider

    async def set_provider(
        self, factory: Callable[[], Provider], model_info: ModelInfo | None
    ) -> Provider:
        """Switch model/provider between runs. The new provider is built now, so a missing key
        fails here (ProviderNotConfiguredError) and the old one stays in place; once replaced,
        the old one is closed."""
        if self.is_running:
            raise AgentBusyError("cannot switch the model while a run is active")
        provider = factory()
        self._provider_factory = factory
        self.model_info = model_info
        old, self._provider = self._provider, provider
        if old is not None:
            await _close_provider(old)
        return provider

    async def aclose(self) -> None:
        """Close the provider (its HTTP client and connections). Call it between runs; a later
        run builds a new provider."""
        provider, self._provider = self._provider, None
        if provider is not None:
            await _close_provider(provider)

    async def prompt(self, content: str | Sequence[UserContent] | UserMessage) -> RunResult:
        """Start a run with new user input; returns when the run has ended."""
        self.check_idle()
        await self._before_run()
        return await self._run([_user_message(content)])

    async def _before_run(self) -> None:
        """The guard's ``before_run``; meanwhile the Agent counts as busy."""
        if self.guard is None:
            return
        self._preparing = True
        try:
            await self.guard.before_run()
        finally:
            self._preparing = False

    async def continue_(self) -> RunResult:
        """Resume from the existing context, delivering queued messages if there are any."""
        self.check_idle()
        context = model_context(self.messages)
        needs_input = not context or isinstance(context[-1], AssistantMessage)
        if needs_input and not (self.steering_queue or self.follow_up_queue):
            reason = (
                "the conversation is empty"
                if not context
                else "the last message is the assistant's; send agent/prompt instead"
            )
            raise CannotContinueError(f"nothing to continue: {reason}")
        _ = self.provider  # fail before taking anything off the queues
        await self._before_run()
        if not needs_input:
            return await self._run([])
        # The input is taken off a queue here, so the loop must not poll steering again before
        # its first model call: one-at-a-time means one message per turn (as pi's continue).
        prompts = self._poll_steering() or self._poll_follow_up()
        return await self._run(prompts, poll_steering_first=False)

    def steer(self, content: str | Sequence[UserContent] | UserMessage) -> int:
        """Queue a steering message; returns the queue's length."""
        self.steering_queue.append(_user_message(content))
        return len(self.steering_queue)

    def follow_up(self, content: str | Sequence[UserContent] | UserMessage) -> int:
        """Queue a follow-up message; returns the queue's length."""
        self.follow_up_queue.append(_user_message(content))
        return len(self.follow_up_queue)

    def abort(self) -> None:
        """End the active run with stop reason ``aborted``."""
        if self._abort is None:
            raise NoActiveRunError("no run is active in this session")
        self._abort.abort()

    async def compact(self, instructions: str | None = None) -> bool:
        """Summarize the older part of the conversation now (between runs); True if anything
        was compacted. Emits compaction_start/compaction_end."""
        self.check_idle()
        provider = self.provider
        self._abort = AbortSignal()
        self._idle = anyio.Event()
        try:
            return await run_compaction(
                self.messages, provider.stream, self.settings.compaction or CompactionSettings(),
                self._emit, "manual", self._abort, instructions, self.settings.run_hooks,
            )
        finally:
            self._abort = None
            self._idle.set()

    async def wait_idle(self) -> None:
        """Return once no run is active."""
        await self._idle.wait()

    def check_idle(self) -> None:
        """AgentBusyError, saying what to do instead, while a run is active (or starting)."""
        if self.is_running or self._preparing:
            raise AgentBusyError(
                "the agent is busy with a run: use agent/steer to change its direction, "
                "agent/followUp to queue work for after it, or agent/abort to stop it"
            )

    async def _run(self, prompts: list[Message], poll_steering_first: bool = True) -> RunResult:
        provider = self.provider
        self._abort = abort = AbortSignal()
        self._idle = anyio.Event()
        notices = self.settings.notices
        queues = Queues(
            poll_steering=self._poll_steering,
            poll_follow_up=self._poll_follow_up,
            has_queued=lambda: bool(self.steering_queue or self.follow_up_queue
                                    or notices is not None and notices.has_notices()),
        )
        try:
            result = await run_agent_loop(
                prompts, self.messages, self.settings, self._model_call(provider, abort),
                queues, self._emit, abort, poll_steering_first=poll_steering_first,
            )
            self.usage = self.usage.add(result.usage)
            return result
        finally:
            self._abort = None
            self._idle.set()
            self._emit(AgentSettled())

    def _model_call(self, provider: Provider, abort: AbortSignal) -> ModelCall:
        """One run's model call: streamed from ``provider``, retried on transient failures,
        compacted near the window and on overflow, priced from the catalog."""
        settings, model = self.settings, self.model_info
        refusal = self.guard.refusal() if self.guard else None
        spec = ModelSpec(
            stream=_refused(refusal, provider) if refusal else provider.stream,
            provider=provider.name,
            model=provider.model,
            system_prompt=settings.system_prompt,
            tools=settings.tools,
            # The level the model takes (one known not to reason gets none: OpenAI answers 400).
            thinking=effective_level(self.thinking, model).level,
            idle_timeout=settings.retry.idle_timeout,
            cache_key=settings.cache_key,
            info=model,
            prepare=provider.prepare,
            delta_window=settings.delta_window,
        )
        call = streaming_call(spec, self._emit, abort)
        call = with_retry(call, settings.retry, self._emit, abort)
        window = model.context_window if model else None
        call = with_compaction(
            call, provider.stream, settings.compaction, window, self._emit, abort,
            settings.run_hooks,
        )
        cost = model.cost.at_ttl(provider.cache_ttl) if model and model.cost else None
        return _explained(priced(call, cost), self.guard)

    def _poll_steering(self) -> list[Message]:
        """The steering messages due (one, or all, by the mode), then the notices waiting
        (``AgentSettings.notices``: all of them, whatever the mode)."""
        notices = self.settings.notices
        told: list[Message] = list(notices.take_notices()) if notices is not None else []
        return [*_drain(self.steering_queue, self.steering_mode), *told]

    def _poll_follow_up(self) -> list[Message]:
        return _drain(self.follow_up_queue, self.follow_up_mode)


def _refused(error: str, provider: Provider) -> Callable[[ModelRequest],
                                                           AsyncIterator[StreamItem]]:
    """A stream that sends nothing and ends in ``error`` (the guard's refusal)."""

    async def stream(request: ModelRequest) -> AsyncIterator[StreamItem]:
        yield AssistantMessage(provider=provider.name, model=provider.model,
                               stop_reason="error", error_message=error)

    return stream


def _explained(call: ModelCall, guard: ModelGuard | None) -> ModelCall:
    """``call`` whose failed messages go through ``guard.explain``."""
    if guard is None:
        return call

    async def explaining(context: list[Message]) -> AssistantMessage:
        message = await call(context)
        return await guard.explain(message) if message.stop_reason == "error" else message

    return explaining


async def _close_provider(provider: Provider) -> None:
    """``provider.aclose()``, shielded from cancellation; a failure is logged, never raised."""
    with anyio.CancelScope(shield=True):
        try:
            await provider.aclose()
        except Exception:
            log.exception("closing provider %s failed", provider.name)


def _user_message(content: str | Sequence[UserContent] | UserMessage) -> UserMessage:
    if isinstance(content, UserMessage):
        return content
    return UserMessage(content=content if isinstance(content, str) else list(content))


def _drain(queue: deque[UserMessage], mode: QueueMode) -> list[Message]:
    if not queue:
        return []
    if mode == "one-at-a-time":
        return [queue.popleft()]
    drained: list[Message] = list(queue)
    queue.clear()
    return drained
