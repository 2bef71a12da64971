"""Unit tests of the wrappers around the model call: retry, compaction and pricing, each driven
by the strict scripted model without a loop around it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from support.scripted import ScriptedProvider, reply_error, reply_text
from tiller.agent.abort import AbortSignal
from tiller.agent.compaction import with_compaction
from tiller.agent.model_call import ModelCall, ModelSpec, streaming_call
from tiller.agent.pricing import priced
from tiller.agent.retry import with_retry
from tiller.config import CompactionSettings, RetryPolicy
from tiller.modes import SUMMARY_PREFIX
from tiller.providers.base import ModelCost
from tiller.types import AgentEvent, AssistantMessage, Message, UserMessage

pytestmark = pytest.mark.anyio

NO_WAIT = RetryPolicy(max_retries=2, base_delay=0.0, jitter=0.0)


@pytest.fixture
def provider() -> Iterator[ScriptedProvider]:
    scripted = ScriptedProvider()
    yield scripted
    scripted.assert_done()


def transient(text: str = "503 Service Unavailable") -> AssistantMessage:
    message = reply_error(text)
    message.retryable = True
    return message


def plain_call(
    provider: ScriptedProvider, events: list[AgentEvent], abort: AbortSignal
) -> ModelCall:
    spec = ModelSpec(provider.stream, provider.name, provider.model)
    return streaming_call(spec, events.append, abort)


def summary(events: list[AgentEvent]) -> list[tuple[Any, ...]]:
    """The retry and compaction events, with what the tests check of them."""
    out: list[tuple[Any, ...]] = []
    for event in events:
        if event.type == "retry_scheduled":
            out.append((event.type, event.attempt, event.max_attempts, event.error_message))
        elif event.type == "retry_end":
            out.append((event.type, event.success, event.attempt))
        elif event.type in ("compaction_start", "compaction_end"):
            out.append((event.type, event.reason))
        elif event.type == "message_start":
            out.append((event.type,))
    return out


async def test_retry_calls_again_after_a_transient_failure(provider: ScriptedProvider) -> None:
    provider.enqueue(transient(), reply_text("recovered"))
    events: list[AgentEvent] = []
    abort = AbortSignal()
    call = with_retry(plain_call(provider, events, abort), NO_WAIT, events.append, abort)

    with anyio.fail_after(5):
        final = await call([UserMessage(content="hi")])

    assert final.text == "recovered"
    assert summary(events) == [
        ("message_start",),
        ("retry_scheduled", 1, 2, "503 Service Unavailable"),
        ("message_start",),
        ("retry_end", True, 1),
    ]


async def test_retry_gives_up_after_max_retries(provider: ScriptedProvider) -> None:
    provider.enqueue(transient(), transient(), transient("still down"))
    events: list[AgentEvent] = []
    abort = AbortSignal()
    call = with_retry(plain_call(provider, events, abort), NO_WAIT, events.append, abort)

    with anyio.fail_after(5):
        final = await call([UserMessage(content="hi")])

    assert (final.stop_reason, final.error_message) == ("error", "still down")
    assert [e for e in summary(events) if e[0] != "message_start"] == [
        ("retry_scheduled", 1, 2, "503 Service Unavailable"),
        ("retry_scheduled", 2, 2, "503 Service Unavailable"),
        ("retry_end", False, 2),
    ]


async def test_an_abort_during_the_retry_wait_ends_the_call_aborted(
    provider: ScriptedProvider,
) -> None:
    provider.enqueue(transient())
    events: list[AgentEvent] = []
    abort = AbortSignal()

    def emit(event: AgentEvent) -> None:
        events.append(event)
        if event.type == "retry_scheduled":
            abort.abort()  # the user stops the run while it waits to retry

    slow = RetryPolicy(base_delay=3600.0, jitter=0.0)
    call = with_retry(plain_call(provider, events, abort), slow, emit, abort)

    with anyio.fail_after(5):
        final = await call([UserMessage(content="hi")])

    assert (final.stop_reason, final.provider, final.content) == ("aborted", "scripted", [])
    assert summary(events)[-2:] == [("message_start",), ("retry_end", False, 1)]


async def test_compaction_on_overflow_compacts_once_and_calls_again(
    provider: ScriptedProvider,
) -> None:
    overflow = reply_error("prompt is too long: 210000 tokens > 200000 maximum")
    provider.enqueue(overflow, reply_text("the summary"), reply_text("answered"))
    context: list[Message] = [  # long enough that the summary shrinks it (compaction.py)
        UserMessage(content="old question " * 40), reply_text("old answer " * 40),
        UserMessage(content="new"),
    ]
    events: list[AgentEvent] = []
    abort = AbortSignal()
    settings = CompactionSettings(keep_recent_tokens=0)
    call = with_compaction(
        plain_call(provider, events, abort), provider.stream, settings, None, events.append, abort
    )

    with anyio.fail_after(5):
        final = await call(context)

    assert final.text == "answered"
    assert [e for e in summary(events) if e[0] != "message_start"] == [
        ("compaction_start", "overflow"), ("compaction_end", "overflow"),
    ]
    assert context[0] == UserMessage(content=SUMMARY_PREFIX + "the summary",
                                     timestamp=context[0].timestamp)
    assert len(provider.requests) == 3


async def test_compaction_runs_before_a_call_past_the_threshold(
    provider: ScriptedProvider,
) -> None:
    provider.enqueue(reply_text("the summary"), reply_text("answered"))
    context: list[Message] = [
        UserMessage(content="x" * 400), reply_text("y" * 400), UserMessage(content="next")
    ]
    events: list[AgentEvent] = []
    abort = AbortSignal()
    settings = CompactionSettings(reserve_tokens=50, keep_recent_tokens=1)
    call = with_compaction(
        plain_call(provider, events, abort), provider.stream, settings, 200, events.append, abort
    )

    with anyio.fail_after(5):
        final = await call(context)

    assert final.text == "answered"
    assert summary(events)[:2] == [
        ("compaction_start", "threshold"), ("compaction_end", "threshold"),
    ]
    assert [m.role for m in provider.requests[1].messages] == ["user", "user"]


async def test_priced_sets_the_cost_from_the_model_prices(provider: ScriptedProvider) -> None:
    provider.enqueue(reply_text("hi"))  # 10 input and 5 output tokens
    events: list[AgentEvent] = []
    call = priced(plain_call(provider, events, AbortSignal()), ModelCost(input=1.0, output=2.0))

    final = await call([UserMessage(content="hi")])

    assert final.usage.cost == pytest.approx((10 * 1.0 + 5 * 2.0) / 1_000_000)
