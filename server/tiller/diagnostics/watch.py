"""A session's diagnostics around the agent's file changes: what each change introduced, told to
the model in the call's result.

For a call of a tool that changes the file its path argument names (``ToolInfo.changes_files``:
``write``, ``edit``), the file's diagnostics are taken twice: **before** the call runs (once the
permission gate let it: a cleared hook; a file that does not exist yet has none) and **after** it
succeeded (the after-tool hook). The baseline is always asked for anew, never remembered from an
earlier call: the user, a formatter or a command may have changed the file (or its
dependencies) in between. The problems of the second set that the first does not account for
(tiller.diagnostics.problems) are appended to the result's text, after a blank line.

The diagnostics come from the editor when the client declared ``diagnostics``
(tiller.diagnostics.editor), else from the config file's ``[diagnostics]`` command for the
file's glob (tiller.diagnostics.commands), else there are none. Any failure to get either set (an
error answer, a timeout, a command that cannot run) leaves the result as the tool made it; a
failed call is left alone too. Calls of other tools (``bash``, an MCP server's) are not looked
at: which files they change is known only afterwards, with no baseline to compare with.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from tiller.diagnostics.commands import CommandDiagnostics
from tiller.diagnostics.problems import Diagnostic, line_map, new_problems, report
from tiller.tools.base import Tool, describe
from tiller.tools.truncate import with_note
from tiller.types import (
    AgentEnd,
    AgentEvent,
    ImageContent,
    TextContent,
    ToolCall,
    ToolResultMessage,
)

__all__ = ["DiagnosticsSource", "DiagnosticsWatch"]

log = logging.getLogger(__name__)


class DiagnosticsSource(Protocol):
    """Where a file's diagnostics come from (the editor, a command)."""

    def origin(self, path: Path) -> str:
        """Who reports ``path``'s problems, in words for the model (``the editor's
        diagnostics``)."""
        ...

    async def diagnostics(self, path: Path, tool_call_id: str) -> list[Diagnostic] | None:
        """``path``'s diagnostics now; None when they could not be had (never raises)."""
        ...


class DiagnosticsWatch:
    """One session's diagnostics around its file changes (see the module docstring): a cleared
    hook (``before_tool``), an after-tool hook (``after_tool``) and a subscriber (a run's end
    drops the baselines of calls that never finished). ``editor`` is set when the client
    offers ``client/getDiagnostics``; ``commands`` are the config file's."""

    def __init__(self, tools: Callable[[], Sequence[Tool[Any]]], cwd: Path,
                 commands: CommandDiagnostics | None = None) -> None:
        self.tools, self.cwd, self.commands = tools, cwd, commands
        self.editor: DiagnosticsSource | None = None
        self._before: dict[str, tuple[Path, DiagnosticsSource, list[Diagnostic]]] = {}

    def __call__(self, event: AgentEvent) -> None:
        if isinstance(event, AgentEnd):
            self._before.clear()

    def _source(self, path: Path) -> DiagnosticsSource | None:
        if self.editor is not None:
            return self.editor
        if self.commands is not None and self.commands.command_for(path) is not None:
            return self.commands
        return None

    def _path(self, call: ToolCall) -> Path | None:
        info = describe(self.tools(), call.name)
        return info.call_path(call.arguments, self.cwd) if info.changes_files else None

    async def before_tool(self, call: ToolCall, args: dict[str, Any]) -> None:
        """Cleared hook: the file's diagnostics before the call changes it. Never raises."""
        path = self._path(call)
        source = self._source(path) if path is not None else None
        if path is None or source is None:
            return
        try:
            baseline = await source.diagnostics(path, call.id) if path.exists() else []
        except Exception:
            log.exception("diagnostics before %s failed", call.name)
            return
        if baseline is not None:
            self._before[call.id] = (path, source, baseline)

    async def after_tool(
        self, call: ToolCall, result: ToolResultMessage
    ) -> list[TextContent | ImageContent] | None:
        """After-tool hook: the result's content with the report of the problems the call
        introduced at the end of its text; None when there are none (or they are not known).
        Never raises."""
        before = self._before.pop(call.id, None)
        if before is None or result.is_error:
            return None
        path, source, baseline = before
        try:
            after = await source.diagnostics(path, call.id)
        except Exception:
            log.exception("diagnostics after %s failed", call.name)
            return None
        if after is None:
            return None
        details = result.details
        diff = details.get("diff") if isinstance(details, dict) else None
        fresh = new_problems(baseline, after, line_map(diff if isinstance(diff, str) else None))
        shown = path.relative_to(self.cwd).as_posix() if path.is_relative_to(self.cwd) \
            else str(path)
        found = report([(shown, fresh)], source.origin(path))
        if found is None:
            return None
        content = list(result.content)
        if content and isinstance(last := content[-1], TextContent):
            content[-1] = TextContent(text=with_note(last.text, found))
        else:
            content.append(TextContent(text=found))
        return content
