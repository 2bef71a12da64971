"""``tiller chat``'s line input, with Tab completion of slash commands.

``terminal_lines`` reads typed lines from a file descriptor; ``CommandNames`` keeps the session's
command names (from ``commands/list``, then each ``commands_changed`` event);
``completing_lines`` reads lines with GNU readline when stdin is a terminal and readline is
available, so ``/`` + Tab completes (Tab twice lists) the commands; else it falls back to
``terminal_lines``. Both read in a daemon thread (``lines_from_thread``).
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel

from tiller.chat_render import Lines

__all__ = ["CommandNames", "Deliver", "completing_lines", "lines_from_thread", "terminal_lines"]


class CommandNames:
    """The names of the session's slash commands, without the slash; ``local`` ones (the
    chat's own) complete too."""

    def __init__(self, names: Iterable[str] = (), local: Iterable[str] = ()) -> None:
        self.names = sorted(names)
        self.local = sorted(local)

    def set_from(self, commands: Iterable[dict[str, Any]]) -> None:
        """Take the names of a ``commands/list`` result's (or an event's) ``commands``."""
        self.names = sorted(str(c.get("name", "")) for c in commands if c.get("name"))

    def observe(self, event: dict[str, Any]) -> None:
        """An ``agent/event``'s params: a ``commands_changed`` replaces the names."""
        if event.get("type") == "commands_changed":
            self.set_from(event.get("commands") or [])

    def matches(self, line: str, word: str) -> list[str]:
        """Completions of ``word`` in ``line``: ``/name``s when the word is the line's first
        and starts with ``/``; nothing otherwise."""
        if not word.startswith("/") or not line.lstrip().startswith(word):
            return []
        every = sorted({*self.names, *self.local})
        return ["/" + name for name in every if name.startswith(word[1:])]


def _readline() -> ModuleType | None:
    try:
        return importlib.import_module("readline")
    except ImportError:
        return None


Deliver = Callable[[str | None], bool]
"""Hands a line (None: end of input) to the reader's consumer; False once nobody listens."""


@asynccontextmanager
async def lines_from_thread(read: Callable[[Deliver], None]) -> AsyncIterator[Lines]:
    """The lines ``read(deliver)`` produces in a daemon thread, then None at end of input. A
    read still blocked when we exit holds nothing up."""
    send, receive = anyio.create_memory_object_stream[str | None](math.inf)
    token = anyio.lowlevel.current_token()

    def deliver(item: str | None) -> bool:
        try:
            anyio.from_thread.run_sync(send.send_nowait, item, token=token)
        except (RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False  # we are exiting
        return True

    threading.Thread(target=read, args=(deliver,), name="tiller-chat-input", daemon=True).start()
    with receive:
        yield receive


@asynccontextmanager
async def terminal_lines(fd: int = 0) -> AsyncIterator[Lines]:
    """Lines typed on ``fd``, then None at end of input (read in a daemon thread)."""

    def read_lines(deliver: Deliver) -> None:
        pending = b""
        while True:
            try:
                data = os.read(fd, 4096)
            except OSError:
                data = b""
            if not data:
                if pending:
                    deliver(pending.decode(errors="replace"))
                deliver(None)
                return
            *lines, pending = (pending + data).split(b"\n")
            if not all(deliver(line.decode(errors="replace")) for line in lines):
                return

    async with lines_from_thread(read_lines) as lines:
        yield lines


@asynccontextmanager
async def completing_lines(
    names: CommandNames, fd: int = 0, history: Path | None = None
) -> AsyncIterator[Lines]:
    """Typed lines (then None at end of input), completing commands on Tab when ``fd`` is a
    terminal with readline; a daemon thread reads them, so a blocked read holds nothing up.
    With readline, the typed lines are kept in ``history`` (read first, appended to)."""
    readline = _readline()
    if readline is None or fd != 0 or not _is_tty(fd):
        async with terminal_lines(fd) as lines:
            yield lines
        return
    if history is not None:
        with contextlib.suppress(OSError):
            readline.read_history_file(history)
    readline.parse_and_bind("set enable-bracketed-paste off")
    readline.parse_and_bind("tab: complete")
    readline.set_completer_delims(" \t\n")

    def complete(word: str, state: int) -> str | None:
        found = names.matches(readline.get_line_buffer(), word)
        return found[state] + " " if state < len(found) else None  # a space, as shells do

    readline.set_completer(complete)

    def read_lines(deliver: Deliver) -> None:
        while True:
            try:
                line: str | None = input()
            except (EOFError, OSError):
                line = None
            if line and history is not None:
                with contextlib.suppress(OSError):
                    history.parent.mkdir(parents=True, exist_ok=True)
                    history.touch()  # readline appends only to a file that exists
                    readline.append_history_file(1, history)
            if not deliver(line) or line is None:
                return

    async with lines_from_thread(read_lines) as lines:
        yield lines


def _is_tty(fd: int) -> bool:
    return os.isatty(fd)
