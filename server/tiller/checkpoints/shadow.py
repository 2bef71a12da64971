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
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "SKIPPED_FOLDERS",
    "Blob",
    "ShadowRepo",
    "Snapshot",
    "git_available",
]

DEFAULT_MAX_FILE_BYTES = 2 * 1024 * 1024
"""Files larger than this are not snapshotted (not covered)."""

SKIPPED_FOLDERS = (
    "node_modules", ".venv", "venv", "__pycache__", ".tox", ".mypy_cache", ".pytest_cache",
    ".ruff_cache", ".gradle", ".next", ".nuxt",
)
"""Folders never snapshotted, at any depth (dependencies and caches; not covered)."""

_CONFIG = (
    "core.hooksPath=/dev/null", "core.fsmonitor=false", "core.autocrlf=false",
    "core.safecrlf=false", "core.attributesFile=/dev/null", "core.excludesFile=/dev/null",
    "core.symlinks=true", "core.quotePath=false", "core.untrackedCache=false", "gc.auto=0",
    "maintenance.auto=false", "commit.gpgSign=false", "core.splitIndex=false",
)


def git_available() -> bool:
    """Whether a ``git`` executable is on PATH."""
    return shutil.which("git") is not None


@dataclass(frozen=True)
class Snapshot:
    """A workspace state: its tree id, and what it does not cover (files over the size cap,
    skipped folders, nested repositories), as workspace-relative paths."""

    tree: str
    not_covered: list[str] = field(default_factory=list)


@dataclass(frozen=True)
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

    # ------------------------------------------------------------------ plumbing

    def git(self, *args: str, stdin: bytes | None = None) -> bytes:
        """Run one git command in the shadow repository; its stdout. Raises OSError (with
        git's message) when it fails."""
        argv = ["git"]
        for option in _CONFIG:
            argv += ["-c", option]
        try:
            done = subprocess.run(
                [*argv, *args], input=stdin, capture_output=True, env=self._env,
                cwd=self.work_tree, check=False,
            )
        except FileNotFoundError as exc:
            raise OSError(f"git is not available: {exc}") from None
        if done.returncode != 0:
            message = done.stderr.decode(errors="replace").strip()
            raise OSError(f"git {args[0]} failed: {message}")
        return done.stdout

    def ensure(self) -> None:
        """Create the shadow repository if it does not exist yet."""
        if (self.git_dir / "HEAD").exists():
            return
        self.git_dir.mkdir(parents=True, exist_ok=True)
        self.git("init", "--quiet")
        info = self.git_dir / "info"
        info.mkdir(exist_ok=True)
        patterns = [f"{name}/" for name in SKIPPED_FOLDERS]
        patterns += ["/" + path.strip("/") for path in self.exclude]
        (info / "exclude").write_text("\n".join(patterns) + "\n")
        # Overrides the workspace's .gitattributes: bytes in, the same bytes out; no filters.
        (info / "attributes").write_text(
            "* -text -eol -filter -ident -working-tree-encoding -diff -merge\n"
        )
        hooks = self.git_dir / "hooks"
        if hooks.is_dir():
            shutil.rmtree(hooks)

    # ------------------------------------------------------------------ snapshots

    def snapshot(self) -> Snapshot:
        """Record the workspace as it is now; its tree and what is not covered."""
        self.ensure()
        self._seed_index()
        listed = self.git("ls-files", "-z", "--others", "--modified", "--exclude-standard")
        update: list[str] = []
        not_covered: list[str] = []
        for raw in dict.fromkeys(listed.split(b"\0")):
            if not raw:
                continue
            path = raw.decode(errors="surrogateescape")
            if path.endswith("/"):  # a nested repository
                not_covered.append(path)
                continue
            try:
                size = os.lstat(self.work_tree / path).st_size
            except FileNotFoundError:
                update.append(path)  # deleted: update-index --remove drops it
                continue
            except OSError:
                not_covered.append(path)
                continue
            if size > self.max_file_bytes:
                not_covered.append(path)
            else:
                update.append(path)
        if update:
            payload = b"".join(p.encode(errors="surrogateescape") + b"\0" for p in update)
            self.git("update-index", "--add", "--remove", "-z", "--stdin", stdin=payload)
        tree = self.git("write-tree").decode().strip()
        return Snapshot(tree, sorted(not_covered) + self.skipped_folders())

    def _seed_index(self) -> None:
        """Start a new session's index from the workspace's latest one, so its first snapshot
        hashes only what changed since (the stat data in it is the same work tree's)."""
        if self.index_file.exists():
            return
        others = [p for p in self.git_dir.glob("index*") if p.is_file() and p != self.index_file]
        if others:
            latest = max(others, key=lambda p: p.stat().st_mtime)
            shutil.copyfile(latest, self.index_file)

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
