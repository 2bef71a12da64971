"""No-follow file access for the file tools: a path checked once cannot be redirected later.

A tool first pins its path with ``pin``: the real path (absolute, ``..`` and symlinks resolved),
computed once, by the permission gate or by the tool itself. ``open_nofollow`` then walks that
path one component at a time from ``/``, each directory opened relative to its parent's file
descriptor with ``O_NOFOLLOW``, and opens the last component with ``O_NOFOLLOW`` too. Since a
real path has no symlinks, a symlink met on the walk was put there after the path was pinned:
the call fails with a ``ToolError`` and touches nothing, instead of following it out of the
workspace. Directories are created the same way (``make_parents``), iteratively, so a deep path
needs no recursion.

Reading and writing go through the opened descriptor. A write replaces the content in place
(truncate, then write through the same descriptor that read the old content) rather than
renaming a temporary file over it: the file keeps its inode, mode, owner and hard links, like
the plain ``write_bytes`` it replaces; a crash mid-write can leave it partly written.

``restore_file``, ``restore_symlink`` and ``remove_entry`` are for code that puts a file back
(``session/revert``): each walks the parent the same way, and acts on the last component
itself, never through it (a symlink there is replaced or removed, not followed).

Linux and macOS only (``dir_fd`` and ``O_NOFOLLOW``); other ``OSError``s pass through for the
tool to word.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tiller.errors import SymlinkInPathError, ToolError

__all__ = [
    "MAX_PATH_BYTES",
    "open_nofollow",
    "pin",
    "read_all",
    "remove_entry",
    "replace_content",
    "restore_file",
    "restore_symlink",
]

MAX_PATH_BYTES = 4096
"""The longest path (in bytes, as the OS spells it) a file tool accepts: Linux's PATH_MAX."""

_DIR_FLAGS = (
    os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_PATH", os.O_RDONLY)
)
_FILE_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK


def pin(path: Path) -> Path:
    """The real path of absolute ``path`` (``..`` and symlinks resolved), computed now. Pin a
    path once and hand the result on: resolving it again later may give another answer."""
    return Path(os.path.realpath(path))


def _refuse_if_symlink(parent: int, name: str, whole: Path, at: Path) -> None:
    """Raise the ToolError for a symlink at ``name`` under ``parent``; return if there is none."""
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except OSError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise SymlinkInPathError(
            f"{whole} changed while the call ran: {at} is now a symlink, and file tools do "
            "not follow a symlink that appears after the path was checked; nothing was read "
            "or written", str(at)
        )


def _open_child_dir(parent: int, name: str, make: bool, whole: Path, at: Path) -> int:
    """The directory ``name`` under ``parent``, opened without following a symlink; created
    first when missing and ``make``."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        if not make:
            raise
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):
            _refuse_if_symlink(parent, name, whole, at)
        raise
    try:
        os.mkdir(name, 0o777, dir_fd=parent)
    except FileExistsError:
        pass  # made meanwhile by someone else: open whatever is there, no-follow
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):
            _refuse_if_symlink(parent, name, whole, at)
        raise


def _open_parent(path: Path, make: bool) -> int:
    """A descriptor of ``path``'s parent directory, walked from ``/`` without following links."""
    fd = os.open(path.anchor, _DIR_FLAGS)
    at = Path(path.anchor)
    try:
        for name in path.parent.parts[1:]:
            at = at / name
            child = _open_child_dir(fd, name, make, path, at)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def open_nofollow(real: Path, flags: int, *, make_parents: bool = False) -> Iterator[int]:
    """A descriptor of the pinned path ``real`` opened with ``flags`` (``O_CREAT`` makes mode
    0666 before umask), closed after the block.

    No component is followed if it is a symlink: that is a ToolError saying the path changed.
    ``make_parents`` creates missing directories (mode 0777 before umask). A directory opens
    (read-only flags) and a regular file opens; anything else (a FIFO, a device) is a
    ToolError, and so is a path longer than ``MAX_PATH_BYTES`` (no shell or editor could name
    the file). Other failures raise ``OSError`` (``FileNotFoundError``, ``IsADirectoryError``).
    """
    if not real.is_absolute():
        raise ValueError(f"not a pinned path: {real}")
    size = len(os.fsencode(real))
    if size > MAX_PATH_BYTES:
        raise ToolError(f"The path is too long: {size} bytes, over the {MAX_PATH_BYTES}-byte limit")
    if real.name == "":
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(real))
    parent = _open_parent(real, make_parents)
    try:
        try:
            fd = os.open(real.name, flags | _FILE_FLAGS, 0o666, dir_fd=parent)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR):
                _refuse_if_symlink(parent, real.name, real, real)
            raise
    finally:
        os.close(parent)
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise ToolError(f"{real} is not a regular file")
        os.set_blocking(fd, True)
        yield fd
    finally:
        os.close(fd)


@contextmanager
def _parent_of(real: Path, make: bool) -> Iterator[int]:
    if not real.is_absolute() or real.name == "":
        raise ValueError(f"not a pinned file path: {real}")
    parent = _open_parent(real, make)
    try:
        yield parent
    finally:
        os.close(parent)


def _remove_at(parent: int, name: str) -> None:
    """Remove the file, symlink or empty folder ``name`` under ``parent`` if there is one; a
    folder that is not empty stays (OSError ``ENOTEMPTY``)."""
    try:
        os.unlink(name, dir_fd=parent)
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        os.rmdir(name, dir_fd=parent)


def restore_file(real: Path, data: bytes, mode: int) -> None:
    """Make the pinned path ``real`` a regular file holding ``data`` with permission bits
    ``mode``, creating missing parents; a symlink or an empty folder at ``real`` is replaced,
    not followed (a folder that is not empty: OSError ``ENOTEMPTY``), and a symlink among its
    parents is a ``SymlinkInPathError`` (nothing is written)."""
    with _parent_of(real, make=True) as parent:
        try:
            kind = os.stat(real.name, dir_fd=parent, follow_symlinks=False).st_mode
        except FileNotFoundError:
            kind = 0
        if stat.S_ISLNK(kind) or stat.S_ISDIR(kind):
            _remove_at(parent, real.name)
        try:
            fd = os.open(real.name, os.O_WRONLY | os.O_CREAT | _FILE_FLAGS, 0o666,
                         dir_fd=parent)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK):
                _refuse_if_symlink(parent, real.name, real, real)
            raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ToolError(f"{real} is not a regular file")
        os.set_blocking(fd, True)
        replace_content(fd, data)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def restore_symlink(real: Path, target: str) -> None:
    """Make the pinned path ``real`` a symlink to ``target`` (what was a file, a symlink or an
    empty folder there goes), creating missing parents, never through a symlink
    (``SymlinkInPathError``)."""
    with _parent_of(real, make=True) as parent:
        _remove_at(parent, real.name)
        os.symlink(target, real.name, dir_fd=parent)


def remove_entry(real: Path) -> None:
    """Delete the file, symlink or empty folder at the pinned path ``real`` (not what a symlink
    points to); nothing to do if it or a parent is missing; a symlink among its parents is a
    ``SymlinkInPathError`` (nothing is deleted)."""
    try:
        with _parent_of(real, make=False) as parent:
            _remove_at(parent, real.name)
    except FileNotFoundError:
        pass


def read_all(fd: int) -> bytes:
    """Everything from the descriptor's current offset to the end."""
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def replace_content(fd: int, data: bytes) -> None:
    """Make ``data`` the whole content of the regular file open for writing at ``fd``."""
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
