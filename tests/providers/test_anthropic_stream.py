"""AnthropicProvider reads events as plain dicts: an event of the wrong shape is a malformed
stream event, not an unexpected failure."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from support.fake_anthropic import FakeAnthropic, message_start, sse_event, sse_reply
from tiller.providers.anthropic import AnthropicProvider
from tiller.providers.base import ModelRequest
from tiller.types import AssistantMessage, UserMessage

HELLO = ModelRequest(messages=[UserMessage(content="hello")])


@pytest.fixture
async def provider(fake_anthropic: FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    provider = AnthropicProvider(model="claude-test", base_url=fake_anthropic.url,
                                 api_key="sk-ant-test")
    yield provider
    await provider.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("event", [
    sse_event("content_block_start", index=0),  # no content_block
    sse_event("content_block_start", index=0, content_block="text"),
    sse_event("message_delta", usage={"output_tokens": 1}),  # no delta
    ("content_block_delta", "[1, 2]"),  # not an object
])
async def test_an_event_of_the_wrong_shape_is_a_malformed_stream_event(
    fake_anthropic: FakeAnthropic, provider: AnthropicProvider, event: tuple[str, Any]
) -> None:
    fake_anthropic.enqueue(sse_reply(message_start(), event))
    with anyio.fail_after(10):
        *_, final = [item async for item in provider.stream(HELLO)]
    assert isinstance(final, AssistantMessage) and final.stop_reason == "error"
    assert final.error_message is not None and not final.retryable
    assert final.error_message.startswith("anthropic: the provider sent a malformed stream event")
