"""Filesystem helpers shared by the file tools: path resolution, diffs, the mutation locks.

``pinned_path`` is the one real path a call acts on on disk (see ``tiller.tools.safefs``).

``write`` and ``edit`` serialise their read-modify-write of one file in two layers, so two calls
of one parallel batch (or of two sessions) that touch the same file cannot lose each other's
changes:

* ``path_lock(path)`` is an async lock per file, held across the whole call, awaits included
  (the editor's ``client/readTextFile`` and ``client/writeTextFile`` are requests to await);
* ``mutation_lock`` is a threading lock, held by a worker thread while it reads, changes or
  writes the file on disk. It is never held across an await.
"""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.to_thread

from tiller.tools.base import EditorFiles, ToolContext
from tiller.tools.safefs import pin

__all__ = [
    "UNSAVED_NOTE",
    "first_changed_line",
    "mutation_lock",
    "path_lock",
    "pinned_path",
    "resolve_path",
    "unified_diff",
    "unsaved_note",
]

UNSAVED_NOTE = (
    "\nNote: the editor keeps this change unsaved in its buffer; shell commands (bash) and "
    "searches read the file from disk, where it is unchanged until the user saves it."
)
"""Added to a write/edit result stored through an editor that declared ``fs.keepsUnsaved``."""


def unsaved_note(files: EditorFiles | None) -> str:
    """``UNSAVED_NOTE`` when a change went to ``files`` and they keep it unsaved, else ""."""
    if files is not None and files.can_write and files.keeps_unsaved:
        return UNSAVED_NOTE
    return ""


mutation_lock = threading.Lock()
"""Held while a worker thread reads, changes and writes back a file on disk."""

_path_locks: dict[str, tuple[anyio.Lock, int]] = {}
"""Lock and number of holders or waiters, per normalised path; an entry goes when unused."""


def _lock_key(path: Path) -> str:
    """``path`` with ``.`` and ``..`` collapsed (string work only; no filesystem access)."""
    return os.path.normpath(path)


@asynccontextmanager
async def path_lock(path: Path) -> AsyncIterator[None]:
    """Hold the async lock of ``path`` (absolute; compared after ``normpath``) for the block.

    Locks are created on first use and dropped when nobody holds or waits for them, so the
    table only ever holds the files being changed right now. Used from the event loop only.
    """
    key = _lock_key(path)
    lock, users = _path_locks.get(key) or (anyio.Lock(), 0)
    _path_locks[key] = (lock, users + 1)
    try:
        async with lock:
            yield
    finally:
        lock, users = _path_locks[key]
        if users == 1:
            del _path_locks[key]
        else:
            _path_locks[key] = (lock, users - 1)


def resolve_path(path: str, cwd: Path) -> Path:
    """``path`` with ``~`` expanded, made absolute against ``cwd`` when relative."""
    expanded = Path(os.path.expanduser(path))
    return expanded if expanded.is_absolute() else cwd / expanded


async def pinned_path(path: Path, ctx: ToolContext) -> Path:
    """The real path the call acts on: the one the permission gate decided on
    (``ctx.resolved_path``), else ``path`` resolved now, once."""
    if ctx.resolved_path is not None:
        return ctx.resolved_path
    return await anyio.to_thread.run_sync(pin, path)


def _lines_with_ends(text: str) -> list[str]:
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def unified_diff(old: str | None, new: str, name: str, context: int = 3) -> str:
    """A unified diff from ``old`` to ``new`` labelled ``a/name`` and ``b/name`` ("" if equal);
    ``old`` None: the file did not exist, labelled ``/dev/null`` as git does."""
    import difflib  # on first use: a loaded session may never diff

    out: list[str] = []
    before = "/dev/null" if old is None else f"a/{name}"
    for line in difflib.unified_diff(
        _lines_with_ends(old or ""), _lines_with_ends(new), before, f"b/{name}", n=context
    ):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def first_changed_line(old: str, new: str) -> int | None:
    """The 1-based line of ``new`` where it first differs from ``old``; None when equal."""
    if old == new:
        return None
    old_lines, new_lines = _lines_with_ends(old), _lines_with_ends(new)
    for index, (before, after) in enumerate(zip(old_lines, new_lines, strict=False)):
        if before != after:
            return index + 1
    return min(len(old_lines), len(new_lines)) + 1
