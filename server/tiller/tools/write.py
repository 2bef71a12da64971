"""The ``write`` tool: create or overwrite a file with the given UTF-8 content.

Parent directories are created. The result's details carry a unified diff from the previous
content (empty for a new file) so a client can show what changed.

When the editor can write files (``ctx.files.can_write``), the content goes through its
``write_text`` (into its buffer, so the user can undo it; the editor creates the file and its
directories, Tiller does not touch the disk). The previous content for the diff is then the
editor's text when it can read (unsaved edits included), else the disk's; "" for a new file.
The whole call holds the file's ``path_lock``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread
from pydantic import BaseModel, Field

from tiller.errors import ToolError
from tiller.tools.base import EditorFiles, Tool, ToolContext, ToolResult
from tiller.tools.files import (
    first_changed_line,
    mutation_lock,
    path_lock,
    resolve_path,
    unified_diff,
)

__all__ = ["WriteParams", "WriteTool"]


class WriteParams(BaseModel):
    path: str = Field(description="Path of the file to write, relative to the working directory")
    content: str = Field(description="The complete new content of the file")


@dataclass
class _Written:
    old: str
    size: int


def _old_disk_text(path: Path) -> str:
    """The file's current text ("" if absent); ToolError for a directory. Caller holds the lock."""
    if path.is_dir():
        raise ToolError(f"{path} is a directory")
    return path.read_bytes().decode("utf-8", errors="replace") if path.exists() else ""


def _write_file(path: Path, content: str) -> _Written:
    """Write ``content`` to ``path`` (creating parents); returns the previous text and size."""
    with mutation_lock:
        old = _old_disk_text(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8")
        path.write_bytes(data)
        return _Written(old, len(data))


def _locked_old_disk_text(path: Path) -> str:
    with mutation_lock:
        return _old_disk_text(path)


async def _write_via_editor(files: EditorFiles, path: Path, content: str) -> _Written:
    """Store ``content`` through the editor; returns the previous text and the new size.

    The previous text is the editor's when it can read; when it cannot, or its read fails (the
    usual answer for a file that does not exist yet), it is the disk's, "" for no file. A
    directory on disk is refused before the editor is asked. The caller holds ``path_lock``;
    the editor's ToolError from ``write_text`` passes through.
    """
    if await anyio.to_thread.run_sync(path.is_dir):
        raise ToolError(f"{path} is a directory")
    old: str | None = None
    if files.can_read:
        try:
            old = await files.read_text(path)
        except ToolError:
            old = None
    if old is None:
        old = await anyio.to_thread.run_sync(_locked_old_disk_text, path)
    await files.write_text(path, content)
    return _Written(old, len(content.encode("utf-8")))


class WriteTool(Tool[WriteParams]):
    name = "write"
    description = (
        "Write content to a file, replacing it if it exists and creating parent directories "
        "as needed. Use it for new files or complete rewrites; prefer edit for changes."
    )
    Params = WriteParams

    async def execute(self, params: WriteParams, ctx: ToolContext) -> ToolResult:
        """Write the file; ToolError if the path is a directory or cannot be written, or the
        editor fails."""
        path = resolve_path(params.path, ctx.cwd)
        files = ctx.files
        try:
            async with path_lock(path):
                if files is not None and files.can_write:
                    written = await _write_via_editor(files, path, params.content)
                else:
                    written = await anyio.to_thread.run_sync(_write_file, path, params.content)
        except OSError as exc:
            raise ToolError(f"Could not write {path}: {exc.strerror or exc}") from exc
        return ToolResult.text(
            f"Wrote {written.size} bytes to {params.path}",
            details={
                "path": str(path),
                "diff": unified_diff(written.old, params.content, params.path),
                "firstChangedLine": first_changed_line(written.old, params.content),
            },
        )
