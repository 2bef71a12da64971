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

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from tiller.procs import CommandOutcome, ProcessScope
from tiller.procs import run_command as run_argv

__all__ = ["OUTPUT_LIMIT", "run_command"]

OUTPUT_LIMIT = 64 * 1024
"""Characters of a hook's stdout (and of its stderr) kept; the rest is read and dropped."""


async def run_command(
    command: str, stdin: bytes, *, cwd: Path, env: Mapping[str, str], timeout: float,
    processes: ProcessScope,
) -> CommandOutcome:
    """Run ``command`` (``sh -c``) with ``stdin`` (``tiller.procs.run_command``); never raises
    but for cancellation (which kills it)."""
    outcome = await run_argv(["/bin/sh", "-c", command], cwd=cwd, env=env, timeout=timeout,
                             scope=processes, stdin=stdin, limit=OUTPUT_LIMIT * 4)
    return replace(outcome, stdout=outcome.stdout[:OUTPUT_LIMIT],
                   stderr=outcome.stderr[:OUTPUT_LIMIT])
