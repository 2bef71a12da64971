"""Saved sessions on disk: where each session's log lives, finding one by id, what
``session/list`` shows of each, and opening one to go live (``open_saved``). Logs live under
``<session_dir>/<workspace>/<id>.jsonl``. Nothing here imports pydantic or the models."""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import re
from collections.abc import Container, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiller.errors import OUT_OF_DESCRIPTORS, SessionLogError, UnknownSessionError
from tiller.store.log import (
    Outline,
    SessionFile,
    SessionLog,
    interrupted_result,
    outline,
    read_session_file,
    saved_tool_calls,
    shown_tool_calls,
)

if TYPE_CHECKING:
    from tiller.config import ServerConfig

__all__ = ["SavedSession", "SessionSummary", "find_log", "log_path", "open_saved", "parent_of",
           "quiet_gc", "saved_logs", "summarize", "task_of", "workspace_dir_name"]

log = logging.getLogger(__name__)


@dataclass
class SessionSummary:
    """What ``session/list`` shows of a saved session; a child session (a subagent's) names its
    parent, the parent's ``task`` call and its agent; ``children`` are the parent's children."""

    session_id: str
    title: str | None
    cwd: str
    created: int
    updated: int
    message_count: int
    live: bool
    parent_session_id: str | None = None
    parent_tool_call_id: str | None = None
    agent: str | None = None
    children: list[SessionSummary] = field(default_factory=list)


def task_of(header: Mapping[str, Any]) -> dict[str, str]:
    """A child session's ``parentSessionId``, ``parentToolCallId`` and ``agent`` from its log
    header's ``task`` (tiller.session.subagents); empty for any other session."""
    task = header.get("task")
    if not isinstance(task, Mapping):
        return {}
    fields = {"parentSessionId": task.get("parentSessionId"),
              "parentToolCallId": task.get("parentToolCallId"), "agent": task.get("agent")}
    return {key: value for key, value in fields.items() if isinstance(value, str)}


def parent_of(path: Path) -> str | None:
    """The parent session a log's header names (a child session's), reading only its first
    line; None for a top-level session or a file that cannot be read."""
    try:
        with open(path, "rb") as handle:
            header = json.loads(handle.readline() or b"{}")
    except (OSError, ValueError):
        return None
    return task_of(header).get("parentSessionId") if isinstance(header, dict) else None


def workspace_dir_name(cwd: Path) -> str:
    """A readable, collision-safe folder name for a workspace: its last parts plus a hash."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", "-".join(cwd.parts[-2:])).strip("-") or "root"
    digest = hashlib.sha256(str(cwd).encode()).hexdigest()[:8]
    return f"{readable[:48]}-{digest}"


def log_path(root: Path | None, cwd: Path, session_id: str) -> Path | None:
    """Where a session of workspace ``cwd`` is saved; None when sessions are not saved."""
    return None if root is None else root / workspace_dir_name(cwd) / f"{session_id}.jsonl"


def find_log(root: Path | None, session_id: str) -> Path | None:
    """The log file of a saved session, in any workspace."""
    if root is None or not re.fullmatch(r"[0-9a-f]{8,64}", session_id):
        return None
    return next(root.glob(f"*/{session_id}.jsonl"), None)


def saved_logs(root: Path | None, cwd: str | None) -> list[Path]:
    """The saved logs of workspace ``cwd`` (None: of every workspace), most recently
    updated first."""
    if root is None or not root.is_dir():
        return []
    if cwd is not None:
        folders = [root / workspace_dir_name(Path(cwd).expanduser().resolve())]
    else:
        folders = [path for path in root.iterdir() if path.is_dir()]
    files = [path for folder in folders if folder.is_dir() for path in folder.glob("*.jsonl")]
    files.sort(key=lambda path: path.stat().st_mtime, reverse=True)
    return files


def summarize(path: Path, live: Container[str]) -> SessionSummary | None:
    """What session/list shows of one log; None (and a warning) if it cannot be read or is
    corrupt, None too for a session without a message (an older Tiller saved those; there is
    nothing to resume). Blocking file I/O."""
    try:
        loaded = read_session_file(path)
        state = outline(loaded)
    except (OSError, SessionLogError) as exc:
        if isinstance(exc, OSError) and exc.errno in OUT_OF_DESCRIPTORS:
            raise  # not this file's fault: the request fails (ResourceLimitError)
        log.warning("skipping %s: %s", path, exc)
        return None
    if not state.messages and not state.queued:
        return None
    created = int(loaded.header.get("created", 0))
    link = task_of(loaded.header)
    return SessionSummary(
        session_id=loaded.id,
        title=state.title,
        cwd=str(loaded.header.get("cwd", "")),
        created=created,
        updated=loaded.entries[-1].timestamp if loaded.entries else created,
        message_count=len(state.messages),
        live=loaded.id in live,
        parent_session_id=link.get("parentSessionId"),
        parent_tool_call_id=link.get("parentToolCallId"),
        agent=link.get("agent"),
    )


@dataclass
class SavedSession:
    """A saved session opened to go live: its id (its file's name), its file, what its log
    says (messages as saved, not yet validated) and the log reopened for appending."""

    id: str
    file: SessionFile
    outline: Outline
    log: SessionLog

    def settings(self, config: ServerConfig) -> tuple[Path, str, str]:
        """Its workspace, provider and model (the server's defaults where the log names none)."""
        cwd = Path(self.file.header.get("cwd") or config.cwd)
        provider = self.outline.provider or config.provider
        return cwd, provider, self.outline.model or config.default_model(provider)

    def history(self, config: ServerConfig) -> dict[str, Any]:
        """``session/load``'s result (protocol.md) for the session about to go live."""
        cwd, provider, model = self.settings(config)
        found = self.outline
        return {"sessionId": self.id, "cwd": str(cwd), "provider": provider,
                "model": model, "messages": found.messages, "entryIds": found.entry_ids,
                "pendingSteering": found.pending("steering"),
                "pendingFollowUp": found.pending("followUp"),
                "toolCalls": shown_tool_calls(
                    saved_tool_calls(found.entry_ids, found.messages), found.shown),
                **task_of(self.file.header)}

    def close(self) -> None:
        """Close the reopened log: the session will not go live."""
        self.log.close()


def open_saved(root: Path | None, session_id: str) -> SavedSession:
    """Find, read and outline a saved session, and reopen its log (blocking: run it in a worker
    thread). What a crash left unfinished is repaired in the log first: each tool call without
    a result gets a synthetic error result, a run left open is ended. Raises
    UnknownSessionError if there is no such log, SessionLogError if it is unusable."""
    path = find_log(root, session_id)
    if path is None:
        raise UnknownSessionError(f"no saved session {session_id!r}")
    with quiet_gc():
        try:
            loaded = read_session_file(path)
            found = outline(loaded)
            session_log = SessionLog.reopen(loaded)
        except OSError as exc:
            if exc.errno in OUT_OF_DESCRIPTORS:
                raise  # the log is fine: the server is out of descriptors (ResourceLimitError)
            raise SessionLogError(f"cannot read the session log {path}: {exc}") from None
        if found.interrupted or found.open_run:
            for call, started in found.interrupted:
                result = interrupted_result(call, started)
                loaded.entries.append(session_log.append("message", message=result))
            if found.open_run:
                loaded.entries.append(session_log.append(
                    "run_end", stopReason="error",
                    errorMessage="the run was interrupted by a restart"))
            found = outline(loaded)
    return SavedSession(session_id, loaded, found, session_log)


@contextmanager
def quiet_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a session's objects are built. A big log
    allocates hundreds of thousands of objects, none of them garbage, and collecting over them
    took about half of a load. What was built is then moved to the oldest generation
    (``gc.freeze`` then ``gc.unfreeze``, no traversal): it lives as long as the session, and the
    first young collection after would otherwise walk all of it."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if paused:
            gc.enable()
