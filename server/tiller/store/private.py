"""Session data is the user's alone: the modes Tiller creates its session folders and files
with. Standard library only, so what imports it (``tiller.checkpoints.shadow``, imported to
answer ``initialize``) loads nothing more."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["PRIVATE_DIR", "PRIVATE_FILE", "private_dir"]

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
"""Session data (logs, the shadow repository) is the user's alone: other local users cannot
list or read it."""


def private_dir(path: Path) -> None:
    """Make ``path`` a folder only its owner can enter: missing parents are created with mode
    0700 too, and an existing ``path`` (made by an older Tiller, 0755) is set to 0700."""
    missing: list[Path] = []
    folder = path
    while not folder.exists() and folder.parent != folder:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=PRIVATE_DIR)
    if (os.stat(path).st_mode & 0o777) != PRIVATE_DIR:  # mkdir's mode is cut by the umask
        os.chmod(path, PRIVATE_DIR)
    for folder in missing[1:]:
        os.chmod(folder, PRIVATE_DIR)
