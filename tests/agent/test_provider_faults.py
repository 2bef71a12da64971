"""End to end: provider faults are retried when transient, reported when not, never a hang.

The real ``tiller`` runs against the loopback OpenAI server with a config file that makes
backoff fast (``base_delay`` 10 ms), so a retry costs no real waiting.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import anyio
import pytest

from support.fake_openai import (
    FakeOpenAI,
    cut_reply,
    empty_reply,
    error_reply,
    stall_reply,
    text_reply,
)
from support.helpers import clean_env, event_types, spawn_tiller
from support.paths import SUPPORT

pytestmark = [pytest.mark.anyio, pytest.mark.process]


def fast_retry_config(tmp_path: Path, max_retries: int = 3) -> str:
    path = tmp_path / "config.toml"
    path.write_text(
        f"[retry]\nmax_retries = {max_retries}\nbase_delay = 0.01\nmax_delay = 30\n"
        "\n[[models]]\nprovider = \"openai\"\nid = \"priced-model\"\n"
        "cost = { input = 2.0, output = 10.0 }\n"
    )
    return str(path)


async def test_429_then_success_honours_retry_after(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(
        error_reply(429, "Rate limit reached", headers={"retry-after-ms": "40"}),
        text_reply("Made it."),
    )
    async with spawn_tiller(fake_openai, tmp_path, "--config", fast_retry_config(tmp_path)) as t:
        result = await t.request("agent/prompt", {"message": "hi"})
        messages = (await t.request("agent/getMessages"))["messages"]

    assert result["stopReason"] == "stop"
    scheduled = [e for e in t.events if e["type"] == "retry_scheduled"]
    assert len(scheduled) == 1
    assert scheduled[0]["attempt"] == 1 and scheduled[0]["maxAttempts"] == 3
    assert scheduled[0]["delayMs"] == 40
    assert "429" in scheduled[0]["errorMessage"]
    assert [e for e in t.events if e["type"] == "retry_end"][0]["success"] is True
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert len(fake_openai.requests) == 2


async def test_500_three_times_then_give_up(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.enqueue(*[error_reply(500, f"boom {n}") for n in range(3)])
    config = fast_retry_config(tmp_path, max_retries=2)
    async with spawn_tiller(fake_openai, tmp_path, "--config", config) as t:
        result = await t.request("agent/prompt", {"message": "hi"})

    assert result["stopReason"] == "error"
    assert "boom 2" in result["errorMessage"]
    types = event_types(t.events)
    assert types.count("retry_scheduled") == 2
    retry_ends = [
        {key: value for key, value in e.items() if key not in ("sessionId", "seq")}
        for e in t.events if e["type"] == "retry_end"
    ]
    assert retry_ends == [{"type": "retry_end", "success": False, "attempt": 2}]
    assert len(fake_openai.requests) == 3


async def test_cut_stream_leaves_no_half_message(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.enqueue(cut_reply("Half of this is lost", after_chunks=3), text_reply("Whole."))
    async with spawn_tiller(fake_openai, tmp_path, "--config", fast_retry_config(tmp_path)) as t:
        result = await t.request("agent/prompt", {"message": "hi"})
        messages = (await t.request("agent/getMessages"))["messages"]

    assert result["stopReason"] == "stop"
    types = event_types(t.events)
    first_retry = types.index("retry_scheduled")
    assert "message_update" in types[:first_retry]  # the cut attempt did stream something
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[1]["content"] == [{"type": "text", "text": "Whole."}]
    second = fake_openai.requests[1]
    assert [m["role"] for m in second["messages"]] == ["system", "user"]


async def test_stall_becomes_a_retry(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    released = threading.Event()
    fake_openai.enqueue(stall_reply("Never fin", until=released), text_reply("Fresh."))
    args = ("--config", fast_retry_config(tmp_path), "--idle-timeout", "0.5")
    async with spawn_tiller(fake_openai, tmp_path, *args) as t:
        result = await t.request("agent/prompt", {"message": "hi"})
    released.set()

    assert result["stopReason"] == "stop"
    scheduled = next(e for e in t.events if e["type"] == "retry_scheduled")
    assert "stalled" in scheduled["errorMessage"]


async def test_empty_200_is_an_error_not_an_empty_reply(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(empty_reply(), empty_reply())
    config = fast_retry_config(tmp_path, max_retries=1)
    async with spawn_tiller(fake_openai, tmp_path, "--config", config) as t:
        result = await t.request("agent/prompt", {"message": "hi"})

    assert result["stopReason"] == "error"
    assert "empty response" in result["errorMessage"]


async def test_401_is_not_retried(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.enqueue(error_reply(401, "Incorrect API key provided"))
    async with spawn_tiller(fake_openai, tmp_path, "--config", fast_retry_config(tmp_path)) as t:
        result = await t.request("agent/prompt", {"message": "hi"})

    assert result["stopReason"] == "error"
    assert "401" in result["errorMessage"] and "OPENAI_API_KEY" in result["errorMessage"]
    assert "retry_scheduled" not in event_types(t.events)
    assert len(fake_openai.requests) == 1


async def test_abort_cancels_a_pending_retry(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.enqueue(error_reply(503, "overloaded", headers={"retry-after": "25"}))
    async with spawn_tiller(fake_openai, tmp_path, "--config", fast_retry_config(tmp_path)) as t:
        async with anyio.create_task_group() as tg:
            results = []

            async def prompt() -> None:
                results.append(await t.request("agent/prompt", {"message": "hi"}))

            tg.start_soon(prompt)
            scheduled = await t.wait_event("retry_scheduled")
            assert scheduled["delayMs"] == 25000
            await t.request("agent/abort")
        messages = (await t.request("agent/getMessages"))["messages"]

    assert results[0]["stopReason"] == "aborted"
    assert len(fake_openai.requests) == 1
    assert [e for e in t.events if e["type"] == "retry_end"][0]["success"] is False
    assert messages[-1]["stopReason"] == "aborted"


async def test_usage_and_cost_per_message_run_and_session(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(
        text_reply("one", usage=(1000, 100)), text_reply("two", usage=(2000, 200))
    )
    args = ("--config", fast_retry_config(tmp_path), "--model", "priced-model")
    async with spawn_tiller(fake_openai, tmp_path, *args) as t:
        first = await t.request("agent/prompt", {"message": "a"})
        await t.request("agent/prompt", {"message": "b"})
        state = await t.request("agent/getState")

    # 1000 input at $2/M + 100 output at $10/M = $0.003
    assert first["usage"]["cost"] == pytest.approx(0.003)
    message_end = next(e for e in t.events if e["type"] == "message_end"
                       and e["message"]["role"] == "assistant")
    assert message_end["message"]["usage"]["cost"] == pytest.approx(0.003)
    assert state["usage"]["inputTokens"] == 3000
    assert state["usage"]["cost"] == pytest.approx(0.009)
    assert fake_openai.requests[0]["model"] == "priced-model"


async def test_the_stall_timer_starts_at_the_request_not_at_the_http_librarys_import(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """Issue 26, 15: the first call's import of the provider's HTTP library (``import openai`` then,
    ``httpx2`` now; 1.5 s more here, as on a loaded machine) counted as the stream's silence, so
    ``--idle-timeout 0.5`` abandoned every first call as stalled. The timer starts once the provider
    is ready to send the request."""
    fake_openai.enqueue(text_reply("First try."))
    env = clean_env(PYTHONPATH=str(SUPPORT / "slow_import"),
                    TILLER_TEST_SLOW_IMPORT="httpx2=1.5")
    args = ("--config", fast_retry_config(tmp_path, max_retries=0), "--idle-timeout", "0.5")
    async with spawn_tiller(fake_openai, tmp_path, *args, env=env) as t:
        started = time.monotonic()
        result = await t.request("agent/prompt", {"message": "hi"})
        took = time.monotonic() - started

    assert result["stopReason"] == "stop", result.get("errorMessage")
    assert "retry_scheduled" not in event_types(t.events)
    assert took >= 1.5  # the slow import did happen during the call


def peak_rss_mb(pid: int) -> float:
    """The most resident memory process ``pid`` has had (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


async def test_a_message_past_the_size_cap_ends_the_call_and_memory_stays_bounded(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """Issue 26, 19: a 100 MB reply was held whole several times over (~590 MB peak). One
    message is capped at 8,000,000 characters; past it the call ends with an error saying so
    (not retried: the model would say it again), the session and the server go on."""
    fake_openai.enqueue(text_reply("x" * 100_000_000, chunk_size=65_536), text_reply("short"))
    async with spawn_tiller(fake_openai, tmp_path, "--config", fast_retry_config(tmp_path)) as t:
        result = await t.request("agent/prompt", {"message": "say a lot"}, timeout=120)
        peak = peak_rss_mb(t.process.pid)
        after = await t.request("agent/prompt", {"message": "say less"})

    assert result["stopReason"] == "error"
    assert result["errorMessage"] == (
        "openai: the model's message passed 8,000,000 characters (text, thinking and tool-call "
        "arguments together); the call was ended there")
    assert "retry_scheduled" not in event_types(t.events)
    assert peak < 300, peak  # MB, the whole server; 580 when the 100 MB went through
    assert after["stopReason"] == "stop"
