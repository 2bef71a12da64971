"""Stdio framing and JSON-RPC message validation in front of pygls's dispatcher.

pygls's own stdio reader understands only ``Content-Length`` framing, reads through a thread hop
per message, turns params into namedtuples and silently drops malformed input. This module reads
stdin itself: it detects the framing from the first bytes (``Content-Length:`` headers as LSP
clients send, or one JSON message per line), answers in the same framing, replies -32700/-32600
to input that is not a valid JSON-RPC message, and hands valid messages to pygls with their
params as plain dicts. ``$/cancelRequest`` is routed to ``on_cancel`` instead of pygls.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import os
import stat
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any, BinaryIO

from lsprotocol.types import ResponseError, ResponseErrorMessage
from pygls.protocol import JsonRPCProtocol
from pygls.protocol.json_rpc import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
)

__all__ = ["FramedReader", "FramedWriter", "Framing", "Selector", "frame", "serve_stdio"]

log = logging.getLogger(__name__)

UTF8_BOM = b"\xef\xbb\xbf"
PARSE_ERROR = -32700
INVALID_REQUEST = -32600


ReadFn = Callable[[int], Awaitable[bytes]]
CancelFn = Callable[[Any], None]
Selector = Callable[[dict[str, Any]], "tuple[JsonRPCProtocol, CancelFn] | None"]
"""Given the first valid message, another protocol (and cancel hook) to serve the whole
connection with, or None to keep the default (how ``tiller`` detects an ACP client)."""


class Framing(enum.Enum):
    LSP = "lsp"
    NDJSON = "ndjson"


class _ByteBuffer:
    """readline/readexactly/peek over any ``read(n)`` stream, with our own buffer."""

    def __init__(self, read: ReadFn) -> None:
        self.read = read
        self.buf = bytearray()

    async def _fill(self) -> bool:
        chunk = await self.read(65536)
        self.buf += chunk
        return bool(chunk)

    async def peek(self) -> bytes:
        """The next byte without consuming it; b"" at end of input."""
        if not self.buf and not await self._fill():
            return b""
        return bytes(self.buf[:1])

    async def starts_with(self, prefix: bytes) -> bool:
        while len(self.buf) < len(prefix) and await self._fill():
            pass
        return self.buf.startswith(prefix)

    def skip(self, n: int) -> None:
        del self.buf[:n]

    async def readline(self) -> bytes:
        """Up to and including the next newline; what is left (maybe b"") at end of input."""
        searched = 0
        while (newline := self.buf.find(b"\n", searched)) < 0:
            searched = len(self.buf)
            if not await self._fill():
                line = bytes(self.buf)
                self.buf.clear()
                return line
        line = bytes(self.buf[: newline + 1])
        del self.buf[: newline + 1]
        return line

    async def readexactly(self, n: int) -> bytes | None:
        while len(self.buf) < n:
            if not await self._fill():
                return None
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data


class FramedReader:
    """Reads message bodies from a byte stream, detecting the framing unless it is forced."""

    def __init__(self, read: ReadFn, framing: Framing | None = None) -> None:
        """``read(n)`` returns up to n bytes, b"" at end of input."""
        self.input = _ByteBuffer(read)
        self.framing = framing

    async def detect(self) -> Framing | None:
        """Skip a BOM and whitespace; a ``Content-`` header means LSP framing, anything else
        (a JSON message, or garbage to answer with a parse error) one message per line."""
        while True:
            head = await self.input.peek()
            if not head:
                return None
            if head in (b" ", b"\t", b"\r", b"\n"):
                self.input.skip(1)
                continue
            if await self.input.starts_with(UTF8_BOM):
                self.input.skip(len(UTF8_BOM))
                continue
            is_header = await self.input.starts_with(b"Content-") or await self.input.starts_with(
                b"content-"
            )
            return Framing.LSP if is_header else Framing.NDJSON

    async def read(self) -> bytes | None:
        """The next message body, or None at end of input."""
        if self.framing is None:
            self.framing = await self.detect()
            if self.framing is None:
                return None
        if self.framing is Framing.NDJSON:
            return await self._read_line()
        return await self._read_lsp()

    async def _read_line(self) -> bytes | None:
        while True:
            line = await self.input.readline()
            if not line:
                return None
            line = line.strip()
            if line:
                return line

    async def _read_lsp(self) -> bytes | None:
        length: int | None = None
        while True:
            line = await self.input.readline()
            if not line:
                return None
            text = line.decode("ascii", "replace").strip()
            if not text:
                if length is not None:
                    return await self.input.readexactly(length)
                continue  # stray blank line between messages
            name, _, value = text.partition(":")
            if name.strip().lower() == "content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    length = None
            elif text.startswith(("{", "[")) and length is None:
                return line.strip()  # a body without headers: let the router judge it


def frame(body: bytes, framing: Framing | None) -> bytes:
    """``body`` framed for the wire: LSP headers, or one line (NDJSON, also the default)."""
    if framing is Framing.LSP:
        return b"Content-Length: %d\r\n\r\n" % len(body) + body
    return body + b"\n"


class FramedWriter:
    """Writes message bodies in the framing the reader detected (NDJSON until one is known)."""

    def __init__(self, write: Callable[[bytes], None], reader: FramedReader) -> None:
        self._write = write
        self._reader = reader
        self.closed = False

    def write(self, body: bytes) -> None:
        if self.closed:
            return
        data = frame(body, self._reader.framing)
        try:
            self._write(data)
        except (BrokenPipeError, ConnectionResetError, OSError):
            log.warning("stdout is closed; dropping further output")
            self.closed = True

    def close(self) -> None:
        self.closed = True


class MessageRouter:
    """Validates decoded JSON and feeds valid JSON-RPC messages to a pygls protocol."""

    def __init__(
        self,
        protocol: JsonRPCProtocol,
        writer: FramedWriter,
        on_cancel: Callable[[Any], None],
        select: Selector | None = None,
    ) -> None:
        self.protocol = protocol
        self.writer = writer
        self.on_cancel = on_cancel
        self.select = select

    def send_error(self, msg_id: Any, code: int, message: str) -> None:
        body = {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}
        self.writer.write(json.dumps(body).encode())

    def handle_body(self, body: bytes) -> None:
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            self.send_error(None, PARSE_ERROR, f"Parse error: invalid JSON ({exc})")
            return
        if isinstance(data, list):
            self.send_error(None, INVALID_REQUEST, "Invalid request: batches are not supported")
            return
        if not isinstance(data, dict):
            self.send_error(None, INVALID_REQUEST, "Invalid request: expected a JSON object")
            return
        problem = _request_problem(data)
        if problem is not None:
            msg_id = data.get("id") if _valid_id(data.get("id")) else None
            self.send_error(msg_id, INVALID_REQUEST, f"Invalid request: {problem}")
            return
        self.dispatch(data)

    def dispatch(self, data: dict[str, Any]) -> None:
        if self.select is not None:  # the first valid message may pick another protocol
            select, self.select = self.select, None
            chosen = select(data)
            if chosen is not None:
                self.protocol, self.on_cancel = chosen
                self.protocol.set_writer(self.writer, include_headers=False)
        method = data.get("method")
        params = data.get("params")
        if method == "$/cancelRequest":
            if isinstance(params, dict) and "id" in params:
                self.on_cancel(params["id"])
            return
        message: Any
        if method is not None and "id" in data:
            message = JsonRPCRequestMessage(
                id=data["id"], method=method, jsonrpc="2.0", params=params
            )
        elif method is not None:
            message = JsonRPCNotification(method=method, jsonrpc="2.0", params=params)
        elif "error" in data:
            error = data["error"] if isinstance(data["error"], dict) else {}
            message = ResponseErrorMessage(
                id=data["id"],
                error=ResponseError(
                    code=int(error.get("code", -32603)),
                    message=str(error.get("message", "")),
                    data=error.get("data"),
                ),
            )
        else:
            message = JsonRPCResponseMessage(id=data["id"], jsonrpc="2.0", result=data["result"])
        self.protocol.handle_message(message)


def _valid_id(msg_id: Any) -> bool:
    return isinstance(msg_id, (str, int)) and not isinstance(msg_id, bool)


def _request_problem(data: dict[str, Any]) -> str | None:
    """Why ``data`` is not a valid JSON-RPC 2.0 message, or None if it is one."""
    if data.get("jsonrpc") != "2.0":
        return 'missing or wrong "jsonrpc" member (must be "2.0")'
    if "id" in data and not _valid_id(data["id"]):
        return '"id" must be a string or an integer'
    if "method" in data:
        if not isinstance(data["method"], str) or not data["method"]:
            return '"method" must be a non-empty string'
        if "params" in data and not isinstance(data["params"], (dict, list)):
            return '"params" must be an object or an array'
        return None
    if "id" in data and ("result" in data or "error" in data):
        return None
    return 'missing "method"'


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


async def serve_stdio(
    protocol: JsonRPCProtocol,
    on_cancel: Callable[[Any], None],
    framing: Framing | None = None,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    select: Selector | None = None,
) -> None:
    """Serve ``protocol`` on stdin/stdout until end of input or ``protocol.stop_event``;
    ``select`` may hand the connection to another protocol on its first valid message."""
    reader = FramedReader((await _open_stdin(stdin or sys.stdin.buffer)).read, framing)
    writer = FramedWriter(_stdout_writer(stdout or sys.stdout.buffer), reader)
    protocol.set_writer(writer, include_headers=False)
    router = MessageRouter(protocol, writer, on_cancel, select)
    while (body := await reader.read()) is not None:
        try:
            router.handle_body(body)
        except Exception:
            log.exception("failed to handle a message")
