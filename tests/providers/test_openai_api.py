"""Which API OpenAIProvider speaks, and Chat Completions' corrections, against the loopback
fakes: the fallback for servers without the Responses API, ``reasoning_effort`` refused and
corrected, ``tool_choice``, llama-cpp-python's streaming refusal, usage a server does not
report, and the model a server serves."""

from __future__ import annotations

import json
import socket
from typing import Any

import anyio
import pytest

from support.fake_openai import FakeOpenAI, chunk, sse_reply, text_reply, tool_call_reply
from support.fake_openai_responses import FakeResponses, message, response_reply
from tiller.providers.base import ModelRequest, ToolSpec
from tiller.providers.openai import OpenAIProvider, chat_only_servers
from tiller.providers.served import served_model
from tiller.types import AssistantMessage, TextContent, ToolCall, UserMessage

pytestmark = pytest.mark.anyio

TOOLS = [ToolSpec("bash", "Run a command", {"type": "object"})]
SAFETY_BOUND = 10


async def final_of(provider: OpenAIProvider, req: ModelRequest) -> AssistantMessage:
    with anyio.fail_after(SAFETY_BOUND):
        items = [item async for item in provider.stream(req)]
    final = items[-1]
    assert isinstance(final, AssistantMessage)
    return final


def ask(text: str = "hi", thinking: str = "off", tools: bool = True, **extra: Any) -> ModelRequest:
    return ModelRequest(messages=[UserMessage(content=text)], tools=TOOLS if tools else [],
                        thinking=thinking, **extra)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Which API


async def test_a_server_without_the_responses_api_gets_chat_completions_once_found_out(
    fake_openai: FakeOpenAI,
) -> None:
    provider = OpenAIProvider(model="qwen3-coder", base_url=fake_openai.url, api_key="x")
    fake_openai.enqueue(text_reply("first"), text_reply("second"))
    first = await final_of(provider, ask())
    assert fake_openai.other_requests == [("POST", "/v1/responses")]
    assert fake_openai.url.rstrip("/") in chat_only_servers()
    again = OpenAIProvider(model="qwen3-coder", base_url=fake_openai.url, api_key="x")
    second = await final_of(again, ask())  # another provider, same server: no second probe
    await provider.aclose()
    await again.aclose()
    assert (first.text, second.text) == ("first", "second")
    assert fake_openai.other_requests == [("POST", "/v1/responses")]
    assert len(fake_openai.requests) == 2 and not again.uses_responses()


async def test_a_server_with_the_responses_api_keeps_it(fake_responses: FakeResponses) -> None:
    provider = OpenAIProvider(model="gpt-6.2-sol", base_url=fake_responses.url, api_key="x")
    fake_responses.enqueue(response_reply(message("one")), response_reply(message("two")))
    assert (await final_of(provider, ask())).text == "one"
    assert (await final_of(provider, ask())).text == "two"
    await provider.aclose()
    assert provider.uses_responses() and len(fake_responses.requests) == 2


async def test_api_responses_on_a_chat_only_server_says_what_to_set(
    fake_openai: FakeOpenAI,
) -> None:
    provider = OpenAIProvider(model="m", base_url=fake_openai.url, api_key="x", api="responses")
    final = await final_of(provider, ask())
    await provider.aclose()
    assert final.stop_reason == "error" and not final.retryable
    assert final.error_message == (
        'openai: 404 Not Found: Not Found (this server has no Responses API: set api = "chat" '
        "for this provider in the config file)")
    assert fake_openai.requests == []


async def test_api_chat_never_asks_for_responses(fake_openai: FakeOpenAI) -> None:
    provider = OpenAIProvider(model="m", base_url=fake_openai.url, api_key="x", api="chat")
    fake_openai.enqueue(text_reply("hi"))
    await final_of(provider, ask())
    await provider.aclose()
    assert fake_openai.other_requests == [] and len(fake_openai.requests) == 1


# ---------------------------------------------------------------------------------------------
# Chat Completions


async def test_tools_go_with_tool_choice_auto(fake_openai: FakeOpenAI) -> None:
    provider = OpenAIProvider(model="m", base_url=fake_openai.url, api_key="x", api="chat")
    fake_openai.enqueue(text_reply("a"), text_reply("b"))
    await final_of(provider, ask())
    await final_of(provider, ask(tools=False))
    await provider.aclose()
    with_tools, without = fake_openai.requests
    assert with_tools["tool_choice"] == "auto" and "tool_choice" not in without


async def test_a_refused_reasoning_effort_gets_one_retry_with_none_then_none_at_once(
    fake_openai: FakeOpenAI,
) -> None:
    provider = OpenAIProvider(model="gpt-5.5", base_url=fake_openai.url, api_key="x", api="chat")
    fake_openai.enqueue(text_reply("first"), text_reply("second"))
    first = await final_of(provider, ask(thinking="high"))
    second = await final_of(provider, ask(thinking="high"))
    await provider.aclose()
    assert (first.text, second.text) == ("first", "second")
    assert [body["reasoning_effort"] for body in fake_openai.requests] == ["high", "none", "none"]
    [(_, status, text)] = fake_openai.refusals
    assert (status, text) == (400, "Function tools with reasoning_effort are not supported for "
                                   "gpt-5.5 in /v1/chat/completions. Please use /v1/responses "
                                   "instead.")


async def test_gpt_5_6_on_chat_completions_is_refused_even_without_an_effort_and_corrected(
    fake_openai: FakeOpenAI,
) -> None:
    """``off`` is ``none`` for a model known to reason; a model Tiller has no facts for sends
    no effort, which gpt-5.6-class models refuse with tools: corrected to ``none``."""
    provider = OpenAIProvider(model="gpt-6.3-nova", base_url=fake_openai.url, api_key="x",
                              api="chat")
    known = OpenAIProvider(model="gpt-5.6-terra", base_url=fake_openai.url, api_key="x",
                           api="chat")
    fake_openai.enqueue(text_reply("ok"), text_reply("at once"))
    assert (await final_of(provider, ask())).text == "ok"
    assert (await final_of(known, ask())).text == "at once"
    await provider.aclose()
    await known.aclose()
    bodies = fake_openai.requests
    assert ["reasoning_effort" in bodies[0], bodies[1]["reasoning_effort"],
            bodies[2]["reasoning_effort"]] == [False, "none", "none"]
    assert fake_openai.refusals[0][2].endswith(
        "To use function tools, use /v1/responses or set reasoning_effort to 'none'.")


async def test_a_model_that_refuses_none_too_says_to_use_the_responses_api(
    fake_openai: FakeOpenAI,
) -> None:
    provider = OpenAIProvider(model="gpt-6.1-sol", base_url=fake_openai.url, api_key="x",
                              api="chat")
    final = await final_of(provider, ask())
    await provider.aclose()
    assert [body["reasoning_effort"] for body in fake_openai.requests] == ["low", "none"]
    assert final.stop_reason == "error" and not final.retryable
    assert final.error_message == (
        "openai: 400 Bad Request: Unsupported value: 'reasoning_effort' does not support 'none' "
        "with this model. Supported values are: 'low', 'medium', 'high', 'xhigh', and 'max'. "
        '(this model takes tools only on the Responses API: set api = "responses" for this '
        "provider in the config file)")


async def test_llama_cpp_pythons_streaming_tool_refusal_is_a_clear_error() -> None:
    with FakeOpenAI(flavor="llama-cpp-python") as fake:
        provider = OpenAIProvider(model="qwen", base_url=fake.url, api_key="x", api="chat")
        fake.enqueue(tool_call_reply([("call_1", "bash", {"command": "ls"})]))
        final = await final_of(provider, ask())
        await provider.aclose()
    assert fake.requests[0]["tool_choice"] == "auto"
    assert final.stop_reason == "error" and not final.retryable
    assert final.error_message == (
        "openai: 500 Internal Server Error: Automatic streaming tool choice is not supported "
        "(llama-cpp-python's server cannot stream tool calls; use a server that does, such as "
        "Ollama or llama.cpp's llama-server (started with --jinja))")


async def test_the_llama_cpp_fake_reads_a_missing_tool_choice_as_none() -> None:
    """The fake's own behaviour, which is why Tiller sends ``auto``: without it the scripted
    call never comes back, only its text."""
    import httpx2

    with FakeOpenAI(flavor="llama-cpp-python") as fake:
        fake.enqueue(tool_call_reply([("call_1", "bash", {"command": "ls"})], text="Let me."))
        body = {"model": "qwen", "stream": True,
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"type": "function", "function": {"name": "bash", "parameters": {}}}]}
        async with httpx2.AsyncClient() as client:
            response = await client.post(f"{fake.url}/chat/completions", json=body)
    chunks = [json.loads(line[6:]) for line in response.text.splitlines()
              if line.startswith("data: {")]
    deltas = [choice["delta"] for c in chunks for choice in c["choices"]]
    assert "".join(d.get("content") or "" for d in deltas) == "Let me."
    assert not any("tool_calls" in d for d in deltas)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


# ---------------------------------------------------------------------------------------------
# Usage the server does not report


async def test_usage_a_server_does_not_report_is_estimated(fake_openai: FakeOpenAI) -> None:
    provider = OpenAIProvider(model="m", base_url=fake_openai.url, api_key="x", api="chat")
    fake_openai.enqueue(
        sse_reply(chunk({"role": "assistant", "content": "x" * 40}), chunk({}, "stop")),
        text_reply("reported", usage=(7, 3)),
    )
    estimated = await final_of(provider, ask("y" * 400, tools=False, system_prompt="z" * 80))
    reported = await final_of(provider, ask(tools=False))
    await provider.aclose()
    assert estimated.content == [TextContent(text="x" * 40)]
    usage = estimated.usage
    assert (usage.input_tokens, usage.output_tokens, usage.estimated) == (120, 10, True)
    assert (reported.usage.input_tokens, reported.usage.estimated) == (7, None)
    assert "estimated" not in reported.usage.dump()


async def test_a_failed_reply_gets_no_estimate(fake_openai: FakeOpenAI) -> None:
    provider = OpenAIProvider(model="m", base_url=fake_openai.url, api_key="x", api="chat")
    fake_openai.enqueue(sse_reply(chunk({"role": "assistant", "content": "cut"}), done=False))
    final = await final_of(provider, ask(tools=False))
    await provider.aclose()
    assert final.stop_reason == "error" and final.usage.estimated is None
    assert final.usage.input_tokens == 0


async def test_a_tool_call_counts_in_the_estimate(fake_openai: FakeOpenAI) -> None:
    provider = OpenAIProvider(model="m", base_url=fake_openai.url, api_key="x", api="chat")
    fake_openai.enqueue(sse_reply(
        chunk({"role": "assistant", "tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                                    "function": {"name": "bash",
                                                                 "arguments": '{"a": 1}'}}]}),
        chunk({}, "tool_calls")))
    final = await final_of(provider, ask(tools=False))
    await provider.aclose()
    assert final.content == [ToolCall(id="c1", name="bash", arguments={"a": 1})]
    assert final.usage.estimated and final.usage.output_tokens == -(-len('bash{"a": 1}') // 4)


# ---------------------------------------------------------------------------------------------
# The model a server serves


async def test_the_served_model_is_the_preferred_one_if_listed_else_the_first() -> None:
    with FakeOpenAI(models=("llama-3.3", "qwen3-coder")) as fake:
        assert await served_model(fake.url, None, "qwen3-coder") == "qwen3-coder"
        assert await served_model(fake.url, "key", "gpt-6.2-sol") == "llama-3.3"
        assert fake.other_requests == [("GET", "/v1/models")] * 2
    with FakeOpenAI(models=()) as empty:
        assert await served_model(empty.url, None, "gpt-6.2-sol") is None


async def test_an_unreachable_server_serves_nothing() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert await served_model(f"http://127.0.0.1:{port}/v1", None, "m") is None
