"""The ``read`` tool: a text file's lines (a window of them, head-truncated) or an image.

Text is streamed from disk line by line, so only the requested window (a little over the output
limits) is held in memory; every line is counted for the "of N" in the notice. Images (PNG, JPEG,
GIF, WebP, recognised by magic bytes or extension) come back as base64 image content. Other
binary files are refused.

When the editor can read files (``ctx.files.can_read``), text comes from its buffer instead,
unsaved edits included: the whole text is fetched with ``read_text`` and cut into the same
window, with the same notices and details, as the disk would give for that text. The disk still
decides what the file is: a directory, an image or a binary file is handled as without the
editor (its API is text only). A path missing on disk is asked of the editor all the same (it
may be an unsaved buffer); the editor's ToolError is the answer when it has no such file.

On disk the tool reads the pinned real path (``pinned_path``), opened without following
symlinks (``tiller.tools.safefs``), through one descriptor: a symlink put on that path while
the call runs makes it fail instead of reading elsewhere. The editor is asked for the path as
named. FIFOs, devices and other non-regular files are refused.
"""

from __future__ import annotations

import base64
import codecs
import os
import shlex
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import anyio.to_thread
from pydantic import BaseModel, Field

from tiller.errors import ToolError
from tiller.tools.base import EditorFiles, Tool, ToolContext, ToolInfo, ToolResult
from tiller.tools.files import pinned_path, resolve_path
from tiller.tools.safefs import open_nofollow
from tiller.tools.truncate import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
    Truncation,
    format_size,
    truncate_head,
)
from tiller.types import ImageContent, PathText, TextContent

__all__ = ["MAX_IMAGE_BYTES", "ReadParams", "ReadTool"]

MAX_IMAGE_BYTES = 5 * 1024 * 1024
_SNIFF_BYTES = 8192
_IMAGE_EXTENSIONS = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}

_Line = TypeVar("_Line", str, bytes)


class ReadParams(BaseModel):
    path: PathText = Field(
        description="Path of the file to read, relative to the working directory"
    )
    offset: int | None = Field(
        default=None, ge=1, description="Line number to start reading from (1-based)"
    )
    limit: int | None = Field(default=None, ge=1, description="Maximum number of lines to read")


@dataclass
class _TextWindow:
    text: str
    total_lines: int


@dataclass
class _Image:
    data: bytes
    mime: str


def _image_mime(path: Path, head: bytes) -> str | None:
    """The image MIME type of a file from its first bytes, else from its extension."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return _IMAGE_EXTENSIONS.get(path.suffix.lower())


def _looks_binary(head: bytes) -> bool:
    """True for a NUL byte, or for bytes that are not UTF-8 and mostly not printable text."""
    if b"\x00" in head:
        return True
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
        return False
    except UnicodeDecodeError:
        text_bytes = bytes(range(0x20, 0x7F)) + b"\t\n\r\f\b\x1b"
        odd = sum(1 for byte in head if byte not in text_bytes)
        return odd > len(head) * 0.3


def _select(
    lines: Iterable[_Line], offset: int, limit: int | None, size: Callable[[_Line], int]
) -> tuple[list[_Line], int]:
    """Lines ``offset``.. (at most ``limit``) of ``lines``, stopping once the output limits are
    exceeded, and the number of all lines. ``size`` is a line's length in UTF-8 bytes."""
    kept: list[_Line] = []
    kept_bytes = 0
    total = 0
    last = None if limit is None else offset + limit - 1
    for number, line in enumerate(lines, start=1):
        total = number
        if number < offset or (last is not None and number > last):
            continue
        if len(kept) <= DEFAULT_MAX_LINES and kept_bytes <= DEFAULT_MAX_BYTES:
            kept.append(line)
            kept_bytes += size(line)
    return kept, total


def _read_window(file: BinaryIO, offset: int, limit: int | None) -> _TextWindow:
    """The window of the open file, streamed from its start (run in a worker thread)."""
    file.seek(0)
    kept, total = _select(file, offset, limit, len)
    data = b"".join(kept)
    if offset == 1 and data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    return _TextWindow(data.decode("utf-8", errors="replace"), total)


def _split_lines_keeping_ends(text: str) -> Iterator[str]:
    """The lines of ``text`` as a binary file yields them: split after each ``\n`` only."""
    start = 0
    while (end := text.find("\n", start)) != -1:
        yield text[start : end + 1]
        start = end + 1
    if start < len(text):
        yield text[start:]


def _utf8_size(line: str) -> int:
    return len(line.encode("utf-8", errors="surrogatepass"))


def _text_window(text: str, offset: int, limit: int | None) -> _TextWindow:
    """The window of ``text`` that ``_read_window`` gives for a file holding that text."""
    kept, total = _select(_split_lines_keeping_ends(text), offset, limit, _utf8_size)
    window = "".join(kept)
    if offset == 1 and window.startswith("\ufeff"):
        window = window[1:]
    return _TextWindow(window, total)


def _notice(cut: Truncation, path: str, first: int, total: int) -> str | None:
    """The line telling the model what it was shown and how to read on (None if all shown)."""
    last = first + cut.output_lines - 1
    if cut.partial_line:
        command = f"sed -n '{first}p' {shlex.quote(path)} | cut -c1-200000"
        return (
            f"[Line {first} is longer than the {format_size(DEFAULT_MAX_BYTES)} limit; showing "
            f"only its beginning. Use bash (e.g. `{command}`) to see more of it, or "
            f"offset={first + 1} to continue with the next line.]"
        )
    if last >= total:
        return None
    limit = f" ({format_size(DEFAULT_MAX_BYTES)} limit)" if cut.truncated_by == "bytes" else ""
    return f"[Showing lines {first}-{last} of {total}{limit}. Use offset={last + 1} to continue.]"


class ReadTool(Tool[ReadParams]):
    name = "read"
    info = ToolInfo(kind="read", mutates=False, path_arg="path", title="Read {path}",
                    hook_name="Read")
    description = (
        "Read a file. Text files: returns the lines, at most "
        f"{DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024}KB per call (a notice says "
        "how to continue); use offset and limit to page through large files. Images (png, jpg, "
        f"gif, webp, up to {MAX_IMAGE_BYTES // (1024 * 1024)}MB) are returned as images. "
        "Other binary files cannot be read."
    )
    Params = ReadParams

    async def execute(self, params: ReadParams, ctx: ToolContext) -> ToolResult:
        """Read ``params.path`` (text from the editor when it can read); ToolError for a missing
        file, a directory, a binary file, an offset past the end, or the editor's failure."""
        path = resolve_path(params.path, ctx.cwd)
        offset = params.offset or 1
        try:
            real = await pinned_path(path, ctx)
            if ctx.files is not None and ctx.files.can_read:
                loaded = await _load_from_editor(ctx.files, path, real, offset, params.limit)
            else:
                loaded = await anyio.to_thread.run_sync(_load, real, offset, params.limit)
        except OSError as exc:
            raise ToolError(f"Could not read {path}: {exc.strerror or exc}") from exc
        if isinstance(loaded, _Image):
            return _image_result(path, loaded)
        return _text_result(params, path, offset, loaded)


@contextmanager
def _open_file(real: Path) -> Iterator[BinaryIO]:
    """The regular file at the pinned path, open for reading without following symlinks;
    ToolError for a directory, ``FileNotFoundError`` when it is missing."""
    with open_nofollow(real, os.O_RDONLY) as fd:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise ToolError(f"{real} is a directory, not a file (use bash with ls to list it)")
        with open(fd, "rb", closefd=False) as file:
            yield file


def _probe(real: Path, file: BinaryIO) -> _Image | None:
    """What the open file is: its image, or None for text; ToolError for an image over the
    limit or a binary file. Run in a worker thread."""
    head = file.read(_SNIFF_BYTES)
    mime = _image_mime(real, head)
    if mime is not None:
        size = os.fstat(file.fileno()).st_size
        if size > MAX_IMAGE_BYTES:
            raise ToolError(
                f"{real} is a {format_size(size)} image, over the "
                f"{format_size(MAX_IMAGE_BYTES)} limit for images"
            )
        file.seek(0)
        return _Image(file.read(), mime)
    if _looks_binary(head):
        raise ToolError(f"{real} is a binary file and cannot be read as text")
    return None


def _load(real: Path, offset: int, limit: int | None) -> _TextWindow | _Image:
    """Everything read does on disk (run in a worker thread)."""
    try:
        with _open_file(real) as file:
            image = _probe(real, file)
            return image if image is not None else _read_window(file, offset, limit)
    except FileNotFoundError as exc:
        raise ToolError(f"File not found: {real}") from exc


def _probe_for_editor(real: Path) -> _Image | None:
    """``_probe``, except that a file the disk does not have or cannot open is left to the
    editor (None): it may be an unsaved buffer, or one the editor can still read."""
    try:
        with _open_file(real) as file:
            return _probe(real, file)
    except OSError:
        return None


async def _load_from_editor(
    files: EditorFiles, path: Path, real: Path, offset: int, limit: int | None
) -> _TextWindow | _Image:
    """An image from the disk at the pinned ``real``, else the window of the editor's whole
    text of ``path``.

    Raises the disk's ToolError for a directory or a binary file and the editor's ToolError when
    the editor cannot read the file. The window is cut here, not by the editor, so that the line
    count and the notices are exactly those of a disk read.
    """
    image = await anyio.to_thread.run_sync(_probe_for_editor, real)
    if image is not None:
        return image
    text = await files.read_text(path)
    return _text_window(text, offset, limit)


def _text_result(params: ReadParams, path: Path, offset: int, window: _TextWindow) -> ToolResult:
    total = window.total_lines
    if params.offset is not None and offset > total:
        raise ToolError(
            f"offset {offset} is beyond the end of the file ({total} "
            f"line{'' if total == 1 else 's'})"
        )
    details: dict[str, Any] = {"path": str(path), "totalLines": total, "truncated": False}
    if total == 0:
        return ToolResult.text("[The file is empty.]", details=details)
    cut = truncate_head(window.text)
    details["truncated"] = cut.truncated
    notice = _notice(cut, params.path, offset, total)
    if notice is None:
        return ToolResult.text(cut.content, details=details)
    body = cut.content.rstrip("\n")
    return ToolResult.text(f"{body}\n\n{notice}", details=details)


def _image_result(path: Path, image: _Image) -> ToolResult:
    size = format_size(len(image.data))
    return ToolResult(
        content=[
            TextContent(text=f"Read image file {path} [{image.mime}, {size}]"),
            ImageContent(data=base64.b64encode(image.data).decode("ascii"), mime_type=image.mime),
        ],
        details={"path": str(path), "mimeType": image.mime, "bytes": len(image.data)},
    )
