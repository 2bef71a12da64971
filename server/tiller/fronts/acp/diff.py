"""ACP ``diff`` tool-call content from the unified diffs Tiller's file tools report.

An ACP diff is ``{type: "diff", path, oldText, newText}``: two texts, not a patch. Tiller's
``write``/``edit`` results (and the permission preview) carry a unified diff, so the texts are
rebuilt honestly from it:

* with a *snapshot* of the file taken right before the call (``None``: the file did not exist),
  the diff is applied to the snapshot; if every context and removed line matches, ``oldText`` is
  the snapshot and ``newText`` the whole file after the change;
* otherwise (no snapshot, or the file changed in between so the diff does not apply), each hunk
  becomes one diff whose texts are that hunk's old and new side (context lines included): exactly
  what the tool said it changed, nothing guessed.

The diffs come from ``tiller.tools.files.unified_diff``: lines split on ``\\n`` only, a missing
final newline marked by ``\\ No newline at end of file``, and ``edit`` diffs compare the text with
its BOM dropped and CRLF read as LF, so the snapshot is also tried in that normalised form.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Hunk", "apply_hunks", "diff_contents", "parse_hunks"]

_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class Hunk:
    """One hunk: ``old_start`` as in its header (for an empty old side, the line it follows),
    and the lines of each side with their line ends."""

    old_start: int
    old_count: int
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)


def _split_lines(text: str) -> list[str]:
    """``text`` split after each ``\\n`` only (``\\r`` and other breaks stay inside lines)."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def parse_hunks(diff: str) -> list[Hunk]:
    """The hunks of a unified diff (file headers skipped); [] for an empty or unparsable diff."""
    hunks: list[Hunk] = []
    last: tuple[list[str], ...] = ()
    for line in _split_lines(diff):
        match = _HEADER.match(line)
        if match:
            count = match.group(2)
            hunks.append(Hunk(int(match.group(1)), 1 if count is None else int(count)))
            last = ()
            continue
        if not hunks or not line:
            continue  # "--- a/x" / "+++ b/x" come before the first hunk
        hunk, marker, body = hunks[-1], line[0], line[1:]
        if marker == "\\":  # "\\ No newline at end of file": the previous line had no "\n"
            for side in last:
                side[-1] = side[-1].removesuffix("\n")
            continue
        sides = {" ": (hunk.old, hunk.new), "-": (hunk.old,), "+": (hunk.new,)}.get(marker, ())
        for side in sides:
            side.append(body)
        last = sides
    return hunks


def apply_hunks(text: str, hunks: list[Hunk]) -> str | None:
    """``text`` with ``hunks`` applied at their stated lines, or None if any context or removed
    line does not match exactly (no fuzz: a stale snapshot must not produce a wrong text)."""
    lines = _split_lines(text)
    out: list[str] = []
    cursor = 0
    for hunk in hunks:
        start = hunk.old_start if hunk.old_count == 0 else hunk.old_start - 1
        if start < cursor or start + len(hunk.old) > len(lines):
            return None
        out.extend(lines[cursor:start])
        if lines[start : start + len(hunk.old)] != hunk.old:
            return None
        out.extend(hunk.new)
        cursor = start + len(hunk.old)
    out.extend(lines[cursor:])
    return "".join(out)


def _normalised(text: str) -> str:
    """``text`` as ``edit`` diffs it: BOM dropped, and CRLF read as LF if every line has it."""
    text = text.removeprefix("\ufeff")
    if "\r\n" in text and text.count("\r\n") == text.count("\n"):
        text = text.replace("\r\n", "\n")
    return text


def diff_contents(path: str, diff: str, snapshot: str | None, *, have_snapshot: bool) -> list[
    dict[str, Any]
]:
    """ACP diff contents for ``diff`` of the file at ``path`` (absolute).

    ``have_snapshot`` says whether ``snapshot`` (the file's text before the change; None when it
    did not exist) was taken. Returns one whole-file diff when the diff applies to the snapshot,
    else one diff per hunk (without ``oldText`` for a diff from ``/dev/null``: a new file);
    [] for an empty diff."""
    hunks = parse_hunks(diff)
    if not hunks:
        return []
    if have_snapshot:
        candidates = [snapshot or ""]
        if snapshot is not None and _normalised(snapshot) != snapshot:
            candidates.append(_normalised(snapshot))
        for before in candidates:
            after = apply_hunks(before, hunks)
            if after is not None:
                content: dict[str, Any] = {"type": "diff", "path": path, "newText": after}
                if snapshot is not None:
                    content["oldText"] = before
                return [content]
    created = diff.startswith("--- /dev/null")  # a new file: no old text at all
    return [
        {"type": "diff", "path": path, "newText": "".join(hunk.new),
         **({} if created else {"oldText": "".join(hunk.old)})}
        for hunk in hunks
    ]
