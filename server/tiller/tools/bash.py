"""The ``bash`` tool: run a shell command in its own process group, streaming merged output.

The command runs as ``bash -c`` (``sh -c`` when there is no ``/bin/bash``) in the working
directory, in a new session (its own process group), with stdin from ``/dev/null`` and stderr
merged into stdout. Output streams to ``ctx.update`` as ``{"output": ...}`` (cumulative,
tail-truncated, at most about every 100 ms and once more at the end). Memory stays bounded: a
rolling tail is kept, and once the output passes the byte limit all of it goes to a temp file
named in the result.

Ending. A timeout or a cancellation (abort) SIGKILLs the whole process group and reaps the shell,
under a shielded scope. When the command exits normally its background processes are left alone
if they let go of the output (``server > log 2>&1 &``). Background processes that still hold
the output pipe ``BACKGROUND_GRACE`` seconds after the shell exits are killed with the group,
and the result says so: waiting for them (as pi does) would hang the call on ``sleep 100 &``.
A holder outside the group (``setsid cmd &``) is not killed; reading stops after another grace
period and it gets SIGPIPE if it writes again.

Processes left running belong to the tool's ``ProcessScope`` (``tiller.procs``): the command's
environment carries the scope's tag, its group is recorded, and they are killed when the
session closes or the server shuts down.

Background (``background: true``): the command starts in the session's ``ProcessTable``
(``tiller.tools.background``), as judged and sandboxed as any command (never in the editor's
terminal: its output must stay readable), with ``PYTHONUNBUFFERED=1`` (so a Python server's
lines show as they are printed), and the call returns after ``START_WINDOW`` seconds, or as
soon as the command ends, with its id and the output so far. A command that has already
failed is an error result; one still running is the process's to report later.

Sandbox. With a ``CommandSandbox`` (``tiller.sandbox.command``) the command runs as the
permission gate judged it would (``ToolContext.sandbox``, else the sandbox's own plan): in
bubblewrap (the same shell inside ``bwrap``; its processes end with it), or unsandboxed when
the call escalated to ``unsandboxed``, the sandbox is off or unavailable. Every update and the
result's ``details`` carry ``sandbox`` (how it ran); a failure the sandbox caused (a read-only
file system, no network) gets a note telling the model how to ask for more. With the editor's
terminals (ACP's ``terminal/*``) an unsandboxed command runs there, as before.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO

import anyio
from anyio.abc import ByteReceiveStream, Process
from pydantic import BaseModel, Field, model_validator

from tiller.errors import ToolError
from tiller.modes import Escalation
from tiller.procs import OUTPUT_GRACE, ProcessScope, reap_orphans
from tiller.sandbox.command import CommandSandbox
from tiller.sandbox.probe import shell as _shell
from tiller.sandbox.use import SandboxUse, failure_note
from tiller.tools.background import START_WINDOW, ProcessTable, describe_end
from tiller.tools.base import Terminal, Tool, ToolContext, ToolInfo, ToolResult
from tiller.tools.bash_terminal import run_in_terminal
from tiller.tools.truncate import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
    format_size,
    truncate_tail,
    with_note,
)
from tiller.types import SystemText

__all__ = ["BACKGROUND_GRACE", "BashParams", "BashTool"]

BACKGROUND_GRACE = OUTPUT_GRACE
"""Seconds the output may stay open after the shell exits before the group is killed (as for
every command Tiller runs: ``tiller.procs.OUTPUT_GRACE``)."""
UPDATE_INTERVAL = 0.1
"""Minimum seconds between two progress updates."""
_EXIT_POLL = 0.05
_REAP_TIMEOUT = 5.0
_CHUNK = 65536
_TAIL_CHARS = DEFAULT_MAX_BYTES + 1024


class BashParams(BaseModel):
    command: SystemText = Field(description="The shell command to run (bash -c)")
    timeout: float | None = Field(
        default=None,
        gt=0,
        description="Timeout in seconds; the command and its children are killed when it "
        "expires. No timeout by default.",
    )
    escalate: Escalation | None = Field(
        default=None,
        description='Only when the command cannot work in the sandbox: "network" to run it '
        'sandboxed with network access, "unsandboxed" to run it outside the sandbox. The '
        "user may be asked; give the reason.",
    )
    reason: str | None = Field(
        default=None, description="Why the command needs what escalate asks for (shown to the "
        "user)",
    )
    background: bool = Field(
        default=False,
        description="Run it in the background: for servers, watchers and anything that keeps "
        "running (npm run dev, python -m http.server). The call returns at once with a "
        "process id and the first output; read more with process_output, stop it with "
        "process_kill; you are told when it exits. No timeout.",
    )

    @model_validator(mode="after")
    def _reason_with_escalate(self) -> BashParams:
        if self.escalate is not None and not (self.reason or "").strip():
            raise ValueError("escalate needs a reason: say why the command needs it")
        if self.background and self.timeout is not None:
            raise ValueError("a background command has no timeout: it runs until it exits or "
                             "process_kill stops it")
        return self


class _Output:
    """A command's output: decoded rolling tail, counts, and the full bytes spilled to a file.

    Keeps every byte in memory while the total is within ``DEFAULT_MAX_BYTES``; past that it
    writes everything to a temp file and keeps only a tail of about twice the limit in chars.
    """

    def __init__(self, update: Callable[[Any], None]) -> None:
        self._update = update
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._tail = ""
        self._raw = bytearray()
        self._file: BinaryIO | None = None
        self.full_output_path: str | None = None
        self.total_bytes = 0
        self.newlines = 0
        self.ends_with_newline = False
        self._dirty = False
        self._last_update = -UPDATE_INTERVAL - 1.0

    def feed(self, chunk: bytes) -> None:
        """Take a chunk of output; emits an update if the last one is old enough."""
        self.total_bytes += len(chunk)
        self.newlines += chunk.count(b"\n")
        self.ends_with_newline = chunk.endswith(b"\n")
        if self._file is None:
            self._raw += chunk
            if self.total_bytes > DEFAULT_MAX_BYTES:
                self._spill()
        else:
            self._file.write(chunk)
        self._tail += self._decoder.decode(chunk)
        if len(self._tail) > 2 * _TAIL_CHARS:
            # More chars than the byte limit, so the cut (partial) first line is never shown.
            self._tail = self._tail[-_TAIL_CHARS:]
        self._dirty = True
        if time.monotonic() - self._last_update >= UPDATE_INTERVAL:
            self.flush()

    def flush(self) -> None:
        """Emit the output so far if it changed since the last update."""
        if self._dirty:
            self._dirty = False
            self._last_update = time.monotonic()
            self._update({"output": truncate_tail(self._tail).content})

    def finish(self) -> None:
        """End of the data: decode what is left, emit the last update if anything is new
        (the output already sent is not sent twice)."""
        rest = self._decoder.decode(b"", final=True)
        if rest:
            self._tail += rest
            self._dirty = True
        self.flush()

    def _spill(self) -> None:
        fd, self.full_output_path = tempfile.mkstemp(prefix="tiller-bash-", suffix=".log")
        self._file = os.fdopen(fd, "wb")
        self._file.write(self._raw)
        self._raw = bytearray()

    def close(self) -> None:
        """Close the spill file, if any (idempotent)."""
        if self._file is not None:
            self._file.close()

    def discard(self) -> None:
        """Close and delete the spill file: nobody will be told about it."""
        self.close()
        if self.full_output_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.full_output_path)
            self.full_output_path = None

    @property
    def total_lines(self) -> int:
        if self.total_bytes == 0:
            return 0
        return self.newlines + (0 if self.ends_with_newline else 1)

    def render(self) -> tuple[str, bool]:
        """The tail-truncated output with its notice, and whether it was truncated.

        Closes the spill file; a truncated output always has one (made now if still in memory).
        """
        cut = truncate_tail(self._tail)
        if not cut.truncated:
            self.discard()
            return cut.content, False
        if self.full_output_path is None:  # cut by lines while still held in memory
            self._spill()
        self.close()
        total = self.total_lines
        first = total - cut.output_lines + 1
        size = format_size(self.total_bytes)
        if cut.partial_line:
            shown = f"the last {format_size(cut.output_bytes)} of line {total} ({size} in all)"
        elif cut.truncated_by == "bytes":
            shown = f"lines {first}-{total} of {total} (the last {format_size(cut.output_bytes)}"
            shown += f" of {size})"
        else:
            shown = f"lines {first}-{total} of {total}"
        body = cut.content.rstrip("\n")
        notice = f"[Showing {shown}. Full output: {self.full_output_path}]"
        return f"{body}\n\n{notice}", True


def _kill_group(process: Process) -> None:
    """SIGKILL the process group led by ``process``; quiet if it is already gone."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if process.returncode is None:
        try:
            process.kill()
        except ProcessLookupError:
            pass


async def _read_into(stream: ByteReceiveStream, output: _Output, eof: anyio.Event) -> None:
    """Feed ``stream`` into ``output`` until it ends, then set ``eof``."""
    try:
        while True:
            output.feed(await stream.receive(_CHUNK))
    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
        output.finish()
    finally:
        eof.set()


async def _tick(output: _Output) -> None:
    """Flush held-back output every ``UPDATE_INTERVAL`` (the trailing edge of the throttle)."""
    while True:
        await anyio.sleep(UPDATE_INTERVAL)
        output.flush()


async def _pump(process: Process, output: _Output) -> bool:
    """Read the output until it ends; returns True if background holders had to be killed.

    The shell's exit is noticed by polling ``returncode`` (asyncio's ``wait()`` also waits for
    the pipe, which a background child may hold forever).
    """
    assert process.stdout is not None
    eof = anyio.Event()
    killed_background = False
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_read_into, process.stdout, output, eof)
        tasks.start_soon(_tick, output)
        while not eof.is_set() and process.returncode is None:
            with anyio.move_on_after(_EXIT_POLL):
                await eof.wait()
        if not eof.is_set():
            with anyio.move_on_after(BACKGROUND_GRACE):
                await eof.wait()
        if not eof.is_set():
            killed_background = True
            _kill_group(process)
            with anyio.move_on_after(BACKGROUND_GRACE):
                await eof.wait()  # a holder outside the group keeps it open: stop reading
        tasks.cancel_scope.cancel()
    return killed_background


_SECRET_NAME = re.compile(
    r"(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|PRIVATE_KEY)(_|$)",
    re.IGNORECASE,
)


def command_env(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without the variables whose names look like secrets (``OPENAI_API_KEY``,
    ``GITHUB_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORD``, …)."""
    return {name: value for name, value in environ.items() if not _SECRET_NAME.search(name)}


SANDBOXED = (
    " Commands run in a sandbox: {where}, the rest of the disk is read-only, secrets folders "
    "are hidden, {network}, and every process a command starts ends with it (a background "
    "command's when it ends). Only if a command cannot work so (installing packages, "
    "fetching, writing outside the workspace), run it again with escalate \"network\" or "
    "\"unsandboxed\" and a reason{asked}."
)
SANDBOXED_APART = (
    " Without the network each command has a network of its own: a server started in the "
    "background is reachable only from commands that have the network too (escalate "
    "\"network\" for both)."
)


class BashTool(Tool[BashParams]):
    name = "bash"
    info = ToolInfo(kind="execute", command_arg="command", hook_name="Bash")
    description = (
        "Run a bash command in the working directory; stdout and stderr are merged. Output is "
        f"truncated to the last {DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024}KB "
        "(the full output is saved to a temp file, named in the result). Optional timeout in "
        "seconds. A nonzero exit code is an error. Processes a command leaves behind that keep "
        "the output open are killed shortly after it exits. For a server, a watcher or "
        "anything that must keep running, set background: true instead of using &."
    )
    Params = BashParams
    sequential = False

    def __init__(
        self, *, sanitize_env: bool = True, processes: ProcessScope | None = None,
        sandbox: CommandSandbox | None = None, background: ProcessTable | None = None,
    ) -> None:
        """``sanitize_env`` drops secrets (API keys, tokens, passwords) from the environment
        the command sees, so the model cannot read them with ``env``. ``processes`` (a new
        scope when None) is where the commands' processes are recorded. ``sandbox``: the
        session's command sandbox (None: commands run unsandboxed, and say nothing of it).
        ``background``: the session's background processes (a new table on ``processes``
        when None)."""
        self.sanitize_env = sanitize_env
        self.processes = processes or ProcessScope()
        self.sandbox = sandbox
        self.background = background or ProcessTable(self.processes)

    def model_description(self) -> str:
        """The description, with what the sandbox lets a command do when commands run in it."""
        if self.sandbox is None:
            return self.description
        use = self.sandbox.plan()
        if not use.sandboxed:
            return self.description
        where = ("the workspace and /tmp (private to the command) are writable"
                 if use.runs_in == "workspace-write" else "only /tmp (private) is writable")
        network = "there is network access" if use.network else "there is no network"
        asked = " (the user may be asked to allow it)" if self.sandbox.may_escalate() else (
            " (this session refuses that: work within the sandbox)")
        apart = "" if use.network else SANDBOXED_APART
        return self.description + SANDBOXED.format(where=where, network=network,
                                                   asked=asked) + apart

    def _use(self, params: BashParams, ctx: ToolContext) -> SandboxUse | None:
        """How this call runs: as the gate judged it, else as the sandbox plans it now."""
        if ctx.sandbox is not None:
            return ctx.sandbox
        if self.sandbox is None:
            return None
        return self.sandbox.plan(params.escalate, params.reason)

    async def execute(self, params: BashParams, ctx: ToolContext) -> ToolResult:
        """Run the command; ToolError (with the output) on nonzero exit or timeout.

        Cancellation kills the process group and propagates. With the editor's terminals
        (``ctx.terminal``) an unsandboxed command runs there instead
        (tiller.tools.bash_terminal). A command the sandbox must refuse (``refused``) fails.
        """
        use = self._use(params, ctx)
        if use is not None and use.refused:
            raise ToolError(f"Command not run: {use.refused}", details={"sandbox": use.wire()})
        if params.background:
            return await self._start_background(params, ctx, use)
        if ctx.terminal is not None and (use is None or not use.sandboxed):
            return await self._in_terminal(ctx.terminal, params, ctx, use)
        shown = {"sandbox": use.wire()} if use is not None else {}
        update = ctx.update
        output = _Output((lambda partial: update({**partial, **shown})) if shown else update)
        argv, env = self._command(params, ctx, use)
        if shown:
            update({"output": "", **shown})
        try:
            with self.processes.spawning() as started:
                process = await anyio.open_process(
                    argv,
                    env=env,
                    cwd=ctx.cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
                started(process.pid)
        except OSError as exc:
            raise ToolError(f"Could not start the command: {exc}") from exc
        finished = killed_background = False
        exit_code: int | None = None
        try:
            with anyio.move_on_after(params.timeout) as deadline:
                killed_background = await _pump(process, output)
                # After a kill the code is known; wait() would also wait for an escaped holder.
                exit_code = process.returncode
                if exit_code is None:
                    exit_code = await process.wait()
                finished = True
        except BaseException:
            output.discard()
            raise
        finally:
            with anyio.move_on_after(_REAP_TIMEOUT, shield=True):
                if not finished:
                    _kill_group(process)
                await process.aclose()
                if process.returncode is not None:
                    self.processes.collected(process.pid)
                await reap_orphans()
        text, truncated = output.render()
        details: dict[str, Any] = {"truncated": truncated, **shown}
        if output.full_output_path is not None:
            details["fullOutputPath"] = output.full_output_path
        if exit_code is None or deadline.cancelled_caught:
            raise ToolError(with_note(text, f"Command timed out after {params.timeout:g} seconds"),
                            details=details if shown else None)
        details = {"exitCode": exit_code, **details}
        note = None
        if exit_code != 0 and use is not None and self.sandbox is not None:
            note = failure_note(text, use, self.sandbox.may_escalate())
        return self._result(text, exit_code, killed_background, details, note)

    def _command(
        self, params: BashParams, ctx: ToolContext, use: SandboxUse | None
    ) -> tuple[list[str], dict[str, str]]:
        """The argv that runs the command as ``use`` says (in bubblewrap when sandboxed) and
        its environment (secrets dropped unless told otherwise, the scope's tag added)."""
        env = command_env(os.environ) if self.sanitize_env else dict(os.environ)
        if params.background:
            env["PYTHONUNBUFFERED"] = "1"
        argv = [_shell(), "-c", params.command]
        if use is not None and use.sandboxed:
            if self.sandbox is None:
                raise ToolError("Command not run: it was judged to run in a sandbox this tool "
                                "does not have")
            argv = self.sandbox.wrap(argv, ctx.cwd, use, env)
        return argv, self.processes.environ(env)

    async def _start_background(
        self, params: BashParams, ctx: ToolContext, use: SandboxUse | None
    ) -> ToolResult:
        """Start the command in the background; return after ``START_WINDOW`` seconds or its
        end, with its id and first output (an error result if it has failed already)."""
        argv, env = self._command(params, ctx, use)
        process = await self.background.start(argv, env=env, cwd=ctx.cwd,
                                              command=params.command,
                                              tool_call_id=ctx.tool_call_id)
        with anyio.move_on_after(START_WINDOW):
            await process.ended.wait()
        text, _ = process.read_new()
        info = process.info()
        details: dict[str, Any] = {"process": info.dump()}
        if use is not None:
            details["sandbox"] = use.wire()
        cut = truncate_tail(text)
        shown = cut.content if not cut.truncated else with_note(
            cut.content, "[Showing the end of its output]")
        if process.running:
            head = (f"Started background process {info.id} (pid {info.pid}); its output in "
                    f"the first {START_WINDOW:g} s:" if text else
                    f"Started background process {info.id} (pid {info.pid}); no output in "
                    f"the first {START_WINDOW:g} s.")
            body = f"{head}\n{shown}" if text else head
            return ToolResult.text(with_note(
                body, f"[process_output {info.id} reads what it writes next, process_kill "
                      f"{info.id} stops it; you are told when it exits]"), details=details)
        process.told = True
        process.notice_due = False
        body = f"Background process {info.id} {describe_end(info)} at once"
        body += f"; its output:\n{shown}" if text else " without output."
        failed = info.state != "exited" or info.exit_code != 0
        if failed:
            note = None
            if use is not None and self.sandbox is not None:
                note = failure_note(text, use, self.sandbox.may_escalate())
            raise ToolError(with_note(body, note) if note else body, details=details)
        return ToolResult.text(body, details=details)

    @staticmethod
    async def _in_terminal(
        terminal: Terminal, params: BashParams, ctx: ToolContext, use: SandboxUse | None
    ) -> ToolResult:
        """Run the command in the editor's terminal, unsandboxed; the result says so when the
        session has a sandbox (``use``)."""
        try:
            result = await run_in_terminal(terminal, params.command, params.timeout, ctx)
        except ToolError as exc:
            if use is not None:
                exc.details = {"sandbox": use.wire()}
            raise
        if use is not None and isinstance(result.details, dict):
            result.details["sandbox"] = use.wire()
        return result

    def _result(
        self, text: str, exit_code: int, killed: bool, details: dict[str, Any],
        note: str | None,
    ) -> ToolResult:
        """The success result, or ToolError with the output for a nonzero exit (``note``
        last: why the sandbox stopped it). A failure carries the details when they say how
        the command was sandboxed."""
        if killed:
            text = with_note(
                text,
                "[The command exited but background processes kept its output open: its process "
                "group was killed and reading stopped. Redirect their output (cmd > log 2>&1 &) "
                "to keep them running.]",
            )
        failed = details if "sandbox" in details else None
        if exit_code < 0:
            text = with_note(text, f"Command was killed by signal {_signal_name(-exit_code)}")
        elif exit_code != 0:
            text = with_note(text, f"Command exited with code {exit_code}")
        if exit_code != 0:
            raise ToolError(with_note(text, note) if note else text, details=failed)
        return ToolResult.text(text or "(no output)", details=details)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
