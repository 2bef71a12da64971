"""Front matter of Markdown files (prompt templates, skills): a tiny YAML subset, no dependency.

The subset: a first line ``---``, then ``key: value`` lines up to a closing ``---``. Values may
be bare or quoted (``"..."`` or ``'...'``); blank lines and ``#`` comments are skipped; indented
lines under a key with no value (a nested map or list, such as a skill's ``metadata:``) are
accepted and ignored (the key reads as ""), except that ``front_matter_lists`` reads a block
list (``- item`` lines) under such a key. Anything else is an error: the caller skips that
file, so a half-understood header never changes what a command says.
"""

from __future__ import annotations

import re

__all__ = ["FrontMatterError", "front_matter_lists", "parse_front_matter"]

_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)\s*:(?:\s+(.*))?$")


class FrontMatterError(ValueError):
    """The file has front matter this parser does not accept; the message says where."""


def parse_front_matter(text: str) -> tuple[dict[str, str], str]:
    """``(fields, body)``: a file without front matter is ``({}, text)``. Raises
    FrontMatterError for an unclosed block, a line that is not ``key: value``, a duplicate key
    or an unclosed quote."""
    fields, _lists, body = front_matter_lists(text)
    return fields, body


def front_matter_lists(text: str) -> tuple[dict[str, str], dict[str, list[str]], str]:
    """``(fields, lists, body)`` as ``parse_front_matter``, plus each key with no value whose
    indented lines are a block list (``  - item``, items bare or quoted) in ``lists``."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n") != "---":
        return {}, {}, text
    fields: dict[str, str] = {}
    lists: dict[str, list[str]] = {}
    nested_under: str | None = None
    for number, raw in enumerate(lines[1:], start=2):
        line = raw.rstrip("\r\n")
        if line.rstrip() == "---":
            return fields, lists, "".join(lines[number:])
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0] in " \t":
            if nested_under is None:
                raise FrontMatterError(f"line {number}: unexpected indentation")
            item = line.strip()
            if item.startswith("- "):
                lists.setdefault(nested_under, []).append(_scalar(item[2:].strip(), number))
            continue
        if nested_under is not None and line.startswith("- "):  # a list not indented
            lists.setdefault(nested_under, []).append(_scalar(line[2:].strip(), number))
            continue
        match = _KEY.match(line.rstrip())
        if match is None:
            raise FrontMatterError(f"line {number}: expected 'key: value', got {line!r}")
        key, value = match.group(1), (match.group(2) or "").strip()
        if key in fields:
            raise FrontMatterError(f"line {number}: duplicate key {key!r}")
        fields[key] = _scalar(value, number)
        nested_under = key if not value else None
    raise FrontMatterError("the front matter is not closed by a '---' line")


def _scalar(value: str, number: int) -> str:
    """A bare or quoted scalar; a bare value loses a trailing `` # comment``."""
    if value[:1] in ("'", '"'):
        quote = value[0]
        if len(value) < 2 or not value.endswith(quote):
            raise FrontMatterError(f"line {number}: unclosed quote")
        inner = value[1:-1]
        return inner.replace("''", "'") if quote == "'" else inner.replace('\\"', '"')
    return re.sub(r"\s+#.*$", "", value)
