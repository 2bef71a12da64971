"""The ``write`` tool: create or overwrite a file with the given UTF-8 content.

Parent directories are created. The result's details carry a unified diff from the previous
content (from ``/dev/null`` for a new file) so a client can show what changed.

When the editor can write files (``ctx.files.can_write``), the content goes through its
``write_text`` (into its buffer, so the user can undo it; the editor creates the file and its
directories, Tiller does not touch the disk). The previous content for the diff is then the
editor's text when it can read (unsaved edits included), else the disk's; none for a new file.
The whole call holds the file's ``path_lock``.

On disk the tool acts on the pinned real path (``pinned_path``), walked without following
symlinks (``tiller.tools.safefs``): the previous content is read and the new one written
through one descriptor, in place. A symlink put on that path while the call runs (or while the
user is asked) makes the call fail without writing. The editor is given the path as named.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread
from pydantic import BaseModel, Field

from tiller.errors import ToolError
from tiller.tools.base import EditorFiles, Tool, ToolContext, ToolInfo, ToolResult
from tiller.tools.files import (
    first_changed_line,
    mutation_lock,
    path_lock,
    pinned_path,
    resolve_path,
    unified_diff,
    unsaved_note,
)
from tiller.tools.safefs import open_nofollow, read_all, replace_content
from tiller.types import PathText

__all__ = ["WriteParams", "WriteTool"]


class WriteParams(BaseModel):
    path: PathText = Field(
        description="Path of the file to write, relative to the working directory"
    )
    content: str = Field(description="The complete new content of the file")


@dataclass
class _Written:
    old: str | None
    """The previous text; None: the file did not exist."""
    size: int


def _old_disk_text(real: Path) -> str | None:
    """The text at the pinned path (None if absent); ToolError for a directory. Caller holds
    ``mutation_lock``."""
    try:
        with open_nofollow(real, os.O_RDONLY) as fd:
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                raise ToolError(f"{real} is a directory")
            return read_all(fd).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None


def _write_file(real: Path, content: str) -> _Written:
    """Write ``content`` at the pinned path (creating it and its parents); the previous text
    (None for a new file) and the size."""
    data = content.encode("utf-8")
    old: str | None
    with mutation_lock:
        try:
            try:
                with open_nofollow(real, os.O_RDWR) as fd:
                    old = read_all(fd).decode("utf-8", errors="replace")
                    replace_content(fd, data)
            except FileNotFoundError:
                with open_nofollow(real, os.O_RDWR | os.O_CREAT, make_parents=True) as fd:
                    old = read_all(fd).decode("utf-8", errors="replace") or None
                    replace_content(fd, data)
        except IsADirectoryError as exc:
            raise ToolError(f"{real} is a directory") from exc
    return _Written(old, len(data))


def _locked_old_disk_text(real: Path) -> str | None:
    with mutation_lock:
        return _old_disk_text(real)


async def _write_via_editor(
    files: EditorFiles, path: Path, real: Path, content: str
) -> _Written:
    """Store ``content`` through the editor at ``path``; the previous text and the new size.

    The previous text is the editor's when it can read; when it cannot, or its read fails (the
    usual answer for a file that does not exist yet), it is the disk's at the pinned ``real``,
    None for no file. A directory on disk is refused before the editor is asked. The caller
    holds ``path_lock``; the editor's ToolError from ``write_text`` passes through.
    """
    disk_old = await anyio.to_thread.run_sync(_locked_old_disk_text, real)
    old: str | None = None
    if files.can_read:
        try:
            old = await files.read_text(path)
        except ToolError:
            old = None
    if old is None:
        old = disk_old
    await files.write_text(path, content)
    return _Written(old, len(content.encode("utf-8")))


class WriteTool(Tool[WriteParams]):
    name = "write"
    info = ToolInfo(kind="edit", path_arg="path", title="Write {path}", hook_name="Write")
    description = (
        "Write content to a file, replacing it if it exists and creating parent directories "
        "as needed. Use it for new files or complete rewrites; prefer edit for changes."
    )
    Params = WriteParams

    def proposed_text(self, args: dict[str, Any], current: str, name: str) -> str | None:
        """The new content, whatever the file holds now."""
        return str(args.get("content", ""))

    async def execute(self, params: WriteParams, ctx: ToolContext) -> ToolResult:
        """Write the file; ToolError if the path is a directory or cannot be written, or the
        editor fails."""
        path = resolve_path(params.path, ctx.cwd)
        files = ctx.files
        try:
            real = await pinned_path(path, ctx)
            async with path_lock(real):
                if files is not None and files.can_write:
                    written = await _write_via_editor(files, path, real, params.content)
                else:
                    written = await anyio.to_thread.run_sync(_write_file, real, params.content)
        except OSError as exc:
            raise ToolError(f"Could not write {path}: {exc.strerror or exc}") from exc
        return ToolResult.text(
            f"Wrote {written.size} bytes to {params.path}{unsaved_note(files)}",
            details={
                "path": str(path),
                "diff": unified_diff(written.old, params.content, params.path),
                "firstChangedLine": first_changed_line(written.old or "", params.content),
            },
        )
