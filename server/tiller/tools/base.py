"""The tool contract shared by the loop and every built-in tool.

A tool declares its parameters as a pydantic model (the JSON schema the model sees is generated
from it, and the loop validates arguments against it). ``execute`` returns a ``ToolResult`` or
raises; the loop turns any exception (``ToolError`` for expected failures) into an error result
the model can read. Cancellation (abort, timeout) arrives as the async library's cancellation:
a tool that owns processes must kill them on the way out.

A tool also describes itself (``ToolInfo``: its kind, which argument names a path, which holds a
command, whether it changes anything), so that the permission gate, the ACP mapping and the
editor bridge judge and show its calls without ever knowing it by name. A tool that declares
nothing is taken at its worst: it may change anything, anywhere.
"""

from __future__ import annotations

import copy
import functools
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from pydantic import BaseModel

from tiller.frozen import frozen
from tiller.modes import ToolKind
from tiller.sandbox.use import SandboxUse
from tiller.types import ImageContent, TextContent, Usage

__all__ = [
    "EditorFiles",
    "Terminal",
    "TerminalOutput",
    "Tool",
    "ToolContext",
    "ToolInfo",
    "ToolResult",
    "describe",
    "find_tool",
]

P = TypeVar("P", bound=BaseModel)


TITLE_LIMIT = 120
"""Characters of a command shown as a call's title (``ToolInfo.call_title``)."""


class _BlankFields(dict[str, str]):
    """Format fields for a title: a missing argument reads as ""."""

    def __missing__(self, key: str) -> str:
        return ""


def _one_line(text: str) -> str:
    """The first line of ``text``, at most ``TITLE_LIMIT`` characters, "…" when cut."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    more = "…" if len(first) > TITLE_LIMIT or "\n" in text.strip() else ""
    return first[:TITLE_LIMIT] + more


@frozen
class ToolInfo:
    """What a tool is, for those who judge and show its calls (the permission gate, ACP's tool
    calls, the editor bridge).

    ``kind``: ACP's tool kind. ``mutates``: a call may change something (files, processes, the
    world); False promises it only reads. ``path_arg``: the argument naming the file or
    directory a call acts on (the gate judges that path; ACP shows it as the call's location),
    ``path_default`` the path when that argument is absent (``ls``'s "."). ``command_arg``: the
    argument holding a shell command line (the gate judges each simple command of it; it is the
    call's title). ``title``: a ``str.format`` template for showing a call, its fields the call's
    string and integer arguments ("" when absent) with ``{path}`` the path or its default
    ("." without one); empty: the tool's name. ``hook_name``: the name Claude Code's hooks
    know the same tool by (``Bash``, ``Edit``...): a hook's matcher matches either name
    (tiller.hooks).
    ``delegates``: a call does its work through tool calls that are judged one by one where
    they run (a subagent's, in its own session), so the call itself needs no permission; it may
    still change files through them (``mutates``).

    The defaults describe a tool that declares nothing: kind ``other``, mutating, no path."""

    kind: ToolKind = "other"
    mutates: bool = True
    path_arg: str | None = None
    path_default: str | None = None
    command_arg: str | None = None
    title: str = ""
    hook_name: str | None = None
    delegates: bool = False

    @property
    def changes_files(self) -> bool:
        """A call changes the file its path argument names (``write``, ``edit``)."""
        return self.mutates and self.path_arg is not None and self.command_arg is None

    def raw_path(self, args: dict[str, Any]) -> str | None:
        """The call's path argument as the model gave it (or the default); None without one."""
        if self.path_arg is None:
            return None
        raw = args.get(self.path_arg, self.path_default)
        return raw if isinstance(raw, str) else None

    def command(self, args: dict[str, Any]) -> str | None:
        """The call's command line ("" when absent); None for a tool that runs no commands."""
        if self.command_arg is None:
            return None
        return str(args.get(self.command_arg, ""))

    def format_title(self, name: str, args: dict[str, Any]) -> str:
        """The call shown by ``title`` (the tool's name when it has none)."""
        if not self.title:
            return name
        fields = _BlankFields({k: str(v) for k, v in args.items() if isinstance(v, str)
                               or isinstance(v, int) and not isinstance(v, bool)})
        if self.path_arg is not None:
            fields["path"] = fields.get(self.path_arg) or self.path_default or "."
        return self.title.format_map(fields)

    def call_title(self, name: str, args: dict[str, Any]) -> str:
        """How a call is shown in one line, wherever it is shown (ACP's ``tool_call``, Tiller's
        ``tool_execution_start``): a command tool's command (its first line, at most
        ``TITLE_LIMIT`` characters), else ``format_title`` (``Edit src/app.py``; the tool's
        name when it has no title)."""
        command = self.command(args)
        if command is not None:
            return _one_line(command) or name
        return self.format_title(name, args)

    def call_path(self, args: dict[str, Any], cwd: Path) -> Path | None:
        """The absolute path a call acts on (``~`` expanded, relative to ``cwd``, not resolved
        through symlinks; the default, else ".", when the argument is absent or empty); None
        for a tool without a path argument."""
        if self.path_arg is None:
            return None
        path = Path(os.path.expanduser(self.raw_path(args) or "."))
        return path if path.is_absolute() else cwd / path


@dataclass
class ToolResult:
    """What a tool returns. ``terminate`` asks the loop to end the run after this batch
    (honoured only when every result in the batch asks for it)."""

    content: list[TextContent | ImageContent]
    details: Any = None
    is_error: bool = False
    terminate: bool = False

    @classmethod
    def text(cls, text: str, *, details: Any = None, is_error: bool = False) -> ToolResult:
        return cls(content=[TextContent(text=text)], details=details, is_error=is_error)


class EditorFiles(Protocol):
    """The editor's view of files, unsaved buffers included (``client/readTextFile`` and
    ``client/writeTextFile``). ``can_read``/``can_write`` say which the client offers; without
    one, tools use the disk for it; ``keeps_unsaved`` that what it writes is not saved. Both
    methods raise ``ToolError`` when the client fails."""

    can_read: bool
    can_write: bool
    keeps_unsaved: bool
    """Changes written through the editor stay unsaved: the disk keeps the old text."""

    async def read_text(
        self, path: Path, line: int | None = None, limit: int | None = None
    ) -> str:
        """The file's text as the editor has it; ``line`` (1-based) and ``limit`` select lines."""
        ...

    async def write_text(self, path: Path, content: str) -> None:
        """Replace the file's content in the editor (its buffer, so the user can undo)."""
        ...


@frozen
class TerminalOutput:
    """A terminal's output so far (``truncated``: the editor dropped its beginning) and, once
    the command has ended, its exit code or the signal that ended it."""

    output: str
    truncated: bool = False
    exited: bool = False
    exit_code: int | None = None
    signal: str | None = None


class Terminal(Protocol):
    """The editor's terminals (ACP's ``terminal/*``): ``bash`` runs its command in one so the
    user watches it live. Every method raises ``ToolError`` when the editor fails."""

    async def create(self, command: str, cwd: Path, output_limit: int) -> str:
        """Start ``command`` (a shell command line) in ``cwd``; the terminal's id. The editor
        keeps the last ``output_limit`` bytes of output."""
        ...

    async def output(self, terminal_id: str) -> TerminalOutput: ...

    async def wait_for_exit(self, terminal_id: str) -> TerminalOutput:
        """Wait until the command ends (only ``exit_code``/``signal`` are meaningful)."""
        ...

    async def kill(self, terminal_id: str) -> None: ...

    async def release(self, terminal_id: str) -> None:
        """Kill the command if it still runs and free the terminal (its output stays shown)."""
        ...


@dataclass
class ToolContext:
    """Where and for whom a tool runs. ``update`` emits a cumulative partial result; ``files``
    is the editor's file access, or None to use the disk only. ``resolved_path`` is the real
    path of the call's ``path`` argument as the permission gate decided on it (and showed the
    user): a file tool acts on exactly that path on disk. None when no gate resolved one; the
    tool then resolves the path itself, once (``tiller.tools.safefs``). ``sandbox``: how the
    gate judged a command would run (sandboxed or not); the command tool runs it exactly so
    (None: no gate decided, the tool plans it itself). ``spend`` adds model usage the call
    caused (a subagent's model calls) to the call's result and the run's usage; it must not
    raise."""

    cwd: Path
    tool_call_id: str
    update: Callable[[Any], None] = field(default=lambda _partial: None)
    spend: Callable[[Usage], None] = field(default=lambda _usage: None)
    files: EditorFiles | None = None
    resolved_path: Path | None = None
    terminal: Terminal | None = None
    sandbox: SandboxUse | None = None


class Tool(ABC, Generic[P]):
    """A callable capability offered to the model.

    Subclasses set ``name``, ``description`` and ``Params``, and describe themselves in ``info``
    (the default: a tool that may change anything); ``sequential = True`` makes any batch
    containing this tool run one call at a time.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    Params: ClassVar[type[BaseModel]]
    info: ClassVar[ToolInfo] = ToolInfo()
    sequential: ClassVar[bool] = False

    def model_description(self) -> str:
        """The description the model reads, at each model call (default: ``description``; a
        tool whose behaviour depends on the session's settings says so here)."""
        return self.description

    def parameters_schema(self) -> dict[str, Any]:
        """The JSON schema of ``Params``, as sent to the model (a copy of the one built once
        per ``Params`` class: a tool's schema takes milliseconds to build)."""
        return copy.deepcopy(_params_schema(self.Params))

    def proposed_text(self, args: dict[str, Any], current: str, name: str) -> str | None:
        """The text of the file the call changes as it would be after the call, given its
        ``current`` text (``name``: the file's name, for messages), for a permission preview.
        None when the tool cannot tell; raises ``ToolError`` for arguments the call would
        fail on. Must not touch the file."""
        return None

    @abstractmethod
    async def execute(self, params: P, ctx: ToolContext) -> ToolResult:
        """Run the call. Raise ``ToolError`` for failures the model should read."""


def find_tool(tools: Sequence[Tool[Any]], name: str) -> Tool[Any] | None:
    """The tool called ``name`` among ``tools``; None when there is none."""
    return next((tool for tool in tools if tool.name == name), None)


def describe(tools: Sequence[Tool[Any]], name: str) -> ToolInfo:
    """How the tool called ``name`` describes itself; an unknown tool declares nothing."""
    tool = find_tool(tools, name)
    return tool.info if tool is not None else ToolInfo()


@functools.cache
def _params_schema(params: type[BaseModel]) -> dict[str, Any]:
    schema = params.model_json_schema(by_alias=True)
    schema.pop("title", None)
    return schema
