"""OpenAIProvider on the Responses API against FakeResponses: real HTTP and SSE over loopback,
the fake refusing what OpenAI refuses. No monkeypatching."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from support.fake_openai_responses import (
    FakeResponses,
    cut_reply,
    empty_reply,
    error_event_reply,
    error_reply,
    failed_reply,
    function_call,
    incomplete_reply,
    message,
    reasoning,
    reasoning_items,
    response_reply,
    sse_reply,
    stall_reply,
)
from tiller.providers.base import ModelRequest, ToolSpec
from tiller.providers.openai import OpenAIProvider
from tiller.providers.openai_stream import EMPTY_RESPONSE_ERROR, INCOMPLETE_STREAM_ERROR
from tiller.types import (
    AssistantMessage,
    ImageContent,
    Message,
    MessageUpdate,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

pytestmark = pytest.mark.anyio

FAKE_KEY = "sk-tiller-test-SECRET-4242"
MODEL = "gpt-5.6-terra"
TOOLS = [ToolSpec("bash", "Run a command", {"type": "object",
                                            "properties": {"command": {"type": "string"}}})]
SAFETY_BOUND = 10


def request(messages: list[Message], thinking: str = "high", **extra: Any) -> ModelRequest:
    return ModelRequest(messages=messages, tools=TOOLS, thinking=thinking,  # type: ignore[arg-type]
                        cache_key="session-1", **extra)


@pytest.fixture
async def provider(fake_responses: FakeResponses) -> AsyncIterator[OpenAIProvider]:
    provider = OpenAIProvider(model=MODEL, base_url=fake_responses.url, api_key=FAKE_KEY,
                              api="responses")
    yield provider
    await provider.aclose()


async def collect(
    provider: OpenAIProvider, req: ModelRequest
) -> tuple[list[MessageUpdate], AssistantMessage]:
    with anyio.fail_after(SAFETY_BOUND):
        items = [item async for item in provider.stream(req)]
    *updates, final = items
    assert isinstance(final, AssistantMessage)
    assert all(isinstance(update, MessageUpdate) for update in updates)
    return [u for u in updates if isinstance(u, MessageUpdate)], final


def replay(updates: list[MessageUpdate]) -> dict[int, str]:
    blocks: dict[int, str] = {}
    for update in updates:
        if update.delta is not None:
            blocks[update.index] = blocks.get(update.index, "") + update.delta
    return blocks


def tool_result(call: ToolCall, text: str = "ok") -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call.id, tool_name=call.name,
                             content=[TextContent(text=text)])


# ---------------------------------------------------------------------------------------------
# Streams


async def test_reasoning_text_and_a_call_stream_as_blocks_with_their_items(
    fake_responses: FakeResponses, provider: OpenAIProvider
) -> None:
    fake_responses.enqueue(response_reply(
        reasoning("Plan: list the files.", "Then read one."),
        message("Listing.", phase="commentary"),
        function_call("bash", {"command": "ls -la"}, call_id="call_1"),
        usage=(1200, 300), cached_tokens=1000, cache_write_tokens=150, reasoning_tokens=250,
    ))
    updates, final = await collect(provider, request([UserMessage(content="list")]))
    assert replay(updates) == {0: "Plan: list the files.\n\nThen read one.", 1: "Listing.",
                               2: '{"command":"ls -la"}'}
    starts = [u for u in updates if u.kind == "toolCallStart"]
    assert [(u.index, u.tool_call_id, u.tool_name) for u in starts] == [(2, "call_1", "bash")]
    assert final.content == [
        ThinkingContent(thinking="Plan: list the files.\n\nThen read one."),
        TextContent(text="Listing."),
        ToolCall(id="call_1", name="bash", arguments={"command": "ls -la"}),
    ]
    assert final.stop_reason == "toolUse" and final.provider == "openai" and final.model == MODEL
    usage = final.usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (50, 1000,
                                                                                       150)
    assert (usage.output_tokens, usage.reasoning_tokens, usage.estimated) == (300, 250, None)
    reasoning_item, message_item, call_item = [e["item"] for e in fake_responses.issued.values()]
    assert final.response_items == [
        reasoning_item,
        {key: value for key, value in message_item.items() if key != "content"},
        call_item,
    ]
    assert reasoning_item["encrypted_content"].startswith("gAAAAAB")


async def test_the_request_is_stateless_and_cached_per_session(
    fake_responses: FakeResponses, provider: OpenAIProvider
) -> None:
    fake_responses.enqueue(response_reply(message("Hi.")))
    image = ImageContent(data="aGVsbG8=", mime_type="image/png")
    await collect(provider, request(
        [UserMessage(content=[TextContent(text="What is this?"), image])],
        system_prompt="Be terse.", max_tokens=500,
    ))
    [body] = fake_responses.requests
    assert body["stream"] is True and body["store"] is False
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["prompt_cache_key"] == "session-1"
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert body["instructions"] == "Be terse." and body["max_output_tokens"] == 500
    assert body["tools"] == [{"type": "function", "name": "bash", "description": "Run a command",
                              "parameters": TOOLS[0].parameters, "strict": False}]
    assert body["tool_choice"] == "auto"
    assert body["input"] == [{"role": "user", "content": [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": "data:image/png;base64,aGVsbG8=", "detail": "auto"},
    ]}]


@pytest.mark.parametrize(("model", "level", "effort"), [
    ("gpt-5.6-terra", "off", "none"),
    ("gpt-5.6-terra", "medium", "medium"),
    ("gpt-6.1-terra", "max", "max"),
    ("gpt-6.2-sol", "off", "low"),     # the Sol models from 6.1 on refuse none
    ("gpt-6.2-astra", "xhigh", "xhigh"),
    ("gpt-5.5", "max", "xhigh"),       # 5.5 stops at xhigh
])
async def test_thinking_levels_become_efforts_the_model_takes(
    fake_responses: FakeResponses, model: str, level: str, effort: str
) -> None:
    fake_responses.enqueue(response_reply(message("ok")))
    provider = OpenAIProvider(model=model, base_url=fake_responses.url, api_key=FAKE_KEY)
    _, final = await collect(provider, request([UserMessage(content="hi")], thinking=level))
    await provider.aclose()
    assert final.stop_reason == "stop" and fake_responses.refusals == []
    assert fake_responses.requests[0]["reasoning"]["effort"] == effort


async def test_a_model_without_reasoning_gets_no_reasoning_knobs(
    fake_responses: FakeResponses
) -> None:
    fake_responses.enqueue(response_reply(message("ok")))
    provider = OpenAIProvider(model="gpt-4.1", base_url=fake_responses.url, api_key=FAKE_KEY)
    _, final = await collect(provider, request([UserMessage(content="hi")], thinking="off"))
    await provider.aclose()
    [body] = fake_responses.requests
    assert final.stop_reason == "stop"
    assert "reasoning" not in body and "include" not in body


# ---------------------------------------------------------------------------------------------
# Reasoning items go back


async def test_reasoning_items_go_back_unchanged_before_their_calls(
    fake_responses: FakeResponses, provider: OpenAIProvider
) -> None:
    fake_responses.enqueue(
        response_reply(reasoning("First look."), function_call("bash", {"command": "ls"}),
                       function_call("bash", {"command": "pwd"})),
        response_reply(reasoning("Now read."), message("Reading.", phase="commentary"),
                       function_call("bash", {"command": "cat a"})),
        response_reply(reasoning(), message("Done.")),
    )
    context: list[Message] = [UserMessage(content="look around")]
    for _ in range(3):
        _, final = await collect(provider, request(context))
        assert final.stop_reason in ("toolUse", "stop"), final.error_message
        context += [final, *(tool_result(call) for call in final.tool_calls)]
    assert fake_responses.refusals == []
    first, second, third = fake_responses.requests
    issued = [entry["item"] for entry in fake_responses.issued.values()]
    assert reasoning_items(first) == []
    assert reasoning_items(second) == [issued[0]]
    assert reasoning_items(third) == [issued[0], issued[3]]
    kinds = [item.get("type", item.get("role")) for item in third["input"]]
    assert kinds == ["user", "reasoning", "function_call", "function_call",
                     "function_call_output", "function_call_output",
                     "reasoning", "message", "function_call", "function_call_output"]
    assert [item.get("id") for item in third["input"][1:4]] == [i["id"] for i in issued[:3]]
    assert third["input"][2]["arguments"] == '{"command":"ls"}'  # as the model wrote it
    assert context[-1].content == [ThinkingContent(thinking=""), TextContent(text="Done.")]


async def test_the_fake_refuses_a_call_without_its_reasoning_item(
    fake_responses: FakeResponses, provider: OpenAIProvider
) -> None:
    """The fake is held to OpenAI's rule: a call sent back by id needs its reasoning item
    right before it, and says so with OpenAI's text."""
    fake_responses.enqueue(
        response_reply(reasoning("Look."), function_call("bash", {"command": "ls"})))
    context: list[Message] = [UserMessage(content="look")]
    _, final = await collect(provider, request(context))
    stripped = final.model_copy(update={"response_items": final.response_items[1:]})
    _, refused = await collect(provider, request(
        [*context, stripped, tool_result(final.tool_calls[0])]))
    reordered = final.model_copy(update={"response_items": final.response_items[::-1]})
    _, refused_again = await collect(provider, request(
        [*context, reordered, tool_result(final.tool_calls[0])]))
    fc_id, rs_id = final.response_items[1]["id"], final.response_items[0]["id"]
    expected = (f"Item '{fc_id}' of type 'function_call' was provided without its required "
                f"'reasoning' item: '{rs_id}'.")
    assert refused.stop_reason == "error" and not refused.retryable
    assert refused.error_message == f"openai: 400 Bad Request: {expected}"
    assert refused_again.error_message is not None
    assert "without its required" in refused_again.error_message
    assert [status for _, status, _ in fake_responses.refusals] == [400, 400]


async def test_changed_encrypted_content_is_refused_as_unverifiable(
    fake_responses: FakeResponses, provider: OpenAIProvider
) -> None:
    fake_responses.enqueue(response_reply(reasoning("Look."), message("Hi.")))
    context: list[Message] = [UserMessage(content="hi")]
    _, final = await collect(provider, request(context))
    items = [dict(item) for item in final.response_items or []]
    items[0]["encrypted_content"] = items[0]["encrypted_content"][:-8] + "AAAAAAAA"
    changed = final.model_copy(update={"response_items": items})
    _, refused = await collect(provider, request([*context, changed,
                                                  UserMessage(content="again")]))
    assert refused.error_message is not None
    assert "could not be verified" in refused.error_message


async def test_another_model_familys_reasoning_is_dropped_and_logged(
    fake_responses: FakeResponses, caplog: pytest.LogCaptureFixture
) -> None:
    older = OpenAIProvider(model="gpt-5.5", base_url=fake_responses.url, api_key=FAKE_KEY)
    newer = OpenAIProvider(model=MODEL, base_url=fake_responses.url, api_key=FAKE_KEY)
    fake_responses.enqueue(
        response_reply(reasoning("Look."), message("Listing.", phase="commentary"),
                       function_call("bash", {"command": "ls"}, call_id="call_9")),
        response_reply(message("Done.")),
    )
    context: list[Message] = [UserMessage(content="look")]
    _, final = await collect(older, request(context))
    context += [final, tool_result(final.tool_calls[0])]
    with caplog.at_level(logging.INFO, logger="tiller.providers.openai"):
        _, done = await collect(newer, request(context))
    await older.aclose()
    await newer.aclose()
    assert done.stop_reason == "stop"
    body = fake_responses.requests[1]
    assert reasoning_items(body) == []
    assert body["input"][1:] == [
        {"role": "assistant", "content": "Listing."},
        {"type": "function_call", "call_id": "call_9", "name": "bash",
         "arguments": '{"command": "ls"}'},
        {"type": "function_call_output", "call_id": "call_9", "output": "ok"},
    ]
    assert "reasoning of earlier replies from openai/gpt-5.5 is not sent" in caplog.text


async def test_a_dated_snapshot_is_the_same_family(fake_responses: FakeResponses) -> None:
    fake_responses.models["gpt-5.5-2026-04-23"] = fake_responses.models["gpt-5.5"]
    dated = OpenAIProvider(model="gpt-5.5-2026-04-23", base_url=fake_responses.url,
                           api_key=FAKE_KEY)
    alias = OpenAIProvider(model="gpt-5.5", base_url=fake_responses.url, api_key=FAKE_KEY)
    fake_responses.enqueue(response_reply(reasoning("Look."), message("Hi.")),
                           response_reply(message("Again.")))
    context: list[Message] = [UserMessage(content="hi")]
    _, final = await collect(dated, request(context))
    _, again = await collect(alias, request([*context, final, UserMessage(content="more")]))
    await dated.aclose()
    await alias.aclose()
    assert again.stop_reason == "stop"
    assert reasoning_items(fake_responses.requests[1]) == [final.response_items[0]]


async def test_tool_results_with_images_go_as_input_images(
    fake_responses: FakeResponses, provider: OpenAIProvider
) -> None:
    fake_responses.enqueue(response_reply(function_call("read", {"path": "a.png"}, "call_r")),
                           response_reply(message("A cat.")))
    context: list[Message] = [UserMessage(content="what is a.png")]
    _, final = await collect(provider, request(context))
    result = ToolResultMessage(tool_call_id="call_r", tool_name="read", content=[
        TextContent(text="Read image"), ImageContent(data="aGk=", mime_type="image/png")])
    await collect(provider, request([*context, final, result]))
    assert fake_responses.requests[1]["input"][-1] == {
        "type": "function_call_output", "call_id": "call_r", "output": [
            {"type": "input_text", "text": "Read image"},
            {"type": "input_image", "image_url": "data:image/png;base64,aGk=", "detail": "auto"},
        ]}


# ---------------------------------------------------------------------------------------------
# Refusals corrected once, and remembered


async def test_an_effort_the_model_lacks_is_corrected_once_and_remembered(
    fake_responses: FakeResponses
) -> None:
    """A model Tiller has no facts for: ``off`` asks for ``none``; OpenAI names what it takes;
    the nearest goes out at once and from then on."""
    fake_responses.models["gpt-6.3-sol"] = ("low", "medium", "high", "xhigh", "max")
    provider = OpenAIProvider(model="gpt-6.3-sol", base_url=fake_responses.url,
                              api_key=FAKE_KEY)
    fake_responses.enqueue(response_reply(message("one")), response_reply(message("two")))
    _, first = await collect(provider, request([UserMessage(content="a")], thinking="off"))
    _, second = await collect(provider, request([UserMessage(content="b")], thinking="off"))
    await provider.aclose()
    assert (first.text, second.text) == ("one", "two")
    efforts = [body["reasoning"]["effort"] for body in fake_responses.requests]
    assert efforts == ["none", "low", "low"]
    [(number, status, text)] = fake_responses.refusals
    assert (number, status) == (1, 400)
    assert text == ("Unsupported value: 'none' is not supported with the 'gpt-6.3-sol' model. "
                    "Supported values are: 'low', 'medium', 'high', 'xhigh', and 'max'.")


async def test_reasoning_on_a_model_without_it_is_dropped_once(
    fake_responses: FakeResponses
) -> None:
    fake_responses.models["house-model"] = None
    provider = OpenAIProvider(model="house-model", base_url=fake_responses.url,
                              api_key=FAKE_KEY)
    fake_responses.enqueue(response_reply(message("one")), response_reply(message("two")))
    await collect(provider, request([UserMessage(content="a")], thinking="low"))
    await collect(provider, request([UserMessage(content="b")], thinking="low"))
    await provider.aclose()
    first, retried, later = fake_responses.requests
    assert first["reasoning"]["effort"] == "low"
    assert "reasoning" not in retried and "include" not in retried and "reasoning" not in later
    assert len(fake_responses.refusals) == 1


async def test_an_unknown_model_is_a_404_that_names_it(
    fake_responses: FakeResponses
) -> None:
    provider = OpenAIProvider(model="gpt-7-nova", base_url=fake_responses.url,
                              api_key=FAKE_KEY)  # api auto: a 404 about the model is not a route
    _, final = await collect(provider, request([UserMessage(content="hi")]))
    await provider.aclose()
    assert final.stop_reason == "error" and not final.retryable
    assert final.error_message == (
        "openai: 404 Not Found: The model `gpt-7-nova` does not exist or you do not have access "
        "to it. (check the model name and the base URL)")
    assert provider.uses_responses()


# ---------------------------------------------------------------------------------------------
# How streams end


@pytest.mark.parametrize(("reply", "message_text", "retryable"), [
    (failed_reply("server_error", "The server had an error.", message("Par")),
     "openai: the response failed: server_error: The server had an error. "
     "(temporary: retrying may succeed)", True),
    (failed_reply("invalid_prompt", "Your prompt was flagged."),
     "openai: the response failed: invalid_prompt: Your prompt was flagged.", False),
    (error_event_reply(None, "An error occurred while processing your request."),
     "openai: the provider reported an error mid-stream: An error occurred while processing "
     "your request. (temporary: retrying may succeed)", True),
    (error_event_reply("context_length_exceeded", "Your input exceeds the context window."),
     "openai: the provider reported an error mid-stream: Your input exceeds the context "
     "window.", False),
    (incomplete_reply(message("Half"), reason="content_filter"),
     "the provider's content filter stopped the response", False),
])
async def test_failure_events_end_in_errors(
    fake_responses: FakeResponses, provider: OpenAIProvider, reply: Any, message_text: str,
    retryable: bool,
) -> None:
    fake_responses.enqueue(reply)
    _, final = await collect(provider, request([UserMessage(content="hi")]))
    assert final.stop_reason == "error"
    assert (final.error_message, final.retryable) == (message_text, retryable)


async def test_the_output_limit_ends_in_length(
    fake_responses: FakeResponses, provider: OpenAIProvider
) -> None:
    fake_responses.enqueue(incomplete_reply(function_call("bash", '{"command": "rm -rf bu')))
    _, final = await collect(provider, request([UserMessage(content="hi")]))
    assert final.stop_reason == "length"
    assert final.tool_calls[0].arguments_error is not None  # it will not run


@pytest.mark.parametrize(("status", "retryable"), [(429, True), (500, True), (400, False)])
async def test_http_errors(
    fake_responses: FakeResponses, provider: OpenAIProvider, status: int, retryable: bool
) -> None:
    fake_responses.enqueue(error_reply(status, "Nope.", headers={"retry-after": "2"}))
    _, final = await collect(provider, request([UserMessage(content="hi")]))
    assert final.stop_reason == "error" and final.retryable is retryable
    assert final.error_message is not None and final.error_message.startswith(
        f"openai: {status} ")
    if retryable:
        assert final.retry_after == 2.0


@pytest.mark.parametrize("ending", ["cut", "ended"])
async def test_a_cut_stream_keeps_its_text_and_is_retryable(
    fake_responses: FakeResponses, provider: OpenAIProvider, ending: str
) -> None:
    """Cut as a real stream is (the connection drops inside the chunked body), or ended cleanly
    before ``response.completed``: either way a retryable error that keeps the text."""
    cut = cut_reply(message("abcdefgh"), after_events=5)
    fake_responses.enqueue(dataclasses.replace(cut, ending=ending))
    updates, final = await collect(provider, request([UserMessage(content="hi")]))
    assert replay(updates) == {0: "abcd"}
    assert (final.stop_reason, final.retryable) == ("error", True)
    if ending == "cut":
        assert final.error_message is not None and final.error_message.startswith(
            f"openai: the connection to {fake_responses.url} broke mid-stream: ")
    else:
        assert final.error_message == INCOMPLETE_STREAM_ERROR
    assert final.response_items is None


async def test_an_empty_stream_is_retryable(
    fake_responses: FakeResponses, provider: OpenAIProvider
) -> None:
    fake_responses.enqueue(empty_reply())
    _, final = await collect(provider, request([UserMessage(content="hi")]))
    assert (final.error_message, final.retryable) == (EMPTY_RESPONSE_ERROR, True)


async def test_a_stalled_stream_times_out(fake_responses: FakeResponses) -> None:
    provider = OpenAIProvider(model=MODEL, base_url=fake_responses.url, api_key=FAKE_KEY,
                              request_timeout=0.3)
    fake_responses.enqueue(stall_reply(message("partial"), after_events=5,
                                       until=threading.Event()))
    updates, final = await collect(provider, request([UserMessage(content="hi")]))
    await provider.aclose()
    assert replay(updates) == {0: "part"}
    assert final.error_message is not None and final.retryable
    assert final.error_message.startswith("openai: the stream stalled: nothing received")


async def test_a_malformed_event_is_not_retried(
    fake_responses: FakeResponses, provider: OpenAIProvider
) -> None:
    fake_responses.enqueue(sse_reply(
        '{"type": "response.output_item.added", "output_index": 0, "item": "a string"}'))
    _, final = await collect(provider, request([UserMessage(content="hi")]))
    assert final.stop_reason == "error" and not final.retryable
    assert final.error_message is not None and "malformed" in final.error_message
