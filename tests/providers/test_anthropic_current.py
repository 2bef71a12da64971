"""AnthropicProvider on December 2026's API (FakeAnthropic refuses what the real one refuses):
the thinking shape from the model's capabilities, the one corrected retry when the API refuses
the shape, prompt-cache breakpoints that stay within four and keep the prefix byte-stable, the
fake's cache accounting, and cache writes priced at their TTL."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import anyio
import pytest

from support.fake_anthropic import (
    ADAPTIVE_ONLY_ERROR,
    CACHE_LIMIT_ERROR,
    NO_ADAPTIVE_ERROR,
    FakeAnthropic,
    text_reply,
)
from tiller.modes import ThinkingLevel
from tiller.providers.anthropic import AnthropicProvider
from tiller.providers.anthropic_models import ANTHROPIC_MODELS
from tiller.providers.base import ModelCost, ModelInfo, ModelRequest, ToolSpec
from tiller.providers.models_endpoint import anthropic_model
from tiller.types import AssistantMessage, Message, TextContent, UserMessage

pytestmark = pytest.mark.anyio

KEY = "sk-ant-current-test"
HELLO: list[Message] = [UserMessage(content="hello")]


def facts(fake: FakeAnthropic, model_id: str) -> ModelInfo:
    """What GET /v1/models says of ``model_id`` (the fake's table), as Tiller reads it."""
    raw = fake.model(model_id)
    assert raw is not None
    return anthropic_model("anthropic", raw)


async def run(provider: AnthropicProvider, request: ModelRequest) -> AssistantMessage:
    with anyio.fail_after(10):
        items = [item async for item in provider.stream(request)]
    final = items[-1]
    assert isinstance(final, AssistantMessage)
    return final


@pytest.fixture
async def opus(fake_anthropic: FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    provider = AnthropicProvider(model="claude-opus-5", base_url=fake_anthropic.url, api_key=KEY)
    yield provider
    await provider.aclose()


@pytest.mark.parametrize(("level", "thinking", "effort"), [
    ("high", {"type": "adaptive", "display": "summarized"}, "high"),
    ("max", {"type": "adaptive", "display": "summarized"}, "max"),
    ("off", {"type": "disabled"}, None),  # Opus 5 thinks unless told not to
])
async def test_an_adaptive_model_gets_adaptive_thinking_and_an_effort(
    fake_anthropic: FakeAnthropic, opus: AnthropicProvider, level: ThinkingLevel,
    thinking: dict[str, str], effort: str | None,
) -> None:
    fake_anthropic.enqueue(text_reply("ok", thinking="Let me see." if effort else None))
    final = await run(opus, ModelRequest(messages=HELLO, thinking=level,
                                         model=facts(fake_anthropic, "claude-opus-5")))
    assert final.stop_reason == "stop"
    [body] = fake_anthropic.requests
    assert body["thinking"] == thinking
    assert body.get("output_config") == ({"effort": effort} if effort else None)
    assert body["max_tokens"] >= (32768 if effort else 8192)


async def test_a_budget_model_gets_a_budget_below_its_output_limit(
    fake_anthropic: FakeAnthropic,
) -> None:
    provider = AnthropicProvider(model="claude-haiku-4-5", base_url=fake_anthropic.url,
                                 api_key=KEY)
    info = facts(fake_anthropic, "claude-haiku-4-5")
    fake_anthropic.enqueue(text_reply("a"), text_reply("b"))
    await run(provider, ModelRequest(messages=HELLO, thinking="xhigh", model=info))
    await run(provider, ModelRequest(messages=HELLO, thinking="off", model=info))
    await provider.aclose()
    xhigh, off = fake_anthropic.requests
    assert xhigh["thinking"] == {"type": "enabled", "budget_tokens": 32768}
    assert xhigh["max_tokens"] == 32768 + 8192 and "output_config" not in xhigh
    assert "thinking" not in off


async def test_a_refused_shape_is_corrected_once_and_remembered(
    fake_anthropic: FakeAnthropic,
) -> None:
    """No facts (a model Tiller knows nothing of) means a budget; Opus 5 refuses it with the
    real text, the call goes again adaptive, and the next provider for it starts adaptive."""
    fake_anthropic.enqueue(text_reply("first"), text_reply("second"))
    for _ in range(2):
        provider = AnthropicProvider(model="claude-opus-5", base_url=fake_anthropic.url,
                                     api_key=KEY)
        final = await run(provider, ModelRequest(messages=HELLO, thinking="medium"))
        await provider.aclose()
        assert final.stop_reason == "stop", final.error_message
    refused, corrected, remembered = fake_anthropic.requests
    assert refused["thinking"]["type"] == "enabled"
    assert corrected["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert corrected["output_config"] == {"effort": "medium"}
    assert remembered["thinking"]["type"] == "adaptive"


async def test_adaptive_refused_by_a_budget_model_goes_back_to_a_budget(
    fake_anthropic: FakeAnthropic,
) -> None:
    info = ModelInfo("anthropic", "claude-haiku-4-5", thinking_shape="adaptive",
                     thinking_levels=("off", "low", "high"))  # stale facts: it says adaptive
    provider = AnthropicProvider(model="claude-haiku-4-5", base_url=fake_anthropic.url,
                                 api_key=KEY)
    fake_anthropic.enqueue(text_reply("ok"))
    final = await run(provider, ModelRequest(messages=HELLO, thinking="low", model=info))
    await provider.aclose()
    assert final.stop_reason == "stop"
    assert [r["thinking"]["type"] for r in fake_anthropic.requests] == ["adaptive", "enabled"]


async def test_the_fake_refuses_what_the_api_refuses_with_its_texts(
    fake_anthropic: FakeAnthropic,
) -> None:
    client = anthropic.AsyncAnthropic(api_key=KEY, base_url=fake_anthropic.url, max_retries=0)
    marker = {"type": "ephemeral"}
    five = [{"type": "text", "text": str(n), "cache_control": marker} for n in range(5)]
    cases = [
        ({"model": "claude-opus-5", "thinking": {"type": "enabled", "budget_tokens": 2048},
          "messages": [{"role": "user", "content": "hi"}]}, 400, ADAPTIVE_ONLY_ERROR),
        ({"model": "claude-haiku-4-5", "thinking": {"type": "adaptive"},
          "messages": [{"role": "user", "content": "hi"}]}, 400, NO_ADAPTIVE_ERROR),
        ({"model": "claude-sonnet-5-5", "messages": [{"role": "user", "content": five}]},
         400, CACHE_LIMIT_ERROR.format(5)),
        ({"model": "claude-sonnet-4-20250514", "messages": [{"role": "user", "content": "hi"}]},
         404, "model: claude-sonnet-4-20250514"),
    ]
    for body, status, text in cases:
        with pytest.raises(anthropic.APIStatusError) as refused:
            await client.messages.create(max_tokens=4096, **body)  # type: ignore[call-overload]
        assert (refused.value.status_code, refused.value.api_message) == (status, text)
    await client.close()
    assert fake_anthropic.unused_replies == [] and len(fake_anthropic.requests) == 4


def conversation(turns: int) -> list[Message]:
    """A conversation of ``turns`` exchanges, each ~2,000 characters."""
    messages: list[Message] = []
    for n in range(turns):
        messages.append(UserMessage(content=f"question {n} " + "x" * 1000))
        messages.append(AssistantMessage(content=[TextContent(text=f"answer {n} " + "y" * 1000)]))
    return messages


def strip_markers(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_markers(v) for v in value]
    return value


async def test_breakpoints_move_forward_and_the_prefix_stays_byte_stable(
    fake_anthropic: FakeAnthropic, opus: AnthropicProvider,
) -> None:
    tools = [ToolSpec(f"tool{n}", "does things " * 40, {"properties": {}}) for n in range(8)]
    system = "You are a careful agent. " * 200
    history: list[Message] = []
    for n in range(6):
        history.append(UserMessage(content=f"step {n}: " + "do it " * 200))
        fake_anthropic.enqueue(text_reply(f"done {n} " + "ok " * 100))
        final = await run(opus, ModelRequest(messages=list(history), system_prompt=system,
                                             tools=tools))
        history.append(final)
    bodies = fake_anthropic.requests
    for body in bodies:  # never more than the API's four
        text = json.dumps(body)
        assert 2 <= text.count('"cache_control"') <= 4
        assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
        assert "cache_control" in body["messages"][-1]["content"][-1]
    for before, after in zip(bodies, bodies[1:], strict=False):
        prefix = len(before["messages"])
        assert strip_markers(after["messages"][:prefix]) == strip_markers(before["messages"])
        assert after["tools"] == before["tools"] and after["system"] == before["system"]
        # the breakpoint the previous request ended with is still there: its prefix is read
        assert after["messages"][prefix - 1]["content"][-1]["cache_control"] == {
            "type": "ephemeral"}
    usages = fake_anthropic.usages
    assert usages[0].cache_read == 0 and usages[0].cache_write > 0
    for usage, earlier in zip(usages[1:], usages, strict=False):
        assert usage.cache_read >= earlier.cache_read + earlier.cache_write - 1
    read = sum(u.cache_read for u in usages)
    total = sum(u.cache_read + u.cache_write + u.input_tokens for u in usages)
    assert read / total > 0.6


async def test_one_hour_writes_are_asked_for_and_priced_at_their_ttl(
    fake_anthropic: FakeAnthropic,
) -> None:
    provider = AnthropicProvider(model="claude-sonnet-5-5", base_url=fake_anthropic.url,
                                 api_key=KEY, cache_ttl="1h")
    fake_anthropic.enqueue(text_reply("ok"))
    final = await run(provider, ModelRequest(messages=[UserMessage(content="z " * 3000)],
                                             system_prompt="s " * 2000))
    await provider.aclose()
    [body] = fake_anthropic.requests
    assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    [usage] = fake_anthropic.usages
    assert usage.cache_write_1h > 0 and usage.cache_write_5m == 0
    assert final.usage.cache_write_tokens == usage.cache_write_1h
    [sonnet] = [m for m in ANTHROPIC_MODELS if m.id == "claude-sonnet-5-5"]
    assert sonnet.cost is not None
    price = sonnet.cost.at_ttl(provider.cache_ttl)
    assert price == ModelCost(2, 10, 0.10, 4, 4)  # a 1-hour write costs twice the input
    expected = (usage.input_tokens * 2 + final.usage.output_tokens * 10
                + usage.cache_write_1h * 4) / 1_000_000
    assert price.cost_of(final.usage) == pytest.approx(expected)
