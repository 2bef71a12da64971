"""Diagnostics from a command the config file names for a glob (``[diagnostics]``): for clients
that cannot give the editor's (scripts, ACP clients, ``tiller chat``).

The command runs as the session's ``bash`` commands do: ``bash -c`` in the workspace, in the
session's sandbox when it has one (as a command that asks for nothing more: no network), with
the secrets left out of its environment (unless ``[tools] sanitize_env = false``), in a process
group of its own tagged with the session's ``ProcessScope`` (killed when the session closes);
past the section's ``timeout`` its group is killed and there are no diagnostics. ``{path}``
stands for the file, relative to the workspace when it is inside it, quoted for the shell.

Its output is read in one of two formats:

- ruff's JSON (``--output-format json``): a list of objects with ``filename``, ``location
  {row, column}``, ``message``, ``code`` and, in newer versions, ``severity``;
- lines ``path:line:col: message``, ``path:line: message`` or ``path(line,col): message``
  (compilers, mypy, tsc, most linters' concise output); a message starting with ``error:``,
  ``warning:``, ``note:`` or ``info:`` has that severity (the word is dropped), otherwise it is
  an error.

Only what names the file asked about is kept (paths relative to the workspace or absolute).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tiller.diagnostics.problems import Diagnostic, Severity
from tiller.diagnostics.settings import DiagnosticsSettings
from tiller.procs import ProcessScope, run_command
from tiller.sandbox.command import CommandSandbox
from tiller.sandbox.probe import shell
from tiller.tools.bash import command_env
from tiller.tools.walk import PathGlob

__all__ = ["ORIGIN_LIMIT", "OUTPUT_LIMIT", "CommandDiagnostics", "parse_output"]

log = logging.getLogger(__name__)

OUTPUT_LIMIT = 4 * 1024 * 1024
"""Bytes of a command's output (each stream) read; the rest is dropped."""
ORIGIN_LIMIT = 120
"""Characters of a command shown as the origin of its report."""
_LINE = re.compile(
    r"^(?P<path>[^:(\n]+?)(?::(?P<line>\d+)(?::(?P<col>\d+))?|\((?P<pline>\d+),(?P<pcol>\d+)\))"
    r":\s*(?P<message>.*\S)\s*$")
_SEVERITY = re.compile(r"^(?P<word>error|warning|warn|note|info|information|hint)\b:?\s*",
                       re.IGNORECASE)
_WORDS: dict[str, Severity] = {"error": "error", "warning": "warning", "warn": "warning",
                               "note": "information", "info": "information",
                               "information": "information", "hint": "hint"}


@dataclass
class CommandDiagnostics:
    """The ``[diagnostics]`` commands of a session: ``settings`` the section, ``cwd`` the
    workspace, ``sandbox`` the session's command sandbox (None: unsandboxed), ``processes`` its
    process scope, ``sanitize_env`` whether secrets leave the environment."""

    settings: DiagnosticsSettings
    cwd: Path
    processes: ProcessScope
    sandbox: CommandSandbox | None = None
    sanitize_env: bool = True

    def __post_init__(self) -> None:
        self._globs = [(PathGlob(glob), command) for glob, command in self.settings.commands]

    def _shown(self, path: Path) -> str:
        """``path`` relative to the workspace when it is inside it, else absolute."""
        return path.relative_to(self.cwd).as_posix() if path.is_relative_to(self.cwd) \
            else str(path)

    def _template(self, path: Path) -> str | None:
        """The command line of the first glob that matches ``path``, ``{path}`` unfilled."""
        subject = self._shown(path).lstrip("/")
        return next((command for glob, command in self._globs if glob.matches(subject)), None)

    def command_for(self, path: Path) -> str | None:
        """The command line that reports ``path``'s problems (``{path}`` filled in), or None."""
        template = self._template(path)
        return None if template is None else template.replace(
            "{path}", shlex.quote(self._shown(path)))

    def origin(self, path: Path) -> str:
        """Who reports ``path``'s problems, for the report: the command as configured (at
        most ``ORIGIN_LIMIT`` characters)."""
        template = " ".join((self._template(path) or "").split())
        if len(template) > ORIGIN_LIMIT:
            template = template[: ORIGIN_LIMIT - 1] + "…"
        return f"reported by `{template}`"

    async def diagnostics(self, path: Path, tool_call_id: str) -> list[Diagnostic] | None:
        """``path``'s problems as its command reports them; None when there is no command for
        it, or it could not run or ran out of time (logged)."""
        command = self.command_for(path)
        if command is None:
            return None
        try:
            output = await self._run(command)
        except OSError as exc:
            log.warning("diagnostics: could not run %r: %s", command, exc)
            return None
        if output is None:
            log.warning("diagnostics: %r ran out of time (%g s)", command, self.settings.timeout)
            return None
        stdout, stderr = output
        words = command.split()
        source = os.path.basename(words[0]) if words else None  # who reports: ruff, mypy...
        return parse_output(stdout, stderr, path, self.cwd, source)

    async def _run(self, command: str) -> tuple[str, str] | None:
        """Run ``command``: its stdout and stderr, or None when it ran out of time."""
        env = command_env(os.environ) if self.sanitize_env else dict(os.environ)
        argv = [shell(), "-c", command]
        if self.sandbox is not None:
            # Tiller runs it, not the editor's terminal: it is sandboxed even when bash is not.
            use = replace(self.sandbox, terminal=lambda: False).plan()
            if use.refused:
                raise OSError(use.refused)
            if use.sandboxed:
                argv = self.sandbox.wrap(argv, self.cwd, use, env)
        outcome = await run_command(argv, cwd=self.cwd, env=env, scope=self.processes,
                                    timeout=self.settings.timeout, limit=OUTPUT_LIMIT)
        if outcome.error is not None:
            raise OSError(outcome.error)
        if outcome.timed_out:
            return None
        return outcome.stdout, outcome.stderr


def _same_file(named: str, path: Path, cwd: Path) -> bool:
    candidate = Path(named.strip())
    candidate = candidate if candidate.is_absolute() else cwd / candidate
    return os.path.realpath(candidate) == os.path.realpath(path)


def _ruff(data: Any, path: Path, cwd: Path, source: str | None) -> list[Diagnostic] | None:
    """ruff's JSON list, or None when ``data`` is not one."""
    if not isinstance(data, list) or not all(
            isinstance(item, dict) and "location" in item and "message" in item
            for item in data):
        return None
    found = []
    for item in data:
        location = item.get("location") or {}
        row, column = location.get("row"), location.get("column")
        filename = item.get("filename")
        if not isinstance(row, int) or (isinstance(filename, str)
                                        and not _same_file(filename, path, cwd)):
            continue
        severity = _WORDS.get(str(item.get("severity") or "error").lower(), "error")
        code = item.get("code")
        found.append(Diagnostic(
            line=max(row, 1), message=str(item["message"]), severity=severity,
            column=column if isinstance(column, int) and column >= 1 else None,
            source=source or "ruff", code=str(code) if code is not None else None))
    return found


def parse_output(stdout: str, stderr: str, path: Path, cwd: Path,
                 source: str | None = None) -> list[Diagnostic]:
    """The problems a command reported for ``path`` (see the module docstring): ruff's JSON on
    stdout, else the lines of both streams. ``source`` names the reporter (the command)."""
    text = stdout.strip()
    if text.startswith("["):
        with contextlib.suppress(ValueError):
            found = _ruff(json.loads(text), path, cwd, source)
            if found is not None:
                return found
    problems = []
    for line in (stdout + "\n" + stderr).splitlines():
        match = _LINE.match(line)
        if match is None or not _same_file(match["path"], path, cwd):
            continue
        message = match["message"]
        severity: Severity = "error"
        if word := _SEVERITY.match(message):
            severity = _WORDS[word["word"].lower()]
            message = message[word.end():] or message
        number = match["line"] or match["pline"]
        column = match["col"] or match["pcol"]
        problems.append(Diagnostic(
            line=max(int(number), 1), message=message, severity=severity,
            column=int(column) if column and int(column) >= 1 else None, source=source))
    return problems
