"""End to end: background processes (``bash`` with ``background: true``, the ``process_*``
tools, the ``process/*`` methods, their events and notices), through the real server with real
processes, the model scripted by the loopback OpenAI fake.

"Gone" is awaited with a bounded poll of ``/proc`` (another process's end shows nowhere else);
everything else waits for an event or a request the fake received.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import (
    UNSANDBOXED,
    killed_afterwards,
    process_gone,
    spawn_tiller,
    still_running,
    wait_requests,
)
from tiller.client import RpcError, TillerClient
from tiller.tools.background import OUTPUT_LIMIT

pytestmark = [pytest.mark.anyio, pytest.mark.process]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def bg(call_id: str, command: str) -> Any:
    """A scripted reply that starts ``command`` in the background."""
    return tool_call_reply([(call_id, "bash", {"command": command, "background": True})])


def call(call_id: str, tool: str, **args: Any) -> Any:
    return tool_call_reply([(call_id, tool, args)])


def result_of(tiller: TillerClient, call_id: str) -> dict[str, Any]:
    """The ``tool_execution_end`` of ``call_id``."""
    return next(e for e in tiller.events
                if e["type"] == "tool_execution_end" and e["toolCallId"] == call_id)


def text_of(end: dict[str, Any]) -> str:
    return str(end["result"]["content"][0]["text"])


def tool_message(request: dict[str, Any], call_id: str) -> str:
    """What the model was sent as the result of ``call_id``."""
    return str(next(m["content"] for m in request["messages"]
                    if m["role"] == "tool" and m["tool_call_id"] == call_id))


async def wait_output(tiller: TillerClient, pattern: str, timeout: float = 30) -> None:
    """Until the process output the client received, joined, matches ``pattern``."""

    def seen(_message: dict[str, Any]) -> bool:
        data = "".join(e["data"] for e in tiller.events if e["type"] == "process_output")
        return re.search(pattern, data) is not None

    await tiller.wait_for(seen, timeout=timeout)


# ------------------------------------------------------------------------------ the dev server


async def test_a_server_started_in_the_background_answers_a_later_command(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    (tmp_path / "health").write_text("healthy\n")
    port = free_port()
    server = f"{sys.executable} -m http.server {port} --bind 127.0.0.1"
    fake_openai.enqueue(
        bg("call_srv", server),
        call("call_ready", "process_output", id=1, waitFor="Serving HTTP"),
        call("call_curl", "bash", command=f"curl -s http://127.0.0.1:{port}/health"),
        call("call_log", "process_output", id=1, waitFor="GET /health"),
        text_reply("It answers."),
    )
    with killed_afterwards() as pids:
        async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as tiller:
            result = await tiller.request("agent/prompt", {"message": "start it, check /health"})
            state = await tiller.request("agent/getState")
            pids.append(state["processes"][0]["pid"])
            assert await tiller.close() == 0
        assert await still_running(pids) == []

    assert result["stopReason"] == "stop"
    started = result_of(tiller, "call_srv")
    assert started["isError"] is False
    assert text_of(started).startswith("Started background process 1 (pid ")
    assert started["result"]["details"]["process"]["state"] == "running"
    assert text_of(result_of(tiller, "call_curl")) == "healthy\n"
    log = text_of(result_of(tiller, "call_log"))
    assert '"GET /health HTTP/1.1" 200' in log and "[Process 1 is running" in log
    [process] = state["processes"]
    assert (process["id"], process["command"], process["state"], process["toolCallId"]) == (
        1, server, "running", "call_srv")
    types = [e["type"] for e in tiller.events]
    assert types.index("process_start") < types.index("tool_execution_end")
    assert "GET /health" in "".join(e["data"] for e in tiller.events
                                    if e["type"] == "process_output")
    # ended at EOF with the server: the last event says so
    assert tiller.events[-1]["type"] == "process_exit"
    assert tiller.events[-1]["process"]["state"] == "ended"
    # what the model read: the start's first output, then the request log
    assert "Serving HTTP" in tool_message(fake_openai.requests[1], "call_srv")


async def test_a_background_command_that_fails_at_once_is_reported_by_the_call(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(bg("call_bad", "echo 'no such script: dev' >&2; exit 3"),
                        text_reply("It failed."), text_reply("ok"))
    async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as tiller:
        await tiller.request("agent/prompt", {"message": "start it"})
        await tiller.request("agent/prompt", {"message": "anything else?"})

    end = result_of(tiller, "call_bad")
    assert end["isError"] is True
    assert text_of(end) == ("Background process 1 exited with code 3 at once; its output:\n"
                            "no such script: dev\n")
    assert end["result"]["details"]["process"]["exitCode"] == 3
    # the model saw the exit in the result: no notice follows, in this run or the next
    assert notices(fake_openai.requests[1]) == notices(fake_openai.requests[2]) == []


# ------------------------------------------------------------------------------ exit notices


def notices(request: dict[str, Any]) -> list[str]:
    """The exit notices among a request's user messages."""
    return [m["content"] for m in request["messages"] if m["role"] == "user"
            and isinstance(m["content"], str) and m["content"].startswith("[Background process")]


async def test_an_exit_notice_reaches_the_model_at_the_next_poll_point(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    held = threading.Event()
    fake_openai.enqueue(
        bg("call_job", "echo building; read line < go; echo 'error: out of memory'; exit 4"),
        text_reply("Waiting for it.", gate=held),
        text_reply("It failed: out of memory."),
    )
    async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as tiller:
        async with anyio.create_task_group() as tasks:
            async def run() -> None:
                result = await tiller.request("agent/prompt", {"message": "build it"})
                assert result["stopReason"] == "stop"

            tasks.start_soon(run)
            await tiller.wait_event("tool_execution_end", toolCallId="call_job", timeout=60)
            await wait_requests(fake_openai, 2)  # the model is answering; the job still runs
            await anyio.to_thread.run_sync(fifo.write_text, "go\n")
            ended = await tiller.wait_event("process_exit")
            held.set()
        messages = (await tiller.request("agent/getMessages"))["messages"]

    assert ended["process"]["state"] == "exited" and ended["process"]["exitCode"] == 4
    assert notices(fake_openai.requests[1]) == []
    # delivered after the turn that was running when it exited, before the next model call
    assert notices(fake_openai.requests[2]) == [
        "[Background process 1 `echo building; read line < go; echo 'error: out of memory'; "
        "exit 4` exited with code 4; last lines:\nbuilding\nerror: out of memory]"]
    assert [m["role"] for m in messages] == ["user", "assistant", "toolResult", "assistant",
                                             "user", "assistant"]


async def test_an_exit_while_idle_waits_for_the_next_prompt(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    fake_openai.enqueue(bg("call_job", "read line < go; echo done"), text_reply("Started."),
                        text_reply("Noted."))
    async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as tiller:
        await tiller.request("agent/prompt", {"message": "start the job"})
        await anyio.to_thread.run_sync(fifo.write_text, "go\n")
        await tiller.wait_event("process_exit")
        state = await tiller.request("agent/getState")
        with pytest.raises(RpcError) as refused:  # nothing to continue from: a notice is no input
            await tiller.request("agent/continue")
        await tiller.request("agent/prompt", {"message": "what next?"})

    assert state["processes"][0]["state"] == "exited" and state["pendingSteering"] == 0
    assert refused.value.code == -32012
    last = fake_openai.requests[2]["messages"]
    assert [m["content"] for m in last[-2:]] == [
        "what next?",
        "[Background process 1 `read line < go; echo done` exited with code 0; last lines:\n"
        "done]"]


async def test_a_process_the_user_kills_is_told_to_the_model(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(bg("call_watch", "echo watching; exec sleep 1000"),
                        text_reply("Watching."), text_reply("Understood."))
    with killed_afterwards() as pids:
        async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as tiller:
            await tiller.request("agent/prompt", {"message": "watch"})
            [process] = (await tiller.request("process/list"))["processes"]
            pids.append(process["pid"])
            shown = await tiller.request("process/output", {"processId": 1})
            killed = await tiller.request("process/kill", {"processId": 1})
            again = await tiller.request("process/kill", {"processId": 1})
            with pytest.raises(RpcError) as unknown:
                await tiller.request("process/output", {"processId": 7})
            await tiller.request("agent/prompt", {"message": "status?"})

    assert shown["output"] == "watching\n" and shown["process"]["state"] == "running"
    assert killed["process"]["state"] == "killed"
    assert killed["process"]["signal"] == "SIGTERM"
    assert again == killed  # already ended: unchanged
    assert unknown.value.code == -32022 and "has: 1" in unknown.value.message
    assert process_gone(pids[0])
    assert notices(fake_openai.requests[2]) == [
        "[Background process 1 `echo watching; exec sleep 1000` was killed by the user; last "
        "lines:\nwatching]"]


# ------------------------------------------------------------------------------ killing


@pytest.mark.parametrize("shell", ["plain", "ignores SIGTERM"])
async def test_process_kill_ends_the_group_and_its_children(
    fake_openai: FakeOpenAI, tmp_path: Path, shell: str
) -> None:
    trap = "trap '' TERM; " if shell != "plain" else ""
    command = f"{trap}sleep 1000 & echo pid=$!; sleep 1000 & echo pid=$!; wait"
    fake_openai.enqueue(
        bg("call_two", command),
        call("call_pids", "process_output", id=1, waitFor=r"(pid=\d+\s+){2}"),
        call("call_kill", "process_kill", id=1),
        text_reply("Stopped."),
    )
    with killed_afterwards() as pids:
        async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as tiller:
            await tiller.request("agent/prompt", {"message": "start and stop"})
            seen = "".join(e["data"] for e in tiller.events if e["type"] == "process_output")
            pids += [int(n) for n in re.findall(r"pid=(\d+)", seen)]
            shell_pid = (await tiller.request("process/list"))["processes"][0]["pid"]
            pids.append(shell_pid)
            # gone while the server still runs: process_kill did it, not the shutdown
            assert len(pids) == 3 and await still_running(pids) == []
            await tiller.request("agent/getState")

    killed = result_of(tiller, "call_kill")
    expected = "SIGTERM" if shell == "plain" else "SIGKILL"
    assert text_of(killed) == f"Process 1 was killed (signal {expected})"
    assert killed["result"]["details"]["process"]["state"] == "killed"
    assert notices(fake_openai.requests[3]) == []  # the model killed it: no notice


# ------------------------------------------------------------------------------ lifetimes


async def test_abort_leaves_background_processes_running_and_session_close_ends_them(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(
        tool_call_reply([("call_srv", "bash", {"command": "exec sleep 1000",
                                                "background": True}),
                         ("call_fg", "bash", {"command": "sleep 1000"})]),
    )
    with killed_afterwards() as pids:
        async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as tiller:
            session = (await tiller.request("session/new"))["sessionId"]
            async with anyio.create_task_group() as tasks:
                async def run() -> None:
                    result = await tiller.request("agent/prompt", {"sessionId": session,
                                                                   "message": "go"})
                    assert result["stopReason"] == "aborted"

                tasks.start_soon(run)
                started = await tiller.wait_event("tool_execution_end", toolCallId="call_srv")
                await tiller.wait_event("tool_execution_start", toolCallId="call_fg")
                await tiller.request("agent/abort", {"sessionId": session})
            pid = started["result"]["details"]["process"]["pid"]
            pids.append(pid)
            after_abort = await tiller.request("agent/getState", {"sessionId": session})
            assert not process_gone(pid)

            await tiller.request("session/close", {"sessionId": session})
            assert await still_running([pid]) == []
            await tiller.request("session/load", {"sessionId": session})
            loaded = await tiller.request("agent/getState", {"sessionId": session})

    assert after_abort["processes"][0]["state"] == "running"
    [process] = loaded["processes"]
    assert (process["id"], process["state"], process["pid"]) == (1, "ended", pid)
    assert "exitCode" not in process


async def test_no_background_process_outlives_the_server(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    escapes = ("setsid sleep 1000 >/dev/null 2>&1 & echo pid=$!; "
               "sleep 1000 & echo pid=$!; echo pid=$$; wait")
    fake_openai.enqueue(bg("call_esc", escapes), text_reply("Running."))
    with killed_afterwards() as pids:
        async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as tiller:
            await tiller.request("agent/prompt", {"message": "go"})
            await wait_output(tiller, r"(pid=\d+\s+){3}")
            seen = "".join(e["data"] for e in tiller.events if e["type"] == "process_output")
            pids += [int(n) for n in re.findall(r"pid=(\d+)", seen)]
            assert len(pids) == 3 and not any(process_gone(pid) for pid in pids)
            assert await tiller.close() == 0
        assert await still_running(pids) == []


async def test_a_loaded_session_lists_the_processes_of_a_crashed_server_as_ended(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(bg("call_a", "exec sleep 1000"), text_reply("one"),
                        bg("call_b", "echo next"), text_reply("two"))
    with killed_afterwards() as pids:
        async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as doomed:
            session = (await doomed.request("session/new"))["sessionId"]
            await doomed.request("agent/prompt", {"sessionId": session, "message": "go"})
            state = await doomed.request("agent/getState", {"sessionId": session})
            pids.append(state["processes"][0]["pid"])
            doomed.process.send_signal(signal.SIGKILL)
            await doomed.process.wait()
        os.kill(pids[0], signal.SIGKILL)  # after SIGKILL nothing could end it

        async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as tiller:
            await tiller.request("session/load", {"sessionId": session})
            loaded = await tiller.request("agent/getState", {"sessionId": session})
            await tiller.request("agent/prompt", {"sessionId": session, "message": "again"})
            later = await tiller.request("process/list", {"sessionId": session})

    [old] = loaded["processes"]
    assert (old["state"], old["command"]) == ("ended", "exec sleep 1000")
    assert [(p["id"], p["state"]) for p in later["processes"]] == [(1, "ended"), (2, "exited")]
    assert notices(fake_openai.requests[-1]) == []  # the crash's ended process is no news


async def exits(tiller: TillerClient, count: int) -> None:
    """Until ``count`` ``process_exit`` events have come (each looked at once)."""

    def is_exit(message: dict[str, Any]) -> bool:
        return message.get("method") == "agent/event" and \
            message["params"]["type"] == "process_exit"

    start = 0
    for _ in range(count):
        found = await tiller.wait_for(is_exit, start=start, timeout=240)
        start = next(i for i in range(start, len(tiller.received))
                     if tiller.received[i] is found) + 1


@pytest.mark.timeout(300)  # a safety bound: 500 MB through pipes take seconds
async def test_ten_processes_writing_50_mb_each_keep_the_servers_memory_bounded(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    size = 50_000_000
    go = tmp_path / "go"
    # They write once the run is over: an exit during the run would be a notice the model gets,
    # asking for a reply the script does not have; an exit while idle waits for the next prompt.
    writer = f"until [ -e {go} ]; do sleep 0.05; done; head -c {size} /dev/zero | tr '\\0' 'x'"
    fake_openai.enqueue(
        text_reply("Warm."),
        tool_call_reply([(f"call_{n}", "bash", {"command": writer, "background": True})
                         for n in range(10)]),
        text_reply("Ten writers."),
    )
    async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as tiller:
        server = tiller.process.pid
        await tiller.request("agent/prompt", {"message": "hello"})  # the provider loaded
        before = vm_kb(server, "VmRSS")
        await tiller.request("agent/prompt", {"message": "write"})
        go.touch()
        await exits(tiller, 10)
        peak = vm_kb(server, "VmHWM")
        processes = (await tiller.request("process/list"))["processes"]
        held = await tiller.request("process/output", {"processId": 3})

    assert [(p["state"], p["exitCode"], p["outputBytes"]) for p in processes] == [
        ("exited", 0, size)] * 10
    assert all(p["droppedBytes"] == size - OUTPUT_LIMIT for p in processes)
    assert held["output"] == "x" * OUTPUT_LIMIT
    # 500 MB went through the server; it held at most a ring (1 MiB) per process, plus what
    # was in flight. An unbounded buffer would add 500 MB.
    assert peak - before < 80_000, (before, peak)
    outputs = [e for e in tiller.events if e["type"] == "process_output"]
    assert sum(len(e["data"]) + e.get("skipped", 0) for e in outputs) == 10 * size
    assert sum(len(e["data"]) for e in outputs) < size  # the events carried a small part


def vm_kb(pid: int, field: str) -> int:
    """``field`` (VmRSS, VmHWM: the peak) of ``/proc/PID/status``, in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


# ------------------------------------------------------------------------------ gate, sandbox


async def test_a_background_command_is_asked_about_like_any_command(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    marker = tmp_path / f"ran-{uuid.uuid4().hex}"
    fake_openai.enqueue(bg("call_srv", f"touch {marker}; exec sleep 1000"),
                        text_reply("Refused."))
    asked: list[dict[str, Any]] = []
    async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as tiller:
        async def permission(params: dict[str, Any]) -> dict[str, Any]:
            asked.append(params)
            return {"outcome": "rejectOnce"}

        tiller.on_request("client/requestPermission", permission)
        await tiller.request("initialize", {"capabilities": {"permissions": True}})
        await tiller.request("agent/prompt", {"message": "start it"})
        processes = (await tiller.request("process/list"))["processes"]

    [question] = asked
    assert question["preview"]["command"] == f"touch {marker}; exec sleep 1000"
    assert processes == [] and not marker.exists()
    assert result_of(tiller, "call_srv")["isError"] is True


async def test_a_sandboxed_background_command_is_in_the_sandbox(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    outside = Path("/var/tmp") / f"tiller-bg-{uuid.uuid4().hex}"
    fake_openai.enqueue(bg("call_out", f"echo inside > {outside}"), text_reply("Refused."))
    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        sandbox = (await tiller.request("agent/getState"))["sandbox"]
        await tiller.request("agent/prompt", {"message": "write outside"})

    if not sandbox["available"]:
        pytest.fail(f"no sandbox here: {sandbox.get('reason')} (.ci/run installs bubblewrap)")
    end = result_of(tiller, "call_out")
    assert end["isError"] is True and "Read-only file system" in text_of(end)
    assert end["result"]["details"]["sandbox"]["mode"] == "workspace-write"
    assert not outside.exists()


async def test_a_wait_for_pattern_that_backtracks_for_ever_is_refused_while_the_server_serves(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """``^(a|a)+$`` on forty a's and a b takes 2**40 steps to fail. Python's ``re`` would hold
    the whole server meanwhile (it never lets another thread run while it matches); the search
    stops at ``SEARCH_SECONDS`` with an error result, and a request sent while it runs is
    answered before the call ends. (``+``, not ``*``: no match in output not there yet.)"""
    fake_openai.enqueue(
        bg("call_bg", "printf '%s\\n' " + "a" * 40 + "b; sleep 1000"),
        call("call_wait", "process_output", id=1, waitFor="^(a|a)+$", timeout=60),
        text_reply("I will wait for something simpler."),
    )

    def waiting(message: dict[str, Any]) -> bool:
        params = message.get("params") or {}
        return params.get("type") == "tool_execution_start" and \
            params.get("toolCallId") == "call_wait"

    async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as tiller:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(tiller.request, "agent/prompt", {"message": "wait for it"})
            await tiller.wait_for(waiting)
            state = await tiller.request("agent/getState")
            answered = len(tiller.received)
        ended = next(index for index, message in enumerate(tiller.received)
                     if (message.get("params") or {}).get("type") == "tool_execution_end"
                     and message["params"]["toolCallId"] == "call_wait")

    assert state["isRunning"] is True
    assert answered <= ended  # answered while the search ran
    end = result_of(tiller, "call_wait")
    assert end["isError"] is True
    assert "The waitFor pattern '^(a|a)+$' took over 2 s on one search" in text_of(end)
    assert "backtracks too much" in text_of(end)
