"""Reading project files (context files, prompt templates, skills) the way the file tools read.

Each file is read from a **root**: the folder tree it belongs to (the workspace for its
``.tiller/`` and ``.agents/`` files, the git root for the context files of the folders above
the workspace, the user's config dir for its own). ``read_confined`` resolves the file's real
path once (``tiller.tools.safefs.pin``); a real path outside the root's real path is refused
with a ``RefusedFileError`` whose reason the session reports (``agent/getState``,
``commands/list``). Otherwise the file is opened through ``open_nofollow``, so a symlink put on
the path after that check fails the read instead of leading it elsewhere. A symlink that stays
inside the root (``CLAUDE.md`` -> ``AGENTS.md``) is followed.
"""

from __future__ import annotations

import os
from pathlib import Path

from tiller.errors import SymlinkInPathError, ToolError
from tiller.frozen import frozen
from tiller.tools.safefs import open_nofollow, pin, read_all

__all__ = ["RefusedFile", "RefusedFileError", "read_confined", "read_confined_text"]


@frozen
class RefusedFile:
    """A project file that was not read, and why (as listed on the wire)."""

    path: Path
    reason: str


class RefusedFileError(Exception):
    """A project file that leads out of its root; ``refused`` says which and why."""

    def __init__(self, refused: RefusedFile) -> None:
        super().__init__(refused.reason)
        self.refused = refused


def read_confined(path: Path, root: Path, limit: int | None = None) -> tuple[bytes, int]:
    """The first ``limit`` bytes (all without a limit) of the file at ``path`` and its size,
    provided its real path is under ``root``'s real path. Raises ``RefusedFileError`` when it is
    not (or when a symlink appears on the path meanwhile), OSError when it cannot be read (a
    folder, a FIFO: not a regular file)."""
    real, real_root = pin(path), pin(root)
    if not real.is_relative_to(real_root):
        raise RefusedFileError(RefusedFile(path, (
            f"it leads to {real}, outside {real_root}: project files are not read through a "
            "symlink out of their folder")))
    try:
        with open_nofollow(real, os.O_RDONLY) as fd:
            size = os.fstat(fd).st_size
            if limit is None:
                return read_all(fd), size
            chunks: list[bytes] = []
            remaining = limit
            while remaining > 0 and (chunk := os.read(fd, min(remaining, 1 << 20))):
                chunks.append(chunk)
                remaining -= len(chunk)
    except SymlinkInPathError as exc:
        raise RefusedFileError(RefusedFile(path, (
            f"{exc.at} became a symlink while it was read: project files are not read through "
            "one"))) from None
    except ToolError as exc:
        raise OSError(str(exc)) from None
    return b"".join(chunks), size


def read_confined_text(path: Path, root: Path) -> str:
    """The whole file as UTF-8 text (``read_confined``; UnicodeDecodeError if it is not)."""
    return read_confined(path, root)[0].decode("utf-8")
