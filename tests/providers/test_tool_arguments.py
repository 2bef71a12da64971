"""End to end: tool-call arguments that are not one JSON object are never executed.

A stream can end (``finish_reason: tool_calls`` / ``stop_reason: tool_use``) with a call whose
arguments are cut short. Repairing them for execution would run something the model never wrote
(``rm -rf build/cache`` cut to ``rm -rf build``), so such a call gets an error result telling the
model to re-send it, and the run goes on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.fake_anthropic import FakeAnthropic, tool_use_reply
from support.fake_anthropic import text_reply as anthropic_text_reply
from support.fake_openai import FakeOpenAI, sse_reply, tool_call_reply
from support.fake_openai import text_reply as openai_text_reply
from support.fake_openai_responses import FakeResponses, function_call, response_reply
from support.fake_openai_responses import message as responses_message
from support.helpers import clean_env, spawn_tiller

pytestmark = [pytest.mark.anyio, pytest.mark.process]

CUT_COMMAND = '{"command": "touch created.txt && echo ran'
"""Repaired, this would be ``touch created.txt && echo ran``: the file would appear."""


def _tool_result_text(request: dict[str, Any], provider: str) -> str:
    """The text of the tool result the second model request carries back."""
    if provider == "responses":
        output = next(item["output"] for item in request["input"]
                      if item.get("type") == "function_call_output")
        return output if isinstance(output, str) else "".join(p["text"] for p in output)
    if provider == "openai":
        return str(request["messages"][-1]["content"])
    block = request["messages"][-1]["content"][0]
    content = block["content"]
    return content if isinstance(content, str) else "".join(part["text"] for part in content)


@pytest.mark.parametrize(
    ("provider", "raw"),
    [
        ("openai", CUT_COMMAND),
        ("anthropic", CUT_COMMAND),
        ("openai", '["touch", "created.txt"]'),  # valid JSON, but not an object
    ],
)
async def test_unparseable_arguments_are_not_executed(
    provider: str,
    raw: str,
    fake_openai: FakeOpenAI,
    fake_anthropic: FakeAnthropic,
    tmp_path: Path,
) -> None:
    fake: FakeOpenAI | FakeAnthropic
    if provider == "openai":
        fake = fake_openai
        fake.enqueue(
            tool_call_reply([("call_cut", "bash", raw)]), openai_text_reply("Re-sending.")
        )
    else:
        fake = fake_anthropic
        fake.enqueue(
            tool_use_reply([("call_cut", "bash", raw)]), anthropic_text_reply("Re-sending.")
        )
    args = ("--provider", provider)
    env = clean_env(ANTHROPIC_API_KEY="sk-ant-test")
    async with spawn_tiller(fake, tmp_path, *args, env=env) as tiller:  # type: ignore[arg-type]
        result = await tiller.request("agent/prompt", {"message": "make a file"})

    assert result["stopReason"] == "stop"  # the run went on to the model's next reply
    assert not (tmp_path / "created.txt").exists()
    end = next(e for e in tiller.events if e["type"] == "tool_execution_end")
    assert end["isError"] is True
    text = end["result"]["content"][0]["text"]
    assert "not one JSON object" in text and "re-send the call" in text
    assert text in _tool_result_text(fake.requests[1], provider)
    call_message = next(
        e["message"] for e in tiller.events
        if e["type"] == "message_end" and e["message"]["role"] == "assistant"
    )
    assert call_message["content"][0]["argumentsError"]



def deep_arguments(depth: int) -> str:
    """Valid JSON: a command, and a value nested ``depth`` levels below the object."""
    return '{"command": "touch created.txt", "x": ' + "[" * depth + "]" * depth + "}"


@pytest.mark.parametrize("depth", [600, 5_000, 100_000])
@pytest.mark.parametrize("provider", ["openai", "anthropic", "responses"])
async def test_arguments_nested_too_deep_are_the_calls_error_result(
    provider: str, depth: int, fake_openai: FakeOpenAI, fake_anthropic: FakeAnthropic,
    fake_responses: FakeResponses, tmp_path: Path,
) -> None:
    """Issue 26, 12: 600 levels (valid JSON) made agent/prompt answer -32603 with no
    agent_end; 5,000 a RecursionError reported as "provider failed". Both are the call's error
    result (nothing runs), the run goes on, and the session log stays loadable."""
    fake: FakeOpenAI | FakeAnthropic | FakeResponses
    args: tuple[str, ...] = ("--provider", provider)
    if provider == "responses":
        fake = fake_responses
        fake.enqueue(response_reply(function_call("bash", deep_arguments(depth), "call_deep"),
                                    chunk_size=4096),
                     response_reply(responses_message("Flattened.")))
        args = ("--model", "gpt-5.6-terra")
    elif provider == "openai":
        fake = fake_openai
        fake.enqueue(tool_call_reply([("call_deep", "bash", deep_arguments(depth))],
                                     fragment_size=4096),
                     openai_text_reply("Flattened."))
    else:
        fake = fake_anthropic
        fake.enqueue(tool_use_reply([("call_deep", "bash", deep_arguments(depth))],
                                    fragment_size=4096),
                     anthropic_text_reply("Flattened."))
    env = clean_env(ANTHROPIC_API_KEY="sk-ant-test", OPENAI_API_KEY="sk-tiller-e2e")
    async with spawn_tiller(fake, tmp_path, *args, env=env) as tiller:  # type: ignore[arg-type]
        result = await tiller.request("agent/prompt", {"message": "make a file"})
        sid = (await tiller.request("agent/getState"))["sessionId"]
        await tiller.request("session/close", {"sessionId": sid})
        loaded = await tiller.request("session/load", {"sessionId": sid})

    assert result["stopReason"] == "stop"
    assert not (tmp_path / "created.txt").exists()
    types = [e["type"] for e in tiller.events]
    assert types.count("agent_end") == 1
    end = next(e for e in tiller.events if e["type"] == "tool_execution_end")
    assert end["isError"] is True
    text = end["result"]["content"][0]["text"]
    assert "nested more than 64 levels deep" in text and "re-send the call" in text
    assert text in _tool_result_text(fake.requests[1], provider)
    call = loaded["messages"][1]["content"][0]
    assert call["arguments"] == {} and "nested" in call["argumentsError"]


async def test_a_stream_event_too_deep_to_decode_ends_the_call_clearly(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """A ``data:`` payload nested 5,000 levels used to escape the stream reader as a
    RecursionError ("provider failed"); it is a malformed chunk, and the run ends with it."""
    deep = '{"choices": [], "x": ' + "[" * 5_000 + "]" * 5_000 + "}"
    fake_openai.enqueue(sse_reply(deep))
    async with spawn_tiller(fake_openai, tmp_path, "--max-retries", "0") as tiller:
        result = await tiller.request("agent/prompt", {"message": "hi"})
        after = await tiller.request("agent/getState")

    assert result["stopReason"] == "error"
    assert result["errorMessage"] == ("openai: the provider sent a malformed stream chunk: a "
                                      "payload nested too deeply to decode")
    assert [e["type"] for e in tiller.events].count("agent_end") == 1
    assert after["isRunning"] is False
