"""The ``ls`` tool: the entries of one directory, sorted, directories marked with ``/``.

Every entry is listed, dotfiles and ignored files included (``ls`` shows what is there; ``find``
and ``grep`` are the ignore-aware tools). Names sort case-insensitively (ties broken by the exact
name); a symlink to a directory counts as a directory. At most ``limit`` entries (default 500)
and 2,000 lines / 50KB of output are returned, with a notice saying how to see the rest.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio.to_thread
from pydantic import BaseModel, Field

from tiller.errors import ToolError
from tiller.tools.base import Tool, ToolContext, ToolInfo, ToolResult
from tiller.tools.files import resolve_path
from tiller.tools.truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, truncate_head
from tiller.types import PathText

__all__ = ["DEFAULT_LS_LIMIT", "LsParams", "LsTool"]

DEFAULT_LS_LIMIT = 500


class LsParams(BaseModel):
    path: PathText | None = Field(
        default=None,
        description="Directory to list, relative to the working directory (default: the working "
        "directory itself)",
    )
    limit: int | None = Field(
        default=None,
        ge=1,
        description=f"Maximum number of entries to return (default {DEFAULT_LS_LIMIT})",
    )


def _sort_key(name: str) -> tuple[str, str]:
    return (name.casefold(), name)


def _entries(directory: Path) -> list[str]:
    """The names in ``directory``, directories suffixed with ``/``, sorted (blocking)."""
    if not directory.exists():
        raise ToolError(f"Path not found: {directory}")
    if not directory.is_dir():
        raise ToolError(f"Not a directory: {directory} (use read to read a file)")
    names: list[str] = []
    with os.scandir(directory) as scan:
        for entry in scan:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            names.append(entry.name + "/" if is_dir else entry.name)
    names.sort(key=_sort_key)
    return names


class LsTool(Tool[LsParams]):
    name = "ls"
    info = ToolInfo(
        kind="read", mutates=False, path_arg="path", path_default=".", title="List {path}",
        hook_name="LS",
    )
    description = (
        "List a directory's entries (default: the working directory), sorted case-insensitively, "
        "directories suffixed with '/', dotfiles included. Returns at most limit entries (default "
        f"{DEFAULT_LS_LIMIT}) and {DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024}KB; a "
        "notice says when entries were left out."
    )
    Params = LsParams

    async def execute(self, params: LsParams, ctx: ToolContext) -> ToolResult:
        """List ``params.path``; ToolError when it is missing, not a directory or unreadable."""
        directory = resolve_path(params.path or ".", ctx.cwd)
        limit = params.limit or DEFAULT_LS_LIMIT
        try:
            names = await anyio.to_thread.run_sync(_entries, directory)
        except OSError as exc:
            raise ToolError(f"Could not list {directory}: {exc.strerror or exc}") from exc
        details = {"path": str(directory), "entries": len(names), "truncated": False}
        if not names:
            return ToolResult.text("(empty directory)", details=details)
        shown = names[:limit]
        cut = truncate_head("\n".join(shown))
        notice = None
        if cut.truncated:
            notice = (
                f"[Showing {cut.output_lines} of {len(names)} entries "
                f"({format_size(DEFAULT_MAX_BYTES)} output limit). List a subdirectory to see "
                "more.]"
            )
        elif len(names) > limit:
            notice = (
                f"[Showing {limit} of {len(names)} entries (limit {limit}). Use "
                f"limit={len(names)} to see them all, or list a subdirectory.]"
            )
        details["truncated"] = notice is not None
        if notice is None:
            return ToolResult.text(cut.content, details=details)
        return ToolResult.text(f"{cut.content}\n\n{notice}", details=details)
