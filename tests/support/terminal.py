"""``tiller chat`` on a pseudo-terminal (``Terminal``, rendered by pyte) and its command line."""

from __future__ import annotations

import codecs
import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pyte

from support.fake_openai import (
    FakeOpenAI,
)
from support.helpers import clean_env

COLUMNS, ROWS = 140, 40
DEADLINE = 30.0
"""Seconds before a test gives up waiting for output; only ever reached by a failing test."""


def chat_argv(fake: FakeOpenAI | None, cwd: Path, *args: str) -> list[str]:
    """``tiller chat`` in workspace ``cwd``, saving sessions under ``cwd/.sessions`` unless
    ``args`` say otherwise."""
    argv = [sys.executable, "-m", "tiller", "chat", "--cwd", str(cwd), *args]
    if "--session-dir" not in args and "--no-session" not in args:
        argv += ["--session-dir", str(cwd / ".sessions")]
    if "--log-file" not in args:
        argv += ["--log-file", str(cwd / ".chat.log")]
    if "--history-file" not in args:
        argv += ["--history-file", str(cwd / ".chat_history")]
    return argv if fake is None else [*argv, "--base-url", fake.url]


def run_chat(
    fake: FakeOpenAI | None, cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        chat_argv(fake, cwd, *args), env=env or clean_env(), cwd=cwd, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, encoding="utf-8", timeout=DEADLINE,
    )


CONTROLLING_TERMINAL = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)
"""Run as ``python -c`` in a new session: make stdin (the pty) the controlling terminal, then
exec the command, so that typing Ctrl-C signals its foreground process group as a shell would."""


class Terminal:
    """``tiller chat`` on a pseudo-terminal: ``type`` sends keys, ``expect`` reads the
    output until a marker appears after the previous one (failing at a deadline). The output
    also drives a screen emulator (``screen``, ``expect_screen``: what a person sees; it
    answers the program's cursor position requests as a terminal does). Output is plain
    (NO_COLOR) unless ``color``."""

    def __init__(self, argv: list[str], cwd: Path, *, color: bool = False,
                 **env_extra: str) -> None:
        self.master, slave = pty.openpty()
        plain = {} if color else {"NO_COLOR": "1"}
        env = clean_env(TERM="xterm", **plain, **env_extra)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        self.process = subprocess.Popen(
            [sys.executable, "-c", CONTROLLING_TERMINAL, *argv], stdin=slave, stdout=slave,
            stderr=slave, env=env, cwd=cwd, close_fds=True, start_new_session=True,
        )
        os.close(slave)
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.output = ""
        self.seen = 0
        self.screen = pyte.HistoryScreen(COLUMNS, ROWS, history=100_000)
        self.screen.write_process_input = self.type
        self.stream = pyte.Stream(self.screen)

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def expect(self, marker: str) -> None:
        """Read until ``marker`` is on screen (or scrolled off it) after the previous one; a
        marker found in the input area (the input line and the two lines above it) counts
        from the start of its line, which may be overwritten by the transcript's next line."""
        deadline = time.monotonic() + DEADLINE
        while (found := self.text().find(marker, self.seen)) < 0:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"{marker!r} never appeared in:\n{self.shown()}"
            assert self._read(remaining), f"exited before {marker!r} appeared in:\n{self.shown()}"
        self.seen = found + len(marker)
        scrolled = len(self.screen.history.top)
        input_area = (scrolled + max(self.screen.cursor.y - 2, 0)) * (COLUMNS + 1)
        if found >= input_area:  # redrawn as the input line and what is drawn above it change
            self.seen = found - found % (COLUMNS + 1)

    def idle(self) -> None:
        """Wait for the status line, then the input line's ``> ``: no run is active."""
        self.expect(" tokens · $")
        self.expect("> ")

    def text(self) -> str:
        """Every line shown so far: those scrolled off the screen, then the screen's."""
        scrolled = [
            "".join(line[x].data for x in range(COLUMNS)) for line in self.screen.history.top
        ]
        return "\n".join([*scrolled, *self.screen.display])

    def shown(self) -> str:
        return "\n".join(line.rstrip() for line in self.text().splitlines())

    def lines(self) -> list[str]:
        """The screen's lines as shown, trailing blanks removed."""
        return [line.rstrip() for line in self.screen.display]

    def expect_screen(self, check: Callable[[list[str]], bool], what: str) -> list[str]:
        """Read until ``check(lines)`` holds for the screen; return those lines."""
        deadline = time.monotonic() + DEADLINE
        while not check(self.lines()):
            remaining = deadline - time.monotonic()
            screen = "\n".join(self.lines())
            assert remaining > 0, f"never on screen: {what}; screen:\n{screen}"
            assert self._read(remaining), f"exited before {what}; screen:\n{screen}"
        return self.lines()

    def wait(self) -> int:
        """Read to the end of output, then return the exit status."""
        deadline = time.monotonic() + DEADLINE
        while self._read(max(deadline - time.monotonic(), 0.01)):
            assert time.monotonic() < deadline, f"still running; output:\n{self.output}"
        return self.process.wait(timeout=DEADLINE)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.close(self.master)

    def _read(self, timeout: float) -> bool:
        """Read what is there (waiting up to ``timeout``); False at end of output."""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.master, 4096)
        except OSError:  # EIO: every process holding the terminal has exited
            data = b""
        text = self.decoder.decode(data)
        self.output += text
        self.stream.feed(text)
        return bool(data)
