"""End to end: no tool process outlives the server or its session, and the API keys the server
holds cannot be read back by the commands it runs (``tiller.procs``).

Processes are started by the real ``bash`` tool, scripted through the loopback OpenAI fake;
"gone" is awaited with a bounded poll of ``/proc`` (``helpers.process_gone``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from support.fake_anthropic import FakeAnthropic, tool_use_reply
from support.fake_anthropic import text_reply as anthropic_text
from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import (
    UNSANDBOXED,
    clean_env,
    killed_afterwards,
    process_gone,
    spawn_tiller,
    still_running,
)
from support.unprivileged import as_nobody, open_workspace, python_as_nobody
from tiller import procs
from tiller.client import TillerClient

pytestmark = pytest.mark.anyio

DAEMONS = (
    "setsid sleep 1000 >/dev/null 2>&1 & echo pid=$!; "
    "nohup sleep 1000 >/dev/null 2>&1 & echo pid=$!"
)
"""A daemon in its own session and a ``nohup`` job in the call's group, both left running."""


def printed_pids(events: list[dict[str, Any]], call_id: str) -> list[int]:
    """The ``pid=N`` numbers in the result of tool call ``call_id``."""
    end = next(e for e in events
               if e["type"] == "tool_execution_end" and e["toolCallId"] == call_id)
    assert end["isError"] is False, end
    return [int(n) for n in re.findall(r"pid=(\d+)", json.dumps(end["result"]))]


async def start_daemons(tiller: TillerClient, call_id: str, session_id: str | None = None) -> \
        list[int]:
    """Prompt a (scripted) bash call that leaves DAEMONS running; their pids, checked alive."""
    params: dict[str, Any] = {"message": "start the daemons"}
    if session_id is not None:
        params["sessionId"] = session_id
    result = await tiller.request("agent/prompt", params)
    assert result["stopReason"] == "stop"
    pids = printed_pids(tiller.events, call_id)
    assert len(pids) == 2 and not any(process_gone(pid) for pid in pids)
    return pids


def daemon_script(call_id: str) -> tuple[Any, Any]:
    return tool_call_reply([(call_id, "bash", {"command": DAEMONS})]), text_reply("started")


@pytest.mark.process
@pytest.mark.parametrize("ending", ["eof", "sigterm", "sighup"])
async def test_shutdown_kills_daemons_left_by_a_finished_call(
    fake_openai: FakeOpenAI, tmp_path: Path, ending: str
) -> None:
    fake_openai.enqueue(*daemon_script("call_daemons"))
    with killed_afterwards() as pids:
        async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as tiller:
            pids += await start_daemons(tiller, "call_daemons")
            if ending == "eof":
                exit_code = await tiller.close()
            else:
                tiller.process.send_signal(signal.SIGTERM if ending == "sigterm" else
                                           signal.SIGHUP)
                exit_code = await tiller.process.wait()

        assert exit_code == 0
        assert await still_running(pids) == []


@pytest.mark.process
async def test_session_close_kills_that_sessions_processes_only(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(*daemon_script("call_a"), *daemon_script("call_b"))
    with killed_afterwards() as pids:
        async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as tiller:
            session_a = (await tiller.request("session/new"))["sessionId"]
            session_b = (await tiller.request("session/new"))["sessionId"]
            pids_a = await start_daemons(tiller, "call_a", session_a)
            pids_b = await start_daemons(tiller, "call_b", session_b)
            pids += pids_a + pids_b

            assert await tiller.request("session/close", {"sessionId": session_a}) == {}
            assert await still_running(pids_a) == []
            assert not any(process_gone(pid) for pid in pids_b)
            assert await tiller.close() == 0

        assert await still_running(pids_b) == []


def stat_fields(pid: int) -> list[str] | None:
    """``/proc/PID/stat`` after the name: state, ppid, ...; None once the pid is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return None


@pytest.mark.process
async def test_an_exited_orphan_is_the_servers_and_is_reaped(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(
        tool_call_reply([("call_orphan", "bash",
                          {"command": "sleep 1 >/dev/null 2>&1 & echo pid=$!"})]),
        text_reply("left one"),
        tool_call_reply([("call_next", "bash", {"command": "true"})]),
        text_reply("next"),
    )
    with killed_afterwards() as pids:
        async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as tiller:
            await tiller.request("agent/prompt", {"message": "leave an orphan"})
            [orphan] = pids[:] = printed_pids(tiller.events, "call_orphan")
            with anyio.move_on_after(10):  # the orphan exits a second after its shell
                while (stat_fields(orphan) or ["Z"])[0] != "Z":  # noqa: ASYNC110
                    await anyio.sleep(0.02)
            fields = stat_fields(orphan)
            assert fields is not None and fields[:2] == ["Z", str(tiller.process.pid)]

            await tiller.request("agent/prompt", {"message": "run the next command"})
            assert stat_fields(orphan) is None  # the server collected its exit status
            assert await tiller.close() == 0


# ------------------------------------------------------------------------------ secrets


async def test_keys_cannot_be_read_through_proc(fake_openai: FakeOpenAI) -> None:
    key = f"sk-proc-{uuid.uuid4().hex}"
    with open_workspace() as workspace:
        env = clean_env(OPENAI_API_KEY=key, HOME=str(workspace),
                        XDG_CONFIG_HOME=str(workspace), PYTHONDONTWRITEBYTECODE="1")
        argv = ["--base-url", fake_openai.url, "--cwd", str(workspace), "--no-session",
                "--permission-mode", "auto", *UNSANDBOXED]
        command = [*as_nobody(), sys.executable, "-m", "tiller"]
        tiller = await TillerClient.spawn(argv, env=env, cwd=workspace, command=command)
        async with tiller:
            server_pid = tiller.process.pid
            probe = (f"echo ppid=$PPID; cat /proc/$PPID/environ; echo rc=$?; "
                     f"cat /proc/{server_pid}/environ; echo rc=$?; "
                     f"head -c 4096 /proc/{server_pid}/cmdline >/dev/null; echo rc=$?")
            fake_openai.enqueue(
                tool_call_reply([("call_probe", "bash", {"command": probe})]),
                text_reply("nothing to see"),
            )
            result = await tiller.request("agent/prompt", {"message": "read the keys"})
            assert await tiller.close() == 0

    assert result["stopReason"] == "stop"  # the server still works
    end = next(e for e in tiller.events if e["type"] == "tool_execution_end")
    output = end["result"]["content"][0]["text"]
    assert f"ppid={server_pid}" in output  # $PPID is the server: the probe read the right file
    assert re.findall(r"rc=(\d+)", output)[:2] == ["1", "1"], output
    assert key not in json.dumps(tiller.received)
    assert key not in json.dumps(fake_openai.requests[1])


@pytest.mark.process
async def test_provider_keys_leave_the_environment_commands_inherit(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    own_key, openai_key = f"sk-mine-{uuid.uuid4().hex}", f"sk-openai-{uuid.uuid4().hex}"
    config = tmp_path / "config.toml"
    config.write_text(  # commands may see secrets, but not the keys the providers use
        "[tools]\nsanitize_env = false\n\n[providers.mine]\ntype = \"anthropic\"\n"
        f"api_key_env = \"MINE_KEY\"\nbase_url = \"{fake_anthropic.url}\"\n"
        "default_model = \"claude-test\"\n"
    )
    fake_anthropic.enqueue(
        tool_use_reply([("toolu_env", "bash", {"command": "env"})]), anthropic_text("seen")
    )
    env = clean_env(MINE_KEY=own_key, OPENAI_API_KEY=openai_key, OTHER_TOKEN="for-commands")
    argv = ["--config", str(config), "--provider", "mine", "--cwd", str(tmp_path),
            "--no-session", *UNSANDBOXED]
    async with await TillerClient.spawn(argv, env=env, cwd=tmp_path) as tiller:
        result = await tiller.request("agent/prompt", {"message": "env"})

    assert result["stopReason"] == "stop"
    sent = fake_anthropic.request_headers  # the key reaches the SDK from the config
    assert len(sent) == 2 and all(own_key in json.dumps(headers) for headers in sent)
    output = next(e for e in tiller.events
                  if e["type"] == "tool_execution_end")["result"]["content"][0]["text"]
    assert "OTHER_TOKEN=for-commands" in output
    assert own_key not in output and openai_key not in output


@pytest.mark.process
def test_tiller_run_keeps_the_keys_from_the_agents_commands(fake_openai: FakeOpenAI) -> None:
    """Issue 26, 1: ``tiller run`` holds the keys it was started with, and the server it spawns
    gets them from it; a command finds that front process as its server's parent. Neither
    process's ``/proc/PID/environ`` shows the keys to the command, so they reach neither the
    output, the session log nor the next model request."""
    openai_key, anthropic_key = f"sk-front-{uuid.uuid4().hex}", f"sk-ant-{uuid.uuid4().hex}"
    probe = ("front=$(awk '/^PPid/{print $2}' /proc/$PPID/status); echo front=$front; "
             "tr '\\0' ' ' </proc/$front/cmdline; echo; "
             "cat /proc/$front/environ; echo rc=$?; cat /proc/$PPID/environ; echo rc=$?; "
             "env")
    fake_openai.enqueue(tool_call_reply([("call_probe", "bash", {"command": probe})]),
                        text_reply("nothing to see"))
    with open_workspace() as workspace:
        python, python_env = python_as_nobody()
        env = clean_env(OPENAI_API_KEY=openai_key, ANTHROPIC_API_KEY=anthropic_key,
                        HOME=str(workspace), XDG_CONFIG_HOME=str(workspace),
                        PYTHONDONTWRITEBYTECODE="1", **python_env)
        argv = [*python, "-m", "tiller", "run", "read the keys", "--json",
                "--base-url", fake_openai.url, "--cwd", str(workspace),
                "--session-dir", str(workspace / "sessions"), *UNSANDBOXED]
        done = subprocess.run(argv, env=env, cwd=workspace, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=60)
        logs = "".join(p.read_text(errors="replace") for p in workspace.rglob("*.jsonl"))

    assert done.returncode == 0, done.stderr
    *events, _result = [json.loads(line) for line in done.stdout.splitlines()]
    end = next(e for e in events if e["type"] == "tool_execution_end")
    output = end["result"]["content"][0]["text"]
    assert "-m tiller run read the keys" in output  # the probe read the front's /proc entries
    assert re.findall(r"rc=(\d+)", output) == ["1", "1"], output
    for key in (openai_key, anthropic_key):
        assert key not in done.stdout and key not in done.stderr
        assert key not in json.dumps(fake_openai.requests[1])
        assert key not in logs
    assert openai_key in json.dumps(fake_openai.request_headers[0])  # the server had the key


NOT_AN_OBJECT = "TILLER_KEYS_FD: the pipe did not hold a JSON object of strings"


@pytest.mark.process
@pytest.mark.parametrize(("fd", "payload", "message"), [
    ("seven", None, "TILLER_KEYS_FD='seven' is not a file descriptor"),
    ("pipe", b'["sk-not-an-object"]', NOT_AN_OBJECT),
    ("pipe", b'{"OPENAI_API_KEY": 7}', NOT_AN_OBJECT),
    ("999", None, "TILLER_KEYS_FD: cannot read descriptor 999: Bad file descriptor"),
])
def test_a_bad_keys_pipe_is_a_configuration_error(
    tmp_path: Path, fd: str, payload: bytes | None, message: str
) -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, payload or b"")
    os.close(write_fd)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tiller", "--cwd", str(tmp_path), "--no-session"],
            env=clean_env(TILLER_KEYS_FD=str(read_fd) if fd == "pipe" else fd),
            pass_fds=(read_fd,), stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=30,
        )
    finally:
        os.close(read_fd)
    assert done.returncode == 2
    assert done.stderr.strip() == f"tiller: {message}"


async def test_a_scope_that_started_nothing_is_killed_without_reading_proc(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Closing a session that ran no command costs no scan of ``/proc`` (shutdown closes every
    session); a scope that gave out its tag is searched for."""
    scans: list[int] = []
    table = procs._table
    monkeypatch.setattr(procs, "_table", lambda: scans.append(1) or table())

    await procs.ProcessScope().kill()
    assert scans == []

    used = procs.ProcessScope()
    used.environ({})
    await used.kill()
    assert scans != []
