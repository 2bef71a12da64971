"""End to end: sessions survive restarts and crashes; several run at once; forks."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import anyio
import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import (
    UNSANDBOXED,
    process_gone,
    roles,
    spawn_tiller,
    wait_for_pid,
    wait_requests,
)
from tiller.client import RpcError

pytestmark = [pytest.mark.anyio, pytest.mark.process]


async def test_a_session_is_saved_and_loads_in_a_new_process(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(text_reply("First answer."), text_reply("Second answer."))
    async with spawn_tiller(fake_openai, tmp_path) as first:
        session_id = (await first.request("session/new"))["sessionId"]
        await first.request("agent/prompt", {"sessionId": session_id,
                                             "message": "Remember the number 42"})
        spent = (await first.request("agent/getState", {"sessionId": session_id}))["usage"]

    async with spawn_tiller(fake_openai, tmp_path) as second:
        listed = await second.request("session/list", {"cwd": str(tmp_path)})
        loaded = await second.request("session/load", {"sessionId": session_id})
        state = await second.request("agent/getState", {"sessionId": session_id})
        await second.request("agent/prompt", {"sessionId": session_id, "message": "Which?"})

    [summary] = listed["sessions"]
    assert summary["sessionId"] == session_id
    assert summary["title"] == "Remember the number 42"
    assert summary["messageCount"] == 2 and summary["live"] is False
    assert [m["role"] for m in loaded["messages"]] == ["user", "assistant"]
    assert len(loaded["entryIds"]) == 2
    assert state["usage"] == spent and spent["inputTokens"] > 0  # the session's total, kept
    request = fake_openai.requests[1]
    assert [m.get("content") for m in request["messages"][1:]] == [
        "Remember the number 42", "First answer.", "Which?"
    ]


async def test_kill_9_mid_tool_then_load_and_continue(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(
        tool_call_reply([("call_long", "bash", {"command": "sleep 60 & echo pid=$!; wait"})]),
        text_reply("I see the restart."),
    )
    async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as doomed:
        session_id = (await doomed.request("session/new"))["sessionId"]
        await doomed.send({"jsonrpc": "2.0", "id": 99, "method": "agent/prompt",
                           "params": {"sessionId": session_id, "message": "run it"}})
        sleeper = await wait_for_pid(doomed)
        group = os.getpgid(sleeper)
        queued = await doomed.request("agent/steer", {"sessionId": session_id,
                                                      "message": "after the restart, check"})
        assert queued == {"queued": 1}
        doomed.process.send_signal(signal.SIGKILL)
        assert await doomed.process.wait() == -signal.SIGKILL
    os.killpg(group, signal.SIGKILL)  # the tool's process group outlived the server

    async with spawn_tiller(fake_openai, tmp_path) as revived:
        loaded = await revived.request("session/load", {"sessionId": session_id})
        result = await revived.request("agent/continue", {"sessionId": session_id})

    assert result["stopReason"] == "stop"
    assert [m["role"] for m in loaded["messages"]] == ["user", "assistant", "toolResult"]
    interrupted = loaded["messages"][2]
    assert interrupted["isError"] is True and "restarted" in interrupted["content"][0]["text"]
    assert loaded["pendingSteering"] == 1
    request = fake_openai.requests[1]
    assert roles(request) == ["system", "user", "assistant", "tool", "user"]
    assert "side effects are unknown" in request["messages"][3]["content"]
    assert request["messages"][4]["content"] == "after the restart, check"
    assert process_gone(sleeper)


async def test_two_sessions_run_at_once(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    gate_a, gate_b = threading.Event(), threading.Event()
    fake_openai.enqueue(text_reply("from A", gate=gate_a), text_reply("from B", gate=gate_b))
    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        a = (await tiller.request("session/new"))["sessionId"]
        b = (await tiller.request("session/new"))["sessionId"]
        results: dict[str, dict[str, object]] = {}

        async def prompt(session_id: str) -> None:
            results[session_id] = await tiller.request(
                "agent/prompt", {"sessionId": session_id, "message": f"hi {session_id}"}
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(prompt, a)
            await wait_requests(fake_openai, 1)
            tg.start_soon(prompt, b)  # A is busy; B is not blocked by it
            await wait_requests(fake_openai, 2)
            state_a = await tiller.request("agent/getState", {"sessionId": a})
            gate_b.set()
            await tiller.wait_event("agent_settled", sessionId=b)
            assert a not in results  # B finished while A still waits
            gate_a.set()

    assert state_a["isRunning"] is True
    assert results[a]["stopReason"] == results[b]["stopReason"] == "stop"
    for session_id, text in ((a, "from A"), (b, "from B")):
        events = [e for e in tiller.events if e["sessionId"] == session_id]
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        end = [e for e in events if e["type"] == "message_end"][-1]
        assert end["message"]["content"][0]["text"] == text
    sessions_in_order = [e["sessionId"] for e in tiller.events]
    assert sessions_in_order.index(b) < len(sessions_in_order) - sessions_in_order[::-1].index(a)


async def test_fork_from_an_earlier_point(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.enqueue(text_reply("one"), text_reply("two"), text_reply("forked"))
    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        source = (await tiller.request("session/new"))["sessionId"]
        await tiller.request("agent/prompt", {"sessionId": source, "message": "first"})
        await tiller.request("agent/prompt", {"sessionId": source, "message": "second"})
        history = await tiller.request("session/load", {"sessionId": source})
        fork = await tiller.request("session/fork", {"sessionId": source,
                                                     "entryId": history["entryIds"][1]})
        await tiller.request("agent/prompt", {"sessionId": fork["sessionId"],
                                              "message": "instead"})
        with pytest.raises(RpcError) as bad:
            await tiller.request("session/fork", {"sessionId": source, "entryId": "nope"})
        source_after = await tiller.request("agent/getMessages", {"sessionId": source})

    assert fork["sessionId"] != source
    assert [m["content"] for m in fork["messages"]][0] == "first"
    assert len(fork["messages"]) == 2
    request = fake_openai.requests[2]
    assert [m.get("content") for m in request["messages"][1:]] == ["first", "one", "instead"]
    assert len(source_after["messages"]) == 4  # the source is untouched
    assert bad.value.code == -32015


async def test_close_delete_and_in_memory_sessions(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(text_reply("saved"), text_reply("not saved"))
    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        session_id = (await tiller.request("session/new"))["sessionId"]
        await tiller.request("agent/prompt", {"sessionId": session_id, "message": "x"})
        await tiller.request("session/close", {"sessionId": session_id})
        with pytest.raises(RpcError) as closed:
            await tiller.request("agent/getState", {"sessionId": session_id})
        await tiller.request("session/load", {"sessionId": session_id})
        await tiller.request("session/delete", {"sessionId": session_id})
        with pytest.raises(RpcError) as deleted:
            await tiller.request("session/load", {"sessionId": session_id})
        listed = await tiller.request("session/list")

    assert closed.value.code == -32013 and "session/load" in closed.value.message
    assert deleted.value.code == -32013
    assert listed["sessions"] == []

    memory_dir = tmp_path / "memory"
    memory_dir.mkdir()
    async with spawn_tiller(fake_openai, memory_dir, "--no-session") as tiller:
        await tiller.request("agent/prompt", {"message": "y"})
        assert (await tiller.request("session/list"))["sessions"] == []
    assert not (memory_dir / ".sessions").exists()


@pytest.mark.anyio
async def test_a_session_is_saved_and_listed_from_its_first_message_on(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """Clients create sessions eagerly (one per chat opened): one that never got a message
    leaves no file and is not listed, even after a model change; it stays live meanwhile."""
    fake_openai.enqueue(text_reply("hi"))
    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        unused = (await tiller.request("session/new"))["sessionId"]
        await tiller.request("agent/setModel", {"sessionId": unused, "provider": "openai",
                                                "model": "gpt-4o"})
        used = (await tiller.request("session/new"))["sessionId"]
        before = (await tiller.request("session/list"))["sessions"]
        await tiller.prompt("hello", session_id=used)
        after = (await tiller.request("session/list"))["sessions"]
        live = await tiller.request("session/load", {"sessionId": unused})

    assert before == []
    assert [s["sessionId"] for s in after] == [used] and after[0]["messageCount"] == 2
    assert after[0]["created"] > 0 and after[0]["updated"] >= after[0]["created"]
    assert live["messages"] == [] and live["model"] == "gpt-4o"
    saved = {path.stem for path in (tmp_path / ".sessions").glob("*/*.jsonl")}
    assert saved == {used}


async def test_a_loaded_session_shows_its_tool_calls_as_they_were_shown(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """``tool_execution_start`` shows each call as its tool describes itself; ``session/load``
    gives the same for each call of the transcript, from the live session and, after a
    restart, from the log. A call id a provider reuses in a later run gets a new one."""
    (tmp_path / "notes.txt").write_text("hi\n")
    fake_openai.enqueue(
        tool_call_reply([("call_0", "bash", {"command": "echo one"}),
                         ("call_1", "no_such_tool", {"path": "x"})]),
        text_reply("Ran it."),
        tool_call_reply([("call_0", "read", {"path": "notes.txt"})]),
        text_reply("Read it."),
    )
    notes = str(tmp_path / "notes.txt")
    expected = [
        {"toolCallId": "call_0", "title": "echo one", "kind": "execute"},
        {"toolCallId": "call_1", "title": "no_such_tool", "kind": "other"},
        {"toolCallId": "call_0", "title": "Read notes.txt", "kind": "read", "path": notes},
    ]
    async with spawn_tiller(fake_openai, tmp_path, "--permission-mode", "auto") as first:
        session_id = (await first.request("session/new"))["sessionId"]
        for prompt in ("run it", "read it"):
            await first.request("agent/prompt", {"sessionId": session_id, "message": prompt})
        live = await first.request("session/load", {"sessionId": session_id})
    starts = [{key: event[key] for key in ("toolCallId", "title", "kind", "path") if key in event}
              for event in first.events if event["type"] == "tool_execution_start"]
    renamed = starts[2]["toolCallId"]
    assert renamed.startswith("call_") and renamed not in ("call_0", "call_1")
    expected[2]["toolCallId"] = renamed
    assert starts == expected
    assert live["toolCalls"] == expected

    async with spawn_tiller(fake_openai, tmp_path) as second:
        saved = await second.request("session/load", {"sessionId": session_id})
        again = await second.request("session/load", {"sessionId": session_id})  # now live
    assert saved["toolCalls"] == expected and again["toolCalls"] == expected
