"""File discovery shared by ``find`` and ``grep``: ignore-aware listing, glob and gitignore
matching, and subprocesses that die with their caller.

Listing (``list_files``). Inside a git work tree ``git ls-files --cached --others
--exclude-standard`` gives the exact answer (tracked files plus untracked ones that no ignore rule
hides, honouring every .gitignore, ``.git/info/exclude`` and ``core.excludesFile``). Otherwise (git
missing, not a repository, or git listing nothing, as when the root is itself an ignored
directory the caller asked for by name) a Python walk honours the ``.gitignore`` files of the root,
of its subdirectories and, when the root is inside a repository, of its ancestors up to the
repository top (plus ``.git/info/exclude``). Either way any path with a ``.git`` or
``node_modules`` component is skipped, only files are listed (symlinks to files included; symlinked
directories are not followed) and the order is by path components (``a/b.txt`` before ``a.txt``),
which is ripgrep's ``--sort path`` order.

Gitignore patterns supported by the walk: blank lines and ``#`` comments, ``\\#`` / ``\\!``
escapes, ``!`` negation (last matching rule wins; a file inside an ignored directory cannot be
re-included, because ignored directories are not entered), a trailing ``/`` (directories only),
a ``/`` at the start or in the middle (anchored to the .gitignore's directory; otherwise the
pattern matches a name at any depth), ``*``, ``?``, ``[...]`` and ``**`` (``**/x``, ``x/**``,
``a/**/b``). Globs given to the tools (``PathGlob``) use the same syntax and the same rule: a glob
without ``/`` matches a file name at any depth, one with ``/`` matches the whole relative path.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Literal

import anyio
import anyio.from_thread
import anyio.to_thread
from anyio.abc import ByteReceiveStream, Process

from tiller.frozen import frozen

__all__ = [
    "SKIPPED_NAMES",
    "FileListing",
    "IgnoreRule",
    "PathGlob",
    "ProcessOutput",
    "find_git_top",
    "glob_to_regex",
    "is_ignored",
    "list_files",
    "parse_gitignore",
    "path_sort_key",
    "read_all",
    "run_collect",
    "spawned",
    "walk_files",
]

SKIPPED_NAMES = frozenset({".git", "node_modules"})
"""Directory names never listed or searched, wherever they appear."""

_CHUNK = 65536
_REAP_TIMEOUT = 5.0


def _no_checkpoint() -> None:
    """The default ``checkpoint``: never interrupts."""


def path_sort_key(rel: str) -> tuple[str, ...]:
    """Sort key giving ripgrep's ``--sort path`` order: component by component, by code point."""
    return tuple(rel.split("/"))


def glob_to_regex(glob: str) -> str:
    """The regex (for ``fullmatch``) of a gitignore-style glob; ``*`` and ``?`` stop at ``/``."""
    out: list[str] = []
    index, size = 0, len(glob)
    while index < size:
        char = glob[index]
        at_segment_start = index == 0 or glob[index - 1] == "/"
        if glob.startswith("**", index) and at_segment_start and index + 2 == size:
            out.append(".*")
            index += 2
        elif glob.startswith("**/", index) and at_segment_start:
            out.append("(?:.*/)?")
            index += 3
        elif char == "*":
            out.append("[^/]*")
            index += 1
        elif char == "?":
            out.append("[^/]")
            index += 1
        elif char == "[":
            index = _char_class(glob, index, out)
        elif char == "\\" and index + 1 < size:
            out.append(re.escape(glob[index + 1]))
            index += 2
        else:
            out.append(re.escape(char))
            index += 1
    return "".join(out)


def _char_class(glob: str, start: int, out: list[str]) -> int:
    """Translate the ``[...]`` at ``start``; returns the index after it (``[`` alone is literal)."""
    index = start + 1
    if index < len(glob) and glob[index] in "!^":
        index += 1
    if index < len(glob) and glob[index] == "]":
        index += 1
    close = glob.find("]", index)
    if close == -1:
        out.append(re.escape("["))
        return start + 1
    body = glob[start + 1 : close]
    negate = body[:1] in ("!", "^")
    if negate:
        body = body[1:]
    escaped = body.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
    escaped = escaped.replace("^", "\\^")
    out.append(f"[{'^/' if negate else ''}{escaped}]")
    return close + 1


class PathGlob:
    """A glob over relative paths: without ``/`` it matches the file name at any depth,
    with ``/`` the whole path (a leading ``/`` is allowed and ignored)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        stripped = pattern.removeprefix("./").lstrip("/")
        self._by_name = "/" not in stripped
        self._regex = re.compile(glob_to_regex(stripped), re.DOTALL)

    def matches(self, rel: str) -> bool:
        """True when the relative path ``rel`` (with ``/`` separators) matches the glob."""
        subject = rel.rsplit("/", 1)[-1] if self._by_name else rel
        return self._regex.fullmatch(subject) is not None


@frozen
class IgnoreRule:
    """One .gitignore line. ``base`` is the directory of its file ("" for the top), relative
    to the top of the walk; paths given to ``matches`` are relative to the same top."""

    base: str
    regex: re.Pattern[str]
    negated: bool
    dir_only: bool
    anchored: bool

    def matches(self, rel: str, is_dir: bool) -> bool:
        """True when this rule's pattern matches ``rel`` (it may be a negation)."""
        if self.dir_only and not is_dir:
            return False
        if self.base:
            if not rel.startswith(self.base + "/"):
                return False
            rel = rel[len(self.base) + 1 :]
        subject = rel if self.anchored else rel.rsplit("/", 1)[-1]
        return self.regex.fullmatch(subject) is not None


def parse_gitignore(text: str, base: str) -> list[IgnoreRule]:
    """The rules of a .gitignore file found in directory ``base`` (see the module docstring)."""
    rules: list[IgnoreRule] = []
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if not line.endswith("\\ "):
            line = line.rstrip(" ")
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        if negated:
            line = line[1:]
        elif line.startswith(("\\!", "\\#")):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        regex = re.compile(glob_to_regex(line), re.DOTALL)
        rules.append(IgnoreRule(base, regex, negated, dir_only, anchored))
    return rules


def is_ignored(rules: Iterable[IgnoreRule], rel: str, is_dir: bool) -> bool:
    """Whether ``rel`` is ignored: the last rule that matches decides."""
    ignored = False
    for rule in rules:
        if rule.matches(rel, is_dir):
            ignored = not rule.negated
    return ignored


def find_git_top(root: Path) -> Path | None:
    """The nearest directory at or above ``root`` that has a ``.git`` entry, if any."""
    for directory in (root, *root.parents):
        if (directory / ".git").exists():
            return directory
    return None


def _read_rules(path: Path, base: str) -> list[IgnoreRule]:
    """The rules of the ignore file at ``path`` (none if it cannot be read)."""
    try:
        return parse_gitignore(path.read_text(encoding="utf-8", errors="replace"), base)
    except OSError:
        return []


def _starting_rules(root: Path) -> tuple[list[IgnoreRule], str]:
    """Rules from the repository top down to (not including) ``root``, and ``root``'s path
    relative to that top ("" when ``root`` is the top or not inside a repository)."""
    top = find_git_top(root)
    if top is None:
        return [], ""
    rules = _read_rules(top / ".git" / "info" / "exclude", "")
    prefix = root.relative_to(top).as_posix() if root != top else ""
    directory, base = top, ""
    for part in prefix.split("/") if prefix else []:
        rules += _read_rules(directory / ".gitignore", base)
        directory, base = directory / part, f"{base}/{part}".lstrip("/")
    return rules, prefix


def walk_files(root: Path, checkpoint: Callable[[], None] = _no_checkpoint) -> list[str]:
    """Files under ``root`` that no .gitignore hides, relative to it, sorted by path_sort_key.

    Blocking; ``checkpoint`` is called once per directory (it may raise to stop the walk).
    """
    start_rules, prefix = _starting_rules(root)
    found: list[str] = []
    pending: list[tuple[Path, str, list[IgnoreRule]]] = [(root, "", start_rules)]
    while pending:
        checkpoint()
        directory, rel_dir, inherited = pending.pop()
        top_rel_dir = "/".join(part for part in (prefix, rel_dir) if part)
        rules = inherited + _read_rules(directory / ".gitignore", top_rel_dir)
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if entry.name in SKIPPED_NAMES:
                continue
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            top_rel = f"{top_rel_dir}/{entry.name}" if top_rel_dir else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = not is_dir and entry.is_file()
            except OSError:
                continue
            if (is_dir or is_file) and not is_ignored(rules, top_rel, is_dir):
                if is_dir:
                    pending.append((Path(entry.path), rel, rules))
                else:
                    found.append(rel)
    found.sort(key=path_sort_key)
    return found


@frozen
class FileListing:
    """The files ``list_files`` found, relative to the root, and which method found them."""

    files: list[str]
    source: Literal["git", "walk"]


@frozen
class ProcessOutput:
    returncode: int
    stdout: bytes
    stderr: bytes


@contextlib.asynccontextmanager
async def spawned(argv: list[str], cwd: Path) -> AsyncIterator[Process]:
    """Start ``argv`` (no shell) with piped stdout/stderr; on the way out (done, error or
    cancellation) the process is killed if it still runs, and reaped."""
    process = await anyio.open_process(
        argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        yield process
    finally:
        with anyio.move_on_after(_REAP_TIMEOUT, shield=True):
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
            await process.aclose()


async def read_all(stream: ByteReceiveStream | None, sink: bytearray, cap: int = -1) -> None:
    """Append ``stream`` to ``sink`` until it ends (keeping at most ``cap`` bytes if >= 0)."""
    if stream is None:
        return
    with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError):
        while True:
            chunk = await stream.receive(_CHUNK)
            if cap < 0 or len(sink) < cap:
                sink += chunk if cap < 0 else chunk[: cap - len(sink)]


async def run_collect(argv: list[str], cwd: Path) -> ProcessOutput:
    """Run ``argv`` to completion and collect its output; killed if the caller is cancelled.

    Raises OSError when the program cannot be started."""
    stdout, stderr = bytearray(), bytearray()
    async with spawned(argv, cwd) as process:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read_all, process.stdout, stdout)
            tasks.start_soon(read_all, process.stderr, stderr, 8192)
        returncode = await process.wait()
    return ProcessOutput(returncode, bytes(stdout), bytes(stderr))


def _existing_files(root: Path, names: list[str]) -> list[str]:
    """The entries of a git listing that are files on disk now, not skipped, sorted."""
    kept = [
        name
        for name in names
        if name
        and not name.endswith("/")
        and SKIPPED_NAMES.isdisjoint(name.split("/"))
        and os.path.isfile(root / name)
    ]
    kept.sort(key=path_sort_key)
    return kept


async def _git_files(root: Path) -> list[str] | None:
    """The git listing of ``root`` (None when git is missing or ``root`` is not in a work
    tree)."""
    argv = ["git", "-c", "core.quotepath=off", "ls-files", "-z", "--cached", "--others"]
    argv.append("--exclude-standard")
    try:
        result = await run_collect(argv, root)
    except OSError:
        return None
    if result.returncode != 0:
        return None
    names = result.stdout.decode("utf-8", errors="surrogateescape").split("\0")
    return await anyio.to_thread.run_sync(_existing_files, root, names)


async def list_files(root: Path, *, use_git: bool = True) -> FileListing:
    """The files under the directory ``root`` (see the module docstring), relative to it.

    ``use_git=False`` forces the Python walk. Cancellation kills git / stops the walk."""
    if use_git:
        files = await _git_files(root)
        if files:
            return FileListing(files, "git")
    walked = await anyio.to_thread.run_sync(walk_files, root, anyio.from_thread.check_cancelled)
    return FileListing(walked, "walk")
