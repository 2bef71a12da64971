"""OpenAIProvider reads chunks as plain dicts: error payloads and ill-shaped chunks mid-stream."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from support.fake_openai import FakeOpenAI, chunk, sse_reply
from tiller.providers.base import ModelRequest
from tiller.providers.openai import OpenAIProvider
from tiller.types import AssistantMessage, MessageUpdate, UserMessage

HELLO = ModelRequest(messages=[UserMessage(content="hello")])
SAFETY_BOUND = 10  # seconds; only ever hit if the code under test hangs


@pytest.fixture
async def provider(fake_openai: FakeOpenAI) -> AsyncIterator[OpenAIProvider]:
    provider = OpenAIProvider(model="gpt-test", base_url=fake_openai.url, api_key="sk-test")
    yield provider
    await provider.aclose()


async def collect(provider: OpenAIProvider) -> tuple[list[MessageUpdate], AssistantMessage]:
    with anyio.fail_after(SAFETY_BOUND):
        items = [item async for item in provider.stream(HELLO)]
    *updates, final = items
    assert isinstance(final, AssistantMessage)
    return [u for u in updates if isinstance(u, MessageUpdate)], final


@pytest.mark.anyio
async def test_an_error_payload_mid_stream_is_a_retryable_error_keeping_the_text(
    fake_openai: FakeOpenAI, provider: OpenAIProvider
) -> None:
    fake_openai.enqueue(sse_reply(
        chunk({"role": "assistant", "content": "Hel"}),
        {"error": {"message": "the model is overloaded", "type": "server_error"}},
    ))
    updates, final = await collect(provider)
    assert [u.delta for u in updates] == ["Hel"] and final.text == "Hel"
    assert final.stop_reason == "error" and final.retryable
    assert final.error_message == (
        "openai: the provider reported an error mid-stream: the model is overloaded"
    )


@pytest.mark.anyio
@pytest.mark.parametrize("payload", [
    '{"choices": "not a list"}',
    '{"choices": [{"index": 0, "delta": "text"}]}',
    '{"choices": [{"index": 0, "delta": {"tool_calls": [3]}}]}',
    '["a", "list"]',
])
async def test_a_chunk_of_the_wrong_shape_is_a_malformed_chunk(
    fake_openai: FakeOpenAI, provider: OpenAIProvider, payload: str
) -> None:
    fake_openai.enqueue(sse_reply(chunk({"role": "assistant", "content": "ok"}), payload))
    _, final = await collect(provider)
    assert final.stop_reason == "error" and not final.retryable
    assert final.error_message is not None
    assert final.error_message.startswith("openai: the provider sent a malformed stream chunk")
