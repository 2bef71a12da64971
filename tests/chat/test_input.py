"""The chat's input line on a real pseudo-terminal, in-process: keys typed while text is being
printed above it (prompt_toolkit's ``run_in_terminal``, which ``patch_stdout`` uses for every
print) reach the input line, and the terminal does not echo them into the transcript."""

from __future__ import annotations

import os
import pty
import select
from collections.abc import Iterator

import anyio
import pytest
from prompt_toolkit import PromptSession
from prompt_toolkit.application import run_in_terminal
from prompt_toolkit.data_structures import Size
from prompt_toolkit.output.vt100 import Vt100_Output

from tiller.chat.input import Keyboard

pytestmark = pytest.mark.anyio


@pytest.fixture
def terminal() -> Iterator[tuple[int, int]]:
    """A pseudo-terminal: (the side a person types into, the side the chat reads)."""
    master, slave = pty.openpty()
    yield master, slave
    os.close(master)
    os.close(slave)


def _session(slave: int) -> PromptSession[str]:
    """An input line on the terminal's ``slave`` side (not asking where its cursor is: nobody
    answers here)."""
    keys = os.fdopen(os.dup(slave), "r", closefd=True)
    screen = os.fdopen(os.dup(slave), "w", closefd=True)
    return PromptSession(input=Keyboard(keys), output=Vt100_Output(
        screen, lambda: Size(rows=24, columns=80), term="xterm", enable_cpr=False))


def _print_then_type(master: int, slave: int, keys: bytes) -> None:
    """While the input line is suspended for a print: print a line, then type ``keys`` and
    wait until the terminal has taken them (a terminal in cooked mode echoes them then)."""
    os.write(slave, b"printed\n")
    os.write(master, keys)
    assert select.select([slave], [], [], 10)[0]


def _shown(master: int) -> bytes:
    """All the terminal showed: the input line's output and anything the terminal echoed."""
    shown = b""
    while select.select([master], [], [], 0)[0] and (chunk := os.read(master, 65536)):
        shown += chunk
    return shown


async def test_ctrl_d_typed_while_text_prints_ends_the_input(terminal: tuple[int, int]) -> None:
    master, slave = terminal
    session = _session(slave)

    async def print_above() -> None:
        await run_in_terminal(lambda: _print_then_type(master, slave, b"\x04"))

    with anyio.fail_after(10), pytest.raises(EOFError):
        await session.prompt_async("> ", pre_run=lambda: session.app.create_background_task(
            print_above()))


async def test_text_typed_while_text_prints_is_not_echoed(terminal: tuple[int, int]) -> None:
    master, slave = terminal
    session = _session(slave)

    async def print_above() -> None:
        await run_in_terminal(lambda: _print_then_type(master, slave, b"secret words\r"))

    with anyio.fail_after(10):
        line = await session.prompt_async("> ", pre_run=lambda: session.app.create_background_task(
            print_above()))
    assert line == "secret words"
    assert b"printed\r\nsecret words" not in _shown(master)
