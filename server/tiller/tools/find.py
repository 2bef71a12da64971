"""The ``find`` tool: files whose path matches a glob, respecting .gitignore.

The candidate files come from ``walk.list_files`` (``git ls-files`` inside a work tree, else a
Python walk honouring .gitignore files; ``.git/`` and ``node_modules/`` always skipped). A glob
without ``/`` (``*.py``) matches file names at any depth; one with ``/`` (``src/*.ts``,
``**/test_*.py``) matches the whole path relative to the search directory, with ``**`` crossing
directories. Output: one relative path per line, sorted component by component, at most
``limit`` paths (default 1000) and 2,000 lines / 50KB, with a notice when cut.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio.to_thread
from pydantic import BaseModel, Field

from tiller.errors import ToolError
from tiller.tools.base import Tool, ToolContext, ToolInfo, ToolResult
from tiller.tools.files import resolve_path
from tiller.tools.truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, truncate_head
from tiller.tools.walk import PathGlob, list_files
from tiller.types import PathText, SystemText

__all__ = ["DEFAULT_FIND_LIMIT", "FindParams", "FindTool", "search_root"]

DEFAULT_FIND_LIMIT = 1000


class FindParams(BaseModel):
    pattern: SystemText = Field(
        description="Glob to match, e.g. '*.py' (file names at any depth), '**/*.ts' or "
        "'src/**/test_*.py' (paths relative to the search directory)"
    )
    path: PathText | None = Field(
        default=None,
        description="Directory to search in, relative to the working directory (default: the "
        "working directory)",
    )
    limit: int | None = Field(
        default=None,
        ge=1,
        description=f"Maximum number of paths to return (default {DEFAULT_FIND_LIMIT})",
    )


def search_root(path: str | None, cwd: Path) -> Path:
    """The absolute, normalised path the search tools start from (symlinks kept)."""
    return Path(os.path.abspath(resolve_path(path or ".", cwd)))


class FindTool(Tool[FindParams]):
    name = "find"
    info = ToolInfo(
        kind="search", mutates=False, path_arg="path", path_default=".",
        title="Find {pattern} in {path}", hook_name="Glob",
    )
    description = (
        "Find files by glob ('*.py' matches names at any depth; '**/*.ts', 'src/*.go' match paths "
        "relative to path). Respects .gitignore; skips .git and node_modules. Returns sorted "
        f"relative paths, at most limit (default {DEFAULT_FIND_LIMIT}) and {DEFAULT_MAX_LINES} "
        f"lines or {DEFAULT_MAX_BYTES // 1024}KB, with a notice when cut."
    )
    Params = FindParams

    def __init__(self, *, use_git: bool = True) -> None:
        """``use_git=False`` always uses the Python walk instead of ``git ls-files``."""
        self.use_git = use_git

    async def execute(self, params: FindParams, ctx: ToolContext) -> ToolResult:
        """Matching files under ``params.path``; ToolError if it is missing or not a directory.

        No match is not an error. Cancellation kills git or stops the walk."""
        root = search_root(params.path, ctx.cwd)
        await anyio.to_thread.run_sync(_check_directory, root)
        limit = params.limit or DEFAULT_FIND_LIMIT
        glob = PathGlob(params.pattern)
        listing = await list_files(root, use_git=self.use_git)
        matches = [rel for rel in listing.files if glob.matches(rel)]
        details: dict[str, Any] = {
            "path": str(root),
            "count": len(matches),
            "source": listing.source,
            "truncated": False,
        }
        if not matches:
            return ToolResult.text(f"No files found matching {params.pattern}", details=details)
        notice = _notice(matches, limit)
        cut = truncate_head("\n".join(matches[:limit]))
        if cut.truncated:
            notice = (
                f"[Showing {cut.output_lines} of {len(matches)} paths "
                f"({format_size(DEFAULT_MAX_BYTES)} output limit). Narrow the pattern or path "
                "to see the rest.]"
            )
        details["truncated"] = notice is not None
        if notice is None:
            return ToolResult.text(cut.content, details=details)
        return ToolResult.text(f"{cut.content}\n\n{notice}", details=details)


def _check_directory(root: Path) -> None:
    """ToolError unless ``root`` is an existing directory."""
    if not root.exists():
        raise ToolError(f"Path not found: {root}")
    if not root.is_dir():
        raise ToolError(f"Not a directory: {root} (find searches directories)")


def _notice(matches: list[str], limit: int) -> str | None:
    """The notice for a result cut by ``limit`` (None when all matches fit)."""
    if len(matches) <= limit:
        return None
    return (
        f"[Showing {limit} of {len(matches)} paths (limit {limit}). Use limit={len(matches)} "
        "for all of them, or narrow the pattern or path.]"
    )
