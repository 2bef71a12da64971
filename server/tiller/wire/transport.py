"""Stdio framing and JSON-RPC message validation in front of pygls's dispatcher.

pygls's own stdio reader understands only ``Content-Length`` framing, reads through a thread hop
per message, turns params into namedtuples and silently drops malformed input. This module reads
stdin itself through ``tiller.wire.framing`` (which detects the framing and recovers from bad
frames), answers in the same framing, replies -32700/-32600 exactly once to input that is not a
valid JSON-RPC message (or nests deeper than ``MAX_DEPTH``), and hands valid messages to pygls
with their params as plain dicts. ``$/cancelRequest`` is routed to ``on_cancel`` instead of
pygls, and answered ``null`` when it was sent as a request.

A response (an object with ``result`` or ``error`` and no ``method``) is never answered, however
malformed: JSON-RPC forbids it, and two peers that answer each other's bad responses would
ping-pong forever. One with a null, missing or unknown id (a client rejecting one of our
notifications with an id-less error, say) is logged and dropped.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import sys
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from lsprotocol.types import ResponseError, ResponseErrorMessage
from pygls.protocol import JsonRPCProtocol
from pygls.protocol.json_rpc import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
)

from tiller.wire.framing import (
    MAX_DEPTH,
    BadFrame,
    FramedReader,
    Framing,
    TooDeep,
    exceeds_depth,
    frame,
)

__all__ = ["FramedWriter", "Selector", "serve_stdio"]

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
_LINE_SEPARATOR = "\u2028".encode()
_PARAGRAPH_SEPARATOR = "\u2029".encode()
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
_TOO_DEEP = f"Invalid request: nested more than {MAX_DEPTH} levels deep"


CancelFn = Callable[[Any], None]
Selector = Callable[[dict[str, Any]], "tuple[JsonRPCProtocol, CancelFn] | None"]
"""Given the first valid message, another protocol (and cancel hook) to serve the whole
connection with, or None to keep the default (how ``tiller`` detects an ACP client)."""


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

    def handle(self, message: Any) -> None:
        """Answer a ``BadFrame`` with -32700, an invalid request with -32600; take a response
        (never answered), dispatch the rest."""
        if isinstance(message, BadFrame):
            self.send_error(None, PARSE_ERROR, f"Parse error: {message.reason}")
            return
        if isinstance(message, TooDeep):  # its id was read from the frame's top level
            if message.is_response:
                log.warning("dropped a response nested too deeply to decode (id %r)",
                            message.msg_id)
            else:
                self.send_error(message.msg_id, INVALID_REQUEST, _TOO_DEEP)
            return
        if isinstance(message, dict) and _is_response(message):
            self.take_response(message)
            return
        readable_id = message.get("id") if isinstance(message, dict) else None
        msg_id = readable_id if _valid_id(readable_id) else None
        if exceeds_depth(message):
            self.send_error(msg_id, INVALID_REQUEST, _TOO_DEEP)
            return
        if isinstance(message, list):
            self.send_error(None, INVALID_REQUEST, "Invalid request: batches are not supported")
            return
        if not isinstance(message, dict):
            self.send_error(None, INVALID_REQUEST, "Invalid request: expected a JSON object")
            return
        problem = _request_problem(message)
        if problem is not None:
            self.send_error(msg_id, INVALID_REQUEST, f"Invalid request: {problem}")
            return
        self.dispatch(message)

    def take_response(self, data: dict[str, Any]) -> None:
        """Hand a response to pygls (which drops one for an id it never sent, with a warning);
        log and drop one that names no request (null, missing or invalid id), is not JSON-RPC
        2.0 or nests too deep. Never answers."""
        if (data.get("jsonrpc") == "2.0" and _valid_id(data.get("id"))
                and not exceeds_depth(data)):
            self.dispatch(data)
            return
        log.warning("dropped a response that answers no request: %s",
                    json.dumps(data, default=str)[:500])

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
            self.cancel(data)
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


    def cancel(self, data: dict[str, Any]) -> None:
        """``$/cancelRequest``: cancel ``params.id``. Sent as a request it is answered exactly
        once: ``null`` after it has acted, -32602 when ``params.id`` cannot name a request (not
        a string or an integer). A notification with such an id is logged and dropped."""
        params = data.get("params")
        target = params.get("id") if isinstance(params, dict) else None
        answered = "id" in data
        try:
            if _valid_id(target):
                self.on_cancel(target)
            elif answered:
                self.send_error(data["id"], INVALID_PARAMS,
                                "Invalid params: id: the id of a request, a string or an integer")
                answered = False
            else:
                log.warning("$/cancelRequest without a request id: %s",
                            json.dumps(params, default=str)[:200])
        finally:
            if answered:
                self.writer.write(json.dumps({"jsonrpc": "2.0", "id": data["id"],
                                              "result": None}).encode())


def _is_response(data: dict[str, Any]) -> bool:
    """A response (to be taken, never answered): ``result`` or ``error``, and no ``method``."""
    return "method" not in data and ("result" in data or "error" in data)


def _valid_id(msg_id: Any) -> bool:
    return isinstance(msg_id, (str, int)) and not isinstance(msg_id, bool)


def _request_problem(data: dict[str, Any]) -> str | None:
    """Why ``data`` (not a response) is not a valid JSON-RPC 2.0 request or notification, or
    None if it is one."""
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
    async for message in reader.messages():
        try:
            router.handle(message)
        except Exception:
            log.exception("failed to handle a message")
