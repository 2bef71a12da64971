"""End to end through the real server: OpenAI's Responses API with reasoning kept across turns,
loads, forks and restarts; Chat Completions for servers that speak only it; the corrections and
the usage estimate on the wire."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.fake_openai import FakeOpenAI, chunk, sse_reply, text_reply, tool_call_reply
from support.fake_openai_responses import (
    FakeResponses,
    function_call,
    message,
    reasoning,
    reasoning_items,
    response_reply,
)
from support.helpers import clean_env, spawn_tiller

pytestmark = [pytest.mark.anyio, pytest.mark.process]

THINKING = ("--model", "gpt-5.6-terra", "--thinking", "high", "--permission-mode", "auto")


def issued_reasoning(fake: FakeResponses) -> list[dict[str, Any]]:
    """The reasoning items the fake sent, in the order it sent them."""
    return [entry["item"] for entry in fake.issued.values() if entry["kind"] == "reasoning"]


def kinds(body: dict[str, Any]) -> list[str]:
    return [str(item.get("type", item.get("role"))) for item in body["input"]]


async def test_a_thinking_run_sends_its_reasoning_back_also_after_a_restart_and_a_fork(
    fake_responses: FakeResponses, tmp_path: Path
) -> None:
    """Three tool turns (bash, read, edit) with thinking on for a gpt-5.6-class model: every
    request carries every earlier reasoning item unchanged, in order, each right before the
    call it led to (the fake refuses anything else, as OpenAI does); after a restart the
    loaded session and a fork of it send them again."""
    (tmp_path / "notes.txt").write_text("alpha\n")
    fake_responses.enqueue(
        response_reply(reasoning("List the files first."),
                       function_call("bash", {"command": "ls"}), reasoning_tokens=12),
        response_reply(reasoning("Read the notes."), message("Reading it.", phase="commentary"),
                       function_call("read", {"path": "notes.txt"}), reasoning_tokens=8),
        response_reply(reasoning("Change it."), function_call(
            "edit", {"path": "notes.txt", "edits": [{"oldText": "alpha", "newText": "beta"}]})),
        response_reply(reasoning("Report."), message("notes.txt now says beta.")),
        response_reply(message("Still beta, in the fork.")),
        response_reply(message("Still beta.")),
    )
    env = clean_env(OPENAI_API_KEY="sk-tiller-e2e")
    async with spawn_tiller(fake_responses, tmp_path, *THINKING, env=env) as tiller:
        sid = (await tiller.request("session/new"))["sessionId"]
        result = await tiller.request("agent/prompt", {"sessionId": sid,
                                                       "message": "Change alpha to beta"})
        live = (await tiller.request("agent/getMessages", {"sessionId": sid}))["messages"]

    async with spawn_tiller(fake_responses, tmp_path, *THINKING, env=env) as revived:
        loaded = await revived.request("session/load", {"sessionId": sid})
        fork = await revived.request("session/fork", {"sessionId": sid,
                                                      "entryId": loaded["entryIds"][-1]})
        forked = await revived.request("agent/prompt", {"sessionId": fork["sessionId"],
                                                        "message": "And now?"})
        again = await revived.request("agent/prompt", {"sessionId": sid, "message": "And now?"})

    assert result["stopReason"] == "stop", result.get("errorMessage")
    assert (forked["stopReason"], again["stopReason"]) == ("stop", "stop")
    assert (tmp_path / "notes.txt").read_text() == "beta\n"
    assert fake_responses.refusals == []
    sent = issued_reasoning(fake_responses)
    requests = fake_responses.requests
    assert [reasoning_items(body) for body in requests] == [
        [], sent[:1], sent[:2], sent[:3], sent[:4], sent[:4]]
    assert kinds(requests[3]) == [
        "user", "reasoning", "function_call", "function_call_output",
        "reasoning", "message", "function_call", "function_call_output",
        "reasoning", "function_call", "function_call_output"]
    for body in requests:
        assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
        assert body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert {body["prompt_cache_key"] for body in requests[:4]} == {sid}
    assert requests[4]["prompt_cache_key"] == fork["sessionId"]
    # The log keeps the items with their messages: the load answers with them as they were.
    replies = [m for m in live if m["role"] == "assistant"]
    assert [m["responseItems"][0] for m in replies] == sent[:4]
    assert [m for m in loaded["messages"] if m["role"] == "assistant"] == replies
    assert replies[0]["content"][0] == {"type": "thinking", "thinking": "List the files first."}
    assert result["usage"]["reasoningTokens"] == 20 and result["usage"]["cost"] > 0


async def test_switching_model_family_drops_the_reasoning_and_says_so(
    fake_responses: FakeResponses, tmp_path: Path
) -> None:
    fake_responses.enqueue(
        response_reply(reasoning("Look."), function_call("bash", {"command": "ls"}, "call_a")),
        response_reply(reasoning("Done."), message("Listed.")),
        response_reply(message("Hello from 5.5.")),
    )
    log = tmp_path / "server.log"
    env = clean_env(OPENAI_API_KEY="sk-tiller-e2e")
    async with spawn_tiller(fake_responses, tmp_path, *THINKING, "--log-level", "INFO",
                            "--log-file", str(log), env=env) as tiller:
        await tiller.request("agent/prompt", {"message": "list"})
        await tiller.request("agent/setModel", {"provider": "openai", "model": "gpt-5.5"})
        switched = await tiller.request("agent/prompt", {"message": "hello"})

    assert switched["stopReason"] == "stop" and fake_responses.refusals == []
    last = fake_responses.requests[2]
    assert last["model"] == "gpt-5.5" and reasoning_items(last) == []
    assert not any("id" in item for item in last["input"])
    assert kinds(last) == ["user", "function_call", "function_call_output", "assistant", "user"]
    assert ("the reasoning of earlier replies from openai/gpt-5.6-terra is not sent to "
            "openai/gpt-5.5") in log.read_text()


async def test_a_chat_only_server_with_no_key_gets_chat_completions_and_its_model(
    tmp_path: Path,
) -> None:
    """Ollama-like: ``--base-url`` alone. The status shows the model it serves; /responses is
    asked once (404), then Chat Completions, with ``tool_choice: auto`` beside the tools."""
    with FakeOpenAI(models=("qwen2.5-coder:7b",)) as fake:
        fake.enqueue(tool_call_reply([("call_1", "bash", {"command": "echo hi"})]),
                     text_reply("It printed hi."), text_reply("Again."))
        async with spawn_tiller(fake, tmp_path, "--permission-mode", "auto") as tiller:
            state = await tiller.request("agent/getState")
            first = await tiller.request("agent/prompt", {"message": "say hi"})
            second = await tiller.request("agent/prompt", {"message": "again"})
        fake.assert_script_complete()
    assert state["model"] == "qwen2.5-coder:7b" and state["provider"] == "openai"
    assert (first["stopReason"], second["stopReason"]) == ("stop", "stop")
    assert fake.other_requests == [("GET", "/v1/models"), ("POST", "/v1/responses")]
    assert {body["model"] for body in fake.requests} == {"qwen2.5-coder:7b"}
    assert all(body["tool_choice"] == "auto" and body["tools"] for body in fake.requests)
    assert fake.requests[0]["messages"][0]["role"] == "system"


async def test_a_refused_reasoning_effort_is_corrected_once(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(text_reply("first"), text_reply("second"))
    async with spawn_tiller(fake_openai, tmp_path, "--model", "gpt-5.5", "--thinking",
                            "high") as tiller:
        first = await tiller.request("agent/prompt", {"message": "one"})
        second = await tiller.request("agent/prompt", {"message": "two"})
    assert (first["stopReason"], second["stopReason"]) == ("stop", "stop")
    assert [body["reasoning_effort"] for body in fake_openai.requests] == ["high", "none", "none"]
    assert [status for _, status, _ in fake_openai.refusals] == [400]
    assert not any(m.get("params", {}).get("type") == "retry_scheduled" for m in tiller.received)


async def test_llama_cpp_pythons_refusal_ends_the_run_with_what_to_do(tmp_path: Path) -> None:
    with FakeOpenAI(flavor="llama-cpp-python") as fake:
        fake.enqueue(tool_call_reply([("call_1", "bash", {"command": "ls"})]))
        async with spawn_tiller(fake, tmp_path) as tiller:
            result = await tiller.request("agent/prompt", {"message": "list"})
        fake.assert_script_complete()
    assert result["stopReason"] == "error"
    assert "llama-cpp-python's server cannot stream tool calls" in result["errorMessage"]
    assert "Ollama" in result["errorMessage"] and "--jinja" in result["errorMessage"]
    assert fake.requests[0]["tool_choice"] == "auto"
    assert not any(m.get("params", {}).get("type") == "retry_scheduled" for m in tiller.received)


async def test_usage_a_server_does_not_report_is_estimated_on_the_wire(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(sse_reply(chunk({"role": "assistant", "content": "An answer of 32 "
                                         "characters here."}), chunk({}, "stop")))
    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        result = await tiller.request("agent/prompt", {"message": "hi"})
        state = await tiller.request("agent/getState")
    ended = [m["params"] for m in tiller.received
             if m.get("params", {}).get("type") == "message_end"
             and m["params"]["message"]["role"] == "assistant"]
    usage = result["usage"]
    assert usage["estimated"] is True and usage["outputTokens"] == 8  # 32 characters
    assert usage["inputTokens"] > 100  # the system prompt and the tools count
    assert ended[0]["message"]["usage"]["estimated"] is True
    assert state["usage"]["estimated"] is True
