"""The ``grep`` tool: search file contents for a regex (or a literal string), respecting .gitignore.

Two engines, one output. With ``rg`` on PATH, ripgrep searches (``--json --sort path``, hidden
files included, ``.git`` and ``node_modules`` excluded, ``.ignore`` files not read, and outside
a git repository ``.gitignore`` files honoured below the root only, as the walk does). Without
it, a Python engine searches the files ``walk.list_files`` gives. Both feed the same per-file hit
lists into the same renderer, so the text is identical (for patterns both regex dialects read
the same way; the pattern syntax is ripgrep's when ripgrep runs, Python's otherwise, searched by
``tiller.tools.pattern`` so that no pattern stalls the server).

Shared rules: paths relative to the search root (the file's name when ``path`` is a file),
files in ripgrep's path order, the ``glob`` filter applied in Python by ``walk.PathGlob`` on both
engines (ripgrep's own ``--glob`` would override .gitignore), files containing a NUL byte and
symlinks found while walking skipped, a UTF-8 BOM dropped, invalid UTF-8 shown as U+FFFD, lines
split on ``\\n`` (a ``\\r`` before it is not shown), lines over 500 characters cut with "…".

Output is ripgrep's default format: ``path:N:text`` for a matching line, ``path-N-text`` for a
context line and, when context is asked for, ``--`` between blocks that are not adjacent. At most
``limit`` matches (default 100) are shown, the last one with its after-context; then the output
is cut at 2,000 lines / 50KB. Notices say when and how to see more.
"""

from __future__ import annotations

import base64
import codecs
import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
from anyio.abc import ByteReceiveStream
from pydantic import BaseModel, ConfigDict, Field

from tiller.errors import ToolError
from tiller.frozen import frozen
from tiller.tools.base import Tool, ToolContext, ToolInfo, ToolResult
from tiller.tools.find import search_root
from tiller.tools.pattern import ModelPattern
from tiller.tools.truncate import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
    format_size,
    split_lines,
    truncate_head,
)
from tiller.tools.walk import PathGlob, find_git_top, list_files, read_all, spawned
from tiller.types import PathText, SystemText

__all__ = ["DEFAULT_GREP_LIMIT", "MAX_LINE_CHARS", "GrepParams", "GrepTool"]

DEFAULT_GREP_LIMIT = 100
MAX_LINE_CHARS = 500
_CHUNK = 65536


class GrepParams(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    pattern: SystemText = Field(
        description="Regular expression to search for (ripgrep syntax: no look-around or "
        "backreferences), or a plain string with literal=true"
    )
    path: PathText | None = Field(
        default=None,
        description="Directory or file to search, relative to the working directory (default: "
        "the working directory)",
    )
    glob: SystemText | None = Field(
        default=None,
        description="Only search files matching this glob: '*.py' matches names at any depth, "
        "'src/**/*.ts' matches paths relative to path",
    )
    ignore_case: bool = Field(
        default=False, alias="ignoreCase", description="Match case-insensitively"
    )
    literal: bool = Field(
        default=False, description="Treat pattern as a plain string, not a regular expression"
    )
    context: int | None = Field(
        default=None, ge=0, description="Lines of context to show before and after each match"
    )
    limit: int | None = Field(
        default=None,
        ge=1,
        description=f"Maximum number of matches to return (default {DEFAULT_GREP_LIMIT})",
    )


@frozen
class _Query:
    """A validated search: what to look for, where, and how much of it to keep."""

    params: GrepParams
    root: Path
    root_is_dir: bool
    context: int
    limit: int
    glob: PathGlob | None
    """None when no glob was given or ``root`` is a file (a named file is always searched)."""

    def keeps(self, rel: str) -> bool:
        """Whether a file found by walking the root passes the ``glob`` filter."""
        return self.glob is None or self.glob.matches(rel)


@dataclass
class _Line:
    number: int
    text: str
    is_match: bool
    was_cut: bool = False


@dataclass
class _FileHits:
    """One file's matching and context lines, in order (as ripgrep reports them)."""

    path: str
    lines: list[_Line] = field(default_factory=list)
    matches: int = 0


@dataclass
class _Found:
    """Files with hits, in order; ``total`` may stop just past the limit (the search stops)."""

    files: list[_FileHits] = field(default_factory=list)
    total: int = 0


def _line(number: int, raw: str, is_match: bool) -> _Line:
    """A line as shown: without its ``\\r``, cut at ``MAX_LINE_CHARS`` characters."""
    text = raw.removesuffix("\r")
    if len(text) <= MAX_LINE_CHARS:
        return _Line(number, text, is_match)
    return _Line(number, text[:MAX_LINE_CHARS] + "…", is_match, was_cut=True)


# --- the Python engine ------------------------------------------------------------------------


def _compile(params: GrepParams) -> ModelPattern:
    """The query's pattern on the Python engine; ToolError for an invalid pattern."""
    return ModelPattern(params.pattern, "regex pattern", literal=params.literal,
                        ignore_case=params.ignore_case)


def _scan_file(path: Path, rel: str, pattern: ModelPattern, context: int) -> _FileHits | None:
    """The hits in one file (None for no match, a binary file or an unreadable one)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"\x00" in data:
        return None
    data = data.removeprefix(codecs.BOM_UTF8)
    lines = split_lines(data.decode("utf-8", errors="replace"))
    matched = {index for index, line in enumerate(lines) if pattern.search(line) is not None}
    if not matched:
        return None
    shown: set[int] = set()
    for index in matched:
        shown.update(range(max(0, index - context), min(len(lines), index + context + 1)))
    hits = [_line(index + 1, lines[index], index in matched) for index in sorted(shown)]
    return _FileHits(rel, hits, len(matched))


def _scan_files(
    base: Path, files: list[str], query: _Query, pattern: ModelPattern, walked: bool,
    checkpoint: Callable[[], None],
) -> _Found:
    """Search ``files`` (relative to ``base``; symlinks skipped if ``walked``) for ``pattern``
    (the query's) in order until more than ``limit`` matches are found (blocking;
    ``checkpoint`` is called per file and may raise to stop)."""
    found = _Found()
    for rel in files:
        checkpoint()
        if walked and os.path.islink(base / rel):
            continue
        hits = _scan_file(base / rel, rel, pattern, query.context)
        if hits is not None:
            found.files.append(hits)
            found.total += hits.matches
            if found.total > query.limit:
                break
    return found


async def _search_python(query: _Query, use_git: bool) -> _Found:
    """The Python engine: list the files like ``find`` does, then scan them in a thread."""
    pattern = _compile(query.params)  # before listing: an invalid pattern fails at once
    if query.root_is_dir:
        listing = await list_files(query.root, use_git=use_git)
        base = query.root
        files = [rel for rel in listing.files if query.keeps(rel)]
    else:
        base, files = query.root.parent, [query.root.name]
    return await anyio.to_thread.run_sync(
        _scan_files, base, files, query, pattern, query.root_is_dir,
        anyio.from_thread.check_cancelled,
    )


# --- the ripgrep engine -----------------------------------------------------------------------


def _rg_text(value: dict[str, Any]) -> str:
    """A ripgrep JSON "arbitrary data" object as text (base64 bytes decoded leniently)."""
    if "text" in value:
        return str(value["text"])
    return base64.b64decode(value.get("bytes", "")).decode("utf-8", errors="replace")


class _RipgrepStream:
    """Turns ripgrep's ``--json`` messages into a ``_Found``; ``stopped`` once past the limit."""

    def __init__(self, query: _Query) -> None:
        self.query = query
        self.found = _Found()
        self.stopped = False
        self.saw_output = False
        self._current: _FileHits | None = None

    async def consume(self, stream: ByteReceiveStream | None) -> None:
        """Read messages until the stream ends or the limit is passed."""
        if stream is None:
            return
        partial: list[bytes] = []  # the pieces of a message not yet ended by a newline
        try:
            while not self.stopped:
                chunk = await stream.receive(_CHUNK)
                if b"\n" not in chunk:
                    partial.append(chunk)
                    continue
                first, *lines, rest = chunk.split(b"\n")
                lines.insert(0, b"".join([*partial, first]))
                partial = [rest]
                for line in lines:
                    if line.strip() and not self.stopped:
                        self._handle(json.loads(line))
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            pass

    def _handle(self, message: dict[str, Any]) -> None:
        self.saw_output = True
        kind, data = message.get("type"), message.get("data", {})
        if kind == "begin":
            path = _rg_text(data["path"]).removeprefix("./")
            self._current = _FileHits(path) if self.query.keeps(path) else None
        elif kind in ("match", "context") and self._current is not None:
            text = _rg_text(data["lines"]).removesuffix("\n")
            self._current.lines.append(_line(data["line_number"], text, kind == "match"))
            if kind == "match":
                self._current.matches += 1
                if self.found.total + self._current.matches > self.query.limit:
                    self._keep_current()
                    self.stopped = True
        elif kind == "end":
            if data.get("binary_offset") is None:
                self._keep_current()
            self._current = None

    def _keep_current(self) -> None:
        if self._current is not None and self._current.matches:
            self.found.files.append(self._current)
            self.found.total += self._current.matches
        self._current = None


def _ripgrep_argv(rg: str, query: _Query, target: str, in_repository: bool) -> list[str]:
    """ripgrep's command line for ``query`` (see the module docstring for the choices)."""
    argv = [rg, "--json", "--no-config", "--sort", "path", "--hidden", "--no-ignore-dot"]
    argv += ["--glob", "!.git", "--glob", "!node_modules"]
    if not in_repository:
        argv += ["--no-require-git", "--no-ignore-parent"]
    if query.params.ignore_case:
        argv.append("--ignore-case")
    if query.params.literal:
        argv.append("--fixed-strings")
    if query.context:
        argv += ["--context", str(query.context)]
    return [*argv, "--regexp", query.params.pattern, "--", target]


async def _search_ripgrep(rg: str, query: _Query) -> _Found:
    """The ripgrep engine; rg is killed once the limit is passed or the call is cancelled."""
    if query.root_is_dir:
        cwd, target = query.root, "."
    else:
        cwd, target = query.root.parent, query.root.name
    in_repository = await anyio.to_thread.run_sync(find_git_top, query.root) is not None
    argv = _ripgrep_argv(rg, query, target, in_repository)
    parser = _RipgrepStream(query)
    stderr = bytearray()
    try:
        async with spawned(argv, cwd) as process:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(read_all, process.stderr, stderr, 8192)
                await parser.consume(process.stdout)
                if parser.stopped:
                    tasks.cancel_scope.cancel()
            returncode = None if parser.stopped else await process.wait()
    except OSError as exc:
        raise ToolError(f"Could not run ripgrep ({rg}): {exc}") from exc
    if returncode not in (None, 0, 1) and not parser.saw_output:
        message = stderr.decode("utf-8", errors="replace").strip()
        if message.startswith("regex parse error"):
            raise ToolError(f"Invalid regex pattern {query.params.pattern!r}: {message}")
        raise ToolError(f"ripgrep failed (exit code {returncode}): {message}")
    return parser.found


# --- rendering --------------------------------------------------------------------------------


def _shown_lines(found: _Found, query: _Query) -> Iterator[tuple[str, _Line]]:
    """The lines to show: everything up to the ``limit``-th match and its after-context."""
    shown = last_match = 0
    last_path = ""
    for hits in found.files:
        for line in hits.lines:
            if shown >= query.limit and (
                hits.path != last_path or line.is_match or line.number > last_match + query.context
            ):
                return
            if line.is_match:
                shown, last_match, last_path = shown + 1, line.number, hits.path
            yield hits.path, line


@dataclass
class _Rendered:
    text: str
    matches: int
    lines_cut: bool


def _render(found: _Found, query: _Query) -> _Rendered:
    """ripgrep's default text for the shown lines (``--`` between blocks when context > 0)."""
    out: list[str] = []
    matches = 0
    lines_cut = False
    previous: tuple[str, int] | None = None
    for path, line in _shown_lines(found, query):
        if query.context and previous is not None and previous != (path, line.number - 1):
            out.append("--")
        mark = ":" if line.is_match else "-"
        out.append(f"{path}{mark}{line.number}{mark}{line.text}")
        matches += line.is_match
        lines_cut = lines_cut or line.was_cut
        previous = (path, line.number)
    return _Rendered("\n".join(out), matches, lines_cut)


def _notices(rendered: _Rendered, found: _Found, query: _Query, output_lines: int | None) -> str:
    """The notices to append (empty when everything was shown as is)."""
    notices: list[str] = []
    if found.total > query.limit:
        notices.append(
            f"[{query.limit} matches limit reached. Use limit={query.limit * 2} for more, or "
            "narrow the pattern, path or glob.]"
        )
    if output_lines is not None:
        notices.append(
            f"[Output truncated to its first {output_lines} lines ({DEFAULT_MAX_LINES} lines / "
            f"{format_size(DEFAULT_MAX_BYTES)} limit). Narrow the pattern, path or glob, or lower "
            "context or limit, to see the rest.]"
        )
    if rendered.lines_cut:
        notices.append(
            f"[Lines longer than {MAX_LINE_CHARS} characters were cut (…). Use read to see them "
            "in full.]"
        )
    return "\n".join(notices)


def _check_root(root: Path) -> bool:
    """Whether the search root is a directory (else a file); ToolError when it is missing."""
    if not root.exists():
        raise ToolError(f"Path not found: {root}")
    if not root.is_dir() and not root.is_file():
        raise ToolError(f"Not a regular file or directory: {root}")
    return root.is_dir()


class GrepTool(Tool[GrepParams]):
    name = "grep"
    info = ToolInfo(
        kind="search", mutates=False, path_arg="path", path_default=".",
        title="Search {pattern!r} in {path}", hook_name="Grep",
    )
    description = (
        "Search file contents for a regex (or a literal string with literal=true), respecting "
        ".gitignore; skips binary files, .git and node_modules. Output lines are path:N:text "
        "(context lines path-N-text, blocks separated by --), paths relative to path. Optional "
        f"glob filter, ignoreCase and context lines. At most limit matches (default "
        f"{DEFAULT_GREP_LIMIT}) and {DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024}KB; "
        f"lines over {MAX_LINE_CHARS} characters are cut. A notice says when output was cut."
    )
    Params = GrepParams

    def __init__(self, *, use_ripgrep: bool = True, use_git: bool = True) -> None:
        """``use_ripgrep=False`` always uses the Python engine; ``use_git=False`` makes that
        engine list files with the Python walk instead of ``git ls-files``."""
        self.use_ripgrep = use_ripgrep
        self.use_git = use_git

    def ripgrep_path(self) -> str | None:
        """The ripgrep executable to use, or None for the Python engine."""
        return shutil.which("rg") if self.use_ripgrep else None

    async def execute(self, params: GrepParams, ctx: ToolContext) -> ToolResult:
        """Search; ToolError for a missing path or an invalid regex. No match is not an error.

        Cancellation kills ripgrep / git or stops the Python scan."""
        root = search_root(params.path, ctx.cwd)
        root_is_dir = await anyio.to_thread.run_sync(_check_root, root)
        context, limit = params.context or 0, params.limit or DEFAULT_GREP_LIMIT
        glob = PathGlob(params.glob) if params.glob and root_is_dir else None
        query = _Query(params, root, root_is_dir, context, limit, glob)
        rg = self.ripgrep_path()
        if rg is not None:
            found = await _search_ripgrep(rg, query)
        else:
            found = await _search_python(query, self.use_git)
        details: dict[str, Any] = {
            "engine": "ripgrep" if rg is not None else "python",
            "matches": 0,
            "limitReached": found.total > limit,
            "truncated": False,
        }
        if not found.files:
            return ToolResult.text("No matches found", details=details)
        rendered = _render(found, query)
        cut = truncate_head(rendered.text)
        notices = _notices(rendered, found, query, cut.output_lines if cut.truncated else None)
        details.update(matches=rendered.matches, truncated=cut.truncated)
        details["linesCut"] = rendered.lines_cut
        text = f"{cut.content}\n\n{notices}" if notices else cut.content
        return ToolResult.text(text, details=details)
