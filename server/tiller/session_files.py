"""Saved sessions on disk: where each session's log lives, finding one by id, and what
``session/list`` shows of each. Logs live under ``<session_dir>/<workspace>/<id>.jsonl``."""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Container
from dataclasses import dataclass
from pathlib import Path

from tiller.store import SessionLogError, read_session_file, replay

__all__ = ["SessionSummary", "find_log", "log_path", "saved_logs", "summarize",
           "workspace_dir_name"]

log = logging.getLogger(__name__)


@dataclass
class SessionSummary:
    session_id: str
    title: str | None
    cwd: str
    created: int
    updated: int
    message_count: int
    live: bool


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
    corrupt. Blocking file I/O."""
    try:
        loaded = read_session_file(path)
        state = replay(loaded)
    except (OSError, SessionLogError) as exc:
        log.warning("skipping %s: %s", path, exc)
        return None
    created = int(loaded.header.get("created", 0))
    return SessionSummary(
        session_id=loaded.id,
        title=state.title,
        cwd=str(loaded.header.get("cwd", "")),
        created=created,
        updated=loaded.entries[-1].timestamp if loaded.entries else created,
        message_count=len(state.messages),
        live=loaded.id in live,
    )
