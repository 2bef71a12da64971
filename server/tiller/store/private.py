"""Session data is the user's alone: the modes Tiller creates its session folders and files
with, and its other files that hold what was typed or said (the chat's input history, logs).
Standard library only, so what imports it (``tiller.checkpoints.shadow``, imported to answer
``initialize``) loads nothing more."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

__all__ = ["PRIVATE_DIR", "PRIVATE_FILE", "private_dir", "private_file"]

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
"""Session data (logs, the shadow repository) is the user's alone: other local users cannot
list or read it."""


def private_dir(path: Path) -> None:
    """Make ``path`` a folder only its owner can enter: missing parents are created with mode
    0700 too, and an existing ``path`` (made by an older Tiller, 0755) is set to 0700."""
    missing = _make_missing(path)
    if (os.stat(path).st_mode & 0o777) != PRIVATE_DIR:  # mkdir's mode is cut by the umask
        os.chmod(path, PRIVATE_DIR)
    for folder in missing[1:]:
        os.chmod(folder, PRIVATE_DIR)


def private_file(path: Path) -> None:
    """Make ``path`` a file only its owner can read or write: created empty with mode 0600
    (missing folders 0700, existing ones left as they are), and an existing one (made by an
    older Tiller, 0644) loses its group and other permissions."""
    for folder in _make_missing(path.parent):
        os.chmod(folder, PRIVATE_DIR)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, PRIVATE_FILE)
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        if mode & 0o077:
            os.fchmod(fd, mode & ~0o077)
    finally:
        os.close(fd)


def _make_missing(path: Path) -> list[Path]:
    """Create ``path`` and its missing parents (mode 0700, cut by the umask); the folders
    created, ``path`` first."""
    missing: list[Path] = []
    folder = path
    while not folder.exists() and folder.parent != folder:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=PRIVATE_DIR)
    return missing
