"""``Agent``: the thin stateful owner of one conversation: its messages, queues and abort.

The loop itself is stateless (``tiller.loop``); the Agent hands it the context, the steering and
follow-up queues as polling callbacks and a fresh ``AbortSignal`` per run. Only one run is active
at a time; ``prompt`` while busy raises ``AgentBusyError``.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio

from tiller.abort import AbortSignal
from tiller.compaction import CompactionSettings
from tiller.errors import AgentBusyError, CannotContinueError, NoActiveRunError
from tiller.loop import (
    Emit,
    LoopConfig,
    RetryPolicy,
    RunResult,
    model_context,
    run_agent_loop,
    run_compaction,
)
from tiller.providers.base import ModelCost, Provider
from tiller.tools.base import EditorFiles, Tool
from tiller.tools.execute import AfterToolCall, BeforeToolCall
from tiller.types import (
    AgentSettled,
    AssistantMessage,
    Message,
    ThinkingLevel,
    Usage,
    UserContent,
    UserMessage,
)

__all__ = ["Agent", "AgentConfig", "QueueMode"]

log = logging.getLogger(__name__)

QueueMode = Literal["one-at-a-time", "all"]


@dataclass
class AgentConfig:
    """What an Agent is built from. ``provider_factory`` is called lazily, on the first run,
    and may raise ``ProviderNotConfiguredError``."""

    provider_factory: Callable[[], Provider]
    tools: Sequence[Tool[Any]] = ()
    system_prompt: str | None = None
    cwd: Path = field(default_factory=Path.cwd)
    max_turns: int | None = 50
    max_tokens: int | None = None
    tool_timeout: float | None = None
    thinking: ThinkingLevel = "off"
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    price: ModelCost | None = None
    compaction: CompactionSettings | None = None
    context_window: int | None = None
    max_run_tokens: int | None = None
    files: EditorFiles | None = None
    before_tool_call: BeforeToolCall | None = None
    after_tool_call: AfterToolCall | None = None


class Agent:
    """One conversation. ``emit`` receives every event of every run, in order."""

    def __init__(self, config: AgentConfig, emit: Emit) -> None:
        self.config = config
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
            self._provider = self.config.provider_factory()
        return self._provider

    async def set_provider(
        self, factory: Callable[[], Provider], price: ModelCost | None
    ) -> Provider:
        """Switch model/provider between runs. The new provider is built now, so a missing key
        fails here (ProviderNotConfiguredError) and the old one stays in place; once replaced,
        the old one is closed."""
        if self.is_running:
            raise AgentBusyError("cannot switch the model while a run is active")
        provider = factory()
        self.config.provider_factory = factory
        self.config.price = price
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

    async def prompt(self, content: str | Sequence[UserContent]) -> RunResult:
        """Start a run with new user input; returns when the run has ended."""
        self._check_idle()
        return await self._run([_user_message(content)])

    async def continue_(self) -> RunResult:
        """Resume from the existing context, delivering queued messages if there are any."""
        self._check_idle()
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
        prompts = (self._poll_steering() or self._poll_follow_up()) if needs_input else []
        return await self._run(prompts)

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
        self._check_idle()
        provider = self.provider
        self._abort = AbortSignal()
        self._idle = anyio.Event()
        try:
            return await run_compaction(
                self.messages, provider.stream, self.config.compaction or CompactionSettings(),
                self._emit, "manual", self._abort, instructions,
            )
        finally:
            self._abort = None
            self._idle.set()

    async def wait_idle(self) -> None:
        """Return once no run is active."""
        await self._idle.wait()

    def _check_idle(self) -> None:
        if self.is_running:
            raise AgentBusyError(
                "the agent is busy with a run: use agent/steer to change its direction, "
                "agent/followUp to queue work for after it, or agent/abort to stop it"
            )

    async def _run(self, prompts: list[Message]) -> RunResult:
        provider = self.provider
        self._abort = AbortSignal()
        self._idle = anyio.Event()
        config = self.config
        loop_config = LoopConfig(
            stream=provider.stream,
            tools=config.tools,
            system_prompt=config.system_prompt,
            poll_steering=self._poll_steering,
            poll_follow_up=self._poll_follow_up,
            has_queued=lambda: bool(self.steering_queue or self.follow_up_queue),
            before_tool_call=config.before_tool_call,
            after_tool_call=config.after_tool_call,
            max_turns=config.max_turns,
            max_tokens=config.max_tokens,
            tool_timeout=config.tool_timeout,
            thinking=config.thinking,
            retry=config.retry,
            price=config.price,
            compaction=config.compaction,
            context_window=config.context_window,
            max_run_tokens=config.max_run_tokens,
            files=config.files,
            cwd=config.cwd,
            provider_name=provider.name,
            model_name=provider.model,
        )
        try:
            result = await run_agent_loop(
                prompts, self.messages, loop_config, self._emit, self._abort
            )
            self.usage = self.usage.add(result.usage)
            return result
        finally:
            self._abort = None
            self._idle.set()
            self._emit(AgentSettled())

    def _poll_steering(self) -> list[Message]:
        return _drain(self.steering_queue, self.steering_mode)

    def _poll_follow_up(self) -> list[Message]:
        return _drain(self.follow_up_queue, self.follow_up_mode)


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
