"""A session's background processes: ``bash`` with ``background: true`` starts one; the
``process_*`` tools (``tiller.tools.process``) and the ``process/*`` methods read and end them
(protocol.md, "Background processes").

``ProcessTable`` holds one session's processes, numbered 1, 2, ... in the order they started.
Each ``BackgroundProcess`` runs its command as a foreground ``bash`` command does: in a process
group and session of its own, stdin from ``/dev/null``, stdout and stderr merged into one pipe,
its environment tagged with the session's ``ProcessScope`` (so the scope's ``kill`` ends what
it leaves behind). A watcher task (not the tool call's: an abort leaves it running) reads the
pipe until it ends:

- **Output** is kept in an ``OutputRing``: the last ``OUTPUT_LIMIT`` bytes; what falls out is
  counted and said when a read wanted it, so memory stays bounded however much a process
  writes. The model reads with a cursor of its own (new output since its last read); clients
  read what is held.
- **Events** (``publish``): ``process_start``; ``process_output`` at most every
  ``EVENT_INTERVAL`` seconds per process (the first after a quiet spell at once), each with at
  most ``EVENT_MAX_BYTES`` of the newest output and ``skipped`` for what it left out;
  ``process_exit``.
- **Ending.** When the command's shell exits, its output gets ``OUTPUT_GRACE`` seconds to reach
  its end; then what of its group still holds the pipe is SIGKILLed (as for a foreground
  command). ``kill`` (``process_kill``, ``process/kill``) sends SIGTERM to the group and SIGKILL
  to what still runs ``KILL_GRACE`` seconds later. ``close`` (the session closes, the server
  shuts down) SIGKILLs every one that runs.
- **Notices.** The end of a process the model has not seen end in a tool's result becomes a
  user message (``take_notices``) that the agent polls with its steering queue: delivered at the
  next poll point of a run, or with the next prompt when it ended while the session was idle.
- **Restore.** Processes of an earlier server, read from the session log, are listed as
  ``ended`` unless their end was recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import anyio
from anyio.abc import ByteReceiveStream, Process

from tiller.errors import ToolError
from tiller.modes import now_ms
from tiller.procs import ProcessScope, end_group, reap_orphans
from tiller.types import (
    AgentEvent,
    ProcessExit,
    ProcessInfo,
    ProcessOutput,
    ProcessStart,
    ProcessState,
    UserMessage,
)

__all__ = [
    "EVENT_INTERVAL",
    "EVENT_MAX_BYTES",
    "KILL_GRACE",
    "OUTPUT_LIMIT",
    "START_WINDOW",
    "BackgroundProcess",
    "OutputRing",
    "ProcessTable",
    "describe_end",
    "elapsed",
]

OUTPUT_LIMIT = 1 << 20
"""Bytes of output kept per background process (the newest)."""
START_WINDOW = 1.0
"""Seconds ``bash`` waits for a background command's first output (or its end) before it
returns."""
EVENT_INTERVAL = 0.1
"""Seconds between two ``process_output`` events of one process, at most one per window."""
EVENT_MAX_BYTES = 16384
"""Bytes of output one ``process_output`` event carries at most (the newest)."""
KILL_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL when a background process is killed."""
OUTPUT_GRACE = 0.5
"""Seconds the output may stay open after the shell exits before the group is SIGKILLed."""
NOTICE_LINES = 10
"""Lines of output an exit notice quotes (its last ones), at most ``NOTICE_CHARS`` characters."""
NOTICE_CHARS = 2000
_EXIT_POLL = 0.05
_CHUNK = 65536
_SEARCH_OVERLAP = 4096
"""Bytes a ``wait_for`` search goes back over, so a match across two reads is found."""
_CLOSE_TIMEOUT = 5.0
_END_TIMEOUT = 30.0

log = logging.getLogger(__name__)

Publish = Callable[[AgentEvent], None]
KilledBy = Literal["model", "user", "close"]


def _complete_end(data: bytes) -> int:
    """The length of ``data`` without a UTF-8 sequence cut at its end."""
    for back in range(1, min(3, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue  # a continuation byte: look further back for its lead
        if byte >= 0xC0:
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return len(data) - back if need > back else len(data)
        return len(data)
    return len(data)


def decode(data: bytes, *, cut_start: bool = False, final: bool = True) -> tuple[str, int]:
    """``data`` as text (invalid UTF-8 replaced) and how many bytes that used: without a
    character cut at the end unless ``final``; without the continuation bytes of one cut at
    the start when ``cut_start`` (the ring dropped its lead)."""
    start = 0
    if cut_start:
        while start < min(3, len(data)) and data[start] & 0xC0 == 0x80:
            start += 1
    end = len(data) if final else _complete_end(data)
    return data[start:end].decode("utf-8", errors="replace"), max(end, start)


class OutputRing:
    """The newest ``limit`` bytes of an output. Offsets count from the output's first byte:
    ``total`` were written, those before ``start`` are gone."""

    def __init__(self, limit: int = OUTPUT_LIMIT) -> None:
        self.limit = limit
        self.total = 0
        self._chunks: deque[bytes] = deque()
        self._held = 0

    @property
    def start(self) -> int:
        """The offset of the oldest byte held."""
        return self.total - self._held

    def append(self, data: bytes) -> None:
        self.total += len(data)
        if len(data) >= self.limit:
            self._chunks.clear()
            self._held = 0
            data = data[-self.limit:]
        self._chunks.append(data)
        self._held += len(data)
        while self._held > self.limit:
            excess = self._held - self.limit
            first = self._chunks[0]
            if len(first) <= excess:
                self._chunks.popleft()
                self._held -= len(first)
            else:
                self._chunks[0] = first[excess:]
                self._held -= excess

    def since(self, offset: int) -> tuple[bytes, int]:
        """The bytes held from ``offset`` on, and how many from ``offset`` on are gone."""
        dropped = max(0, self.start - offset)
        skip = max(0, offset - self.start)
        if skip >= self._held:
            return b"", dropped
        return b"".join(self._chunks)[skip:], dropped

    def tail_lines(self, count: int) -> tuple[bytes, int]:
        """The last ``count`` lines held (a last line without a newline counts), and the
        offset they start at."""
        data, _ = self.since(self.start)
        end = len(data) - 1 if data.endswith(b"\n") else len(data)
        cut = end
        for _ in range(count):
            cut = data.rfind(b"\n", 0, cut)
            if cut < 0:
                break
        start = cut + 1 if cut >= 0 else 0
        return data[start:], self.start + start


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def describe_end(info: ProcessInfo) -> str:
    """How a process ended, in words ("exited with code 1", "was killed by SIGTERM")."""
    if info.state == "running":
        return "is running"
    if info.state == "ended":
        return "ended with its session or the server"
    how = "was killed" if info.state == "killed" else "exited"
    if info.signal is not None:
        return f"{how} (signal {info.signal})"
    return f"{how} with code {info.exit_code}"


class BackgroundProcess:
    """One background process: its output, state and events (see the module docstring).
    ``cursor`` is the model's read offset, ``match_end`` its ``wait_for``'s; ``told``: the
    model has seen it end."""

    def __init__(
        self, process_id: int, command: str, publish: Publish, *,
        tool_call_id: str | None = None, pid: int | None = None,
    ) -> None:
        self.id = process_id
        self.command = command
        self.tool_call_id = tool_call_id
        self.pid = pid
        self.publish = publish
        self.started_at = now_ms()
        self.ended_at: int | None = None
        self.state: ProcessState = "running"
        self.exit_code: int | None = None
        self.signal: str | None = None
        self.output = OutputRing()
        self.cursor = 0
        self.match_end = 0
        """Where the previous ``wait_for`` match ended (an output offset)."""
        self.told = False
        self.notice_due = False
        self.ended = anyio.Event()
        self._changed = anyio.Event()
        self._killed_by: KilledBy | None = None
        self._unsent = bytearray()
        self._skipped = 0
        self._last_event = float("-inf")
        self._timer: asyncio.TimerHandle | None = None

    @classmethod
    def restored(cls, saved: Mapping[str, Any], publish: Publish) -> BackgroundProcess:
        """A process of an earlier server from its log record (``ProcessInfo`` as saved): as
        it ended when its end was recorded, else ``ended``."""
        info = ProcessInfo.model_validate(saved)
        process = cls(info.id, info.command, publish, tool_call_id=info.tool_call_id,
                      pid=info.pid)
        process.started_at, process.ended_at = info.started_at, info.ended_at
        process.exit_code, process.signal = info.exit_code, info.signal
        process.state = info.state if info.state != "running" else "ended"
        process.output.total = info.output_bytes
        process.cursor = info.output_bytes
        process.told = True
        process.ended.set()
        return process

    @property
    def running(self) -> bool:
        return self.state == "running"

    def info(self) -> ProcessInfo:
        return ProcessInfo(
            id=self.id, command=self.command, state=self.state, pid=self.pid,
            tool_call_id=self.tool_call_id, started_at=self.started_at,
            ended_at=self.ended_at, exit_code=self.exit_code, signal=self.signal,
            output_bytes=self.output.total, dropped_bytes=self.output.start,
        )

    # ------------------------------------------------------------------ reading

    def read_new(self) -> tuple[str, int]:
        """The model's new output (since its last read) and how many bytes of it are gone;
        moves the cursor past it."""
        data, dropped = self.output.since(self.cursor)
        text, used = decode(data, cut_start=dropped > 0, final=not self.running)
        self.cursor = max(self.cursor, self.output.start) + used
        return text, dropped

    def tail(self, lines: int) -> str:
        """The last ``lines`` lines held; the model's cursor moves to the end."""
        data, start = self.output.tail_lines(lines)
        text, _ = decode(data, cut_start=start == self.output.start and start > 0)
        self.cursor = self.output.total
        return text

    def held_text(self, lines: int | None = None) -> str:
        """What is held (its last ``lines`` lines), for a client; the cursor stays."""
        if lines is not None:
            data, start = self.output.tail_lines(lines)
        else:
            start = self.output.start
            data, _ = self.output.since(start)
        return decode(data, cut_start=start > 0 and start == self.output.start)[0]

    async def wait_for(self, search: Callable[[str], int | None], timeout: float) -> bool:
        """Wait until ``search`` (a text -> the end of its first match, or None) finds a match
        in the output after the previous ``wait_for``'s match (from the start, the first time),
        and move past this match; False if the process ended or ``timeout`` passed first. What
        ``search`` raises comes out. The model's read cursor stays."""
        scanned = self.match_end
        with anyio.move_on_after(timeout):
            while True:
                changed = self._changed
                start = max(self.match_end, self.output.start, scanned - _SEARCH_OVERLAP)
                data, _ = self.output.since(start)
                scanned = self.output.total
                lead = 0
                if start > self.match_end:  # maybe mid-character: skip its continuation bytes
                    while lead < min(3, len(data)) and data[lead] & 0xC0 == 0x80:
                        lead += 1
                # surrogateescape: a match's end maps back to the same byte offset
                text = data[lead:].decode("utf-8", errors="surrogateescape")
                # A worker thread: a search may take a while on a megabyte, and the server
                # must go on serving meanwhile (abandoned at the timeout).
                end = await anyio.to_thread.run_sync(search, text, abandon_on_cancel=True)
                if end is not None:
                    used = len(text[:end].encode("utf-8", errors="surrogateescape"))
                    self.match_end = start + lead + used
                    return True
                if not self.running:
                    return False
                await changed.wait()
        return False

    def _notify(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    # ------------------------------------------------------------------ the watcher

    def feed(self, data: bytes) -> None:
        """Take a chunk of output: held, announced (coalesced), waiters woken."""
        self.output.append(data)
        self._unsent += data
        if len(self._unsent) > EVENT_MAX_BYTES:
            excess = len(self._unsent) - EVENT_MAX_BYTES
            del self._unsent[:excess]
            self._skipped += excess
        self._notify()
        if self._timer is not None:
            return
        loop = asyncio.get_running_loop()
        due = self._last_event + EVENT_INTERVAL
        if loop.time() >= due:
            self.flush_events()
        else:
            self._timer = loop.call_at(due, self.flush_events)

    def flush_events(self, final: bool = False) -> None:
        """Send the output not announced yet as one ``process_output`` event."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._unsent:
            return
        text, used = decode(bytes(self._unsent), cut_start=self._skipped > 0, final=final)
        del self._unsent[:used]
        skipped, self._skipped = self._skipped, 0
        with contextlib.suppress(RuntimeError):
            self._last_event = asyncio.get_running_loop().time()
        if text or skipped:
            self.publish(ProcessOutput(process_id=self.id, data=text, skipped=skipped or None))

    async def watch(self, process: Process, scope: ProcessScope) -> None:
        """Read the output until it ends and the shell has exited; then record the end. Never
        raises but cancellation (the table's ``close``)."""
        try:
            await self._pump(process)
        finally:
            with anyio.move_on_after(_CLOSE_TIMEOUT, shield=True):
                if process.returncode is None:
                    _kill_group(process.pid)
                with contextlib.suppress(Exception):
                    await process.aclose()
                if process.returncode is not None:
                    scope.collected(process.pid)
                await reap_orphans()
            self._end(process.returncode)

    async def _pump(self, process: Process) -> None:
        assert process.stdout is not None
        eof = anyio.Event()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._read, process.stdout, eof)
            while process.returncode is None:  # wait() would also wait for the pipe
                with anyio.move_on_after(_EXIT_POLL):
                    await eof.wait()
                if eof.is_set():
                    await process.wait()  # the pipe is closed: only the exit is left
            with anyio.move_on_after(OUTPUT_GRACE):
                await eof.wait()
            if not eof.is_set():
                _kill_group(process.pid)  # background members hold the pipe: as bash does
                with anyio.move_on_after(OUTPUT_GRACE):
                    await eof.wait()
            tasks.cancel_scope.cancel()

    async def _read(self, stream: ByteReceiveStream, eof: anyio.Event) -> None:
        try:
            while True:
                self.feed(await stream.receive(_CHUNK))
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            eof.set()

    def _end(self, returncode: int | None) -> None:
        """Record the end: state, status, the last output event, ``process_exit``, the notice."""
        if not self.running:
            return
        killed_by = self._killed_by
        self.state = "ended" if killed_by == "close" else "killed" if killed_by else "exited"
        if returncode is not None and returncode < 0:
            self.signal = _signal_name(-returncode)
        elif returncode is not None and killed_by != "close":
            self.exit_code = returncode
        self.ended_at = now_ms()
        self.flush_events(final=True)
        self.publish(ProcessExit(process=self.info()))
        self.notice_due = not self.told and killed_by in (None, "user")
        self.ended.set()
        self._notify()

    # ------------------------------------------------------------------ ending

    async def kill(self, by: KilledBy) -> bool:
        """End it (see the module docstring; ``close`` SIGKILLs at once) and wait for its end to
        be recorded; True if it ran until now. ``by`` the model: it learns of the end from the
        call's result, no notice; by the user: a notice."""
        if not self.running or self.pid is None:
            return False
        if self._killed_by != "close":
            self._killed_by = by
        if by == "close":
            _kill_group(self.pid)
        else:
            await end_group(self.pid, KILL_GRACE)
        with anyio.move_on_after(_END_TIMEOUT):  # SIGKILLed: its end comes, however loaded
            await self.ended.wait()
        return True

    def closing(self) -> None:
        """Its session closes: however it ends from now on, it ended with the session."""
        if self.running:
            self._killed_by = "close"

    def notice(self) -> str:
        """The message that tells the model how it ended, with its last lines."""
        info = self.info()
        ending = "was killed by the user" if info.state == "killed" else describe_end(info)
        command = self.command if len(self.command) <= 80 else self.command[:79] + "…"
        last = self.held_text(NOTICE_LINES).rstrip("\n")
        if len(last) > NOTICE_CHARS:
            last = "…" + last[-NOTICE_CHARS:]
        quoted = f"; last lines:\n{last}" if last else "; it wrote nothing"
        return f"[Background process {self.id} `{command}` {ending}{quoted}]"


def _kill_group(pid: int) -> None:
    """SIGKILL the process group led by ``pid``; quiet if it is already gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class ProcessTable:
    """One session's background processes. ``scope``: the session's process scope (the
    processes are started and tagged through it); ``publish``: the session's event bus."""

    def __init__(self, scope: ProcessScope, publish: Publish = lambda _event: None) -> None:
        self.scope = scope
        self.publish = publish
        self._processes: dict[int, BackgroundProcess] = {}
        self._next_id = 1
        self._watchers: set[asyncio.Task[None]] = set()
        self._closed = False

    def __iter__(self) -> Any:
        return iter(list(self._processes.values()))

    def get(self, process_id: int) -> BackgroundProcess | None:
        return self._processes.get(process_id)

    def infos(self) -> list[ProcessInfo]:
        """Every process, oldest first (``agent/getState``'s ``processes``)."""
        return [process.info() for process in self._processes.values()]

    async def start(
        self, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, command: str,
        tool_call_id: str | None,
    ) -> BackgroundProcess:
        """Start ``argv`` (``command`` is how it is shown) in the background; ToolError if it
        cannot be started (or the session is closing)."""
        if self._closed:
            raise ToolError("Command not run: the session is closing")
        try:
            with self.scope.spawning() as started:
                process = await anyio.open_process(
                    list(argv), env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                )
                started(process.pid)
        except OSError as exc:
            raise ToolError(f"Could not start the command: {exc}") from exc
        background = BackgroundProcess(self._next_id, command, self.publish,
                                       tool_call_id=tool_call_id, pid=process.pid)
        self._next_id += 1
        self._processes[background.id] = background
        self.publish(ProcessStart(process=background.info()))
        task = asyncio.create_task(background.watch(process, self.scope))
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)
        return background

    def restore(self, saved: Sequence[Mapping[str, Any]]) -> None:
        """Take the processes a loaded log recorded (``ProcessInfo`` as saved), as ended;
        later ones are numbered after them."""
        for record in saved:
            try:
                process = BackgroundProcess.restored(record, self.publish)
            except ValueError:  # pydantic's ValidationError: a log edited by hand
                log.warning("a background process record of the log is not valid: %r", record)
                continue
            self._processes[process.id] = process
            self._next_id = max(self._next_id, process.id + 1)

    # ------------------------------------------------------------------ notices

    def has_notices(self) -> bool:
        """An exit the model has not been told of waits (``take_notices``)."""
        return any(process.notice_due for process in self._processes.values())

    def take_notices(self) -> list[UserMessage]:
        """The exits the model has not been told of, as one user message ([] when none); each
        is told once."""
        due = [process for process in self._processes.values() if process.notice_due]
        for process in due:
            process.notice_due = False
            process.told = True
        if not due:
            return []
        return [UserMessage(content="\n\n".join(process.notice() for process in due))]

    # ------------------------------------------------------------------ ending

    async def close(self) -> None:
        """SIGKILL every process that runs and wait for the ends to be recorded (``ended``);
        no process starts afterwards."""
        self._closed = True
        running = [process for process in self._processes.values() if process.running]
        for process in running:
            process.closing()
        async with anyio.create_task_group() as tasks:
            for process in running:
                tasks.start_soon(process.kill, "close")
        for task in list(self._watchers):
            task.cancel()


def elapsed(since_ms: int, until_ms: int | None = None) -> str:
    """A duration in words: "4 s", "3 min", "2 h"."""
    seconds = max(0, ((until_ms if until_ms is not None else now_ms()) - since_ms) // 1000)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"

