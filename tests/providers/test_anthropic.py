"""AnthropicProvider against FakeAnthropic: real HTTP and SSE over loopback, no monkeypatching
of the SDK. Waits are driven by the fake's gates and request counts, never by sleeping."""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from support.fake_anthropic import (
    FakeAnthropic,
    cut_reply,
    empty_reply,
    error_reply,
    message_start,
    sse_event,
    sse_reply,
    stall_reply,
    stream_error_reply,
    text_reply,
    tool_use_reply,
)
from tiller.modes import ThinkingLevel
from tiller.providers.anthropic import AnthropicProvider
from tiller.providers.anthropic_stream import EMPTY_RESPONSE_ERROR, INCOMPLETE_STREAM_ERROR
from tiller.providers.base import ModelRequest, ToolSpec
from tiller.types import (
    AssistantMessage,
    ImageContent,
    MessageUpdate,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

pytestmark = pytest.mark.anyio

FAKE_KEY = "sk-ant-tiller-test-SECRET-4242"
HELLO = ModelRequest(messages=[UserMessage(content="hello")])
SAFETY_BOUND = 10  # seconds; only ever hit if the code under test hangs
CACHED = {"type": "ephemeral"}  # a 5-minute cache breakpoint


@pytest.fixture
async def provider(fake_anthropic: FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    """A provider pointed at the fake server, closed after the test."""
    provider = AnthropicProvider(model="claude-test", base_url=fake_anthropic.url, api_key=FAKE_KEY)
    yield provider
    await provider.aclose()


async def collect(
    provider: AnthropicProvider, request: ModelRequest = HELLO
) -> tuple[list[MessageUpdate], AssistantMessage]:
    """Run one stream; check it is deltas then exactly one final message, and return both."""
    with anyio.fail_after(SAFETY_BOUND):
        items = [item async for item in provider.stream(request)]
    *updates, final = items
    assert isinstance(final, AssistantMessage)
    assert all(isinstance(update, MessageUpdate) for update in updates)
    assert final.provider == "anthropic" and final.model == "claude-test"
    return [u for u in updates if isinstance(u, MessageUpdate)], final


def replay(updates: list[MessageUpdate]) -> dict[int, str]:
    """Concatenate the text, thinking and argument deltas per content block index."""
    blocks: dict[int, str] = {}
    for update in updates:
        if update.delta is not None:
            blocks[update.index] = blocks.get(update.index, "") + update.delta
    return blocks


# ---------------------------------------------------------------------------------------------
# Successful streams


async def test_text_streams_in_chunks_and_maps_usage_with_cache(
    fake_anthropic: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake_anthropic.enqueue(
        text_reply("Hello, streaming world!", chunk_size=3, usage=(100, 7), cache=(40, 25))
    )
    updates, final = await collect(provider)
    assert len(updates) > 3
    assert {u.kind for u in updates} == {"text"} and {u.index for u in updates} == {0}
    assert replay(updates) == {0: "Hello, streaming world!"}
    assert final.content == [TextContent(text="Hello, streaming world!")]
    assert final.stop_reason == "stop" and final.error_message is None and not final.retryable
    usage = final.usage
    assert (usage.input_tokens, usage.output_tokens) == (100, 7)
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (40, 25)


async def test_tool_call_input_arrives_in_many_fragments(
    fake_anthropic: FakeAnthropic, provider: AnthropicProvider
) -> None:
    arguments = {"path": "src/main.py", "limit": 50, "nested": {"a": [1, 2, "x"]}}
    fake_anthropic.enqueue(tool_use_reply([("toolu_abc", "read", arguments)], fragment_size=3))
    updates, final = await collect(provider)
    assert updates[0] == MessageUpdate(
        kind="toolCallStart", index=0, tool_call_id="toolu_abc", tool_name="read"
    )
    assert len(updates) > 10 and {u.kind for u in updates[1:]} == {"toolCallArgs"}
    assert json.loads(replay(updates)[0]) == arguments
    assert final.content == [ToolCall(id="toolu_abc", name="read", arguments=arguments)]
    assert final.stop_reason == "toolUse"


async def test_two_tool_calls_after_text(
    fake_anthropic: FakeAnthropic, provider: AnthropicProvider
) -> None:
    calls = [("toolu_1", "read", {"path": "a.txt"}), ("toolu_2", "ls", {"dir": "."})]
    fake_anthropic.enqueue(tool_use_reply(calls, text="Let me look."))
    updates, final = await collect(provider)
    starts = [u for u in updates if u.kind == "toolCallStart"]
    assert [(u.index, u.tool_call_id, u.tool_name) for u in starts] == [
        (1, "toolu_1", "read"),
        (2, "toolu_2", "ls"),
    ]
    assert replay(updates) == {0: "Let me look.", 1: '{"path":"a.txt"}', 2: '{"dir":"."}'}
    assert final.text == "Let me look."
    assert [(c.id, c.arguments) for c in final.tool_calls] == [
        ("toolu_1", {"path": "a.txt"}),
        ("toolu_2", {"dir": "."}),
    ]
    assert final.stop_reason == "toolUse"


async def test_truncated_tool_input_is_parsed_best_effort(
    fake_anthropic: FakeAnthropic, provider: AnthropicProvider
) -> None:
    """A call cut by max_tokens keeps what parsed, for display only (``arguments_error`` says
    it must not run), and the message stops with ``length``."""
    fake_anthropic.enqueue(
        tool_use_reply(
            [("toolu_1", "write", '{"path": "a.py", "content": "pri')], stop_reason="max_tokens"
        )
    )
    _, final = await collect(provider)
    [call] = final.tool_calls
    assert (call.id, call.name) == ("toolu_1", "write")
    assert call.arguments == {"path": "a.py", "content": "pri"}
    assert call.arguments_error and call.arguments_error.startswith("not valid JSON")
    assert final.stop_reason == "length"


@pytest.mark.parametrize(
    ("stop_reason", "expected"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("pause_turn", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
    ],
)
async def test_stop_reasons_map(
    fake_anthropic: FakeAnthropic, provider: AnthropicProvider, stop_reason: str, expected: str
) -> None:
    fake_anthropic.enqueue(text_reply("cut off by max_tok", stop_reason=stop_reason))
    _, final = await collect(provider)
    assert final.stop_reason == expected and final.text == "cut off by max_tok"
    assert final.error_message is None


async def test_refusal_is_a_clear_error_that_is_not_retried(
    fake_anthropic: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake_anthropic.enqueue(text_reply("I can't help with that.", stop_reason="refusal"))
    _, final = await collect(provider)
    assert final.stop_reason == "error" and not final.retryable
    assert final.error_message is not None and "refused" in final.error_message
    assert final.text == "I can't help with that."


# ---------------------------------------------------------------------------------------------
# Thinking


async def test_thinking_keeps_its_signature_and_is_sent_back(
    fake_anthropic: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake_anthropic.enqueue(
        tool_use_reply(
            [("toolu_1", "read", {"path": "a"})],
            thinking="Six times seven.",
            signature="EqQBCgIYAhIM1gbcDa9GJwZA",
            chunk_size=5,
        ),
        text_reply("42."),
    )
    updates, first = await collect(provider, ModelRequest(messages=HELLO.messages, thinking="low"))
    assert [u.kind for u in updates][:4] == ["thinking"] * 4
    assert replay(updates)[0] == "Six times seven."
    assert first.content[0] == ThinkingContent(
        thinking="Six times seven.", signature="EqQBCgIYAhIM1gbcDa9GJwZA"
    )
    result = ToolResultMessage(
        tool_call_id="toolu_1", tool_name="read", content=[TextContent(text="x")]
    )
    follow_up = ModelRequest(messages=[*HELLO.messages, first, result], thinking="low")
    await collect(provider, follow_up)
    assistant = fake_anthropic.requests[1]["messages"][1]
    assert assistant == {
        "role": "assistant",
        "content": [
            {
                "type": "thinking",
                "thinking": "Six times seven.",
                "signature": "EqQBCgIYAhIM1gbcDa9GJwZA",
            },
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}},
        ],
    }


async def test_redacted_thinking_round_trips_and_unsigned_thinking_is_dropped(
    fake_anthropic: FakeAnthropic, provider: AnthropicProvider
) -> None:
    redacted = {"type": "redacted_thinking", "data": "ENCRYPTED+/=="}
    fake_anthropic.enqueue(
        sse_reply(
            message_start(),
            sse_event("content_block_start", index=0, content_block=redacted),
            sse_event("content_block_stop", index=0),
            sse_event("content_block_start", index=1, content_block={"type": "text", "text": ""}),
            sse_event("content_block_delta", index=1, delta={"type": "text_delta", "text": "Hi"}),
            sse_event("content_block_stop", index=1),
            sse_event(
                "message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 3}
            ),
            sse_event("message_stop"),
        ),
        text_reply("again"),
    )
    updates, first = await collect(provider)
    assert updates == [MessageUpdate(kind="text", index=1, delta="Hi")]
    assert isinstance(first.content[0], ThinkingContent) and first.content[0].thinking == ""
    unsigned = AssistantMessage(content=[ThinkingContent(thinking="mine"), TextContent(text="ok")])
    history = [*HELLO.messages, first, UserMessage(content="more"), unsigned]
    await collect(provider, ModelRequest(messages=[*history, UserMessage(content="go")]))
    messages = fake_anthropic.requests[1]["messages"]
    assert messages[1]["content"] == [
        {"type": "redacted_thinking", "data": "ENCRYPTED+/=="},
        {"type": "text", "text": "Hi"},
    ]
    assert messages[3]["content"] == [{"type": "text", "text": "ok"}]


@pytest.mark.parametrize(
    ("level", "max_tokens", "expected_thinking", "expected_max_tokens"),
    [
        ("off", None, None, 8192),
        ("low", None, {"type": "enabled", "budget_tokens": 1024}, 8192),
        ("medium", 2000, {"type": "enabled", "budget_tokens": 4096}, 4096 + 8192),
        ("high", 32000, {"type": "enabled", "budget_tokens": 16384}, 32000),
    ],
)
async def test_thinking_level_maps_to_a_budget_below_max_tokens(
    fake_anthropic: FakeAnthropic,
    provider: AnthropicProvider,
    level: ThinkingLevel,
    max_tokens: int | None,
    expected_thinking: dict[str, object] | None,
    expected_max_tokens: int,
) -> None:
    fake_anthropic.enqueue(text_reply("ok"))
    request = ModelRequest(messages=HELLO.messages, max_tokens=max_tokens, thinking=level)
    await collect(provider, request)
    [body] = fake_anthropic.requests
    assert body.get("thinking") == expected_thinking
    assert body["max_tokens"] == expected_max_tokens


# ---------------------------------------------------------------------------------------------
# The request sent


async def test_request_body_converts_the_context(
    fake_anthropic: FakeAnthropic, provider: AnthropicProvider
) -> None:
    image = ImageContent(data="aGVsbG8=", mime_type="image/png")
    calls = [
        ToolCall(id="toolu_1", name="read", arguments={"path": "a.png"}),
        ToolCall(id="call|2", name="ls", arguments={}),
    ]
    request = ModelRequest(
        system_prompt="You are terse.",
        messages=[
            UserMessage(content=[TextContent(text="What is this?"), image]),
            AssistantMessage(content=[TextContent(text="Reading."), *calls]),
            ToolResultMessage(
                tool_call_id="toolu_1", tool_name="read", content=[TextContent(text="ok"), image]
            ),
            ToolResultMessage(
                tool_call_id="call|2",
                tool_name="ls",
                content=[TextContent(text="no")],
                is_error=True,
            ),
            UserMessage(content="Also: be brief."),
        ],
        tools=[ToolSpec(name="read", description="Read a file", parameters={
            "title": "ReadParams", "properties": {"offset": {
                "anyOf": [{"type": "integer"}, {"type": "null"}], "default": None,
                "title": "Offset"}}})],
        max_tokens=256,
    )
    fake_anthropic.enqueue(text_reply("A greeting."))
    await collect(provider, request)
    [body] = fake_anthropic.requests
    assert (body["model"], body["stream"], body["max_tokens"]) == ("claude-test", True, 256)
    # cache breakpoints: the tools, the system prompt, the message the previous request ended
    # with (the one before the newest assistant message) and the newest one
    assert body["system"] == [{"type": "text", "text": "You are terse.", "cache_control": CACHED}]
    assert "thinking" not in body
    assert body["tools"] == [
        {
            "name": "read",
            "description": "Read a file",
            # titles say nothing; an optional null-default field is just its type
            "input_schema": {"type": "object", "properties": {"offset": {"type": "integer"}}},
            "cache_control": CACHED,
        }
    ]
    image_block = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "aGVsbG8="},
    }
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                     {**image_block, "cache_control": CACHED}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.png"}},
                {"type": "tool_use", "id": "call_2", "name": "ls", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {  # is_error only when true; a lone text as a string (fewer tokens)
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "ok"}, image_block],
                },
                {"type": "tool_result", "tool_use_id": "call_2", "is_error": True,
                 "content": "no"},
                {"type": "text", "text": "Also: be brief.", "cache_control": CACHED},
            ],
        },
    ]


async def test_request_without_system_or_tools_omits_them_and_sends_headers(
    fake_anthropic: FakeAnthropic,
) -> None:
    provider = AnthropicProvider(
        model="claude-test",
        base_url=fake_anthropic.url,
        api_key=FAKE_KEY,
        headers={"x-tiller-test": "yes"},
        default_max_tokens=1000,
    )
    fake_anthropic.enqueue(text_reply("hi"))
    await collect(provider)
    await provider.aclose()
    [body] = fake_anthropic.requests
    assert "system" not in body and "tools" not in body and body["max_tokens"] == 1000
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "hello", "cache_control": CACHED}]}]
    [headers] = fake_anthropic.request_headers
    assert headers["x-tiller-test"] == "yes" and "anthropic-version" in headers


# ---------------------------------------------------------------------------------------------
# Failures become error messages


async def test_401_asks_for_the_key_and_never_shows_it(
    fake_anthropic: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake_anthropic.enqueue(error_reply(401, f"invalid x-api-key: {FAKE_KEY}"))
    updates, final = await collect(provider)
    assert updates == [] and final.stop_reason == "error" and not final.retryable
    assert final.error_message is not None
    assert final.error_message.startswith("anthropic: 401 Unauthorized: invalid x-api-key")
    assert "ANTHROPIC_API_KEY" in final.error_message
    assert FAKE_KEY not in json.dumps(final.dump()) and FAKE_KEY not in final.error_message


async def test_429_with_retry_after_is_retryable_after_that_long(
    fake_anthropic: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake_anthropic.enqueue(
        error_reply(
            429,
            "Number of request tokens has exceeded your rate limit",
            headers={"retry-after": "2"},
        ),
        error_reply(429, "slow down", headers={"retry-after": "0.5"}),
    )
    _, final = await collect(provider)
    _, fractional = await collect(provider)
    assert final.stop_reason == "error" and final.retryable and final.retry_after == 2
    assert final.error_message is not None
    assert final.error_message.startswith("anthropic: 429 Too Many Requests: Number of request")
    assert fractional.retryable and fractional.retry_after == 0.5


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (500, "Internal server error", "anthropic: 500 Internal Server Error: Internal server"),
        (502, "Bad gateway", "anthropic: 502 Bad Gateway: Bad gateway"),
        (503, "Service unavailable", "anthropic: 503 Service Unavailable"),
        (504, "Gateway timeout", "anthropic: 504 Gateway Timeout"),
        (529, "Overloaded", "anthropic: 529 Overloaded: Overloaded (the API is overloaded"),
    ],
)
async def test_server_errors_are_retryable(
    fake_anthropic: FakeAnthropic,
    provider: AnthropicProvider,
    status: int,
    message: str,
    expected: str,
) -> None:
    fake_anthropic.enqueue(error_reply(status, message))
    _, final = await collect(provider)
    assert final.stop_reason == "error" and final.retryable and final.retry_after is None
    assert final.error_message is not None and final.error_message.startswith(expected)


@pytest.mark.parametrize(
    ("status", "message", "hint"),
    [
        (400, "prompt is too long: 210000 tokens > 200000 maximum", "context is too long"),
        (413, "Request exceeds the maximum allowed number of bytes.", "context is too long"),
        (404, "model: claude-nope", "check the model name"),
        (400, "messages: roles must alternate", "roles must alternate"),
    ],
)
async def test_client_errors_are_not_retryable_and_say_why(
    fake_anthropic: FakeAnthropic,
    provider: AnthropicProvider,
    status: int,
    message: str,
    hint: str,
) -> None:
    fake_anthropic.enqueue(error_reply(status, message))
    _, final = await collect(provider)
    assert final.stop_reason == "error" and not final.retryable
    assert final.error_message is not None and hint in final.error_message
    assert message in final.error_message


async def test_empty_200_stream_is_a_retryable_error(
    fake_anthropic: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake_anthropic.enqueue(empty_reply())
    updates, final = await collect(provider)
    assert updates == [] and final.content == []
    assert final.stop_reason == "error" and final.error_message == EMPTY_RESPONSE_ERROR
    assert final.retryable


@pytest.mark.parametrize("ending", ["cut", "close"])
async def test_stream_cut_midway_is_retryable_and_keeps_the_partial_text(
    fake_anthropic: FakeAnthropic, provider: AnthropicProvider, ending: str
) -> None:
    """Cut as a real stream is (the connection drops inside the chunked body), or ended cleanly
    before ``message_stop``: either way a retryable error that keeps the text."""
    cut = cut_reply("abcdefghijkl", after_events=5, chunk_size=4)
    fake_anthropic.enqueue(dataclasses.replace(cut, ending=ending))
    updates, final = await collect(provider)
    assert replay(updates) == {0: "abcdefgh"} and final.text == "abcdefgh"
    assert final.stop_reason == "error" and final.retryable
    if ending == "cut":
        assert final.error_message is not None and final.error_message.startswith(
            f"anthropic: the connection to {fake_anthropic.url} broke mid-stream: ")
    else:
        assert final.error_message == INCOMPLETE_STREAM_ERROR


async def test_connection_broken_mid_body_is_retryable(
    fake_anthropic: FakeAnthropic, provider: AnthropicProvider
) -> None:
    """A body shorter than its Content-Length: the HTTP library's own error, mid-stream."""
    cut = cut_reply("abcdefgh", after_events=4)
    fake_anthropic.enqueue(dataclasses.replace(cut, headers=(("Content-Length", "100000"),)))
    _, final = await collect(provider)
    assert final.stop_reason == "error" and final.retryable
    assert final.error_message is not None
    assert final.error_message.startswith(
        f"anthropic: the connection to {fake_anthropic.url} broke mid-stream: "
    )


@pytest.mark.parametrize(
    ("error_type", "message", "retryable"),
    [
        ("overloaded_error", "Overloaded", True),
        ("api_error", "Internal server error", True),
        ("invalid_request_error", "bad thing", False),
    ],
)
async def test_error_event_mid_stream_keeps_the_partial_text(
    fake_anthropic: FakeAnthropic,
    provider: AnthropicProvider,
    error_type: str,
    message: str,
    retryable: bool,
) -> None:
    fake_anthropic.enqueue(stream_error_reply("Partial answer", type=error_type, message=message))
    updates, final = await collect(provider)
    assert replay(updates) == {0: "Partial answer"} and final.text == "Partial answer"
    assert final.stop_reason == "error" and final.retryable is retryable
    assert final.error_message is not None
    expected = f"anthropic: the provider reported an error mid-stream: {error_type}: {message}"
    assert final.error_message.startswith(expected)


async def test_malformed_event_is_an_error(
    fake_anthropic: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake_anthropic.enqueue(sse_reply(message_start(), ("content_block_start", '{"type": "conte')))
    _, final = await collect(provider)
    assert final.stop_reason == "error" and final.error_message is not None
    assert final.error_message.startswith("anthropic: the provider sent a malformed stream event")


async def test_connection_refused_is_retryable_and_names_the_url() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago and has no listener
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    provider = AnthropicProvider(model="claude-test", base_url=url, api_key=FAKE_KEY)
    _, final = await collect(provider)
    await provider.aclose()
    assert final.stop_reason == "error" and final.retryable
    assert final.error_message is not None
    assert final.error_message.startswith(f"anthropic: cannot connect to {url}: ")


async def test_silent_server_times_out_retryably(fake_anthropic: FakeAnthropic) -> None:
    """Headers and then nothing, or nothing at all: the read timeout ends both."""
    provider = AnthropicProvider(
        model="claude-test", base_url=fake_anthropic.url, api_key=FAKE_KEY, request_timeout=0.2
    )
    fake_anthropic.enqueue(stall_reply("abc"), stall_reply().released_when(threading.Event()))
    updates, after_headers = await collect(provider)
    _, before_headers = await collect(provider)
    await provider.aclose()
    assert replay(updates) == {0: "abc"}
    assert after_headers.retryable and before_headers.retryable
    assert after_headers.error_message is not None and before_headers.error_message is not None
    assert after_headers.error_message.startswith("anthropic: the stream stalled: nothing received")
    assert before_headers.error_message.startswith("anthropic: no response: nothing received")


@pytest.mark.parametrize("config_dir", [False, True])
async def test_missing_api_key_says_what_to_set(
    fake_anthropic: FakeAnthropic,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    config_dir: bool,
) -> None:
    """No key anywhere: nothing is sent. The SDK's credential profiles (a config directory) are
    not read: the message is the same with one (anthropic.py's docstring)."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    if config_dir:
        monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path))
    else:
        monkeypatch.delenv("ANTHROPIC_CONFIG_DIR", raising=False)
    provider = AnthropicProvider(model="claude-test", base_url=fake_anthropic.url)
    _, final = await collect(provider)
    await provider.aclose()
    assert final.stop_reason == "error" and not final.retryable
    assert final.error_message == "anthropic: no API key: set ANTHROPIC_API_KEY"
    assert fake_anthropic.requests == []


async def test_an_auth_token_goes_as_a_bearer_when_there_is_no_key(
    fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "tok-123456")
    fake_anthropic.enqueue(text_reply("Hi."))
    provider = AnthropicProvider(model="claude-test", base_url=fake_anthropic.url)
    _, final = await collect(provider)
    await provider.aclose()
    assert final.stop_reason == "stop", final.error_message
    [headers] = fake_anthropic.request_headers
    assert headers["authorization"] == "Bearer tok-123456" and "x-api-key" not in headers


# ---------------------------------------------------------------------------------------------
# Cancellation and the fake's own contract


async def test_cancelling_a_stalled_stream_propagates_promptly(
    fake_anthropic: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake_anthropic.enqueue(stall_reply("partial"))
    received: list[object] = []
    with anyio.fail_after(SAFETY_BOUND):
        with anyio.CancelScope() as scope:
            async for item in provider.stream(HELLO):
                received.append(item)
                if len(received) == 2:  # "part" and "ial": the stream is now stalled
                    scope.cancel()
    assert scope.cancelled_caught
    assert [getattr(item, "delta", None) for item in received] == ["part", "ial"]


async def test_gate_holds_the_reply_until_set(
    fake_anthropic: FakeAnthropic, provider: AnthropicProvider
) -> None:
    gate = threading.Event()
    fake_anthropic.enqueue(text_reply("released").released_when(gate))
    results: list[AssistantMessage] = []

    async def run() -> None:
        results.append((await collect(provider))[1])

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run)
        await anyio.to_thread.run_sync(fake_anthropic.wait_for_requests, 1)
        assert results == []
        gate.set()
    assert results[0].text == "released"


def test_unscripted_request_gets_500_and_fails_the_script() -> None:
    with FakeAnthropic() as fake:
        provider = AnthropicProvider(model="claude-test", base_url=fake.url, api_key=FAKE_KEY)
        _, final = anyio.run(collect, provider)
    assert final.retryable and final.error_message is not None
    assert "fake_anthropic: no scripted reply for request 1" in final.error_message
    with pytest.raises(AssertionError, match="no scripted reply for request 1"):
        fake.assert_script_complete()


@pytest.mark.process
def test_importing_the_provider_does_not_import_the_sdk() -> None:
    code = "import sys, tiller.providers.anthropic; print('anthropic' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"



async def test_a_schema_with_a_union_at_its_root_is_refused_as_the_api_does(
    fake_anthropic: FakeAnthropic, provider: AnthropicProvider
) -> None:
    """What the API answers a tool schema it refuses (an MCP tool's is made one object before:
    tests/mcp/test_mapping.py): the call fails saying which tool and why."""
    request = ModelRequest(messages=[UserMessage(content="hi")], tools=[ToolSpec(
        name="grab", description="Grab", parameters={"anyOf": [{"type": "object"}]})])
    _, final = await collect(provider, request)  # refused before any reply is taken
    assert final.stop_reason == "error" and len(fake_anthropic.refusals) == 1
    assert "tools.0.custom.input_schema: input_schema does not support oneOf, allOf, or anyOf " \
        "at the top level" in (final.error_message or "")
