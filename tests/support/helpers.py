"""Helpers for end-to-end tests: spawning the real ``tiller`` against the fake OpenAI server."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from support.fake_openai import FakeOpenAI
from tiller.client import TillerClient

EMPTY_CONFIG_HOME = tempfile.mkdtemp(prefix="tiller-tests-config-")
"""An empty XDG config home: the machine's own ~/.config/tiller (config file, AGENTS.md,
prompts, skills) never reaches a test that does not ask for one."""
TEST_DATA_HOME = tempfile.mkdtemp(prefix="tiller-tests-data-")
"""The XDG data home of the servers this test process spawns (not the machine's own)."""

UNSANDBOXED = ("--sandbox", "off")
"""Server arguments for a test about commands run as before the sandbox (issue 27): one that
reads a command's pids (a sandboxed command sees its own pid namespace: the numbers it prints
name other processes outside, and killing them would hit those), or one about the permission
question a command asks in ``ask`` (a sandboxed command runs without one)."""


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without provider settings that would leak into a test, with
    an empty config home and a data folder of the test process's own (where the providers'
    model lists are cached: a test that scripts a list passes a folder of its own) unless
    ``extra`` names them (or a ``HOME``, under which the data folder then is)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OPENAI_", "ANTHROPIC_", "TILLER_"))
    }
    env["XDG_CONFIG_HOME"] = EMPTY_CONFIG_HOME
    if "HOME" not in extra:  # a test with a HOME of its own keeps its data there
        env["XDG_DATA_HOME"] = TEST_DATA_HOME
    env.update(extra)
    return env


@asynccontextmanager
async def spawn_tiller(
    fake: FakeOpenAI | None,
    cwd: Path,
    *args: str,
    framing: str = "ndjson",
    env: dict[str, str] | None = None,
) -> AsyncIterator[TillerClient]:
    """A running ``tiller`` whose provider is ``fake``; closed (stdin EOF) on exit. Sessions
    are saved under ``cwd/.sessions`` unless ``args`` say otherwise."""
    argv = ["--cwd", str(cwd), *args]
    if "--session-dir" not in args and "--no-session" not in args:
        argv += ["--session-dir", str(cwd / ".sessions")]
    if fake is not None:
        argv = ["--base-url", fake.url, *argv]
    client = await TillerClient.spawn(argv, framing=framing, env=env or clean_env(), cwd=cwd)
    async with client:
        yield client


async def wait_requests(fake: FakeOpenAI, n: int) -> list[dict[str, Any]]:
    """Await (in a worker thread) until the fake has received ``n`` model requests."""
    return await anyio.to_thread.run_sync(fake.wait_for_requests, n)


def event_types(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


def roles(request: dict[str, Any]) -> list[str]:
    """The roles of the messages of one chat completion request body."""
    return [message["role"] for message in request["messages"]]


def process_gone(pid: int) -> bool:
    """True if ``pid`` no longer runs (absent, or a zombie nobody reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


async def wait_for_pid(tiller: TillerClient) -> int:
    """The pid a running bash call printed as ``pid=N`` in its streamed output."""

    def printed_pid(message: dict[str, Any]) -> bool:
        params = message.get("params") or {}
        output = str((params.get("partialResult") or {}).get("output", ""))
        return params.get("type") == "tool_execution_update" and "pid=" in output

    update = await tiller.wait_for(printed_pid)
    match = re.search(r"pid=(\d+)", update["params"]["partialResult"]["output"])
    assert match is not None
    return int(match.group(1))


def record_sent(tiller: TillerClient) -> list[dict[str, Any]]:
    """Every message the client sends from now on, in order."""
    sent: list[dict[str, Any]] = []
    send = tiller.send

    async def recording(message: dict[str, Any]) -> None:
        sent.append(message)
        await send(message)

    tiller.send = recording  # type: ignore[method-assign]
    return sent


def serve_in_turn(cwd: Path, argv: list[str], *messages: dict[str, Any],
                  env: dict[str, str]) -> str:
    """Run ``python ARGV`` (a ``tiller`` server) in ``cwd``, send ``messages`` one after
    another, each answered (with a result) before the next goes, then close stdin and wait for
    the exit; what it wrote on stderr (kept in a file: a full pipe would stall the server)."""
    with (cwd / "stderr.log").open("w+b") as log:
        process = subprocess.Popen([sys.executable, *argv], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=log, env=env, cwd=cwd)
        assert process.stdin is not None and process.stdout is not None
        try:
            for message in messages:
                process.stdin.write(json.dumps(message).encode() + b"\n")
                process.stdin.flush()
                answer: dict[str, Any] = {}
                while answer.get("id") != message["id"]:  # the answer, past notifications
                    line = process.stdout.readline()
                    assert line, f"the server exited before answering {message['method']}"
                    answer = json.loads(line)
                assert "result" in answer, answer
            process.stdin.close()
            process.wait(timeout=60)
        finally:
            process.kill()
            process.wait()
        log.seek(0)
        return log.read().decode()


async def still_running(pids: list[int], timeout: float = 10.0) -> list[int]:
    """The pids of ``pids`` still running after at most ``timeout`` seconds of polling."""
    with anyio.move_on_after(timeout):
        # No event to await: another process's end (not our child's) shows only in /proc.
        while not all(process_gone(pid) for pid in pids):  # noqa: ASYNC110
            await anyio.sleep(0.02)
    return [pid for pid in pids if not process_gone(pid)]


@contextlib.contextmanager
def killed_afterwards() -> Iterator[list[int]]:
    """A list to put pids in; whatever still runs of them at the end is SIGKILLed, so a
    failing test leaves nothing behind."""
    pids: list[int] = []
    try:
        yield pids
    finally:
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
