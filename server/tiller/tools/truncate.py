"""Output truncation shared by the tools: keep the head (read) or the tail (bash) of a text.

A text is cut at whichever limit it reaches first: ``max_lines`` lines or ``max_bytes`` bytes of
UTF-8. Only whole lines are kept, except when a single line on its own is over the byte limit:
then that line is cut at a character boundary and ``partial_line`` says so. A UTF-8 character is
never cut in half. Lines are separated by ``\\n``; a final newline does not start another line.
The tools write their own notices (they know how the rest can be fetched); ``format_size`` helps.
A text is made ``printable`` first: bytes a file name or an output held that are not UTF-8 (Python
keeps them as lone surrogates) are shown as ``\\xNN`` escapes, so a result can always be sent.
"""

from __future__ import annotations

from typing import Literal

from tiller.frozen import frozen

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_LINES",
    "Truncation",
    "format_size",
    "head_with_note",
    "printable",
    "split_lines",
    "truncate_head",
    "truncate_tail",
    "utf8_prefix",
    "utf8_suffix",
    "with_note",
]

DEFAULT_MAX_LINES = 2000
DEFAULT_MAX_BYTES = 50 * 1024

TruncatedBy = Literal["lines", "bytes"]


@frozen
class Truncation:
    """The kept part of a text and what was lost.

    ``total_*`` describe the input and ``output_*`` the kept ``content``. ``truncated_by`` is the
    limit that cut the text (None when nothing was cut). ``partial_line`` is True when the only
    kept line is itself cut (the first line for a head, the last line for a tail).
    """

    content: str
    truncated: bool
    truncated_by: TruncatedBy | None
    total_lines: int
    total_bytes: int
    output_lines: int
    output_bytes: int
    partial_line: bool = False


def printable(text: str) -> str:
    """``text`` as valid Unicode: a byte that was not UTF-8 (kept by ``surrogateescape`` as
    U+DC80..U+DCFF) becomes its ``\\xNN`` escape, any other lone surrogate U+FFFD. ``text``
    itself when it has none (the usual case, checked at C speed)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join(_printable(char) for char in text)
    return text


def _printable(char: str) -> str:
    if "\udc80" <= char <= "\udcff":
        return f"\\x{ord(char) - 0xDC00:02x}"
    return "\ufffd" if "\ud800" <= char <= "\udfff" else char


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` without their ``\\n``; a trailing newline adds no empty line."""
    if not text:
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


def utf8_prefix(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` that is at most ``max_bytes`` bytes of UTF-8."""
    return text.encode("utf-8")[: max(max_bytes, 0)].decode("utf-8", errors="ignore")


def utf8_suffix(text: str, max_bytes: int) -> str:
    """The longest suffix of ``text`` that is at most ``max_bytes`` bytes of UTF-8."""
    data = text.encode("utf-8")
    if max_bytes <= 0:
        return ""
    return data[-max_bytes:].decode("utf-8", errors="ignore")


def format_size(size: int) -> str:
    """A short human-readable size: ``512B``, ``50.0KB``, ``9.5MB``."""
    if size < 1024:
        return f"{size}B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f}KB"
    return f"{size / (1024 * 1024):.1f}MB"


def truncate_head(
    text: str, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> Truncation:
    """Keep the first whole lines of ``text`` that fit both limits (see the module docstring)."""
    return _truncate(text, max_lines, max_bytes, from_end=False)


def head_with_note(text: str) -> str:
    """``text`` kept from its start within the default limits, with a note of what was shown
    when anything was cut (what MCP tool results and resources pass on)."""
    cut = truncate_head(text)
    if not cut.truncated:
        return text
    return (f"{cut.content}\n\n[Output truncated: {cut.output_lines} of {cut.total_lines} lines "
            f"({format_size(cut.total_bytes)}) shown, {format_size(DEFAULT_MAX_BYTES)} limit]")


def truncate_tail(
    text: str, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> Truncation:
    """Keep the last whole lines of ``text`` that fit both limits (see the module docstring)."""
    return _truncate(text, max_lines, max_bytes, from_end=True)


def _truncate(text: str, max_lines: int, max_bytes: int, *, from_end: bool) -> Truncation:
    text = printable(text)
    lines = split_lines(text)
    total_lines = len(lines)
    total_bytes = len(text.encode("utf-8"))
    body_bytes = total_bytes - 1 if text.endswith("\n") else total_bytes
    if total_lines <= max_lines and body_bytes <= max_bytes:
        return Truncation(text, False, None, total_lines, total_bytes, total_lines, total_bytes)

    ordered = reversed(lines) if from_end else iter(lines)
    kept_lines = 0
    kept_bytes = 0
    truncated_by: TruncatedBy = "lines"
    for line in ordered:
        if kept_lines >= max_lines:
            truncated_by = "lines"
            break
        size = len(line.encode("utf-8")) + (1 if kept_lines else 0)
        if kept_bytes + size > max_bytes:
            truncated_by = "bytes"
            break
        kept_bytes += size
        kept_lines += 1

    if kept_lines == 0:
        # A single line is over the byte limit on its own: keep the part of it that fits.
        cut = utf8_suffix(lines[-1], max_bytes) if from_end else utf8_prefix(lines[0], max_bytes)
        return Truncation(
            cut, True, "bytes", total_lines, total_bytes, 1, len(cut.encode("utf-8")), True
        )
    kept = lines[total_lines - kept_lines :] if from_end else lines[:kept_lines]
    return Truncation(
        "\n".join(kept), True, truncated_by, total_lines, total_bytes, kept_lines, kept_bytes
    )


def with_note(text: str, note: str) -> str:
    """``note`` after the output, separated by a blank line (just ``note`` if no output)."""
    body = text.rstrip("\n")
    return f"{body}\n\n{note}" if body else note
