"""Reading JSON message bodies off a byte stream, in LSP ``Content-Length`` framing or one
message per line (NDJSON), detected from the first bytes.

LSP framing recovers from bad frames (protocol.md, "Transport"): a bad header block is one
``BadFrame``, after which everything up to the next ``Content-Length:`` header is skipped; a body
that does not decode is one ``BadFrame`` too, and reading resumes at a ``Content-Length:``
header found inside it (a too-long length ran into the next frame) or else at the next one after
it. Decoding refuses nesting too deep to decode without recursing out of the stack: such a
message is ``TooDeep``, with the id read from its top level without decoding the rest.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from tiller import jsontext
from tiller.frozen import frozen

__all__ = [
    "MAX_BODY",
    "MAX_DEPTH",
    "BadFrame",
    "FramedReader",
    "Framing",
    "TooDeep",
    "decode",
    "exceeds_depth",
    "frame",
]

MAX_BODY = 256 * 1024 * 1024
"""The largest ``Content-Length`` (and headerless body) accepted, in bytes."""
MAX_DEPTH = 512
"""The deepest nesting of arrays and objects a message may have (the message itself is 1)."""
MAX_HEADER_LINE = 8192

UTF8_BOM = b"\xef\xbb\xbf"
_HEADER = re.compile(rb"content-length:", re.IGNORECASE)
_SURE_HEADER = re.compile(rb"content-length:[ \t]*[0-9]+[ \t]*\r?\n", re.IGNORECASE)
"""A header line no JSON text can contain (the raw newline cannot be inside a string, and the
name cannot be outside one), so a body it appears in can never decode."""
_FIELD = re.compile(rb"([A-Za-z0-9-]+)[ \t]*:[ \t]*([ -~]*?)[ \t]*\r?\n?")
_BLANK = re.compile(rb"[ \t\r\n]*")
_OVERLAP = 64  # bytes searched again after a refill, so a pattern split across reads is found

ReadFn = Callable[[int], Awaitable[bytes]]


class Framing(enum.Enum):
    LSP = "lsp"
    NDJSON = "ndjson"


@frozen
class BadFrame:
    """Input that is not a JSON message: answered with one -32700 (Parse error) whose message
    is ``"Parse error: " + reason``."""

    reason: str


@frozen
class TooDeep:
    """A message nested too deeply to decode. ``msg_id`` is its top-level ``id`` member when
    that is a string or an integer (None otherwise); ``is_response`` says that its top level has
    ``result`` or ``error`` and no ``method`` (a response: never answered)."""

    msg_id: str | int | None
    is_response: bool


def frame(body: bytes, framing: Framing | None) -> bytes:
    """``body`` framed for the wire: LSP headers, or one line (NDJSON, also the default)."""
    if framing is Framing.LSP:
        return b"Content-Length: %d\r\n\r\n" % len(body) + body
    return body + b"\n"


def decode(body: bytes) -> Any:
    """``body`` decoded as JSON (a lone surrogate escape read as U+FFFD: ``tiller.jsontext``), a
    ``TooDeep`` when it nests too deeply to decode, or a ``BadFrame`` saying why it cannot be."""
    try:
        return jsontext.loads(body)
    except RecursionError:
        return _top_level(body)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        return BadFrame(f"invalid JSON ({exc})")


def exceeds_depth(value: Any, limit: int = MAX_DEPTH) -> bool:
    """True if ``value`` nests lists and dicts more than ``limit`` levels deep; never recurses."""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, (dict, list)) else []
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SCALAR = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?'
                     rb"|true|false|null", re.DOTALL)
_STRUCTURE = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{]+|[\]}]+', re.DOTALL)


def _top_level(body: bytes) -> TooDeep:
    """What the top-level members of a message too deep to decode say: its id (a string or
    an integer) and whether it is a response. Reads member by member, skipping nested values
    by counting brackets outside strings, until it has the id and the method or meets
    something that is not JSON."""
    members: dict[str, Any] = {}
    pos = _space(body, 0)
    if body[pos:pos + 1] == b"{":
        pos += 1
        while (key := _STRING.match(body, _space(body, pos))) is not None:
            pos = _space(body, key.end())
            if body[pos:pos + 1] != b":":
                break
            pos = _space(body, pos + 1)
            name = json.loads(key.group())
            if body[pos:pos + 1] in (b"{", b"["):
                members.setdefault(name, None)
                end = _skip_container(body, pos)
                if end is None:
                    break
                pos = end
            elif (scalar := _SCALAR.match(body, pos)) is not None:
                members.setdefault(name, json.loads(scalar.group()))
                pos = scalar.end()
            else:
                break
            pos = _space(body, pos)
            if ("id" in members and "method" in members) or body[pos:pos + 1] != b",":
                break
            pos += 1
    msg_id = members.get("id")
    valid = isinstance(msg_id, (str, int)) and not isinstance(msg_id, bool)
    is_response = "method" not in members and ("result" in members or "error" in members)
    return TooDeep(msg_id if valid else None, is_response)


def _space(body: bytes, pos: int) -> int:
    """The position of the first byte at or after ``pos`` that is not JSON whitespace."""
    while body[pos:pos + 1] in (b" ", b"\t", b"\r", b"\n"):
        pos += 1
    return pos


def _skip_container(body: bytes, pos: int) -> int | None:
    """The position just past the array or object that opens at ``pos``; None if it never
    closes."""
    depth = 0
    for token in _STRUCTURE.finditer(body, pos):
        first = token.group()[:1]
        if first == b'"':
            continue
        if first in (b"[", b"{"):
            depth += len(token.group())
            continue
        if len(token.group()) >= depth:
            return token.start() + depth
        depth -= len(token.group())
    return None


def _show(data: bytes) -> str:
    """A short printable rendering of offending header bytes for an error message."""
    text = repr(bytes(data[:60]))[2:-1]
    return text + ("..." if len(data) > 60 else "")


class _ByteBuffer:
    """Line, exact-length and scan reads over any ``read(n)`` stream, with our own buffer."""

    def __init__(self, read: ReadFn) -> None:
        self.read = read
        self.buf = bytearray()

    async def fill(self) -> bool:
        """Append the next chunk; False at end of input."""
        chunk = await self.read(65536)
        self.buf += chunk
        return bool(chunk)

    async def starts_with(self, prefix: bytes, *, ignore_case: bool = False) -> bool:
        while len(self.buf) < len(prefix) and await self.fill():
            pass
        head = bytes(self.buf[: len(prefix)])
        return (head.lower() if ignore_case else head) == prefix

    def skip(self, n: int) -> None:
        del self.buf[:n]

    def unread(self, data: bytes) -> None:
        self.buf[:0] = data

    async def skip_blank(self) -> bool:
        """Drop spaces, tabs and line breaks; False at end of input."""
        while True:
            match = _BLANK.match(self.buf)
            self.skip(match.end() if match else 0)
            if self.buf:
                return True
            if not await self.fill():
                return False

    async def skip_to_header(self) -> bool:
        """Drop bytes up to the next ``Content-Length:``; False at end of input."""
        while (match := _HEADER.search(self.buf)) is None:
            self.skip(max(0, len(self.buf) - _OVERLAP))
            if not await self.fill():
                self.buf.clear()
                return False
        self.skip(match.start())
        return True

    async def readline(self) -> bytes:
        """Up to and including the next newline; what is left (maybe b"") at end of input."""
        searched = 0
        while (newline := self.buf.find(b"\n", searched)) < 0:
            searched = len(self.buf)
            if not await self.fill():
                line = bytes(self.buf)
                self.buf.clear()
                return line
        line = bytes(self.buf[: newline + 1])
        self.skip(newline + 1)
        return line

    async def read_segment(self, limit: int) -> bytes:
        """Up to and including the next newline, or up to a later ``Content-Length:`` (which
        starts a frame), at most ``limit`` bytes; b"" at end of input."""
        searched = 0
        while True:
            window = min(len(self.buf), limit)
            newline = self.buf.find(b"\n", searched, window)
            stop = newline + 1 if newline >= 0 else window
            header = _HEADER.search(self.buf, max(1, searched - _OVERLAP), stop)
            if header is not None:
                stop = header.start()
            if header is not None or newline >= 0 or window == limit or not await self.fill():
                segment = bytes(self.buf[:stop])
                self.skip(len(segment))
                return segment
            searched = window


class FramedReader:
    """Reads messages from a byte stream, detecting the framing unless it is forced."""

    def __init__(self, read: ReadFn, framing: Framing | None = None) -> None:
        """``read(n)`` returns up to n bytes, b"" at end of input."""
        self.input = _ByteBuffer(read)
        self.framing = framing
        self.resyncing = False
        """After a bad LSP frame: skip input up to the next ``Content-Length:`` header."""

    async def detect(self) -> Framing | None:
        """Skip a BOM and whitespace; a ``Content-`` header means LSP framing, anything else
        (a JSON message, or garbage to answer with a parse error) one message per line."""
        while True:
            if not await self.input.skip_blank():
                return None
            if not await self.input.starts_with(UTF8_BOM):
                break
            self.input.skip(len(UTF8_BOM))
        is_header = await self.input.starts_with(b"content-", ignore_case=True)
        return Framing.LSP if is_header else Framing.NDJSON

    async def messages(self) -> AsyncIterator[Any]:
        """Each decoded JSON message, or a ``BadFrame`` for input that is none, until the end
        of input. Every ``BadFrame`` stands for one bad frame (or run of junk)."""
        while (body := await self._next_body()) is not None:
            if isinstance(body, BadFrame):
                yield body
                continue
            message = decode(body)
            if isinstance(message, BadFrame) and self.framing is Framing.LSP:
                self._resume_in(body)
            yield message

    async def read(self) -> bytes | None:
        """The next message body, skipping bad frames, or None at end of input (for a client
        reading a server that frames correctly)."""
        while isinstance(body := await self._next_body(), BadFrame):
            pass
        return body

    async def _next_body(self) -> bytes | BadFrame | None:
        if self.framing is None:
            self.framing = await self.detect()
            if self.framing is None:
                return None
        if self.framing is Framing.NDJSON:
            return await self._read_line()
        body = await self._read_lsp()
        self.resyncing = isinstance(body, BadFrame)
        return body

    async def _read_line(self) -> bytes | None:
        while True:
            line = await self.input.readline()
            if not line:
                return None
            line = line.strip()
            if line:
                return line

    def _resume_in(self, body: bytes) -> None:
        """After an LSP body that did not decode, resume at the first header line inside it
        (preferring one no JSON can contain), else keep its tail in case a header straddles
        its end; the skipping up to the next header is then ``resyncing``'s job."""
        header = _SURE_HEADER.search(body) or _HEADER.search(body)
        self.input.unread(body[header.start() :] if header else body[-_OVERLAP:])
        self.resyncing = True

    async def _read_lsp(self) -> bytes | BadFrame | None:
        if self.resyncing and not await self.input.skip_to_header():
            return None
        if not await self.input.skip_blank():
            return None
        if not await self.input.starts_with(b"content-", ignore_case=True):
            segment = await self.input.read_segment(MAX_BODY)
            if segment.startswith((b"{", b"[")):
                return segment.strip()  # a body without headers: decoding judges it
            return BadFrame(f"expected a Content-Length header, got {_show(segment)}")
        length = await self._read_headers()
        if not isinstance(length, int):
            return length
        return await self._read_body(length)

    async def _read_headers(self) -> int | BadFrame | None:
        """The Content-Length of the header block at the start of the input, or why the
        block is bad; None at end of input."""
        length: int | None = None
        while True:
            line = await self.input.read_segment(MAX_HEADER_LINE)
            if not line:
                return None
            if not line.strip():
                return length if length is not None else BadFrame("no Content-Length header")
            field = _FIELD.fullmatch(line)
            if field is None:
                return BadFrame(f"bad header line {_show(line)}")
            name, value = field.groups()
            if name.lower() != b"content-length":
                continue
            if length is not None:  # a new frame began before this one's blank line
                self.input.unread(line)
                return BadFrame("header block without the blank line that ends it")
            if not value.isdigit():
                return BadFrame(f"bad Content-Length {_show(value)}")
            if int(value) > MAX_BODY:
                return BadFrame(f"Content-Length {int(value)} exceeds {MAX_BODY} bytes")
            length = int(value)

    async def _read_body(self, length: int) -> bytes | BadFrame | None:
        """``length`` bytes; a BadFrame as soon as they run into a following header line
        (which no JSON can contain), so a too-long length never waits for input it eats."""
        buf, searched = self.input.buf, 0
        while len(buf) < length:
            if _SURE_HEADER.search(buf, max(0, searched - _OVERLAP)):
                first = _SURE_HEADER.search(buf)
                assert first is not None
                self.input.skip(first.start())
                return BadFrame(f"Content-Length {length} runs into the next frame's header")
            searched = len(buf)
            if not await self.input.fill():
                return None
        body = bytes(buf[:length])
        self.input.skip(length)
        return body
