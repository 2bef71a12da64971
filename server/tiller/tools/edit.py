"""The ``edit`` tool: exact-text replacements in one file, all matched against the original.

Every ``oldText`` must occur exactly once in the file as it was before the call, and no two may
overlap; then all replacements are applied at once, so one edit never sees another's result. The
file keeps its UTF-8 BOM and its line endings: in a file whose every line ends in CRLF, the texts
are matched and written with LF and the result converted back to CRLF. A file with mixed endings
is matched as it is.

When the editor offers its files (``ctx.files``), the edit is made to the text the user sees:
the match runs against ``read_text`` (unsaved edits included) when the editor can read, else
against the disk, and the result goes back through ``write_text`` (into the buffer, so the user
can undo it) when the editor can write, else to the disk. A BOM is then the text's leading
U+FEFF, kept as it was. The whole call holds the file's ``path_lock``.

On disk the tool acts on the pinned real path (``pinned_path``), walked without following
symlinks (``tiller.tools.safefs``), reading and writing back through one descriptor, in place.
A symlink put on that path while the call runs makes it fail without writing. The editor is
given the path as named.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field

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

__all__ = ["EditParams", "EditTool", "Replacement"]


class Replacement(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    old_text: str = Field(
        alias="oldText",
        description="Exact text to replace, including whitespace and indentation; must occur "
        "exactly once in the original file",
    )
    new_text: str = Field(alias="newText", description="The text to put in its place")


class EditParams(BaseModel):
    path: PathText = Field(
        description="Path of the file to edit, relative to the working directory"
    )
    edits: list[Replacement] = Field(
        min_length=1,
        description="Replacements, each matched against the original file; they must not "
        "overlap and are applied together",
    )


@dataclass
class _Edited:
    """The text before and after (BOM dropped, CRLF as LF: what the diff shows) and
    ``output``, the complete new text to store (BOM and CRLF restored)."""

    old: str
    new: str
    output: str


def _occurrences(content: str, needle: str) -> list[int]:
    """Start offsets of every (possibly overlapping) occurrence of ``needle`` in ``content``."""
    starts: list[int] = []
    start = content.find(needle)
    while start != -1:
        starts.append(start)
        start = content.find(needle, start + 1)
    return starts


def apply_edits(content: str, edits: list[tuple[str, str]], name: str) -> str:
    """``content`` with every ``(old, new)`` edit applied; ToolError if an old text is empty,
    missing or ambiguous, or two overlap. Texts are used as given (no line-ending changes)."""
    spans: list[tuple[int, int, int]] = []  # (start, end, edit index)
    for index, (old, _new) in enumerate(edits):
        if not old:
            raise ToolError(f"edits[{index}].oldText is empty; give the exact text to replace")
        starts = _occurrences(content, old)
        if not starts:
            raise ToolError(
                f"edits[{index}].oldText was not found in {name}; it must match the file "
                "exactly, including whitespace and indentation"
            )
        if len(starts) > 1:
            raise ToolError(
                f"edits[{index}].oldText occurs {len(starts)} times in {name}; include more "
                "surrounding context to make it unique"
            )
        spans.append((starts[0], starts[0] + len(old), index))
    spans.sort()
    for (_, end, first), (start, _, second) in zip(spans, spans[1:], strict=False):
        if start < end:
            low, high = sorted((first, second))
            raise ToolError(
                f"edits[{low}] and edits[{high}] overlap in {name}; merge them into one edit"
            )
    pieces: list[str] = []
    position = 0
    for start, end, index in spans:
        pieces += [content[position:start], edits[index][1]]
        position = end
    pieces.append(content[position:])
    return "".join(pieces)


def _transform(text: str, edits: list[Replacement], name: str) -> _Edited:
    """Apply ``edits`` to ``text`` (a whole file; a leading U+FEFF is its BOM), keeping the BOM
    and, in an all-CRLF text, the CRLF endings. ToolError for a bad edit or no change."""
    bom = text.startswith("\ufeff")
    if bom:
        text = text[1:]
    crlf = "\r\n" in text and text.count("\r\n") == text.count("\n")
    pairs = [(edit.old_text, edit.new_text) for edit in edits]
    if crlf:
        text = text.replace("\r\n", "\n")
        pairs = [(old.replace("\r\n", "\n"), new.replace("\r\n", "\n")) for old, new in pairs]
    new_text = apply_edits(text, pairs, name)
    if new_text == text:
        raise ToolError(f"No changes made to {name}: every newText is the same as its oldText")
    output = new_text.replace("\n", "\r\n") if crlf else new_text
    return _Edited(text, new_text, ("\ufeff" if bom else "") + output)


def _decode(real: Path, data: bytes) -> str:
    """The file's text (a BOM becomes a leading U+FEFF); ToolError if it is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(f"{real} is not valid UTF-8 text; edit cannot change it") from exc


def _edit_file(real: Path, edits: list[Replacement], name: str) -> _Edited:
    """Apply ``edits`` to the file at the pinned path under the mutation lock (worker thread);
    ToolError if it is missing or a directory."""
    with mutation_lock:
        try:
            with open_nofollow(real, os.O_RDWR) as fd:
                edited = _transform(_decode(real, read_all(fd)), edits, name)
                replace_content(fd, edited.output.encode("utf-8"))
                return edited
        except FileNotFoundError as exc:
            raise ToolError(f"File not found: {real}") from exc
        except IsADirectoryError as exc:
            raise ToolError(f"{real} is a directory, not a file") from exc


def _locked_read(real: Path) -> str:
    """The text at the pinned path, as ``_edit_file`` reads it (worker thread)."""
    with mutation_lock:
        try:
            with open_nofollow(real, os.O_RDONLY) as fd:
                if stat.S_ISDIR(os.fstat(fd).st_mode):
                    raise ToolError(f"{real} is a directory, not a file")
                return _decode(real, read_all(fd))
        except FileNotFoundError as exc:
            raise ToolError(f"File not found: {real}") from exc


def _locked_write(real: Path, text: str) -> None:
    with mutation_lock, open_nofollow(real, os.O_WRONLY | os.O_CREAT) as fd:
        replace_content(fd, text.encode("utf-8"))


async def _edit_via_editor(
    files: EditorFiles, path: Path, real: Path, edits: list[Replacement], name: str
) -> _Edited:
    """Apply ``edits`` to the editor's text of ``path`` (or the disk's at the pinned ``real``,
    if it cannot read) and store the result through the editor (or on disk at ``real``, if it
    cannot write). The caller holds the file's ``path_lock``; the editor's ToolError passes
    through."""
    if files.can_read:
        text = await files.read_text(path)
    else:
        text = await anyio.to_thread.run_sync(_locked_read, real)
    edited = _transform(text, edits, name)
    if files.can_write:
        await files.write_text(path, edited.output)
    else:
        await anyio.to_thread.run_sync(_locked_write, real, edited.output)
    return edited


class EditTool(Tool[EditParams]):
    name = "edit"
    info = ToolInfo(kind="edit", path_arg="path", title="Edit {path}", hook_name="Edit")
    description = (
        "Edit a file by exact text replacement. Each edits[i].oldText must match the current "
        "file exactly (whitespace included) and occur exactly once; all edits are matched "
        "against the original file, must not overlap, and are applied together. Read the file "
        "first; use write to create a file."
    )
    Params = EditParams

    def proposed_text(self, args: dict[str, Any], current: str, name: str) -> str | None:
        """``current`` with the edits applied; ToolError for an edit that would fail."""
        pairs = [(e.get("oldText", ""), e.get("newText", ""))
                 for e in args.get("edits", []) if isinstance(e, dict)]
        return apply_edits(current, pairs, name)

    async def execute(self, params: EditParams, ctx: ToolContext) -> ToolResult:
        """Apply the edits; ToolError for a missing file, a bad edit, no change at all, or the
        editor's failure."""
        path = resolve_path(params.path, ctx.cwd)
        files = ctx.files
        try:
            real = await pinned_path(path, ctx)
            async with path_lock(real):
                if files is not None and (files.can_read or files.can_write):
                    edited = await _edit_via_editor(
                        files, path, real, params.edits, params.path
                    )
                else:
                    edited = await anyio.to_thread.run_sync(
                        _edit_file, real, params.edits, params.path
                    )
        except OSError as exc:
            raise ToolError(f"Could not edit {path}: {exc.strerror or exc}") from exc
        count = len(params.edits)
        return ToolResult.text(
            f"Applied {count} edit{'' if count == 1 else 's'} to {params.path}"
            f"{unsaved_note(files)}",
            details={
                "path": str(path),
                "diff": unified_diff(edited.old, edited.new, params.path),
                "firstChangedLine": first_changed_line(edited.old, edited.new),
            },
        )
