"""``bash`` in the editor's terminal (``ToolContext.terminal``, ACP's ``terminal/*``).

The command is started with ``Terminal.create`` (the editor keeps the last ``DEFAULT_MAX_BYTES``
of output) and the call reports ``{"terminalId"}`` at once, so the editor can show the terminal
live. While it runs, its output is polled every ``POLL_INTERVAL`` seconds and reported as
``{"terminalId", "output"}`` (tail-truncated), as the local ``bash`` streams. Then, as for the
local ``bash``:

* a timeout kills the command (``Terminal.kill``) and fails the call with the output and a note;
* an abort (cancellation) kills it too, under a shielded scope, and propagates;
* the model gets the tail-truncated output; a nonzero exit code or a signal is an error;
* the terminal is always released at the end (the editor keeps showing its output).

There is no full-output file: the editor's terminal has the output, within its byte limit.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import anyio

from tiller.errors import ToolError
from tiller.tools.base import Terminal, TerminalOutput, ToolContext, ToolResult
from tiller.tools.truncate import DEFAULT_MAX_BYTES, truncate_tail, with_note

__all__ = ["POLL_INTERVAL", "run_in_terminal"]

POLL_INTERVAL = 0.5
"""Seconds between two ``Terminal.output`` polls while the command runs."""
_CLEANUP_TIMEOUT = 5.0


async def _poll(terminal: Terminal, terminal_id: str, ctx: ToolContext) -> None:
    """Report the output whenever it changed, until cancelled (or the editor fails to say:
    the progress is best-effort)."""
    last = ""
    while True:
        await anyio.sleep(POLL_INTERVAL)
        try:
            now = await terminal.output(terminal_id)
        except ToolError:
            return
        if now.output != last:
            last = now.output
            ctx.update({"terminalId": terminal_id, "output": truncate_tail(last).content})


def _text(final: TerminalOutput) -> tuple[str, bool]:
    """The output for the model, tail-truncated, and whether anything was cut."""
    cut = truncate_tail(final.output)
    text = cut.content
    if cut.truncated or final.truncated:
        text = with_note(text, "[Output truncated: showing its end; the editor's terminal shows "
                           "what it kept]")
    return text, cut.truncated or final.truncated


async def _wait(terminal: Terminal, terminal_id: str, ctx: ToolContext) -> TerminalOutput:
    """The command's end, polling its output meanwhile; ToolError when the editor fails."""
    failure: ToolError | None = None
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_poll, terminal, terminal_id, ctx)
        try:
            status = await terminal.wait_for_exit(terminal_id)
        except ToolError as exc:  # raised here, a task group would wrap it in a group
            failure = exc
        tasks.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return status


async def run_in_terminal(
    terminal: Terminal, command: str, timeout: float | None, ctx: ToolContext
) -> ToolResult:
    """Run ``command`` in a new terminal of the editor; see the module docstring."""
    terminal_id = await terminal.create(command, ctx.cwd, DEFAULT_MAX_BYTES)
    ctx.update({"terminalId": terminal_id, "output": ""})
    try:
        with anyio.move_on_after(math.inf if timeout is None else timeout) as deadline:
            status = await _wait(terminal, terminal_id, ctx)
        if deadline.cancelled_caught:
            await terminal.kill(terminal_id)
        final = await terminal.output(terminal_id)
    except BaseException:
        with anyio.move_on_after(_CLEANUP_TIMEOUT, shield=True), \
                contextlib.suppress(Exception):
            await terminal.kill(terminal_id)
        raise
    finally:
        with anyio.move_on_after(_CLEANUP_TIMEOUT, shield=True), \
                contextlib.suppress(Exception):
            await terminal.release(terminal_id)
    text, truncated = _text(final)
    if deadline.cancelled_caught:
        raise ToolError(with_note(text, f"Command timed out after {timeout:g} seconds"))
    if status.signal:
        raise ToolError(with_note(text, f"Command was killed by signal {status.signal}"))
    if status.exit_code:
        raise ToolError(with_note(text, f"Command exited with code {status.exit_code}"))
    details: dict[str, Any] = {"exitCode": status.exit_code or 0, "truncated": truncated,
                               "terminalId": terminal_id}
    return ToolResult.text(text or "(no output)", details=details)
