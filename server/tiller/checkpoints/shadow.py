"""The shadow git repository: snapshots of a workspace kept outside the user's own git.

``GIT_DIR`` is a folder under the session data directory and ``GIT_WORK_TREE`` the workspace,
so the user's ``.git`` (index, stash, HEAD, hooks, config) is never read or written. Git runs
with no system or global config, no hooks, no fsmonitor, no attributes file and no auto gc, so
nothing in the user's configuration or the workspace can make it run code; the shadow's
``info/attributes`` overrides the workspace's ``.gitattributes`` (no filters, no end-of-line
conversion: a file is stored and restored byte for byte).

A snapshot is ``update-index`` of the changed paths into the shadow index (one index per
session) and ``write-tree``: a tree id. It honours the workspace's ``.gitignore`` files, skips
files over a size cap and ``node_modules``-style folders (reported as not covered). Every method
here blocks (it runs git): callers run them in a worker thread.

Protected files (tiller.gate.protected) are recorded even where ``.gitignore`` ignores them:
the names of ``PROTECTED_FOLDERS`` and ``PROTECTED_FILES`` are re-included by command-line
``--exclude=!…`` patterns, which take precedence over every ignore file (a protected name inside
an ignored folder such as ``build/`` stays unseen: git does not enter the folder). Git never
lists its own ``.git``, so the workspace's ``.git/config``, ``config.worktree``, ``hooks/`` and
``info/`` are snapshotted through a second view of the same shadow repository whose work tree
is that ``.git`` folder (its own index, ``<index>.dotgit``), and the snapshot's tree is the
workspace's tree with that one as its ``.git`` entry (``git mktree``): ``session/changes`` lists
``.git/config`` like any other file, and revert puts it back.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import stat
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import field
from pathlib import Path

from tiller.frozen import frozen
from tiller.gate.protected import PROTECTED_FILES, PROTECTED_FOLDERS
from tiller.store.private import PRIVATE_FILE, private_dir

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "SKIPPED_FOLDERS",
    "Blob",
    "Hold",
    "ShadowRepo",
    "Snapshot",
    "git_available",
    "off_reason",
]

DEFAULT_MAX_FILE_BYTES = 2 * 1024 * 1024
"""Files larger than this are not snapshotted (not covered)."""

SKIPPED_FOLDERS = (
    "node_modules", ".venv", "venv", "__pycache__", ".tox", ".mypy_cache", ".pytest_cache",
    ".ruff_cache", ".gradle", ".next", ".nuxt",
)
"""Folders never snapshotted, at any depth (dependencies and caches; not covered)."""

GIT_FILES = ("config", "config.worktree", "hooks", "info")
"""What of the workspace's ``.git`` folder a snapshot records: what makes git run commands."""

_REINCLUDE = tuple(
    option for name in PROTECTED_FOLDERS if name != ".git"
    for option in (f"--exclude=!{name}", f"--exclude=!**/{name}/**")
) + tuple(f"--exclude=!{name}" for name in PROTECTED_FILES)
"""``ls-files`` options that list protected files even where an ignore file ignores them."""

_EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
"""Git's id of the tree with nothing in it (SHA-1 repositories, what ``git init`` makes)."""

_CONFIG = (
    "core.hooksPath=/dev/null", "core.fsmonitor=false", "core.autocrlf=false",
    "core.safecrlf=false", "core.attributesFile=/dev/null", "core.excludesFile=/dev/null",
    "core.symlinks=true", "core.quotePath=false", "core.untrackedCache=false", "gc.auto=0",
    "maintenance.auto=false", "commit.gpgSign=false", "core.splitIndex=false",
)


_LOCK = "tiller.lock"
"""Taken shared while a snapshot's objects are not yet referenced by a log (and while changes
or a revert read them), exclusively while objects are pruned (``ShadowRepo.purge``)."""
_PURGED = "tiller-purged"
"""Touched by every purge: a repository object that saw it change forgets its caches."""
_LOOSE = re.compile(r"[0-9a-f]{2}")


class Hold:
    """A shared hold on a shadow repository (see ``_LOCK``); ``release`` never blocks."""

    def __init__(self, git_dir: Path, exclusive: bool = False) -> None:
        self._fd: int | None = os.open(git_dir / _LOCK, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
        fcntl.flock(self._fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing releases the lock
            self._fd = None


_Stat = tuple[str, int, int, int, int]
"""A path's name, mode, size, modification time (ns) and inode."""
_RACY_NS = 1_000_000_000


def _stamp(dot_git: Path) -> tuple[_Stat, ...]:
    """A cheap fingerprint of the ``GIT_FILES`` of ``dot_git`` (stat calls): when it has not
    changed, neither has their recorded tree."""
    key: list[_Stat] = []
    pending = [dot_git / name for name in GIT_FILES]
    while pending:
        path = pending.pop()
        try:
            info = os.lstat(path)
        except OSError:
            continue
        key.append((str(path), info.st_mode, info.st_size, info.st_mtime_ns, info.st_ino))
        if stat.S_ISDIR(info.st_mode):
            try:
                pending += [Path(entry.path) for entry in os.scandir(path)]
            except OSError:
                continue
    return tuple(sorted(key))


def _write_private(path: Path, data: str | bytes) -> None:
    """Write ``path`` (mode 0600) with ``data``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data.encode() if isinstance(data, str) else data)


def _paths(paths: list[str]) -> bytes:
    """``paths`` as ``update-index -z --stdin`` reads them."""
    return b"".join(path.encode(errors="surrogateescape") + b"\0" for path in paths)


class _Folders:
    """Which folders under ``root`` are real folders (not files or symlinks), each asked of
    the file system once: a file under a symlinked folder is never read through it. A missing
    folder counts as real (its files are deleted: ``--remove`` drops them)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._known: dict[str, bool] = {"": True}

    def real(self, path: str) -> bool:
        """Whether no folder on the way to workspace-relative ``path`` is a file or a
        symlink."""
        folder = path.rpartition("/")[0]
        known = self._known.get(folder)
        if known is None:
            known = self.real(folder)
            if known:
                try:
                    known = stat.S_ISDIR(os.lstat(self.root / folder).st_mode)
                except FileNotFoundError:
                    known = True
                except OSError:
                    known = False
            self._known[folder] = known
        return known


def git_available() -> bool:
    """Whether a ``git`` executable is on PATH."""
    return shutil.which("git") is not None


def off_reason(*, saved: bool) -> str | None:
    """Why a session's checkpoints are off, None when they are on: they need git, and a saved
    session (its log holds the checkpoints)."""
    if not git_available():
        return "git is not on PATH"
    if not saved:
        return "sessions are not saved (--no-session)"
    return None


@frozen
class Snapshot:
    """A workspace state: its tree id, and what it does not cover (files over the size cap,
    skipped folders, nested repositories), as workspace-relative paths."""

    tree: str
    not_covered: list[str] = field(default_factory=list)


@frozen
class Blob:
    """One file in a tree: its mode (``100644``, ``100755``, ``120000``) and blob id."""

    mode: str
    oid: str


class ShadowRepo:
    """The shadow repository at ``git_dir`` for the workspace ``work_tree``; ``index`` names
    this user's index file inside it. ``exclude`` are extra workspace-relative paths never
    snapshotted (e.g. the session directory when it lies inside the workspace)."""

    def __init__(
        self, git_dir: Path, work_tree: Path, *, index: str = "index",
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES, exclude: tuple[str, ...] = (),
    ) -> None:
        self.git_dir, self.work_tree = git_dir, work_tree
        self.index_file = git_dir / index
        self.max_file_bytes = max_file_bytes
        self.exclude = exclude
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update(
            GIT_DIR=str(git_dir), GIT_WORK_TREE=str(work_tree),
            GIT_INDEX_FILE=str(self.index_file), GIT_CONFIG_NOSYSTEM="1",
            GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0",
            GIT_LITERAL_PATHSPECS="1", LC_ALL="C",
        )
        self._env = env
        self._dot_git_env = {**env, "GIT_WORK_TREE": str(work_tree / ".git"),
                             "GIT_INDEX_FILE": f"{self.index_file}.dotgit"}
        self._composed: dict[tuple[str, str], str] = {}
        self._git_record: tuple[tuple[_Stat, ...] | None, str, list[str]] | None = None
        """The ``.git`` files' stat stamp, tree and not covered paths at the last snapshot."""
        self._purged: int | None = None
        """The purge stamp the caches were filled under."""

    # ------------------------------------------------------------------ plumbing

    def git(self, *args: str, stdin: bytes | None = None,
            env: Mapping[str, str] | None = None, cwd: Path | None = None) -> bytes:
        """Run one git command in the shadow repository (``env``: another view of it); its
        stdout. Everything git creates is private (umask 077: objects 0400, the rest 0600,
        folders 0700). Raises OSError (with git's message) when it fails."""
        argv = ["git"]
        for option in _CONFIG:
            argv += ["-c", option]
        try:
            done = subprocess.run(
                [*argv, *args], input=stdin, capture_output=True, env=env or self._env,
                cwd=cwd or self.work_tree, check=False, umask=0o077,
            )
        except FileNotFoundError as exc:
            raise OSError(f"git is not available: {exc}") from None
        if done.returncode != 0:
            message = done.stderr.decode(errors="replace").strip()
            raise OSError(f"git {args[0]} failed: {message}")
        return done.stdout

    def ensure(self) -> None:
        """Create the shadow repository if it does not exist yet (private: 0700), or make an
        older one private."""
        private_dir(self.git_dir)
        if (self.git_dir / "HEAD").exists():
            return
        self.git("init", "--quiet")
        info = self.git_dir / "info"
        info.mkdir(mode=0o700, exist_ok=True)
        patterns = [f"{name}/" for name in SKIPPED_FOLDERS]
        patterns += ["/" + path.strip("/") for path in self.exclude]
        _write_private(info / "exclude", "\n".join(patterns) + "\n")
        # Overrides the workspace's .gitattributes: bytes in, the same bytes out; no filters.
        _write_private(info / "attributes",
                       "* -text -eol -filter -ident -working-tree-encoding -diff -merge\n")
        hooks = self.git_dir / "hooks"
        if hooks.is_dir():
            shutil.rmtree(hooks)

    # ------------------------------------------------------------------ snapshots

    def hold(self) -> Hold:
        """A shared hold (blocking while a purge runs): take it before a snapshot and release
        it once the snapshot's tree is in a log, or once what read the trees is done."""
        self.ensure()
        return Hold(self.git_dir)

    @contextmanager
    def held(self) -> Iterator[None]:
        """``hold`` for the block."""
        hold = self.hold()
        try:
            yield
        finally:
            hold.release()

    def snapshot(self) -> Snapshot:
        """Record the workspace as it is now; its tree and what is not covered."""
        self.ensure()
        self._forget_if_purged()
        self._seed_index()
        excluded = [f"--exclude=/{path.strip('/')}/" for path in self.exclude]  # wins: last
        tree, not_covered = self._record(
            ["--exclude-standard", *_REINCLUDE, *excluded], self.work_tree, self._env)
        dot_git = self.work_tree / ".git"
        if dot_git.is_dir() and not dot_git.is_symlink():
            stamp = _stamp(dot_git)
            if self._git_record is None or self._git_record[0] != stamp:
                # A stamp taken within a second of a change may miss the next one (a rewrite
                # of the same size in the same clock tick): such a stamp is never matched.
                fresh = time.time_ns() - _RACY_NS
                trusted = stamp if all(entry[3] < fresh for entry in stamp) else None
                self._git_record = (trusted, *self._record(["--", *GIT_FILES], dot_git,
                                                           self._dot_git_env))
            _trusted, git_tree, git_not_covered = self._git_record
            tree = self._compose(tree, git_tree)
            not_covered += [f".git/{path}" for path in git_not_covered]
        return Snapshot(tree, sorted(not_covered) + self.skipped_folders())

    def _record(self, listing: list[str], root: Path, env: Mapping[str, str]
                ) -> tuple[str, list[str]]:
        """``update-index`` what ``ls-files --others --modified LISTING`` names under the work
        tree ``root`` (in the view ``env``), then ``write-tree``: the tree and the paths left
        out (over the size cap, nested repositories)."""
        listed = self.git("ls-files", "-z", "--others", "--modified", *listing, env=env)
        update: list[str] = []
        gone: list[str] = []
        """Files now folders, or under a folder that is a file or a symlink now: dropped
        (never read through a symlink); what stands there now is listed on its own."""
        not_covered: list[str] = []
        folders = _Folders(root)
        for raw in dict.fromkeys(listed.split(b"\0")):
            if not raw:
                continue
            path = raw.decode(errors="surrogateescape")
            if path.endswith("/"):  # a nested repository
                not_covered.append(path)
                continue
            if not folders.real(path):
                gone.append(path)
                continue
            try:
                info = os.lstat(root / path)
            except (FileNotFoundError, NotADirectoryError):
                update.append(path)  # deleted: update-index --remove drops it
                continue
            except OSError:
                not_covered.append(path)
                continue
            if stat.S_ISDIR(info.st_mode):  # a recorded file that is a folder now
                gone.append(path)
            elif info.st_size > self.max_file_bytes:
                not_covered.append(path)
            else:
                update.append(path)
        if gone:  # --remove refuses a path "beyond a symbolic link"; --force-remove does not
            self.git("update-index", "--force-remove", "-z", "--stdin", stdin=_paths(gone),
                     env=env)
        if update:
            # --replace: a file where a folder was (or the other way) drops the entries in
            # the way, so `rm -r pkg && echo x > pkg` is recorded rather than refused.
            self.git("update-index", "--add", "--remove", "--replace", "-z", "--stdin",
                     stdin=_paths(update), env=env)
        return self.git("write-tree", env=env).decode().strip(), not_covered

    def _compose(self, tree: str, git_tree: str) -> str:
        """``tree`` with ``git_tree`` as its ``.git`` folder (``tree`` when that is empty)."""
        if git_tree == _EMPTY_TREE:
            return tree
        key = (tree, git_tree)
        if key not in self._composed:
            if len(self._composed) > 256:  # only recent snapshots repeat
                self._composed.clear()
            entries = self.git("ls-tree", "-z", tree)
            entries += f"040000 tree {git_tree}\t.git".encode() + b"\0"
            self._composed[key] = self.git("mktree", "-z", stdin=entries).decode().strip()
        return self._composed[key]

    def _seed_index(self) -> None:
        """Start a new session's index from the workspace's latest one, so its first snapshot
        hashes only what changed since (the stat data in it is the same work tree's)."""
        if self.index_file.exists():
            return
        others = [p for p in self.git_dir.glob("index*")
                  if p.is_file() and p != self.index_file and p.suffix != ".dotgit"]
        if others:
            latest = max(others, key=lambda p: p.stat().st_mtime)
            # The copy keeps the original's time: git trusts an entry whose file's stat data
            # match it unless the entry is as new as the index file (the "racy" check, in
            # whole seconds). A copy stamped now would pass off a file rewritten in the same
            # second with the same size as unchanged. Taken before the read: content newer
            # than its stamp only makes git look at more files.
            stamp = latest.stat()
            _write_private(self.index_file, latest.read_bytes())
            os.utime(self.index_file, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))

    def _forget_if_purged(self) -> None:
        """Drop the caches of trees if a purge ran since they were filled (they may name
        objects it removed)."""
        try:
            stamp = os.stat(self.git_dir / _PURGED).st_mtime_ns
        except FileNotFoundError:
            stamp = 0
        if stamp != self._purged:
            self._composed.clear()
            self._git_record = None
            self._purged = stamp

    # ------------------------------------------------------------------ purging

    def purge(self, session_id: str, logged_trees: Callable[[], Iterable[str]]) -> int:
        """Forget session ``session_id``: remove its index files, and every object no longer
        reachable from ``logged_trees()`` (the trees the workspace's remaining logs name, read
        under the lock) or from a remaining index. Indexes whose session has no log left (a
        session deleted by an older Tiller) go too. Holds the repository exclusively
        meanwhile; returns how many objects were removed. Blocking (git, the file system)."""
        if not (self.git_dir / "HEAD").exists():
            return 0
        hold = Hold(self.git_dir, exclusive=True)
        try:
            logs = self.git_dir.parent
            for index in self.git_dir.glob("index-*"):
                owner = index.name.removeprefix("index-").split(".", 1)[0]
                if owner == session_id or not (logs / f"{owner}.jsonl").exists():
                    index.unlink(missing_ok=True)
            roots = set(logged_trees())
            for index in self.git_dir.glob("index*"):
                if index.is_file() and not index.name.endswith(".lock"):
                    # write-tree names every tree the index's cache relies on: git trusts a
                    # cached tree without checking that it still exists.
                    roots.add(self.git("write-tree", cwd=self.git_dir, env={
                        **self._env, "GIT_INDEX_FILE": str(index)}).decode().strip())
            listed = self.git("rev-list", "--objects", "--stdin", cwd=self.git_dir,
                              stdin="".join(f"{root}\n" for root in roots).encode()
                              ) if roots else b""
            keep = {line.split(maxsplit=1)[0] for line in listed.decode().splitlines() if line}
            removed = 0
            objects = self.git_dir / "objects"
            for folder in objects.iterdir():
                if not (folder.is_dir() and _LOOSE.fullmatch(folder.name)):
                    continue  # packs, info: none are made (gc is off), so none are pruned
                for loose in folder.iterdir():
                    if len(loose.name) == 38 and folder.name + loose.name not in keep:
                        loose.unlink(missing_ok=True)
                        removed += 1
            (self.git_dir / _PURGED).touch(mode=PRIVATE_FILE)
            os.utime(self.git_dir / _PURGED)
            return removed
        finally:
            hold.release()

    def skipped_folders(self) -> list[str]:
        """The ``SKIPPED_FOLDERS`` present at the top of the workspace (not covered)."""
        return sorted(f"{name}/" for name in SKIPPED_FOLDERS if (self.work_tree / name).is_dir())

    # ------------------------------------------------------------------ reading trees

    def changed_paths(self, old: str, new: str, only: list[str] | None = None) -> list[str]:
        """The paths (among ``only``, when given) whose content or mode differ between two
        trees."""
        limit = ["--", *only] if only is not None else []
        out = self.git("diff-tree", "-r", "-z", "--no-renames", "--name-only", old, new, *limit)
        return sorted(p.decode(errors="surrogateescape") for p in out.split(b"\0") if p)

    def blobs(self, tree: str, paths: list[str]) -> dict[str, Blob]:
        """The blobs of ``paths`` in ``tree``; a path absent from it is absent here."""
        if not paths:
            return {}
        out = self.git("ls-tree", "-z", "--full-tree", tree, "--", *paths)
        found: dict[str, Blob] = {}
        for record in out.split(b"\0"):
            if not record:
                continue
            meta, _, name = record.partition(b"\t")
            mode, kind, oid = meta.decode().split()
            if kind == "blob":
                found[name.decode(errors="surrogateescape")] = Blob(mode, oid)
        return found

    def read_blob(self, oid: str) -> bytes:
        """A blob's content."""
        return self.git("cat-file", "blob", oid)

    def size(self) -> int:
        """The shadow repository's size on disk, in bytes."""
        return sum(p.stat().st_size for p in self.git_dir.rglob("*") if p.is_file())
