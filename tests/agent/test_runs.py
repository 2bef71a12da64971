"""End to end: the real ``tiller`` over stdio, against the loopback OpenAI server.

Each test shows one rule of docs/loop.md through the wire: what the client sees as events and
responses, and what the model is sent.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import anyio
import pytest

from support.fake_openai import FakeOpenAI, error_reply, text_reply, tool_call_reply
from support.helpers import (
    UNSANDBOXED,
    event_types,
    process_gone,
    roles,
    spawn_tiller,
    wait_for_pid,
    wait_requests,
)
from tiller.client import RpcError

pytestmark = [pytest.mark.anyio, pytest.mark.process]


async def test_tool_round_event_order(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.enqueue(
        tool_call_reply([("call_1", "bash", {"command": "echo hello-from-bash"})]),
        text_reply("All done."),
    )
    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        result = await tiller.request("agent/prompt", {"message": "run it"})
        events = tiller.events

    assert result["stopReason"] == "stop"
    assert result["usage"]["inputTokens"] == 20 and result["usage"]["outputTokens"] == 10
    types = [t for t in event_types(events) if not t.endswith("_update")]
    assert types == [
        "agent_start",
        "turn_start",
        "message_start", "message_end",  # the user prompt
        "message_start", "message_end",  # the assistant's tool call
        "tool_execution_start",
        "checkpoint",  # bash may change files: the workspace is snapshotted after it
        "tool_execution_end",
        "message_start", "message_end",  # the tool result
        "turn_end",
        "turn_start",
        "message_start", "message_end",  # the final answer
        "turn_end",
        "agent_end",
        "agent_settled",
    ]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert len({e["sessionId"] for e in events}) == 1
    end = next(e for e in events if e["type"] == "tool_execution_end")
    assert end["isError"] is False and "hello-from-bash" in end["result"]["content"][0]["text"]

    second = fake_openai.requests[1]
    assert roles(second) == ["system", "user", "assistant", "tool"]
    assert second["messages"][2]["tool_calls"][0]["id"] == "call_1"
    assert second["messages"][3]["tool_call_id"] == "call_1"
    assert "hello-from-bash" in second["messages"][3]["content"]


async def test_message_update_carries_only_deltas(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    text = "".join(f"word{i} " for i in range(200))
    fake_openai.enqueue(text_reply(text, chunk_size=7))
    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        await tiller.request("initialize", {"deltaWindowMs": 0})  # one update per chunk
        await tiller.request("agent/prompt", {"message": "talk"})
        updates = [e for e in tiller.events if e["type"] == "message_update"]

    assert "".join(u["delta"] for u in updates) == text
    assert all(len(u["delta"]) <= 7 and "message" not in u for u in updates)
    end = [e for e in tiller.events if e["type"] == "message_end"][-1]
    assert end["message"]["content"] == [{"type": "text", "text": text}]


async def test_steering_arrives_after_the_batch(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "release")
    fake_openai.enqueue(
        tool_call_reply([
            ("call_wait", "bash", {"command": "cat release"}),
            ("call_echo", "bash", {"command": "echo quick"}),
        ]),
        text_reply("Changed direction."),
    )
    async with spawn_tiller(fake_openai, tmp_path) as tiller, anyio.create_task_group() as tg:
        results = []

        async def prompt() -> None:
            results.append(await tiller.request("agent/prompt", {"message": "work"}))

        tg.start_soon(prompt)
        await tiller.wait_event("tool_execution_end", toolCallId="call_echo")
        queued = await tiller.request("agent/steer", {"message": "use tabs, not spaces"})
        assert queued == {"queued": 1}
        await anyio.to_thread.run_sync((tmp_path / "release").write_text, "released\n")
        await tiller.wait_event("agent_settled")

    assert results[0]["stopReason"] == "stop"
    assert len(fake_openai.requests) == 2
    second = fake_openai.requests[1]
    assert roles(second) == ["system", "user", "assistant", "tool", "tool", "user"]
    assert second["messages"][3]["content"].strip() == "released"
    assert second["messages"][5]["content"] == "use tabs, not spaces"
    end = next(e for e in tiller.events
               if e["type"] == "tool_execution_end" and e["toolCallId"] == "call_wait")
    assert end["isError"] is False


async def test_follow_up_extends_the_same_run(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    gate = threading.Event()
    fake_openai.enqueue(text_reply("First answer.", gate=gate), text_reply("Second answer."))
    async with spawn_tiller(fake_openai, tmp_path) as tiller, anyio.create_task_group() as tg:
        results = []

        async def prompt() -> None:
            results.append(await tiller.request("agent/prompt", {"message": "one"}))

        tg.start_soon(prompt)
        await tiller.wait_event("message_start", start=0)
        await wait_requests(fake_openai, 1)
        assert await tiller.request("agent/followUp", {"message": "and two"}) == {"queued": 1}
        gate.set()
        await tiller.wait_event("agent_settled")

    types = event_types(tiller.events)
    assert types.count("agent_start") == 1 and types.count("agent_end") == 1
    assert results[0]["stopReason"] == "stop"
    second = fake_openai.requests[1]
    assert roles(second) == ["system", "user", "assistant", "user"]
    assert second["messages"][2]["content"] == "First answer."
    assert second["messages"][3]["content"] == "and two"


async def test_length_poisons_the_whole_batch(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.enqueue(
        tool_call_reply(
            [("call_touch", "bash", {"command": "touch created.txt"})], finish_reason="length"
        ),
        text_reply("I will retry."),
    )
    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        result = await tiller.request("agent/prompt", {"message": "make a file"})

    assert result["stopReason"] == "stop"
    assert not (tmp_path / "created.txt").exists()
    end = next(e for e in tiller.events if e["type"] == "tool_execution_end")
    assert end["isError"] is True
    tool_message = fake_openai.requests[1]["messages"][3]
    assert tool_message["tool_call_id"] == "call_touch"
    assert "output token limit" in tool_message["content"]
    assert "Re-issue" in tool_message["content"]


async def test_parallel_tool_calls_overlap(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    def waits_for(mine: str, other: str) -> str:
        # Each call announces itself, then waits (bounded) for the other: only overlap succeeds.
        return (
            f"touch {mine}; for i in $(seq 1000); do [ -f {other} ] && break; sleep 0.01; done; "
            f"[ -f {other} ] && echo overlapped-{mine}"
        )

    fake_openai.enqueue(
        tool_call_reply([
            ("call_a", "bash", {"command": waits_for("a", "b")}),
            ("call_b", "bash", {"command": waits_for("b", "a")}),
        ]),
        text_reply("Both ran."),
    )
    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        await tiller.request("agent/prompt", {"message": "go"})

    tool_messages = fake_openai.requests[1]["messages"][3:5]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_a", "call_b"]  # source order
    assert "overlapped-a" in tool_messages[0]["content"]
    assert "overlapped-b" in tool_messages[1]["content"]


async def test_prompt_while_busy_is_rejected(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    gate = threading.Event()
    fake_openai.enqueue(text_reply("Slow answer.", gate=gate))
    async with spawn_tiller(fake_openai, tmp_path) as tiller, anyio.create_task_group() as tg:
        results = []

        async def prompt() -> None:
            results.append(await tiller.request("agent/prompt", {"message": "first"}))

        tg.start_soon(prompt)
        await wait_requests(fake_openai, 1)
        with pytest.raises(RpcError) as busy:
            await tiller.request("agent/prompt", {"message": "second"})
        assert busy.value.code == -32010
        assert "agent/steer" in busy.value.message and "agent/followUp" in busy.value.message
        gate.set()
        await tiller.wait_event("agent_settled")

    assert results[0]["stopReason"] == "stop"
    assert len(fake_openai.requests) == 1


async def test_continue_after_an_error(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.enqueue(error_reply(400, "upstream refused"), text_reply("Recovered."))
    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        failed = await tiller.request("agent/prompt", {"message": "try"})
        assert failed["stopReason"] == "error"
        assert "400" in failed["errorMessage"] and "upstream refused" in failed["errorMessage"]
        resumed = await tiller.request("agent/continue")
        messages = (await tiller.request("agent/getMessages"))["messages"]

    assert resumed["stopReason"] == "stop"
    second = fake_openai.requests[1]
    assert roles(second) == ["system", "user"]  # the errored reply is not sent again
    assert [m["role"] for m in messages] == ["user", "assistant", "assistant"]
    assert messages[1]["stopReason"] == "error"  # but it stays in the transcript


async def test_continue_delivers_one_queued_steering_message_per_turn(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(text_reply("Idle now."), text_reply("Did one."), text_reply("Did two."))
    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        await tiller.request("agent/prompt", {"message": "start"})
        assert await tiller.request("agent/steer", {"message": "one"}) == {"queued": 1}
        assert await tiller.request("agent/steer", {"message": "two"}) == {"queued": 2}
        resumed = await tiller.request("agent/continue")

    assert resumed["stopReason"] == "stop"
    first, second = fake_openai.requests[1:]  # one-at-a-time: one steering message per turn
    assert roles(first) == ["system", "user", "assistant", "user"]
    assert first["messages"][-1]["content"] == "one"
    assert roles(second) == ["system", "user", "assistant", "user", "assistant", "user"]
    assert second["messages"][-1]["content"] == "two"


async def test_abort_kills_a_running_command(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.enqueue(
        tool_call_reply([("call_sleep", "bash", {"command": "sleep 60 & echo pid=$!; wait"})])
    )
    async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as tiller, \
            anyio.create_task_group() as tg:
        results = []

        async def prompt() -> None:
            results.append(await tiller.request("agent/prompt", {"message": "sleep"}))

        tg.start_soon(prompt)
        pid = await wait_for_pid(tiller)
        assert not process_gone(pid)
        assert await tiller.request("agent/abort") == {}
        await tiller.wait_event("agent_settled")

    assert results[0]["stopReason"] == "aborted"
    assert process_gone(pid)
    end = next(e for e in tiller.events if e["type"] == "tool_execution_end")
    assert end["isError"] is True and end["toolCallId"] == "call_sleep"


async def test_cancel_request_aborts_the_prompt(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    gate = threading.Event()
    fake_openai.enqueue(text_reply("never seen", gate=gate))
    async with spawn_tiller(fake_openai, tmp_path) as tiller, anyio.create_task_group() as tg:
        results = []

        async def prompt() -> None:
            results.append(await tiller.request("agent/prompt", {"message": "x"}, msg_id=77))

        tg.start_soon(prompt)
        await wait_requests(fake_openai, 1)
        await tiller.notify("$/cancelRequest", {"id": 77})
        await tiller.wait_event("agent_settled")
        gate.set()

    assert results[0]["stopReason"] == "aborted"
    state_end = next(e for e in tiller.events if e["type"] == "agent_end")
    assert state_end["stopReason"] == "aborted"


@pytest.mark.parametrize("framing", ["lsp", "ndjson"])
async def test_both_framings(fake_openai: FakeOpenAI, tmp_path: Path, framing: str) -> None:
    fake_openai.enqueue(text_reply("Framed reply ünïcödé."))
    async with spawn_tiller(fake_openai, tmp_path, framing=framing) as tiller:
        init = await tiller.request("initialize", {"clientInfo": {"name": "test"}})
        result = await tiller.request("agent/prompt", {"message": "hi ✓"})

    assert init["serverInfo"]["name"] == "tiller"
    assert result["stopReason"] == "stop"
    assert fake_openai.requests[0]["messages"][1]["content"] == "hi ✓"
    end = [e for e in tiller.events if e["type"] == "message_end"][-1]
    assert end["message"]["content"][0]["text"] == "Framed reply ünïcödé."


@pytest.mark.parametrize("ending", ["eof", "sigterm"])
async def test_eof_or_sigterm_exits_cleanly_and_kills_children(
    fake_openai: FakeOpenAI, tmp_path: Path, ending: str
) -> None:
    fake_openai.enqueue(
        tool_call_reply([("call_sleep", "bash", {"command": "sleep 60 & echo pid=$!; wait"})])
    )
    async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as tiller:
        await tiller.send({"jsonrpc": "2.0", "id": 1, "method": "agent/prompt",
                           "params": {"message": "sleep"}})
        pid = await wait_for_pid(tiller)
        if ending == "eof":
            exit_code = await tiller.close()
        else:
            tiller.process.terminate()
            exit_code = await tiller.process.wait()

    assert exit_code == 0
    assert process_gone(pid)
