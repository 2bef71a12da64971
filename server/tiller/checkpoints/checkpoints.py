"""Checkpoints: what the agent changed in the workspace, and putting it back.

Before the first mutating tool call of a turn (a tool whose ``ToolInfo.mutates`` is true) the
workspace is snapshotted into the shadow repository (tiller.checkpoints.shadow) and a ``checkpoint``
log entry ``{tree, notCovered}`` is written; after each mutating call of that turn another snapshot
is taken, logged as ``checkpoint_end {checkpointId, tree, files}`` and published as a ``checkpoint``
event. The agent's changes are the differences inside those (before, after) pairs; whatever changed
between pairs was someone else (the user), so it is never reported or undone. Everything lives in
the log and the shadow repository, so checkpoints survive a restart, ``session/load`` and
``session/fork``.

The Agent and the loop know nothing of this: a ``Session`` wires ``Checkpoints`` in as a cleared
hook (before), an after-tool hook and a subscriber (turn end). Git runs in worker threads.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio

from tiller.checkpoints.shadow import (
    DEFAULT_MAX_FILE_BYTES,
    Blob,
    ShadowRepo,
    git_available,
    off_reason,
)
from tiller.errors import (
    CheckpointsOffError,
    SessionLogError,
    SymlinkInPathError,
    ToolError,
    UnknownEntryError,
)
from tiller.protocol.checkpoints import (
    ChangesResult,
    FileChange,
    RevertResult,
    SkippedFile,
    TurnCheckpoint,
)
from tiller.store.log import Entry, read_session_file
from tiller.store.recorder import LogRecorder
from tiller.tools.base import EditorFiles, Tool, describe
from tiller.tools.safefs import pin, remove_entry, restore_file, restore_symlink
from tiller.types import AgentEnd, AgentEvent, CheckpointEvent, ToolCall, ToolResultMessage, TurnEnd

__all__ = ["Checkpoints", "forget_session", "open_shadow"]

log = logging.getLogger(__name__)

_Span = tuple[Blob | None, Blob | None]
"""A file as the agent found it (before its first change) and left it (after its last)."""


def open_shadow(
    session_dir: Path | None, cwd: Path, log_path: Path | None, session_id: str,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> tuple[ShadowRepo | None, str | None]:
    """The shadow repository of a session's workspace (shared by the workspace's sessions, one
    index each), or None and the reason checkpoints are off. Creates nothing yet."""
    reason = off_reason(saved=log_path is not None)
    if reason is not None or log_path is None:
        return None, reason
    exclude: tuple[str, ...] = ()
    if session_dir is not None and session_dir.is_relative_to(cwd):
        exclude = (session_dir.relative_to(cwd).as_posix(),)
    repo = ShadowRepo(log_path.parent / "checkpoints.git", cwd, index=f"index-{session_id}",
                      max_file_bytes=max_file_bytes, exclude=exclude)
    return repo, None


def forget_session(log_path: Path, session_id: str) -> int:
    """After session ``session_id``'s log at ``log_path`` was deleted: remove from its
    workspace's shadow repository the session's index and every object only it referenced
    (what the workspace's other logs and indexes need stays). Blocking; the number of objects
    removed. A log of the workspace that cannot be read keeps everything (its trees are not
    known), and so does a repository git cannot read."""
    git_dir = log_path.parent / "checkpoints.git"
    if not git_available() or not (git_dir / "HEAD").exists():
        return 0

    def logged_trees() -> set[str]:
        trees: set[str] = set()
        for other in log_path.parent.glob("*.jsonl"):
            for entry in read_session_file(other).entries:
                tree = entry.data.get("tree")
                if entry.type in ("checkpoint", "checkpoint_end") and isinstance(tree, str):
                    trees.add(tree)
        return trees

    try:
        return ShadowRepo(git_dir, log_path.parent).purge(session_id, logged_trees)
    except (OSError, SessionLogError) as exc:
        log.warning("checkpoints: could not remove session %s's snapshots from %s: %s",
                    session_id, git_dir, exc)
        return 0


@dataclass
class _Turn:
    """One checkpoint: its log entry, its place on the branch, the trees around the turn and
    what the snapshots before it and (the latest) after it did not cover."""

    entry_id: str
    position: int
    before: str
    after: str | None
    not_covered_before: frozenset[str] = frozenset()
    not_covered_after: frozenset[str] = frozenset()

    def grown(self) -> set[str]:
        """Files the turn left over the size cap that were not over it before the turn
        (grown past it, or created over it); folders (``node_modules/``...) aside."""
        return {path for path in self.not_covered_after - self.not_covered_before
                if not path.endswith("/")}


class Checkpoints:
    """One session's checkpoints. ``repo`` None: off, for ``reason``."""

    def __init__(
        self, repo: ShadowRepo | None, reason: str | None, recorder: LogRecorder,
        tools: Callable[[], Sequence[Tool[Any]]], publish: Callable[[AgentEvent], None],
    ) -> None:
        self.repo, self.reason = repo, reason
        self.recorder = recorder
        self.tools, self.publish = tools, publish
        self._open: tuple[str, str] | None = None
        """The (entry id, tree) of the current turn's checkpoint, once taken."""
        self._lock = anyio.Lock()

    @property
    def enabled(self) -> bool:
        return self.repo is not None

    # ------------------------------------------------------------------ the hooks

    def __call__(self, event: AgentEvent) -> None:
        """Subscriber: a turn's checkpoint closes with the turn."""
        if isinstance(event, TurnEnd | AgentEnd):
            self._open = None

    async def before_tool(self, call: ToolCall, args: dict[str, Any]) -> None:
        """Cleared hook: snapshot before the turn's first mutating call runs. Never raises."""
        repo = self.repo
        if repo is None or self._open is not None or not self._mutates(call):
            return
        async with self._lock:
            if self._open is not None:
                return
            try:
                hold = await anyio.to_thread.run_sync(repo.hold)
            except OSError:
                log.exception("checkpoint: the shadow repository is not usable; this turn is "
                              "not covered")
                return
            try:
                snap = await anyio.to_thread.run_sync(repo.snapshot)
                entry = self.recorder.append("checkpoint", tree=snap.tree,
                                             notCovered=snap.not_covered)
            except OSError:
                log.exception("checkpoint: the snapshot failed; this turn is not covered")
                return
            finally:
                hold.release()  # the tree is in the log: a purge keeps it
            if entry is not None:
                self._open = (entry.id, snap.tree)

    async def after_tool(self, call: ToolCall, result: ToolResultMessage) -> None:
        """After-tool hook: snapshot after a mutating call, log it, publish ``checkpoint``.
        Never raises."""
        repo, opened = self.repo, self._open
        if repo is None or opened is None or not self._mutates(call):
            return
        entry_id, before = opened
        async with self._lock:
            try:
                hold = await anyio.to_thread.run_sync(repo.hold)
            except OSError:
                log.exception("checkpoint: the shadow repository is not usable")
                return
            try:
                snap = await anyio.to_thread.run_sync(repo.snapshot)
                files = await anyio.to_thread.run_sync(repo.changed_paths, before, snap.tree)
                self.recorder.append("checkpoint_end", checkpointId=entry_id, tree=snap.tree,
                                     files=files, notCovered=snap.not_covered)
            except OSError:
                log.exception("checkpoint: the snapshot after %s failed", call.name)
                return
            finally:
                hold.release()
        self.publish(CheckpointEvent(entry_id=entry_id, files=files,
                                     not_covered=snap.not_covered))

    def _mutates(self, call: ToolCall) -> bool:
        return describe(self.tools(), call.name).mutates

    # ------------------------------------------------------------------ the methods

    def _repo(self) -> ShadowRepo:
        if self.repo is None:
            raise CheckpointsOffError(f"checkpoints are off: {self.reason}")
        return self.repo

    async def changes(self, start: str | None = None, end: str | None = None) -> ChangesResult:
        """The files the agent changed after entry ``start`` up to entry ``end`` (default: the
        whole session), each with its status, line stats and a unified diff."""
        repo = self._repo()
        path = self.recorder.log.path
        async with self._lock:
            return await anyio.to_thread.run_sync(_changes, repo, path, start, end)

    async def revert(
        self, entry_id: str, paths: Sequence[str] | None = None, *, force: bool = False,
        files: EditorFiles | None = None, log_path: Path | None = None,
    ) -> RevertResult:
        """Put the files the agent changed after ``entry_id`` back as they were at it (files
        through the editor when it offers writes); a file changed by someone else since the
        agent's last change to it is a conflict, left alone unless ``force``. ``log_path``:
        read the checkpoints of another session's log (a fork's source)."""
        repo = self._repo()
        source = log_path or self.recorder.log.path
        async with self._lock:
            plan = await anyio.to_thread.run_sync(_plan_revert, repo, source, entry_id,
                                                  paths, force)
            result, restore = plan
            # Deletions first, deepest first, then writes, shallowest first: `pkg/a.py` goes
            # before the file `pkg` comes back, and the folder `pkg` before `pkg/a.py` does.
            deletions = sorted((item for item in restore if item[1] is None), reverse=True)
            writes = sorted(item for item in restore if item[1] is not None)
            for rel, blob in [*deletions, *writes]:
                refused = await _restore(repo, rel, blob, files)
                if refused is None:
                    result.restored.append(rel)
                else:
                    result.skipped.append(SkippedFile(path=rel, reason=refused))
        if result.restored:
            self.recorder.append("revert", entryId=entry_id, restored=result.restored)
        return result


# ---------------------------------------------------------------------------------------------
# Reading the log (blocking: worker threads)


def _branch(path: Path | None) -> list[Entry]:
    if path is None:
        raise CheckpointsOffError("checkpoints are off: sessions are not saved")
    if not path.exists():  # a new session, saved from its first message on: nothing yet
        return []
    return read_session_file(path).branch()


def _position(branch: list[Entry], entry_id: str | None, default: int) -> int:
    if entry_id is None:
        return default
    for position, entry in enumerate(branch):
        if entry.id == entry_id:
            return position
    raise UnknownEntryError(f"the session has no entry {entry_id!r}")


def _turns(branch: list[Entry], start: int, end: int) -> list[_Turn]:
    """The checkpoints placed at ``start`` <= position <= ``end``, with their after trees (a
    turn a crash cut short ends where the next one starts, or, for the last, at None)."""
    turns: dict[str, _Turn] = {}
    for position, entry in enumerate(branch):
        data = entry.data
        if entry.type == "checkpoint" and isinstance(data.get("tree"), str):
            turns[entry.id] = _Turn(entry.id, position, data["tree"], None,
                                    frozenset(data.get("notCovered") or ()))
        elif entry.type == "checkpoint_end" and data.get("checkpointId") in turns:
            turn = turns[data["checkpointId"]]
            turn.after = data.get("tree")
            turn.not_covered_after = frozenset(data.get("notCovered") or ())  # older logs: ()
    ordered = list(turns.values())
    for turn, following in zip(ordered, ordered[1:], strict=False):
        turn.after = turn.after or following.before
    return [turn for turn in ordered if start <= turn.position <= end]


def _spans(repo: ShadowRepo, turns: list[_Turn], now: Callable[[], str],
           only: list[str] | None = None) -> tuple[dict[str, _Span], set[str]]:
    """Each file (among ``only``, when given) the turns changed: as the first turn found it,
    as the last one left it; and the files whose first state is unknown, because the first
    turn that changed them found them over the size cap (not "added": never deleted)."""
    spans: dict[str, _Span] = {}
    unknown: set[str] = set()
    if only is not None and not only:
        return spans, unknown
    for turn in turns:
        after = turn.after or now()
        changed = repo.changed_paths(turn.before, after, only)
        if not changed:
            continue
        old, new = repo.blobs(turn.before, changed), repo.blobs(after, changed)
        for rel in changed:
            if rel not in spans and rel not in old and rel in turn.not_covered_before:
                unknown.add(rel)
            first = spans[rel][0] if rel in spans else old.get(rel)
            spans[rel] = (first, new.get(rel))
    changed_spans = {rel: span for rel, span in spans.items()
                     if span[0] != span[1] and rel not in unknown}
    return changed_spans, unknown


def _changes(repo: ShadowRepo, path: Path | None, start: str | None,
             end: str | None) -> ChangesResult:
    with repo.held():
        return _changes_held(repo, path, start, end)


def _changes_held(repo: ShadowRepo, path: Path | None, start: str | None,
                  end: str | None) -> ChangesResult:
    branch = _branch(path)
    first = _position(branch, start, 0)
    last = _position(branch, end, len(branch))
    turns = _turns(branch, first, last)
    not_covered: set[str] = set()
    for entry in branch[first:last + 1]:
        if entry.type in ("checkpoint", "checkpoint_end"):
            not_covered.update(entry.data.get("notCovered") or [])
    current: list[str] = []

    def now() -> str:
        current[:] = current or [repo.snapshot().tree]
        return current[0]

    spans, unknown = _spans(repo, turns, now)
    not_covered |= unknown
    return ChangesResult(
        files=[_file_change(repo, rel, old, new) for rel, (old, new) in sorted(spans.items())],
        checkpoints=[TurnCheckpoint(entry_id=turn.entry_id,
                                    files=repo.changed_paths(turn.before, turn.after or now()),
                                    after_entry_id=_message_before(branch, turn.position))
                     for turn in turns],
        not_covered=sorted(not_covered),
    )


def _message_before(branch: list[Entry], position: int) -> str | None:
    """The id of the last message entry before ``position``."""
    return next((entry.id for entry in reversed(branch[:position]) if entry.type == "message"),
                None)


def _file_change(repo: ShadowRepo, rel: str, old: Blob | None, new: Blob | None) -> FileChange:
    status: Literal["added", "modified", "deleted"] = (
        "added" if old is None else "deleted" if new is None else "modified"
    )
    before = repo.read_blob(old.oid) if old else b""
    after = repo.read_blob(new.oid) if new else b""
    old_text, new_text = _text(before), _text(after)
    if old_text is None or new_text is None:
        return FileChange(path=rel, status=status, binary=True, additions=0, deletions=0,
                          diff=f"Binary files a/{rel} and b/{rel} differ\n")
    import difflib  # on first use: a loaded session may never diff

    lines = list(difflib.unified_diff(
        old_text.splitlines(keepends=True), new_text.splitlines(keepends=True),
        fromfile=f"a/{rel}" if old else "/dev/null", tofile=f"b/{rel}" if new else "/dev/null",
    ))
    additions = sum(1 for ln in lines if ln.startswith("+") and not ln.startswith("+++"))
    deletions = sum(1 for ln in lines if ln.startswith("-") and not ln.startswith("---"))
    diff = "".join(ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n"
                   for ln in lines)
    return FileChange(path=rel, status=status, additions=additions, deletions=deletions,
                      diff=diff)


def _text(data: bytes) -> str | None:
    """The content as text; None for binary content (a NUL byte, or not UTF-8)."""
    if b"\0" in data:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return None


def _plan_revert(
    repo: ShadowRepo, path: Path | None, entry_id: str, only: Sequence[str] | None, force: bool
) -> tuple[RevertResult, list[tuple[str, Blob | None]]]:
    """What a revert to ``entry_id`` restores (file, blob to restore or None to delete), with
    the conflicts and skipped files already in the result. (The blobs to restore are in
    logged trees: a purge keeps them.)"""
    with repo.held():
        return _plan_held(repo, path, entry_id, only, force)


def _plan_held(
    repo: ShadowRepo, path: Path | None, entry_id: str, only: Sequence[str] | None, force: bool
) -> tuple[RevertResult, list[tuple[str, Blob | None]]]:
    branch = _branch(path)
    turns = _turns(branch, _position(branch, entry_id, 0), len(branch))
    current = repo.snapshot()
    wanted = sorted({_relative(repo, p) for p in only}) if only is not None else None
    spans, unknown = _spans(repo, turns, lambda: current.tree, wanted)
    result = RevertResult()
    restore: list[tuple[str, Blob | None]] = []
    skipped = {rel: "not covered: it was over the size cap before the agent changed it"
               for rel in unknown}
    for turn in turns:
        grown = sorted(rel for rel in turn.grown() if rel not in spans and rel not in skipped
                       and (wanted is None or rel in wanted))
        found_before = repo.blobs(turn.before, grown)
        for rel in grown:
            skipped[rel] = ("not covered: it grew past the size cap" if rel in found_before
                            else "not covered: over the size cap")
    now = repo.blobs(current.tree, list(spans))
    for rel, (found, left) in sorted(spans.items()):
        if rel in current.not_covered:
            skipped[rel] = "not covered: over the size cap"
        elif now.get(rel) == found:
            skipped[rel] = "already as it was"
        elif now.get(rel) != left and not force:
            result.conflicts.append(rel)
        else:
            restore.append((rel, found))
    result.skipped = [SkippedFile(path=rel, reason=why) for rel, why in sorted(skipped.items())]
    return result, restore


def _relative(repo: ShadowRepo, path: str) -> str:
    candidate = Path(path)
    if candidate.is_absolute() and candidate.is_relative_to(repo.work_tree):
        return candidate.relative_to(repo.work_tree).as_posix()
    return candidate.as_posix()


async def _restore(repo: ShadowRepo, rel: str, blob: Blob | None, files: EditorFiles | None
                   ) -> str | None:
    """Put one file back: deleted (``blob`` None) or written, through the editor for a text
    file when it offers writes, else on disk; the disk is written like the file tools write
    it (tiller.tools.safefs), never through a symlink. Returns why it was not restored (a
    symlink in the way), None once it is."""
    root, through_link = await anyio.to_thread.run_sync(_locate, repo.work_tree, rel)
    target = root / rel
    content = await anyio.to_thread.run_sync(repo.read_blob, blob.oid) if blob else None
    if files is not None and files.can_write and blob is not None and blob.mode == "100644" \
            and not through_link:  # the editor resolves the path itself
        text = _text(content or b"")
        if text is not None:
            try:
                await files.write_text(target, text)
                return None
            except ToolError:
                log.warning("checkpoint: the editor could not write %s; writing the disk", rel)
    try:
        await anyio.to_thread.run_sync(_write_disk, target, blob, content)
    except SymlinkInPathError as exc:
        at = Path(exc.at)
        shown = at.relative_to(root).as_posix() if at.is_relative_to(root) else str(at)
        return f"not restored: {shown} is a symlink, and revert does not write through one"
    except NotADirectoryError:
        return "not restored: a folder on its path is a file now"
    except OSError as exc:
        if exc.errno == errno.ENOTEMPTY:
            return f"not restored: {rel} is a folder now, and not empty"
        return f"not restored: {exc.strerror or exc}"
    return None


def _locate(work_tree: Path, rel: str) -> tuple[Path, bool]:
    """The workspace's real path, and whether ``rel`` under it goes through a symlink now."""
    root = pin(work_tree)
    return root, os.path.realpath(root / rel) != str(root / rel)


def _write_disk(target: Path, blob: Blob | None, content: bytes | None) -> None:
    if blob is None or content is None:
        remove_entry(target)
    elif blob.mode == "120000":
        restore_symlink(target, content.decode(errors="surrogateescape"))
    else:
        restore_file(target, content, 0o755 if blob.mode == "100755" else 0o644)
