"""OpenAIProvider against FakeOpenAI: real HTTP and SSE over loopback, no monkeypatching."""

from __future__ import annotations

import dataclasses
import json
import math
import socket
import threading
from collections.abc import AsyncIterator

import anyio
import pytest

from support.fake_openai import (
    FakeOpenAI,
    chunk,
    cut_reply,
    empty_reply,
    error_reply,
    sse_reply,
    stall_reply,
    text_reply,
    tool_call_reply,
)
from tiller.errors import ProviderNotConfiguredError
from tiller.providers.base import ModelRequest, ToolSpec
from tiller.providers.openai import OpenAIProvider
from tiller.providers.openai_models import DEFAULT_MODEL
from tiller.providers.openai_stream import EMPTY_RESPONSE_ERROR, INCOMPLETE_STREAM_ERROR
from tiller.providers.registry import create_provider
from tiller.providers.tool_arguments import parse_tool_arguments, streamed_tool_call
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

FAKE_KEY = "sk-tiller-test-SECRET-4242"
HELLO = ModelRequest(messages=[UserMessage(content="hello")])
SAFETY_BOUND = 10  # seconds; only ever hit if the code under test hangs


@pytest.fixture
async def provider(fake_openai: FakeOpenAI) -> AsyncIterator[OpenAIProvider]:
    """A provider pointed at the fake server, closed after the test."""
    provider = OpenAIProvider(model="gpt-test", base_url=fake_openai.url, api_key=FAKE_KEY)
    yield provider
    await provider.aclose()


async def collect(
    provider: OpenAIProvider, request: ModelRequest = HELLO
) -> tuple[list[MessageUpdate], AssistantMessage]:
    """Run one stream; check it is deltas then exactly one final message, and return both."""
    with anyio.fail_after(SAFETY_BOUND):
        items = [item async for item in provider.stream(request)]
    *updates, final = items
    assert isinstance(final, AssistantMessage)
    assert all(isinstance(update, MessageUpdate) for update in updates)
    assert final.provider == "openai" and final.model == "gpt-test"
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


@pytest.mark.anyio
async def test_text_streams_in_chunks_and_maps_usage(
    fake_openai: FakeOpenAI, provider: OpenAIProvider
) -> None:
    fake_openai.enqueue(
        text_reply("Hello, streaming world!", chunk_size=3, usage=(100, 7), cached_tokens=40)
    )
    updates, final = await collect(provider)
    assert len(updates) > 3
    assert {u.kind for u in updates} == {"text"} and {u.index for u in updates} == {0}
    assert replay(updates) == {0: "Hello, streaming world!"}
    assert final.content == [TextContent(text="Hello, streaming world!")]
    assert final.stop_reason == "stop" and final.error_message is None
    assert (final.usage.input_tokens, final.usage.cache_read_tokens) == (60, 40)
    assert final.usage.output_tokens == 7


@pytest.mark.anyio
async def test_tool_call_arguments_arrive_in_many_fragments(
    fake_openai: FakeOpenAI, provider: OpenAIProvider
) -> None:
    arguments = {"path": "src/main.py", "limit": 50, "nested": {"a": [1, 2, "x"]}}
    fake_openai.enqueue(tool_call_reply([("call_abc", "read", arguments)], fragment_size=3))
    updates, final = await collect(provider)
    assert updates[0] == MessageUpdate(
        kind="toolCallStart", index=0, tool_call_id="call_abc", tool_name="read"
    )
    assert len(updates) > 10 and {u.kind for u in updates[1:]} == {"toolCallArgs"}
    assert json.loads(replay(updates)[0]) == arguments
    assert final.content == [ToolCall(id="call_abc", name="read", arguments=arguments)]
    assert final.stop_reason == "toolUse"


@pytest.mark.anyio
async def test_two_parallel_tool_calls_after_text(
    fake_openai: FakeOpenAI, provider: OpenAIProvider
) -> None:
    calls = [("call_1", "read", {"path": "a.txt"}), ("call_2", "ls", {"dir": "."})]
    fake_openai.enqueue(tool_call_reply(calls, text="Let me look."))
    updates, final = await collect(provider)
    starts = [u for u in updates if u.kind == "toolCallStart"]
    assert [(u.index, u.tool_call_id, u.tool_name) for u in starts] == [
        (1, "call_1", "read"),
        (2, "call_2", "ls"),
    ]
    assert replay(updates) == {0: "Let me look.", 1: '{"path":"a.txt"}', 2: '{"dir":"."}'}
    assert final.text == "Let me look."
    assert [(c.id, c.arguments) for c in final.tool_calls] == [
        ("call_1", {"path": "a.txt"}),
        ("call_2", {"dir": "."}),
    ]
    assert final.stop_reason == "toolUse"


@pytest.mark.anyio
async def test_finish_reason_length_stops_with_length(
    fake_openai: FakeOpenAI, provider: OpenAIProvider
) -> None:
    fake_openai.enqueue(text_reply("cut off by max_tok", finish_reason="length"))
    _, final = await collect(provider)
    assert final.stop_reason == "length" and final.text == "cut off by max_tok"


@pytest.mark.anyio
async def test_reasoning_content_becomes_a_thinking_block(
    fake_openai: FakeOpenAI, provider: OpenAIProvider
) -> None:
    fake_openai.enqueue(text_reply("42.", reasoning="Six times seven.", chunk_size=5))
    updates, final = await collect(provider)
    assert [u.kind for u in updates][:4] == ["thinking"] * 4
    assert replay(updates) == {0: "Six times seven.", 1: "42."}
    assert final.content == [ThinkingContent(thinking="Six times seven."), TextContent(text="42.")]


@pytest.mark.anyio
async def test_local_server_quirks(fake_openai: FakeOpenAI, provider: OpenAIProvider) -> None:
    """Reasoning in ``delta.reasoning``, a call without an id, two complete calls sharing one
    index, ``stop`` after tool calls, truncated arguments: all still make a usable message."""
    first = {"index": 0, "type": "function", "function": {"name": "a", "arguments": '{"x": "1'}}
    second = {"index": 1, "id": "b1", "function": {"name": "b", "arguments": "{}"}}
    third = {"index": 1, "id": "c1", "function": {"name": "c", "arguments": '{"y": 2}'}}
    fake_openai.enqueue(
        sse_reply(
            chunk({"role": "assistant", "reasoning": "thinking..."}),
            chunk({"tool_calls": [first]}),
            chunk({"tool_calls": [second]}),
            chunk({"tool_calls": [third]}),
            chunk({}, "stop"),
        )
    )
    updates, final = await collect(provider)
    assert isinstance(final.content[0], ThinkingContent)
    calls = final.tool_calls
    assert [(c.name, c.arguments) for c in calls] == [("a", {"x": "1"}), ("b", {}), ("c", {"y": 2})]
    assert [c.arguments_error is None for c in calls] == [False, True, True]  # "a" won't run
    assert calls[0].id.startswith("call_") and [c.id for c in calls[1:]] == ["b1", "c1"]
    assert [u.tool_call_id for u in updates if u.kind == "toolCallStart"] == [c.id for c in calls]
    assert final.stop_reason == "toolUse"


@pytest.mark.anyio
async def test_tool_call_ids_a_server_repeats_are_made_unique(
    fake_openai: FakeOpenAI, provider: OpenAIProvider
) -> None:
    """Some local servers number the calls of every reply ``call_0``, ``call_1``..., or send
    one id twice: an id already in the conversation or in the reply gets a new one (clients
    and the session log tell calls apart by id); the deltas carry the id the call keeps."""
    earlier = AssistantMessage(content=[ToolCall(id="call_0", name="read", arguments={})],
                               stop_reason="toolUse")
    request = ModelRequest(messages=[
        UserMessage(content="go"), earlier,
        ToolResultMessage(tool_call_id="call_0", tool_name="read",
                          content=[TextContent(text="x")])])
    fake_openai.enqueue(tool_call_reply([("call_0", "ls", {}), ("call_1", "ls", {}),
                                         ("call_1", "find", {"pattern": "*"})]))
    updates, final = await collect(provider, request)
    ids = [call.id for call in final.tool_calls]
    assert ids[1] == "call_1" and len(set(ids) | {"call_0"}) == 4
    assert all(id_.startswith("call_") for id_ in ids)
    assert [u.tool_call_id for u in updates if u.kind == "toolCallStart"] == ids
    assert [call.name for call in final.tool_calls] == ["ls", "ls", "find"]


# ---------------------------------------------------------------------------------------------
# The request sent


@pytest.mark.anyio
async def test_request_body_converts_the_context(
    fake_openai: FakeOpenAI, provider: OpenAIProvider
) -> None:
    image = ImageContent(data="aGVsbG8=", mime_type="image/png")
    request = ModelRequest(
        system_prompt="You are terse.",
        messages=[
            UserMessage(content=[TextContent(text="What is this?"), image]),
            AssistantMessage(
                content=[
                    ThinkingContent(thinking="hidden"),
                    TextContent(text="Reading."),
                    ToolCall(id="call_9", name="read", arguments={"path": "a.png"}),
                ]
            ),
            ToolResultMessage(
                tool_call_id="call_9", tool_name="read", content=[TextContent(text="ok"), image]
            ),
        ],
        tools=[ToolSpec(name="read", description="Read a file", parameters={"type": "object"})],
        max_tokens=256,
    )
    fake_openai.enqueue(text_reply("A greeting."))
    await collect(provider, request)
    [body] = fake_openai.requests
    assert body["model"] == "gpt-test"
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 256
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file",
                "parameters": {"type": "object"},
            },
        }
    ]
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8="}},
            ],
        },
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "a.png"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_9", "content": "ok\n[image omitted]"},
    ]


@pytest.mark.anyio
async def test_request_without_tools_or_max_tokens_omits_them(
    fake_openai: FakeOpenAI, provider: OpenAIProvider
) -> None:
    fake_openai.enqueue(text_reply("hi"))
    await collect(provider)
    [body] = fake_openai.requests
    assert "tools" not in body and "max_tokens" not in body
    assert body["messages"] == [{"role": "user", "content": "hello"}]


@pytest.mark.anyio
async def test_text_blocks_of_a_user_message_stay_apart(
    fake_openai: FakeOpenAI, provider: OpenAIProvider
) -> None:
    """A prompt and the resource an editor attached to it are separate blocks: sent as one
    string (what local servers take), a blank line keeps them apart."""
    resource = '<resource uri="file:///w/a.py">\nx = 1\n</resource>'
    request = ModelRequest(messages=[UserMessage(content=[
        TextContent(text="Explain this"), TextContent(text=resource)])])
    fake_openai.enqueue(text_reply("ok"))
    await collect(provider, request)
    [body] = fake_openai.requests
    assert body["messages"] == [{"role": "user", "content": f"Explain this\n\n{resource}"}]


# ---------------------------------------------------------------------------------------------
# Failures become error messages


@pytest.mark.anyio
async def test_401_reports_status_and_message_without_the_key(
    fake_openai: FakeOpenAI, provider: OpenAIProvider
) -> None:
    fake_openai.enqueue(
        error_reply(401, f"Incorrect API key provided: {FAKE_KEY}.", code="invalid_api_key")
    )
    updates, final = await collect(provider)
    assert updates == [] and final.stop_reason == "error"
    assert final.error_message is not None
    assert final.error_message.startswith("openai: 401 Unauthorized: Incorrect API key provided")
    assert "OPENAI_API_KEY" in final.error_message
    assert FAKE_KEY not in json.dumps(final.dump())


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (429, "Rate limit reached for requests", "429 Too Many Requests: Rate limit reached"),
        (500, "The server had an error", "500 Internal Server Error: The server had an error"),
    ],
)
async def test_retryable_statuses_become_errors(
    fake_openai: FakeOpenAI, provider: OpenAIProvider, status: int, message: str, expected: str
) -> None:
    fake_openai.enqueue(error_reply(status, message, headers={"retry-after": "1"}))
    _, final = await collect(provider)
    assert final.stop_reason == "error" and final.error_message is not None
    assert expected in final.error_message and "retrying may succeed" in final.error_message


@pytest.mark.anyio
async def test_empty_200_stream_is_an_error(
    fake_openai: FakeOpenAI, provider: OpenAIProvider
) -> None:
    fake_openai.enqueue(empty_reply())
    _, final = await collect(provider)
    assert final.stop_reason == "error" and final.error_message == EMPTY_RESPONSE_ERROR


@pytest.mark.anyio
@pytest.mark.parametrize("ending", ["cut", "ended"])
async def test_stream_cut_midway_is_an_error_keeping_the_partial_text(
    fake_openai: FakeOpenAI, provider: OpenAIProvider, ending: str
) -> None:
    """Cut as a real stream is (the connection drops inside the chunked body), or ended cleanly
    before ``[DONE]``: either way an error that keeps the text and may be retried."""
    cut = cut_reply("abcdefghijkl", after_chunks=3, chunk_size=4)
    fake_openai.enqueue(dataclasses.replace(cut, ending=ending))
    updates, final = await collect(provider)
    assert replay(updates) == {0: "abcdefgh"} and final.text == "abcdefgh"
    assert final.stop_reason == "error" and final.retryable
    if ending == "cut":
        assert final.error_message is not None and final.error_message.startswith(
            f"openai: the connection to {fake_openai.url} broke mid-stream: ")
    else:
        assert final.error_message == INCOMPLETE_STREAM_ERROR


@pytest.mark.anyio
async def test_malformed_chunk_and_content_filter_are_errors(
    fake_openai: FakeOpenAI, provider: OpenAIProvider
) -> None:
    fake_openai.enqueue(sse_reply('{"id": "chatcmpl-1", "choices": [{'))
    fake_openai.enqueue(text_reply("nope", finish_reason="content_filter"))
    _, malformed = await collect(provider)
    _, filtered = await collect(provider)
    assert malformed.stop_reason == "error" and malformed.error_message is not None
    assert "malformed stream chunk" in malformed.error_message
    assert filtered.stop_reason == "error"
    assert filtered.error_message == "the provider's content filter stopped the response"


@pytest.mark.anyio
async def test_connection_refused_names_the_url() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago and has no listener
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    provider = OpenAIProvider(model="gpt-test", base_url=url, api_key=FAKE_KEY)
    _, final = await collect(provider)
    await provider.aclose()
    assert final.stop_reason == "error" and final.error_message is not None
    assert final.error_message.startswith(f"openai: cannot connect to {url}: ")


@pytest.mark.anyio
async def test_silent_server_times_out(fake_openai: FakeOpenAI) -> None:
    """Headers and then nothing, or nothing at all: the read timeout ends both."""
    provider = OpenAIProvider(
        model="gpt-test", base_url=fake_openai.url, api_key=FAKE_KEY, request_timeout=0.2
    )
    fake_openai.enqueue(stall_reply(), stall_reply().released_when(threading.Event()))
    _, after_headers = await collect(provider)
    _, before_headers = await collect(provider)
    await provider.aclose()
    assert after_headers.error_message is not None and before_headers.error_message is not None
    assert after_headers.error_message.startswith("openai: the stream stalled: nothing received")
    assert before_headers.error_message.startswith("openai: no response: nothing received")


# ---------------------------------------------------------------------------------------------
# Cancellation and gating


@pytest.mark.anyio
async def test_cancelling_a_stalled_stream_propagates(
    fake_openai: FakeOpenAI, provider: OpenAIProvider
) -> None:
    fake_openai.enqueue(stall_reply("partial"))
    received: list[object] = []
    with anyio.fail_after(SAFETY_BOUND):
        with anyio.CancelScope() as scope:
            async for item in provider.stream(HELLO):
                received.append(item)
                if len(received) == 2:  # "part" and "ial": the stream is now stalled
                    scope.cancel()
    assert scope.cancelled_caught
    assert [getattr(item, "delta", None) for item in received] == ["part", "ial"]


@pytest.mark.anyio
async def test_move_on_after_ends_a_stream_that_never_sends_a_byte(
    fake_openai: FakeOpenAI, provider: OpenAIProvider
) -> None:
    fake_openai.enqueue(stall_reply().released_when(threading.Event()))
    received: list[object] = []

    async def consume() -> None:
        async for item in provider.stream(HELLO):
            received.append(item)

    with anyio.fail_after(SAFETY_BOUND):
        with anyio.move_on_after(math.inf) as scope:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(consume)
                # The 0.2 s count from the request's arrival: on a loaded machine the request
                # itself can take longer, and the scripted stall would never be asked for.
                await anyio.to_thread.run_sync(fake_openai.wait_for_requests, 1)
                scope.deadline = anyio.current_time() + 0.2
    assert scope.cancelled_caught and received == []


@pytest.mark.anyio
async def test_gate_holds_the_reply_until_set(
    fake_openai: FakeOpenAI, provider: OpenAIProvider
) -> None:
    gate = threading.Event()
    fake_openai.enqueue(text_reply("released").released_when(gate))
    results: list[AssistantMessage] = []

    async def run() -> None:
        results.append((await collect(provider))[1])

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run)
        await anyio.to_thread.run_sync(fake_openai.wait_for_requests, 1)
        assert results == []
        gate.set()
    assert results[0].text == "released"


def test_unscripted_request_gets_500_and_fails_the_script() -> None:
    with FakeOpenAI() as fake:
        provider = OpenAIProvider(model="gpt-test", base_url=fake.url, api_key=FAKE_KEY)
        _, final = anyio.run(collect, provider)
    assert final.error_message is not None
    assert "fake_openai: no scripted reply for request 1" in final.error_message
    with pytest.raises(AssertionError, match="no scripted reply for request 1"):
        fake.assert_script_complete()


# ---------------------------------------------------------------------------------------------
# Argument parsing and the factory


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("", {}),
        ('{"path": "src/ma', {"path": "src/ma"}),
        ('{"a": 1, "b"', {"a": 1}),
        ('{"a": [1, 2', {"a": [1, 2]}),
        ('{"a": {"b": tr', {"a": {}}),
        ('{"a": "x", "b": [{"c": "d\\', {"a": "x", "b": [{"c": "d"}]}),
        ('{"a": "1,2", "b": nu', {"a": "1,2"}),
        ('{"a":', {"a": None}),
        ("[1, 2]", {}),
        ("not json", {}),
    ],
)
def test_parse_tool_arguments_is_best_effort(raw: str, expected: dict[str, object]) -> None:
    assert parse_tool_arguments(raw) == expected


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ('{"command": "rm -rf build/cache', "not valid JSON: Unterminated string"),
        ('{"a": 1} {"b": 2}', "not valid JSON: Extra data"),
        ("[1, 2]", "a JSON array, not an object"),
        ("null", "a JSON null, not an object"),
        ("not json", "not valid JSON"),
    ],
)
def test_streamed_call_with_unparseable_arguments_is_marked(raw: str, error: str) -> None:
    """Repaired for display only: ``arguments_error`` says why the call must not run."""
    call = streamed_tool_call("call_1", "bash", raw)
    assert call.arguments == parse_tool_arguments(raw)
    assert call.arguments_error is not None and call.arguments_error.startswith(error)


@pytest.mark.parametrize("raw", ['{"command": "ls"}', " ", ""])
def test_streamed_call_with_one_object_or_nothing_is_executable(raw: str) -> None:
    call = streamed_tool_call("call_1", "bash", raw)
    assert call.arguments_error is None and "argumentsError" not in call.dump()


def test_create_provider_requires_a_key_or_a_base_url() -> None:
    with pytest.raises(ProviderNotConfiguredError, match="OPENAI_API_KEY") as info:
        create_provider("openai", model=None, base_url=None, env={})
    assert "--base-url" in info.value.message
    available = "available: anthropic, local, openai"
    with pytest.raises(ProviderNotConfiguredError, match=f"unknown provider .x.: {available}"):
        create_provider("x", model=None, base_url=None, env={"OPENAI_API_KEY": FAKE_KEY})


def test_create_provider_resolves_model_url_and_key() -> None:
    env = {"OPENAI_BASE_URL": "http://env.invalid/v1"}
    local = create_provider("openai", model=None, base_url="http://127.0.0.1:9/v1", env=env)
    assert isinstance(local, OpenAIProvider)
    assert local.model == DEFAULT_MODEL == "gpt-6.2-sol"
    assert (local.base_url, local._api_key) == ("http://127.0.0.1:9/v1", "not-needed")
    from_env = create_provider("openai", model="m", base_url=None, env=env)
    assert isinstance(from_env, OpenAIProvider) and from_env.base_url == "http://env.invalid/v1"
    keyed = create_provider("openai", model="m", base_url=None, env={"OPENAI_API_KEY": FAKE_KEY})
    assert isinstance(keyed, OpenAIProvider) and keyed._api_key == FAKE_KEY
    assert keyed.name == "openai" and keyed.model == "m"
