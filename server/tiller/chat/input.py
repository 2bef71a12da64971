"""``tiller chat``'s input line on a terminal (prompt_toolkit), kept apart from the transcript.

``input_lines`` reads typed lines with a ``PromptSession``: history (``history``, a file kept
across chats), editing, ``/`` + Tab completing the session's commands (``CommandNames``; Tab
twice lists them, as readline does), Esc Enter (or Alt-Enter) for a new line in the message.
While it reads, everything the ``Renderer`` writes is printed *above* the input line
(``patch_stdout``); a streamed line not finished yet and the activity line are drawn with the
input line (``tiller.chat.status.InputArea``), so what is typed never lands inside the
transcript, and the transcript never inside what is typed; keys typed while text is printed
wait for the input line (``Keyboard``). An accepted line is put in the transcript as
``prompt + text``. The status line is drawn above the prompt while a prompt is
awaited, never printed. Ctrl-C clears the line and raises SIGINT, as the terminal does when not
in raw mode (the chat decides what it means); Ctrl-D on an empty line is the end of input
(None).
"""

from __future__ import annotations

import math
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterable
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import ANSI
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input.vt100 import Vt100Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.patch_stdout import patch_stdout
from prompt_toolkit.shortcuts import CompleteStyle

from tiller.chat.complete import CommandNames
from tiller.chat.status import InputArea
from tiller.store.private import private_file

if TYPE_CHECKING:
    from tiller.chat.render import Lines, Renderer

__all__ = ["Keyboard", "input_lines"]


class Keyboard(Vt100Input):
    """The terminal's keys, left in raw mode while text is printed above the input line.

    prompt_toolkit puts the terminal in cooked mode around each print, for programs that read
    a line meanwhile (nothing here does). A key typed in that moment would be echoed into the
    transcript by the terminal, and a Ctrl-D would end a line of the terminal's instead of the
    input (the input line then reads a NUL). In raw mode, keys wait unseen for the input line.
    """

    def cooked_mode(self) -> AbstractContextManager[None]:
        return nullcontext()


def _message(area: InputArea) -> ANSI:
    return ANSI("\n".join([*area.lines(), area.prompt]))


class _Commands(Completer):
    def __init__(self, names: CommandNames) -> None:
        self.names = names

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        word = document.get_word_before_cursor(WORD=True)
        for found in self.names.matches(document.text_before_cursor, word):
            yield Completion(found + " ", start_position=-len(word), display=found)


def _bindings() -> KeyBindings:
    keys = KeyBindings()

    @keys.add("c-c")
    def _interrupt(event: KeyPressEvent) -> None:
        event.current_buffer.reset()
        os.kill(os.getpid(), signal.SIGINT)

    @keys.add("escape", "enter")
    def _new_line(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    return keys


@asynccontextmanager
async def input_lines(
    names: CommandNames, renderer: Renderer, history: Path | None = None
) -> AsyncIterator[Lines]:
    """Typed lines, then None at end of input, read on the terminal while ``renderer``'s
    output goes above the input line (its ``out``/``err`` and ``area`` are set meanwhile)."""
    kept: History = InMemoryHistory()
    if history is not None:
        try:
            private_file(history)  # what was typed: the user's alone, as the session logs
            kept = FileHistory(history)
        except OSError:
            pass
    session: PromptSession[str] = PromptSession(
        input=Keyboard(sys.stdin), history=kept, completer=_Commands(names),
        complete_style=CompleteStyle.READLINE_LIKE, key_bindings=_bindings(),
        erase_when_done=True, complete_while_typing=False,
    )
    area = InputArea(session.app.invalidate)
    send, receive = anyio.create_memory_object_stream[str | None](math.inf)
    saved = renderer.out, renderer.err, renderer.area
    with patch_stdout(raw=True):
        renderer.out, renderer.err = sys.stdout, sys.stderr  # the proxy printing above
        renderer.area = area
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_read, session, area, renderer, send)
                with receive:
                    yield receive
                tg.cancel_scope.cancel()
        finally:
            renderer.out, renderer.err, renderer.area = saved


async def _read(
    session: PromptSession[str],
    area: InputArea,
    renderer: Renderer,
    send: MemoryObjectSendStream[str | None],
) -> None:
    with send:
        while True:
            try:
                text = await session.prompt_async(lambda: _message(area), handle_sigint=False)
            except (EOFError, KeyboardInterrupt):
                send.send_nowait(None)
                return
            area.status = ""  # the next prompt shows it again, when it is current
            renderer.out.write(area.prompt + text.replace("\n", "\n  ") + "\n")
            renderer.out.flush()
            send.send_nowait(text)
