"""Process hygiene: keys out of the commands' reach, and no tool process outliving its owner.

Linux only; elsewhere every function here does nothing (there is no ``prctl`` or ``/proc``).

- ``harden()``, at start-up: ``PR_SET_DUMPABLE 0`` makes the server's ``/proc/PID/environ``,
  memory and fds unreadable to other processes of the same user (the commands it runs included;
  root can still read them), and ``PR_SET_CHILD_SUBREAPER 1`` makes every orphaned descendant
  (``setsid cmd &``, ``nohup cmd &`` after its shell exited) re-parent to the server instead of
  init, so it stays findable as a descendant.
- ``make_private()``: ``PR_SET_DUMPABLE 0`` alone, for a process that holds keys but starts
  no tools (the ``tiller chat`` / ``tiller run`` front).
- ``scrub_environ(names)``: drop the provider keys from ``os.environ`` once the config holds
  them, so no child inherits them. This does not change ``/proc/PID/environ``, which shows the
  environment the process was started with: only a non-dumpable process keeps that private.
- ``send_keys`` / ``receive_keys``: the keys handed from a front to the server it starts
  through an inherited pipe (``TILLER_KEYS_FD``) instead of the server's environment, so they
  are never in the environment block of a process, not even for the moment between the
  server's start and its ``harden()``. The server reads the pipe once, after ``harden()``, and
  closes it.
- ``ProcessScope``: what one session's ``bash`` calls (and MCP servers) started. ``kill()`` ends
  the processes in the process groups (and sessions) its calls created, every process whose
  environment carries the scope's tag (``TILLER_SCOPE``), and their descendants.
- ``end_group(pgid, grace)``: SIGTERM a process group, then SIGKILL what of it (and of its
  session) still runs ``grace`` seconds later (``process_kill``).
- ``run_command(argv, ...)``: a one-shot command (a hook, a diagnostics command) in a scope,
  its output collected within a timeout, its group killed when it ends.
- ``kill_descendants()``: at shutdown, every descendant of the server.
- ``reap_orphans()``: wait for re-parented orphans that have exited (zombies). It only reaps a
  child that is in another session than the server and was not started by ``ProcessScope``:
  asyncio's child watcher must get the exit status of the processes Tiller started itself.
  Code that starts a process in a new session must do so through ``ProcessScope.spawning``.

A process that leaves the server's tree (re-parented to a nearer subreaper of its own), changes
user, or clears its environment and leaves its group is not found by ``ProcessScope.kill``; it
still dies at shutdown if it stayed a descendant. Nothing survives SIGKILL of the server itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream

from tiller.errors import ConfigError
from tiller.frozen import frozen

__all__ = [
    "KEYS_FD_VARIABLE",
    "OUTPUT_GRACE",
    "SCOPE_VARIABLE",
    "CommandOutcome",
    "ProcessScope",
    "end_group",
    "harden",
    "kill_descendants",
    "make_private",
    "reap_orphans",
    "receive_keys",
    "run_command",
    "scrub_environ",
    "send_keys",
]

log = logging.getLogger(__name__)

SCOPE_VARIABLE = "TILLER_SCOPE"
"""The environment variable that tags a command (and what it starts) with its ProcessScope."""
KEYS_FD_VARIABLE = "TILLER_KEYS_FD"
"""The environment variable naming the inherited pipe a front sends the server's keys on."""
_MAX_KEYS_BYTES = 1 << 20
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_KILL_TIMEOUT = 5.0
_KILL_POLL = 0.01

_own_children: set[int] = set()
"""Pids started through ``ProcessScope.spawning`` whose exit asyncio has not collected yet."""
_spawning = 0
"""How many ``ProcessScope.spawning`` blocks are open (their pid may not be known yet)."""


def harden() -> None:
    """Make the server non-dumpable and a child subreaper; logs (never raises) on failure."""
    _prctl(((_PR_SET_DUMPABLE, 0, "non-dumpable"),
            (_PR_SET_CHILD_SUBREAPER, 1, "a child subreaper")))


def make_private() -> None:
    """Make this process non-dumpable (its ``/proc/PID/environ``, memory and fds unreadable
    to other processes of the user); logs (never raises) on failure."""
    _prctl(((_PR_SET_DUMPABLE, 0, "non-dumpable"),))


def _prctl(settings: tuple[tuple[int, int, str], ...]) -> None:
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for option, value, what in settings:
        if libc.prctl(option, value, 0, 0, 0) != 0:
            error = os.strerror(ctypes.get_errno())
            log.warning("could not make the process %s: %s", what, error)


def scrub_environ(names: Iterable[str]) -> None:
    """Remove ``names`` from ``os.environ`` (and the C environment) where present."""
    for name in names:
        os.environ.pop(name, None)


def send_keys(write_fd: int, keys: Mapping[str, str]) -> None:
    """Write ``keys`` (JSON) to the write end of the pipe whose read end the server inherited
    (named by ``KEYS_FD_VARIABLE`` in its environment), then close it. Blocking: a worker
    thread's job. A server gone before reading it is not an error here: its exit says why."""
    payload = json.dumps(dict(keys)).encode()
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(write_fd, view):]
    except BrokenPipeError:
        pass
    finally:
        os.close(write_fd)


def receive_keys() -> dict[str, str]:
    """The keys a front sent on the pipe ``$TILLER_KEYS_FD`` names ({} when it names none):
    read to its end, then closed; the variable leaves ``os.environ``. Raises ConfigError for
    a descriptor that cannot be read or a payload that is not a JSON object of strings."""
    raw = os.environ.pop(KEYS_FD_VARIABLE, None)
    if raw is None:
        return {}
    try:
        fd = int(raw)
    except ValueError:
        raise ConfigError(f"{KEYS_FD_VARIABLE}={raw!r} is not a file descriptor") from None
    chunks: list[bytes] = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
            if sum(map(len, chunks)) > _MAX_KEYS_BYTES:
                raise ConfigError(f"{KEYS_FD_VARIABLE}: more than {_MAX_KEYS_BYTES} bytes")
    except OSError as exc:
        raise ConfigError(f"{KEYS_FD_VARIABLE}: cannot read descriptor {fd}: "
                          f"{exc.strerror}") from None
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    try:
        keys = json.loads(b"".join(chunks) or b"{}")
    except ValueError:
        keys = None
    if not isinstance(keys, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in keys.items()):
        raise ConfigError(f"{KEYS_FD_VARIABLE}: the pipe did not hold a JSON object of strings")
    return keys


# ------------------------------------------------------------------------------ /proc


@frozen
class _Proc:
    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    start: int
    """Start time in clock ticks since boot: with ``pid``, names one process for good."""

    @property
    def running(self) -> bool:
        return self.state not in ("Z", "X")


def _read_stat(pid: int) -> _Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            text = file.read().decode(errors="replace")
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # the name, in parentheses, may hold anything
    return _Proc(pid, int(fields[1]), int(fields[2]), int(fields[3]), fields[0], int(fields[19]))


def _table() -> dict[int, _Proc]:
    """Every process visible in ``/proc``, by pid (empty without ``/proc``)."""
    table: dict[int, _Proc] = {}
    with contextlib.suppress(OSError), os.scandir("/proc") as entries:
        for entry in entries:
            if entry.name.isdigit() and (proc := _read_stat(int(entry.name))) is not None:
                table[proc.pid] = proc
    return table


def _subtree(table: Mapping[int, _Proc], roots: Iterable[int]) -> set[int]:
    """``roots`` (those in ``table``) and all their descendants."""
    children: dict[int, list[int]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found: set[int] = set()
    pending = [pid for pid in roots if pid in table]
    while pending:
        pid = pending.pop()
        if pid not in found:
            found.add(pid)
            pending.extend(children.get(pid, ()))
    return found


def _scope_tag(pid: int) -> str | None:
    """The ``SCOPE_VARIABLE`` a process was started with; None if absent or unreadable."""
    prefix = f"{SCOPE_VARIABLE}=".encode()
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            variables = file.read().split(b"\0")
    except OSError:
        return None
    tags = [v[len(prefix):].decode(errors="replace") for v in variables if v.startswith(prefix)]
    return tags[-1] if tags else None


def _kill(proc: _Proc, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` (SIGKILL) to ``proc``, unless its pid names another process by now."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        return
    except OSError:  # no pidfd (old kernel): a check then a kill, a small window for reuse
        current = _read_stat(proc.pid)
        if current is not None and current.start == proc.start:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.pid, sig)
        return
    try:
        current = _read_stat(proc.pid)
        if current is not None and current.start == proc.start:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                signal.pidfd_send_signal(pidfd, sig)
    finally:
        os.close(pidfd)


def _kill_pass(select: Callable[[dict[int, _Proc]], set[int]]) -> int:
    """SIGKILL the running processes ``select`` picks from a fresh table; how many it found."""
    table = _table()
    targets = [table[pid] for pid in select(table) if table[pid].running]
    for proc in targets:
        _kill(proc)
    return len(targets)


async def _kill_until_gone(select: Callable[[dict[int, _Proc]], set[int]]) -> None:
    """Kill what ``select`` picks until it picks nothing running (a forking process is caught
    by a later pass), for at most ``_KILL_TIMEOUT`` seconds; then reap the orphans."""
    with anyio.move_on_after(_KILL_TIMEOUT) as scope:
        while True:  # no event tells when another process is gone: poll /proc
            if not await anyio.to_thread.run_sync(_kill_pass, select):
                break
            await anyio.sleep(_KILL_POLL)
    if scope.cancelled_caught:
        log.warning("some tool processes were still running %gs after SIGKILL", _KILL_TIMEOUT)
    await reap_orphans()


def _group_members(pgid: int, table: Mapping[int, _Proc]) -> set[int]:
    """The server's descendants in process group (or session) ``pgid``, and theirs."""
    me = os.getpid()
    descendants = _subtree(table, [me]) - {me}
    return _subtree(table, [pid for pid in descendants
                            if table[pid].pgid == pgid or table[pid].sid == pgid]) & descendants


async def end_group(pgid: int, grace: float) -> bool:
    """End process group ``pgid`` (a process started in a session of its own: its session
    too), as far as it is the server's descendants: SIGTERM to each of them, then, if any of
    it still runs after ``grace`` seconds, SIGKILL to it and its descendants (until gone, as
    ``kill_descendants``). True if SIGKILL was needed. Never raises."""
    table = await anyio.to_thread.run_sync(_table)
    # The leader first: a shell whose child died first could exit on its own meanwhile.
    for pid in sorted(_group_members(pgid, table), key=lambda pid: pid != pgid):
        if table[pid].running:
            _kill(table[pid], signal.SIGTERM)
    with anyio.move_on_after(grace):
        while True:  # no event tells when another process is gone: poll /proc
            table = await anyio.to_thread.run_sync(_table)
            if not any(table[pid].running for pid in _group_members(pgid, table)):
                await reap_orphans()
                return False
            await anyio.sleep(_KILL_POLL * 5)
    leader = _read_stat(pgid)
    if leader is not None and leader.running and leader.pgid == pgid:
        _kill(leader)
    await _kill_until_gone(functools.partial(_group_members, pgid))
    return True


async def kill_descendants() -> None:
    """SIGKILL every descendant of the server (at shutdown) and reap them."""
    me = os.getpid()
    await _kill_until_gone(lambda table: _subtree(table, [me]) - {me})


async def reap_orphans() -> None:
    """Collect the exit status of exited orphans re-parented to the server (see the module
    docstring for which children are left to asyncio). Never raises."""
    me = os.getpid()
    table = await anyio.to_thread.run_sync(_table)
    candidates = [p.pid for p in table.values() if p.ppid == me and not p.running]
    if not candidates:
        return
    own_session = os.getsid(0)
    for pid in candidates:
        proc = _read_stat(pid)  # fresh: the table may be stale by now
        if (_spawning or proc is None or proc.ppid != me or proc.running
                or proc.sid == own_session or pid in _own_children):
            continue
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # noqa: ASYNC222 (WNOHANG: never blocks)


# ------------------------------------------------------------------------------ scopes


class ProcessScope:
    """The processes one session's commands started; see the module docstring."""

    def __init__(self) -> None:
        self.tag = secrets.token_hex(8)
        self._groups: set[int] = set()
        self._used = False
        """``environ`` or ``spawning`` was called: a process may carry the tag or lead a group."""

    def environ(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` plus this scope's tag, for a command's environment."""
        self._used = True
        return {**base, SCOPE_VARIABLE: self.tag}

    @contextlib.contextmanager
    def spawning(self) -> Iterator[Callable[[int], None]]:
        """Wrap the start of a process that leads a new session; call the yielded function with
        its pid. Until then no orphan is reaped (it could be this one, exited already)."""
        global _spawning
        self._used = True
        _spawning += 1
        try:
            yield self._started
        finally:
            _spawning -= 1

    def _started(self, pid: int) -> None:
        self._groups.add(pid)
        _own_children.add(pid)

    def adopt_leaders(self) -> list[int]:
        """For a library that starts processes in new sessions itself (call it inside
        ``spawning``, once the process runs): the server's children that lead a session and
        carry this scope's tag are taken as started through ``spawning``. Returns their pids."""
        me = os.getpid()
        found = [proc.pid for proc in _table().values()
                 if proc.ppid == me and proc.sid == proc.pid and _scope_tag(proc.pid) == self.tag]
        for pid in found:
            self._started(pid)
        return found

    def release(self, pids: Iterable[int]) -> None:
        """``collected`` for each of ``pids`` that is gone (its exit status was collected)."""
        for pid in pids:
            if _read_stat(pid) is None:
                self.collected(pid)

    def collected(self, pid: int) -> None:
        """``pid``'s exit status has been collected (by asyncio): reaping it is safe again."""
        _own_children.discard(pid)

    def _members(self, groups: frozenset[int], table: dict[int, _Proc]) -> set[int]:
        """The server's descendants tagged with this scope, or in one of ``groups`` (process
        groups or sessions) and not tagged with another scope (a reused group id), and their
        descendants."""
        me = os.getpid()
        descendants = _subtree(table, [me]) - {me}
        roots = []
        for pid in descendants:
            tag = _scope_tag(pid)
            in_groups = table[pid].pgid in groups or table[pid].sid in groups
            if tag == self.tag or tag is None and in_groups:
                roots.append(pid)
        return _subtree(table, roots) & descendants

    async def kill(self) -> None:
        """SIGKILL every process this scope's commands left behind, and reap them. A scope
        that never gave out its tag nor spawned has nothing to kill: it reads no ``/proc``."""
        if not self._used:
            return
        groups = frozenset(self._groups)
        await _kill_until_gone(functools.partial(self._members, groups))


# ------------------------------------------------------------------------------ one-shot commands


OUTPUT_GRACE = 0.5
"""Seconds a command's output may stay open after it exits (something it left in the
background holding it); then its group is killed."""


@frozen
class CommandOutcome:
    """How a one-shot command (``run_command``) ended: its exit code (None when it was killed
    or did not start), its output, whether its timeout killed it, and why it could not start."""

    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    error: str | None = None


async def run_command(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float,
    scope: ProcessScope, stdin: bytes = b"", limit: int,
) -> CommandOutcome:
    """Run ``argv`` to its end with ``stdin`` as its input, in a session of its own that
    belongs to ``scope`` (tagged through ``env``); the first ``limit`` bytes of its stdout and
    of its stderr kept (the rest is read and dropped), decoded as UTF-8. Past ``timeout``
    seconds, on cancellation, and ``OUTPUT_GRACE`` seconds after it exited, its whole group is
    killed. Never raises but for cancellation."""
    try:
        with scope.spawning() as started:
            process = await anyio.open_process(
                list(argv), env=scope.environ(env), cwd=cwd, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
            started(process.pid)
    except OSError as exc:
        return CommandOutcome(None, error=f"could not start it: {exc}")
    out, err = bytearray(), bytearray()
    reading = [process.stdout, process.stderr]
    read_both = anyio.Event()

    async def read(stream: ByteReceiveStream | None, into: bytearray) -> None:
        if stream is not None:
            with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError,
                                     anyio.BrokenResourceError):
                while True:
                    chunk = await stream.receive()
                    into += chunk[: max(0, limit - len(into))]
        reading.remove(stream)
        if not reading:
            read_both.set()

    async def write() -> None:
        """Its input, then stdin closed; a command that does not read it is fine."""
        if process.stdin is None:
            return
        try:
            await process.stdin.send(stdin)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            await process.stdin.aclose()

    finished = False
    try:
        with anyio.move_on_after(timeout):
            async with anyio.create_task_group() as group:
                group.start_soon(write)
                group.start_soon(read, process.stdout, out)
                group.start_soon(read, process.stderr, err)
                await process.wait()
                finished = True
                with anyio.move_on_after(OUTPUT_GRACE):
                    await read_both.wait()
                _kill_group(process.pid)
    finally:
        with anyio.move_on_after(_KILL_TIMEOUT, shield=True):
            _kill_group(process.pid)  # what it left running in its group ends with it
            await process.aclose()
            if process.returncode is not None:
                scope.collected(process.pid)
            await reap_orphans()

    def text(data: bytearray) -> str:
        return data.decode("utf-8", errors="replace")

    if not finished:
        return CommandOutcome(None, text(out), text(err), timed_out=True)
    return CommandOutcome(process.returncode, text(out), text(err))


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
