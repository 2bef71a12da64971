"""Stdin and stdout as framed JSON messages, on asyncio alone (``initialize`` can be answered
before the front is imported: ``tiller.fronts.tiller.early``).

``Stdio.open`` reads stdin through ``tiller.wire.framing.FramedReader`` (a non-blocking pipe
where possible, else a reader thread) and writes with a ``FramedWriter`` in the framing the
reader detected; ``messages`` is the one iterator of decoded messages, ``first()`` takes one off
it (the transport, ``tiller.wire.transport.serve_stdio``, goes on with the rest).
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import sys
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

from tiller.wire.framing import FramedReader, Framing, frame

__all__ = ["FramedWriter", "Stdio"]

log = logging.getLogger(__name__)

_LINE_SEPARATOR = "\u2028".encode()
_PARAGRAPH_SEPARATOR = "\u2029".encode()


class FramedWriter:
    """Writes message bodies in the framing the reader detected (NDJSON until one is known)."""

    def __init__(self, write: Callable[[bytes], None], reader: FramedReader) -> None:
        self._write = write
        self._reader = reader
        self.closed = False

    def write(self, body: bytes) -> None:
        """Frame and write one JSON body. U+2028/U+2029 (valid raw in JSON strings, but line
        breaks to some NDJSON readers, e.g. Node's readline) go out escaped."""
        if self.closed:
            return
        if _LINE_SEPARATOR in body or _PARAGRAPH_SEPARATOR in body:
            body = body.replace(_LINE_SEPARATOR, b"\\u2028").replace(
                _PARAGRAPH_SEPARATOR, b"\\u2029"
            )
        data = frame(body, self._reader.framing)
        try:
            self._write(data)
        except (BrokenPipeError, ConnectionResetError, OSError):
            log.warning("stdout is closed; dropping further output")
            self.closed = True

    def close(self) -> None:
        self.closed = True


@dataclass
class Stdio:
    """A connection's framed reader and writer and its one message iterator."""

    reader: FramedReader
    writer: FramedWriter
    messages: AsyncIterator[Any]

    @classmethod
    async def open(
        cls, framing: Framing | None = None, stdin: BinaryIO | None = None,
        stdout: BinaryIO | None = None,
    ) -> Stdio:
        """Over ``stdin``/``stdout`` (the process's by default); ``framing`` None: detected."""
        reader = FramedReader((await _open_stdin(stdin or sys.stdin.buffer)).read, framing)
        writer = FramedWriter(_stdout_writer(stdout or sys.stdout.buffer), reader)
        return cls(reader, writer, reader.messages())

    async def first(self) -> Any:
        """The next message off ``messages`` (None at end of input)."""
        return await anext(self.messages, None)


async def _open_stdin(stdin: BinaryIO) -> asyncio.StreamReader:
    """A StreamReader over stdin: a non-blocking pipe where possible, else a reader thread."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    mode = os.fstat(stdin.fileno()).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):  # files and /dev/null cannot be polled
        try:
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
            return reader
        except (ValueError, OSError):
            pass

    def pump() -> None:  # regular files and other non-pollable inputs
        while chunk := os.read(stdin.fileno(), 65536):
            loop.call_soon_threadsafe(reader.feed_data, chunk)
        loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=pump, name="tiller-stdin", daemon=True).start()
    return reader


def _stdout_writer(stdout: BinaryIO) -> Callable[[bytes], None]:
    def write(data: bytes) -> None:
        stdout.write(data)
        stdout.flush()

    return write
