"""``bash`` in the editor's terminal (``ToolContext.terminal``, ACP's ``terminal/*``).

The command is started with ``Terminal.create`` (the editor keeps the last ``DEFAULT_MAX_BYTES``
of output) and the call reports ``{"terminalId"}`` at once, so the editor can show the terminal
live. Its output is read once, when the command has ended (``terminal/output`` after
``terminal/wait_for_exit``): the editor shows the terminal itself, so polling it while it runs
would only cost requests (acpx prints a line for each). Then, as for the local ``bash``:

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

__all__ = ["run_in_terminal"]

_CLEANUP_TIMEOUT = 5.0


def _text(final: TerminalOutput) -> tuple[str, bool]:
    """The output for the model, tail-truncated, and whether anything was cut."""
    cut = truncate_tail(final.output)
    text = cut.content
    if cut.truncated or final.truncated:
        text = with_note(text, "[Output truncated: showing its end; the editor's terminal shows "
                           "what it kept]")
    return text, cut.truncated or final.truncated


async def run_in_terminal(
    terminal: Terminal, command: str, timeout: float | None, ctx: ToolContext
) -> ToolResult:
    """Run ``command`` in a new terminal of the editor; see the module docstring."""
    terminal_id = await terminal.create(command, ctx.cwd, DEFAULT_MAX_BYTES)
    ctx.update({"terminalId": terminal_id, "output": ""})
    try:
        with anyio.move_on_after(math.inf if timeout is None else timeout) as deadline:
            status = await terminal.wait_for_exit(terminal_id)
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
