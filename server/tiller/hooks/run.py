"""Running one hook command: JSON on its stdin, its output and exit code back, within its
timeout.

The command runs as ``sh -c`` in the workspace, in a new session (its own process group) that
belongs to the session's ``ProcessScope`` (tiller.procs): a timeout, a cancellation (an abort)
and the session's close kill the whole group. Its environment is the server's without secrets
(as ``bash``'s, ``command_env``) plus ``CLAUDE_PROJECT_DIR`` and ``TILLER_PROJECT_DIR`` (the
workspace) and ``TILLER_SESSION_ID``. Hooks are the user's own commands (their config file, or a
workspace they trusted), so they run outside the command sandbox, as Claude Code runs them.
Output is kept up to ``OUTPUT_LIMIT`` characters a stream.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, Process

from tiller.procs import ProcessScope, reap_orphans

__all__ = ["BACKGROUND_GRACE", "OUTPUT_LIMIT", "CommandOutcome", "run_command"]

OUTPUT_LIMIT = 64 * 1024
"""Characters of a hook's stdout (and of its stderr) kept; the rest is read and dropped."""
BACKGROUND_GRACE = 0.5
"""Seconds the output may stay open after the command exits; then its group is killed."""
_REAP_TIMEOUT = 5.0


@dataclass(frozen=True)
class CommandOutcome:
    """How a hook command ended: its exit code (None when it was killed or did not start),
    its output, whether its timeout killed it, and why it could not start."""

    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    error: str | None = None


async def _read(stream: ByteReceiveStream | None, into: bytearray) -> None:
    if stream is None:
        return
    try:
        while True:
            chunk = await stream.receive()
            if len(into) < OUTPUT_LIMIT * 4:
                into.extend(chunk)
    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
        return


async def _write(process: Process, data: bytes) -> None:
    """Give the command its input and close its stdin; one that does not read it is fine."""
    if process.stdin is None:
        return
    try:
        await process.stdin.send(data)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
    finally:
        await process.stdin.aclose()


def _kill_group(process: Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _text(data: bytearray) -> str:
    return data.decode("utf-8", errors="replace")[:OUTPUT_LIMIT]


async def run_command(
    command: str, stdin: bytes, *, cwd: Path, env: Mapping[str, str], timeout: float,
    processes: ProcessScope,
) -> CommandOutcome:
    """Run ``command`` with ``stdin``; never raises but for cancellation (which kills it)."""
    try:
        with processes.spawning() as started:
            process = await anyio.open_process(
                ["/bin/sh", "-c", command], env=processes.environ(env), cwd=cwd,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True,
            )
            started(process.pid)
    except OSError as exc:
        return CommandOutcome(None, error=f"could not start it: {exc}")
    out, err = bytearray(), bytearray()
    read_both, reading = anyio.Event(), [process.stdout, process.stderr]

    async def read(stream: ByteReceiveStream | None, into: bytearray) -> None:
        await _read(stream, into)
        reading.remove(stream)
        if not reading:
            read_both.set()

    finished = False
    try:
        with anyio.move_on_after(timeout):
            async with anyio.create_task_group() as group:
                group.start_soon(_write, process, stdin)
                group.start_soon(read, process.stdout, out)
                group.start_soon(read, process.stderr, err)
                await process.wait()
                finished = True
                # Something it left in the background may hold the output open: not for long.
                with anyio.move_on_after(BACKGROUND_GRACE):
                    await read_both.wait()
                _kill_group(process)
    finally:
        with anyio.move_on_after(_REAP_TIMEOUT, shield=True):
            _kill_group(process)  # what it left running in its group ends with it
            await process.aclose()
            if process.returncode is not None:
                processes.collected(process.pid)
            await reap_orphans()
    if not finished:
        return CommandOutcome(None, _text(out), _text(err), timed_out=True)
    return CommandOutcome(process.returncode, _text(out), _text(err))
