"""``tiller chat``'s line input when stdin is not a terminal, and the slash commands to complete.

``terminal_lines`` reads lines from a file descriptor in a daemon thread (``lines_from_thread``);
``CommandNames`` keeps the session's command names (from ``commands/list``, then each
``commands_changed`` event) that ``tiller.chat.input`` completes on Tab.
"""

from __future__ import annotations

import difflib
import math
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel

from tiller.chat.render import Lines

__all__ = ["CommandNames", "Deliver", "lines_from_thread", "terminal_lines"]


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

    def known(self, name: str) -> bool:
        return name in self.names or name in self.local

    def closest(self, name: str, most: int = 3) -> list[str]:
        """The known names most like ``name`` (a typo's, or ones it starts): at most ``most``."""
        every = sorted({*self.names, *self.local})
        found = [n for n in every if n.startswith(name) or name.startswith(n)]
        found += difflib.get_close_matches(name, every, n=most, cutoff=0.6)
        return list(dict.fromkeys(found))[:most]

    def matches(self, line: str, word: str) -> list[str]:
        """Completions of ``word`` in ``line``: ``/name``s when the word is the line's first
        and starts with ``/``; nothing otherwise."""
        if not word.startswith("/") or not line.lstrip().startswith(word):
            return []
        every = sorted({*self.names, *self.local})
        return ["/" + name for name in every if name.startswith(word[1:])]


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
