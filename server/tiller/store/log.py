"""The session log: one append-only JSONL file per session, written before the step it records.

Line 1 is a header ``{"type": "session", "version", "id", "cwd", "created", ...}``; every other
line is an entry ``{"type", "id", "parentId", "timestamp", ...}``. ``parentId`` links an entry to
the one before it on its branch, so a file is a tree (forks share the prefix). Each ``append``
writes one whole line and flushes it (and fsyncs, unless ``durable=False``) before returning.

A new session's file is written from its first entry that is not a settings change
(``WAITING``): in practice its first run, whose user message follows at once, or an
acknowledged queued message. Until then the header and the settings changes wait in memory, so
a session a client opened and never used leaves no file (``session/list`` cannot list it,
another process cannot load it).

A torn last line (a crash mid-write) is ignored on load, never fatal; any other bad line is
skipped with a warning. ``LOADERS`` maps each format version to its loader; a file from a newer
Tiller is refused with a message saying so, and so is a corrupt one (a ``parentId`` loop, a
malformed entry) when its branch is walked or outlined.

``outline`` reads what a branch says about its session (transcript, queues, settings, title)
with the messages as saved, plain JSON; ``tiller.store.replay`` validates them into models. Nothing
here imports pydantic (only pydantic_core's JSON parser), so a server can read a log and answer
``session/load`` before the models are loaded.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_core import from_json

from tiller.errors import SessionLogError
from tiller.modes import SUMMARY_PREFIX, now_ms
from tiller.store.private import PRIVATE_FILE, private_dir

__all__ = [
    "FORMAT_VERSION",
    "LOADERS",
    "Entry",
    "Outline",
    "SessionFile",
    "SessionLog",
    "interrupted_result",
    "outline",
    "read_session_file",
    "saved_tool_calls",
    "shown_tool_calls",
    "title_of",
]

log = logging.getLogger(__name__)


FORMAT_VERSION = 1

ENTRY_TYPES = (
    "message",  # {message}: a user, assistant or tool result message; `queueId` if it was queued
    "model_change",  # {provider, model}
    "thinking_change",  # {level}
    "tool_start",  # {toolCallId, toolName, args, title, kind, path?}: before the tool runs
    "tool_end",  # {toolCallId, isError}
    "run_start",  # {}
    "run_end",  # {stopReason, errorMessage?}
    "queued",  # {queue: "steering"|"followUp", message}: acknowledged, not yet delivered
    "compaction",  # {summary, firstKeptEntryId, tokensBefore}
    "label",  # {label}: a title or bookmark
    "checkpoint",  # {tree, notCovered}: the workspace before a turn's mutating calls
    "checkpoint_end",  # {checkpointId, tree, files, notCovered}: after a mutating call
    "revert",  # {entryId, restored}: session/revert put these files back
    "process_start",  # {sessionId, process}: a background process started (a ProcessInfo)
    "process_end",  # {sessionId, process}: it ended (a ProcessInfo)
)


WAITING = frozenset({"model_change", "thinking_change"})
"""Entry types a new log keeps in memory, with its header, until another entry comes: the
settings a client may change on a session it never uses."""


@dataclass(slots=True)
class Entry:
    """One line after the header. ``data`` holds the type-specific fields, camelCase. (Slots:
    a loaded log holds one per line.)"""

    type: str
    id: str
    parent_id: str | None
    timestamp: int
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "id": self.id,
            "parentId": self.parent_id,
            "timestamp": self.timestamp,
            **self.data,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Entry:
        """The entry of one parsed line; takes ``raw`` over (its fixed keys are popped, the
        rest becomes ``data``), so pass a dict nothing else holds."""
        pop = raw.pop
        return cls(pop("type"), pop("id"), pop("parentId", None), pop("timestamp", 0), raw)


@dataclass
class SessionFile:
    """A loaded session file: its header and entries in file order."""

    path: Path
    header: dict[str, Any]
    entries: list[Entry]
    torn_tail: bool = False

    @property
    def id(self) -> str:
        return str(self.header["id"])

    def branch(self, leaf_id: str | None = None) -> list[Entry]:
        """The entries from the root to ``leaf_id`` (default: the last entry), in order.

        Raises KeyError for an unknown ``leaf_id``, SessionLogError if the ``parentId`` links
        from it form a loop."""
        if not self.entries:
            return []
        by_id = {entry.id: entry for entry in self.entries}
        current = by_id.get(leaf_id) if leaf_id else self.entries[-1]
        if current is None:
            raise KeyError(leaf_id)
        path: list[Entry] = []
        seen: set[str] = set()
        while current is not None:
            if current.id in seen:
                raise SessionLogError(
                    f"session {self.id} is corrupt ({self.path}): the parentId links of its "
                    f"entry {current.id!r} form a loop"
                )
            seen.add(current.id)
            path.append(current)
            current = by_id.get(current.parent_id) if current.parent_id else None
        return path[::-1]


def _load_v1(header: dict[str, Any], lines: list[dict[str, Any]]) -> list[Entry]:
    return [Entry.from_json(raw) for raw in lines if "type" in raw and "id" in raw]


LOADERS: dict[int, Callable[[dict[str, Any], list[dict[str, Any]]], list[Entry]]] = {
    1: _load_v1,
}
"""Format version -> loader of its entry lines. A new version adds a loader; old ones stay."""


def _parse_lines(path: Path) -> tuple[list[dict[str, Any]], bool]:
    """The JSON objects of the file's lines, and whether a torn last line was dropped."""
    data = path.read_bytes()
    raw_lines = data.split(b"\n")
    torn = False
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()
    elif raw_lines:
        torn = True  # no newline at the end: the last write did not finish
    parsed = []
    for number, line in enumerate(raw_lines, start=1):
        if not line.strip():
            continue
        try:
            value = _parse_line(line)
        except ValueError:
            if number == len(raw_lines):
                torn = True
                continue
            log.warning("%s: skipping unreadable line %d", path, number)
            continue
        if number == len(raw_lines) and torn and isinstance(value, dict):
            torn = False  # complete JSON, only the newline was missing
        if isinstance(value, dict):
            parsed.append(value)
    return parsed, torn


def _parse_line(line: bytes) -> Any:
    """One line's JSON value, as ``json.loads`` reads it; raises ValueError if unreadable.
    pydantic_core's parser is about three times faster; it refuses a lone surrogate escape
    (``"\\ud800"``) that ``json.dumps`` writes for such a character, so it falls back."""
    try:
        return from_json(line)
    except ValueError:
        return json.loads(line)


def read_session_file(path: Path) -> SessionFile:
    """Load a session file; raises SessionLogError if it has no header or a newer format."""
    lines, torn = _parse_lines(path)
    if not lines or lines[0].get("type") != "session" or "id" not in lines[0]:
        raise SessionLogError(f"{path} is not a Tiller session file (no header)")
    header = lines[0]
    version = header.get("version")
    loader = LOADERS.get(version) if isinstance(version, int) else None
    if loader is None:
        raise SessionLogError(
            f"{path} has format version {version!r}; this Tiller reads versions "
            f"{', '.join(map(str, sorted(LOADERS)))} (was it written by a newer Tiller?)"
        )
    return SessionFile(path, header, loader(header, lines[1:]), torn)


class SessionLog:
    """Appends entries to one session file (``path=None``: writes nothing). It remembers only
    the current leaf; the entries themselves live in the file (``read_session_file``)."""

    def __init__(self, path: Path | None, *, durable: bool = True) -> None:
        self.path = path
        self.durable = durable
        self.leaf_id: str | None = None
        self._waiting: list[dict[str, Any]] | None = None
        """A new log's lines not yet written (header first), until its first message."""

    @property
    def written(self) -> bool:
        """Whether the file exists: false for a new session until its first run or queued
        message."""
        return self._waiting is None and self.path is not None

    @classmethod
    def create(
        cls, path: Path | None, header: dict[str, Any], *, durable: bool = True
    ) -> SessionLog:
        """A new log whose first line is ``header`` (plus type, version and created), written
        with its first entry of a type not ``WAITING``."""
        session_log = cls(path, durable=durable)
        full = {"type": "session", "version": FORMAT_VERSION, "created": now_ms(), **header}
        session_log._waiting = [full] if path is not None else None
        return session_log

    @classmethod
    def reopen(cls, loaded: SessionFile, *, durable: bool = True) -> SessionLog:
        """Continue appending to a loaded file (after its last complete line)."""
        session_log = cls(loaded.path, durable=durable)
        session_log.leaf_id = loaded.entries[-1].id if loaded.entries else None
        session_log._repair_tail(loaded.torn_tail)
        return session_log

    def append(self, entry_type: str, **data: Any) -> Entry:
        """Write one entry on the current branch and return it, once it is on disk (a new
        log's settings change: once it waits with the header, see ``WAITING``)."""
        entry = Entry(entry_type, uuid.uuid4().hex[:12], self.leaf_id, now_ms(), data)
        if self._waiting is not None and entry_type in WAITING:
            self._waiting.append(entry.to_json())
        else:
            self._write_line(entry.to_json())
        self.leaf_id = entry.id
        return entry

    def append_entry(self, entry: Entry) -> None:
        """Write an existing entry as is (copying a branch into a fork: written at once)."""
        self._write_line(entry.to_json())
        self.leaf_id = entry.id

    def close(self) -> None:
        """Nothing to release: the file is open only while an append writes it."""

    def _write_line(self, value: dict[str, Any]) -> None:
        """Append ``value`` (after the waiting header and settings, if any). The file is opened
        for this one write and closed again, so an idle session holds no descriptor: a server
        with a thousand saved sessions live stays far from the process's open-file limit. It
        is created (0600, its folder 0700) only with the header; a written log that has gone
        missing is an OSError, never a headerless file."""
        if self.path is None:
            return
        lines = [*(self._waiting or ()), value]
        flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC
        if self._waiting is not None:
            private_dir(self.path.parent)
            flags |= os.O_CREAT
        fd = os.open(self.path, flags, PRIVATE_FILE)
        try:
            if os.fstat(fd).st_mode & 0o077:  # written by an older Tiller
                os.fchmod(fd, PRIVATE_FILE)
            data = b"".join(json.dumps(line, separators=(",", ":")).encode() + b"\n"
                            for line in lines)
            while data:
                data = data[os.write(fd, data):]
            self._waiting = None  # the header is out (kept for the next try if writing failed)
            if self.durable:
                os.fsync(fd)
        finally:
            os.close(fd)

    def _repair_tail(self, torn: bool) -> None:
        """Make the next append start a line of its own: cut a torn last line, or end a
        complete one that lost only its newline."""
        assert self.path is not None
        with open(self.path, "r+b") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size == 0:
                return
            handle.seek(size - 1)
            if handle.read(1) == b"\n":
                return
            if not torn:
                handle.write(b"\n")
                return
            data = self.path.read_bytes()  # rare: only after a crash mid-write
            handle.truncate(data.rfind(b"\n") + 1)


# ---------------------------------------------------------------------------------------------
# Outline: what a log says about its session, its messages as saved

INTERRUPTED_STARTED = (
    "Tool call interrupted: Tiller restarted while this call was running, so its side effects "
    "are unknown. Check the current state before re-running it."
)
INTERRUPTED_NOT_STARTED = (
    "Tool call not executed: Tiller restarted before this call ran. Re-issue it if still needed."
)
FAILED = ("error", "aborted")
ROLES = ("user", "assistant", "toolResult")

JSON = dict[str, Any]


@dataclass
class Outline:
    """What a branch of a log says about its session, messages as saved (camelCase JSON, not
    yet validated): the transcript and each message's entry (``""`` for a compaction's
    summary), the undelivered queued messages as (queue entry id, queue, message), the last
    model settings, the tool calls a crash left without a result (call block, whether it had
    started), whether a run was left open, the ``usage`` of every assistant message (and tool
    result: a subagent's) of the branch with its entry (those a compaction dropped too: the
    session's spending), how each tool call was shown when it started (``shown``: by its
    assistant message's entry and the call's id, ``{title, kind, path?}``), and its background
    processes (``processes``)."""

    messages: list[JSON] = field(default_factory=list)
    entry_ids: list[str] = field(default_factory=list)
    queued: list[tuple[str, str, JSON]] = field(default_factory=list)
    provider: str | None = None
    model: str | None = None
    thinking: str | None = None
    interrupted: list[tuple[JSON, bool]] = field(default_factory=list)
    open_run: bool = False
    title: str | None = None
    spent: list[tuple[str, JSON]] = field(default_factory=list)
    shown: dict[tuple[str, str], JSON] = field(default_factory=dict)
    processes: dict[int, JSON] = field(default_factory=dict)
    """The session's background processes by id, as last recorded (``ProcessInfo`` as saved;
    a fork does not inherit its source's)."""

    def pending(self, queue: str) -> int:
        """How many queued messages of ``queue`` ("steering" or "followUp") wait."""
        return sum(1 for _, name, _ in self.queued if name == queue)


def corrupt(file: SessionFile, entry: Entry, exc: Exception) -> SessionLogError:
    """The error for a malformed ``entry`` of ``file``."""
    return SessionLogError(
        f"session {file.id} is corrupt ({file.path}): its {entry.type} entry {entry.id!r} is "
        f"malformed: {type(exc).__name__}: {exc}"
    )


def outline(file: SessionFile, leaf_id: str | None = None) -> Outline:
    """Read the branch ending at ``leaf_id`` (default: the last entry). A compaction entry
    replaces the messages before its first kept entry with a summary message. Raises
    SessionLogError for an entry this reading cannot use (a message without a known ``role``,
    a ``model_change`` without a model ...); the messages' other fields are checked when they
    are validated (``tiller.store.replay``)."""
    found = Outline(provider=file.header.get("provider"), model=file.header.get("model"))
    kept: list[tuple[str, JSON]] = []
    queued: dict[str, tuple[str, JSON]] = {}
    started: set[str] = set()
    for entry in file.branch(leaf_id):
        try:
            if entry.type in ("process_start", "process_end"):
                if entry.data.get("sessionId") == file.id:
                    process = entry.data["process"]
                    found.processes[int(process["id"])] = process
                continue
            kept = _outline_entry(found, entry, kept, queued, started)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise corrupt(file, entry, exc) from None
    found.entry_ids = [entry_id for entry_id, _ in kept]
    found.messages = [message for _, message in kept]
    found.queued = [(queue_id, queue, message) for queue_id, (queue, message) in queued.items()]
    answered = {m.get("toolCallId") for m in found.messages if m["role"] == "toolResult"}
    for message in found.messages:
        if message["role"] == "assistant" and message.get("stopReason") not in FAILED:
            for block in message.get("content") or ():
                if block.get("type") == "toolCall" and block.get("id") not in answered:
                    found.interrupted.append((block, block.get("id") in started))
    return found


def _outline_entry(
    found: Outline, entry: Entry, kept: list[tuple[str, JSON]],
    queued: dict[str, tuple[str, JSON]], started: set[str],
) -> list[tuple[str, JSON]]:
    """Apply one entry to the outline in progress; returns the kept messages (a compaction
    replaces the list). Raises KeyError/TypeError/ValueError for a malformed entry."""
    data = entry.data
    if entry.type == "message":
        message = data["message"]
        if message["role"] not in ROLES:
            raise ValueError(f"unknown role {message['role']!r}")
        kept.append((entry.id, message))
        if message["role"] in ("assistant", "toolResult") and "usage" in message:
            found.spent.append((entry.id, message["usage"]))
        queued.pop(data.get("queueId", ""), None)
        if found.title is None and message["role"] == "user":
            found.title = title_of(message)
    elif entry.type == "queued":
        if data["message"]["role"] != "user":
            raise ValueError("a queued message is a user message")
        queued[entry.id] = (data["queue"], data["message"])
    elif entry.type == "tool_start":
        started.add(data["toolCallId"])
        if "title" in data:  # logs before tool_start carried them have none
            owner = next((eid for eid, message in reversed(kept)
                          if message["role"] == "assistant"), "")
            found.shown[(owner, data["toolCallId"])] = {
                key: data[key] for key in SHOWN_FIELDS if key in data}
    elif entry.type == "model_change":
        found.provider, found.model = data["provider"], data["model"]
    elif entry.type == "thinking_change":
        found.thinking = data["level"]
    elif entry.type in ("run_start", "run_end"):
        found.open_run = entry.type == "run_start"
    elif entry.type == "compaction":
        first_kept = data.get("firstKeptEntryId")
        ids = [entry_id for entry_id, _ in kept]
        cut = ids.index(first_kept) if first_kept in ids else len(kept)
        summary = {"role": "user", "content": SUMMARY_PREFIX + data["summary"],
                   "timestamp": entry.timestamp}
        kept = [("", summary), *kept[cut:]]
    return kept


SHOWN_FIELDS = ("title", "kind", "path")
"""What a ``tool_start`` entry records of how its call was shown (its tool_execution_start)."""


def shown_tool_calls(
    calls: Iterable[tuple[str, str, str]], shown: Mapping[tuple[str, str], JSON]
) -> list[JSON]:
    """``session/load``'s ``toolCalls``: for each tool call of a transcript, in order, given as
    (its assistant message's entry, its id, its tool's name), how it was shown when it started
    (``shown``, keyed like ``Outline.shown``). A call with no record of that (a log written
    before they were recorded, a call a restart left unstarted) is shown by its tool's name,
    kind ``other``."""
    return [{"toolCallId": call_id, **shown.get((entry_id, call_id),
                                                {"title": name, "kind": "other"})}
            for entry_id, call_id, name in calls]


def saved_tool_calls(entry_ids: list[str], messages: list[JSON]) -> Iterable[tuple[str, str, str]]:
    """The (entry, call id, tool name) of each tool call in ``messages`` (as saved), in order,
    for ``shown_tool_calls``."""
    for entry_id, message in zip(entry_ids, messages, strict=True):
        if message["role"] == "assistant":
            for block in message.get("content") or ():
                if block.get("type") == "toolCall":
                    yield entry_id, str(block.get("id")), str(block.get("name"))


def interrupted_result(call: JSON, started: bool) -> JSON:
    """The synthetic error result (a tool result message, as saved) for a call a restart left
    unanswered."""
    text = INTERRUPTED_STARTED if started else INTERRUPTED_NOT_STARTED
    return {"role": "toolResult", "toolCallId": call["id"], "toolName": call["name"],
            "content": [{"type": "text", "text": text}], "isError": True, "timestamp": now_ms()}


def title_of(message: JSON) -> str:
    """A session's title: its first user message's text (``message`` as saved; the text the
    client sent when it kept its ``acpContent``: no ``<resource>`` text, a ``/name`` command
    as typed) on one line, at most 80 characters."""
    sent = message.get("acpContent")
    content = sent if isinstance(sent, list) else message["content"]
    if isinstance(content, str):
        text = content
    else:
        text = " ".join(block["text"] for block in content if isinstance(block, dict)
                        and block.get("type") == "text" and isinstance(block.get("text"), str))
    text = " ".join(text.split())
    return text[:77] + "..." if len(text) > 80 else text
