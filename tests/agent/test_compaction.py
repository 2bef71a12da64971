"""End to end: compaction when the context nears the window, on demand, and on overflow;
per-run token limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.fake_openai import FakeOpenAI, error_reply, text_reply, tool_call_reply
from support.helpers import spawn_tiller

pytestmark = [pytest.mark.anyio, pytest.mark.process]

LONG_ONE = "alpha " * 1500  # ~9,000 characters: ~2,250 tokens
LONG_TWO = "bravo " * 1500


def small_window(tmp_path: Path, **extra: str) -> str:
    path = tmp_path / "config.toml"
    lines = [
        'model = "tiny"',
        *(f"{key} = {value}" for key, value in extra.items()),
        "[retry]\nbase_delay = 0.01",
        "[compaction]\nreserve_tokens = 500\nkeep_recent_tokens = 300",
        '[[models]]\nprovider = "openai"\nid = "tiny"\ncontext_window = 3000',
    ]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


async def test_context_near_the_window_is_summarized(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(
        text_reply("first reply"), text_reply("SUMMARY: alpha was discussed"),
        text_reply("second reply"),
    )
    async with spawn_tiller(fake_openai, tmp_path, "--config", small_window(tmp_path)) as t:
        session_id = (await t.request("session/new"))["sessionId"]
        await t.request("agent/prompt", {"sessionId": session_id, "message": LONG_ONE})
        result = await t.request("agent/prompt", {"sessionId": session_id, "message": LONG_TWO})

    assert result["stopReason"] == "stop"
    summary_request, after = fake_openai.requests[1], fake_openai.requests[2]
    assert "alpha alpha" in summary_request["messages"][1]["content"]
    assert "handover" in summary_request["messages"][0]["content"]
    contents = [m["content"] for m in after["messages"][1:]]
    assert len(contents) == 2
    assert "SUMMARY: alpha was discussed" in contents[0] and "alpha alpha" not in contents[0]
    assert contents[1] == LONG_TWO
    start = next(e for e in t.events if e["type"] == "compaction_start")
    end = next(e for e in t.events if e["type"] == "compaction_end")
    assert start["reason"] == "threshold" and end["removedCount"] == 2
    assert end["tokensAfter"] < end["tokensBefore"]

    async with spawn_tiller(fake_openai, tmp_path, "--config", small_window(tmp_path)) as t2:
        loaded = await t2.request("session/load", {"sessionId": session_id})
    assert [m["role"] for m in loaded["messages"]] == ["user", "user", "assistant"]
    assert "SUMMARY: alpha" in loaded["messages"][0]["content"]


async def test_compact_on_demand_with_instructions(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(text_reply("one"), text_reply("two"), text_reply("the summary"))
    async with spawn_tiller(fake_openai, tmp_path, "--config", small_window(tmp_path)) as t:
        await t.request("agent/prompt", {"message": "a long one: " + "words " * 100})
        await t.request("agent/prompt", {"message": "short two"})
        result = await t.request("agent/compact", {"instructions": "keep the numbers"})
        messages = (await t.request("agent/getMessages"))["messages"]

    assert result["compacted"] is True and result["summary"] == "the summary"
    assert "keep the numbers" in fake_openai.requests[2]["messages"][1]["content"]
    assert messages[0]["content"].endswith("the summary")
    assert result["messageCount"] == len(messages)
    assert result["tokensAfter"] < result["tokensBefore"]


async def test_compact_never_makes_the_context_bigger(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """A summary no shorter than what it would replace (a short conversation, a wordy
    summarizer) is not used: the context stays as it was, and the reason is given."""
    wordy = "A long summary of a short conversation. " * 20
    fake_openai.enqueue(text_reply("one"), text_reply("two"), text_reply(wordy))
    async with spawn_tiller(fake_openai, tmp_path, "--config", small_window(tmp_path)) as t:
        await t.request("agent/prompt", {"message": "short one"})
        await t.request("agent/prompt", {"message": "short two"})
        before = (await t.request("agent/getMessages"))["messages"]
        result = await t.request("agent/compact")
        after = (await t.request("agent/getMessages"))["messages"]

    assert result["compacted"] is False and "summary" not in result
    assert result["tokensAfter"] == result["tokensBefore"]
    assert after == before
    end = next(e for e in t.events if e["type"] == "compaction_end")
    assert end["errorMessage"].startswith("nothing to compact: the summary (")
    assert "would be no shorter than the" in end["errorMessage"]


async def test_context_too_long_error_compacts_and_retries_once(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    overflow = "This model's maximum context length is 3000 tokens. Please reduce the length."
    fake_openai.enqueue(
        text_reply("one"),
        error_reply(400, overflow, code="context_length_exceeded"),
        text_reply("compact summary"),
        text_reply("fits now"),
    )
    config = small_window(tmp_path)
    async with spawn_tiller(fake_openai, tmp_path, "--config", config, "--model", "unknown") as t:
        await t.request("agent/prompt", {"message": "first question: " + "words " * 100})
        result = await t.request("agent/prompt", {"message": "second question"})

    assert result["stopReason"] == "stop"
    end = next(e for e in t.events if e["type"] == "compaction_end")
    assert end["reason"] == "overflow"
    assert "compact summary" in fake_openai.requests[3]["messages"][1]["content"]


async def test_per_run_token_limit(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.enqueue(
        tool_call_reply([("c1", "bash", {"command": "echo 1"})], usage=(900, 100)),
        tool_call_reply([("c2", "bash", {"command": "echo 2"})], usage=(900, 100)),
    )
    async with spawn_tiller(fake_openai, tmp_path, "--max-run-tokens", "1500") as t:
        result = await t.request("agent/prompt", {"message": "loop"})

    assert result["stopReason"] == "maxTokens"
    assert "2,000 tokens" in result["errorMessage"]
    assert len(fake_openai.requests) == 2
