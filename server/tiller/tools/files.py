"""Filesystem helpers shared by the file tools: path resolution, diffs, the mutation lock.

``write`` and ``edit`` run their read-modify-write under ``mutation_lock`` (in a worker thread),
so two calls of one parallel batch that touch the same file cannot lose each other's changes.
"""

from __future__ import annotations

import difflib
import os
import threading
from pathlib import Path

__all__ = ["first_changed_line", "mutation_lock", "resolve_path", "unified_diff"]

mutation_lock = threading.Lock()
"""Held while a tool reads, changes and writes back a file."""


def resolve_path(path: str, cwd: Path) -> Path:
    """``path`` with ``~`` expanded, made absolute against ``cwd`` when relative."""
    expanded = Path(os.path.expanduser(path))
    return expanded if expanded.is_absolute() else cwd / expanded


def _lines_with_ends(text: str) -> list[str]:
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def unified_diff(old: str, new: str, name: str, context: int = 3) -> str:
    """A unified diff from ``old`` to ``new`` labelled ``a/name`` and ``b/name`` ("" if equal)."""
    out: list[str] = []
    for line in difflib.unified_diff(
        _lines_with_ends(old), _lines_with_ends(new), f"a/{name}", f"b/{name}", n=context
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
