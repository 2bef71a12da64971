"""``bash`` through the ACP client's terminals, end to end: a client that declares
``terminal: true`` and really runs commands (``terminal/*`` answered by this test's client)
gets ``terminal/create``, ``terminal/wait_for_exit``, one ``terminal/output`` (at exit, never
polled while it runs) and ``terminal/release``; the tool call shows ``{type: "terminal",
terminalId}`` and, at its end, the output as text too; the model gets the output and the exit
code as from Tiller's own ``bash``. A cancelled command and a
timed-out one are killed (``terminal/kill``) and released."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block
from acp.schema import (
    ClientCapabilities,
    CreateTerminalResponse,
    EnvVariable,
    KillTerminalResponse,
    ReleaseTerminalResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
)

from support.acp_client import Recorder, spawn_acp, tool_messages
from support.acp_raw import raw_acp
from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply

pytestmark = [pytest.mark.anyio, pytest.mark.process]


class RunningCommand:
    """One terminal: a real process, its output (the last ``limit`` bytes) and its end."""

    def __init__(self, process: asyncio.subprocess.Process, limit: int | None) -> None:
        self.process, self.limit = process, limit
        self.output, self.truncated = b"", False
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while chunk := await self.process.stdout.read(65536):
            self.output += chunk
            if self.limit is not None and len(self.output) > self.limit:
                self.output, self.truncated = self.output[-self.limit:], True

    def status(self) -> TerminalExitStatus | None:
        code = self.process.returncode
        if code is None:
            return None
        if code < 0:
            return TerminalExitStatus(signal=signal.Signals(-code).name)
        return TerminalExitStatus(exit_code=code)

    def kill(self) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)


class TerminalClient(Recorder):
    """A Recorder that implements ``terminal/*`` by running the commands."""

    def __init__(self) -> None:
        super().__init__()
        self.terminals: dict[str, RunningCommand] = {}
        self.ids = (f"term-{n}" for n in itertools.count(1))
        self.started = asyncio.Event()

    async def create_terminal(
        self, session_id: str, command: str, args: list[str] | None = None,
        env: list[EnvVariable] | None = None, cwd: str | None = None,
        output_byte_limit: int | None = None, **kwargs: Any,
    ) -> CreateTerminalResponse:
        process = await asyncio.create_subprocess_exec(
            command, *(args or []), cwd=cwd, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True)
        terminal_id = next(self.ids)
        self.terminals[terminal_id] = RunningCommand(process, output_byte_limit)
        self.started.set()
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> TerminalOutputResponse:
        term = self.terminals[terminal_id]
        return TerminalOutputResponse(output=term.output.decode(errors="replace"),
                                      truncated=term.truncated, exit_status=term.status())

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        term = self.terminals[terminal_id]
        await term.process.wait()
        await term.reader
        status = term.status()
        assert status is not None
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> KillTerminalResponse:
        self.terminals[terminal_id].kill()
        return KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse:
        self.terminals[terminal_id].kill()
        return ReleaseTerminalResponse()

    def requests(self, prefix: str = "terminal/") -> list[str]:
        return [m["method"] for m in self.raw if str(m.get("method", "")).startswith(prefix)]


async def test_bash_runs_in_the_clients_terminal(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.enqueue(
        tool_call_reply([("b1", "bash", {
            "command": "printf 'one\\ntwo\\n' | tee made.txt; sleep 1.2"})]),
        tool_call_reply([("b2", "bash", {"command": "echo oops; exit 3"})]),
        text_reply("done"),
    )
    client = TerminalClient()
    async with spawn_acp(client, fake_openai, tmp_path, "--permission-mode", "auto") as conn:
        await conn.initialize(protocol_version=1,
                              client_capabilities=ClientCapabilities(terminal=True))
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        result = await conn.prompt(session_id=session.session_id,
                                   prompt=[text_block("run it")])

    assert result.stop_reason == "end_turn"
    assert (tmp_path / "made.txt").read_text() == "one\ntwo\n"  # the client ran it
    create = next(m["params"] for m in client.raw if m.get("method") == "terminal/create")
    assert create["args"][-1] == "printf 'one\\ntwo\\n' | tee made.txt; sleep 1.2"
    assert create["cwd"] == str(tmp_path) and create["outputByteLimit"] > 0
    requests = client.requests()
    assert requests[0] == "terminal/create" and requests.count("terminal/release") == 2
    assert "terminal/wait_for_exit" in requests
    # The output is read once, at exit: not polled while the command runs (1.2 s here).
    assert requests.count("terminal/output") == 2
    assert "terminal/kill" not in requests
    shown = [u for u in client.session_updates() if u.get("toolCallId") == "b1"
             and any(c.get("type") == "terminal" for c in u.get("content") or [])]
    assert shown[0]["content"] == [{"type": "terminal", "terminalId": "term-1"}]
    final = client.final("b1")
    assert final["status"] == "completed"
    # The terminal, then the output as the model got it (acpx shows only this text).
    assert final["content"] == [
        {"type": "terminal", "terminalId": "term-1"},
        {"type": "content", "content": {"type": "text", "text": "```\none\ntwo\n```"}}]
    assert final["rawOutput"]["exitCode"] == 0
    assert tool_messages(fake_openai, 1) == ["one\ntwo\n"]
    assert client.final("b2")["status"] == "failed"
    assert tool_messages(fake_openai, 2)[-1] == "oops\n\nCommand exited with code 3"


async def test_a_cancelled_or_timed_out_terminal_command_is_killed(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(
        tool_call_reply([("b1", "bash", {"command": "echo started; sleep 60"})]),
        tool_call_reply([("b2", "bash", {"command": "echo slow; sleep 60", "timeout": 0.5})]),
        text_reply("gave up"),
    )
    client = TerminalClient()
    async with spawn_acp(client, fake_openai, tmp_path, "--permission-mode", "auto") as conn:
        await conn.initialize(protocol_version=1,
                              client_capabilities=ClientCapabilities(terminal=True))
        session_id = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
        prompt = asyncio.ensure_future(
            conn.prompt(session_id=session_id, prompt=[text_block("wait")]))
        await client.started.wait()
        await conn.cancel(session_id=session_id)
        cancelled = await prompt
        first = client.terminals["term-1"]
        await first.process.wait()
        timed_out = await conn.prompt(session_id=session_id, prompt=[text_block("again")])

    assert cancelled.stop_reason == "cancelled"
    assert first.status() == TerminalExitStatus(signal="SIGKILL")
    assert client.final("b1")["status"] == "failed"
    assert timed_out.stop_reason == "end_turn"
    assert client.terminals["term-2"].status() == TerminalExitStatus(signal="SIGKILL")
    assert tool_messages(fake_openai, 2)[-1] == "slow\n\nCommand timed out after 0.5 seconds"
    assert client.requests().count("terminal/kill") == 2
    assert client.requests().count("terminal/release") == 2


class FailingWaitClient(TerminalClient):
    """A client whose ``terminal/wait_for_exit`` fails."""

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        raise RequestError.internal_error({"why": "the terminal went away"})


async def test_a_failing_terminal_request_is_the_calls_error_result(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(tool_call_reply([("b1", "bash", {"command": "sleep 60"})]),
                        text_reply("it failed"))
    client = FailingWaitClient()
    async with spawn_acp(client, fake_openai, tmp_path, "--permission-mode", "auto") as conn:
        await conn.initialize(protocol_version=1,
                              client_capabilities=ClientCapabilities(terminal=True))
        session_id = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
        result = await conn.prompt(session_id=session_id, prompt=[text_block("run")])

    assert result.stop_reason == "end_turn"
    assert client.final("b1")["status"] == "failed"
    assert tool_messages(fake_openai, 1)[0].startswith(
        "the editor failed terminal/wait_for_exit")
    assert client.requests()[-2:] == ["terminal/kill", "terminal/release"]
    assert client.terminals["term-1"].status() == TerminalExitStatus(signal="SIGKILL")


@pytest.mark.parametrize(
    ("exit_code", "said"),
    [(1.0, "boom\n\nCommand exited with code 1"),
     ("1", 'the editor\'s terminal/wait_for_exit answer has an exitCode that is not an '
           'integer: "1"'),
     (2.5, "the editor's terminal/wait_for_exit answer has an exitCode that is not an "
           "integer: 2.5"),
     (True, "the editor's terminal/wait_for_exit answer has an exitCode that is not an "
            "integer: true")],
    ids=["float", "string", "fraction", "boolean"],
)
async def test_an_exit_code_the_client_mistypes_is_not_success(
    fake_openai: FakeOpenAI, tmp_path: Path, exit_code: Any, said: str
) -> None:
    """Issue 26, 18: a client answering ``exitCode: "1"`` or ``1.0`` (off ACP's schema) said a
    failure, and Tiller reported success. 1.0 is the number 1 (JSON has one number type); what
    is no integer ("1", true, 2.5) is no exit status: the call fails saying so."""
    fake_openai.enqueue(tool_call_reply([("b1", "bash", {"command": "false"})]),
                        text_reply("noted"))

    async def hostile(method: str, params: dict[str, Any]) -> Any:
        status = {"exitCode": exit_code, "signal": None}
        return {"terminal/create": {"terminalId": "t1"},
                "terminal/wait_for_exit": status,
                "terminal/output": {"output": "boom\n", "truncated": False,
                                    "exitStatus": status}}.get(method, {})

    async with raw_acp(fake_openai, tmp_path, "--permission-mode", "auto",
                       answer=hostile) as client:
        await client.call("initialize", {"protocolVersion": 1,
                                         "clientCapabilities": {"terminal": True}})
        sid = (await client.call("session/new", {"cwd": str(tmp_path), "mcpServers": []}))[
            "sessionId"]
        await client.call("session/prompt", {"sessionId": sid,
                                             "prompt": [{"type": "text", "text": "run"}]})
        final = [u for u in client.updates() if u.get("toolCallId") == "b1"
                 and u.get("status") in ("completed", "failed")]

    assert [u["status"] for u in final] == ["failed"]
    assert tool_messages(fake_openai, 1) == [said]
