"""Diagnostics, and which of them an edit introduced.

A file's diagnostics after an edit are compared with its diagnostics before it: a problem is new
when no problem of the same severity, message, source and code was there before, at the same
place once the edit's line shift is accounted for (the tool's unified diff, when its result
carries one, maps old lines to new) or, failing that, anywhere else in the file (the nearest
one is taken). Only errors and warnings count; information and hints are never reported.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Literal

from tiller.frozen import frozen

__all__ = [
    "REPORTED",
    "Diagnostic",
    "LineMap",
    "Severity",
    "line_map",
    "new_problems",
    "report",
]

Severity = Literal["error", "warning", "information", "hint"]
REPORTED: tuple[Severity, ...] = ("error", "warning")
"""The severities a report shows (and counts)."""
SHOWN = 10
"""At most this many problems are listed in a report; the rest are counted."""
MESSAGE_LIMIT = 300
"""Characters of a message shown (on one line)."""
PAIRS_LIMIT = 100_000
"""Past this many (old, new) candidate pairs of one kind, problems are paired in line order."""

LineMap = Callable[[int], int | None]
"""An old line number -> its new one; None for a line the edit removed or rewrote."""


@frozen
class Diagnostic:
    """One problem in a file: 1-based ``line`` and ``column`` (None: unknown)."""

    line: int
    message: str
    severity: Severity = "error"
    column: int | None = None
    source: str | None = None
    code: str | None = None

    @property
    def kind(self) -> tuple[str, str, str | None, str | None]:
        """What makes two problems the same one, wherever they are."""
        return self.severity, " ".join(self.message.split()), self.source, self.code


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def line_map(diff: str | None) -> LineMap:
    """The old -> new line numbers of a unified diff of one file (the identity without one):
    lines outside its hunks move by the lines added and removed above them; a context line
    inside a hunk keeps its place in it; a removed line maps to None."""
    moved: dict[int, int | None] = {}
    shifts: list[tuple[int, int]] = []  # (first old line after a hunk, shift from there on)
    for header, body in _hunks(diff or ""):
        old, new = header
        for line in body:
            mark = line[:1]
            if mark == " ":
                moved[old], old, new = new, old + 1, new + 1
            elif mark == "-":
                moved[old], old = None, old + 1
            elif mark == "+":
                new += 1
        shifts.append((old, new - old))

    def mapped(line: int) -> int | None:
        if line in moved:
            return moved[line]
        shift = 0
        for start, after in shifts:
            if line >= start:
                shift = after
        return line + shift

    return mapped


def _hunks(diff: str) -> list[tuple[tuple[int, int], list[str]]]:
    """Each hunk's (old start, new start) and its lines."""
    hunks: list[tuple[tuple[int, int], list[str]]] = []
    for line in diff.splitlines():
        if match := _HUNK.match(line):
            old, old_count, new, new_count = match.groups()
            # An empty side ("-0,0") starts after line 0: its first line is 1.
            hunks.append(((max(int(old), 1) if old_count != "0" else int(old) + 1,
                           max(int(new), 1) if new_count != "0" else int(new) + 1), []))
        elif hunks and line[:1] in (" ", "-", "+") and not line.startswith(("---", "+++")):
            hunks[-1][1].append(line)
        elif hunks and line == "":
            hunks[-1][1].append(" ")
    return hunks


def new_problems(
    before: Sequence[Diagnostic], after: Sequence[Diagnostic], moved: LineMap | None = None,
) -> list[Diagnostic]:
    """The errors and warnings of ``after`` not accounted for by one of ``before`` (see the
    module docstring), in ``after``'s order. ``moved`` maps ``before``'s lines to ``after``'s."""
    shift = moved or (lambda line: line)
    old_by_kind: dict[tuple[str, str, str | None, str | None], list[int]] = defaultdict(list)
    for problem in before:
        if problem.severity in REPORTED:
            place = shift(problem.line)
            old_by_kind[problem.kind].append(problem.line if place is None else place)
    new_by_kind: dict[tuple[str, str, str | None, str | None], list[int]] = defaultdict(list)
    for index, problem in enumerate(after):
        if problem.severity in REPORTED:
            new_by_kind[problem.kind].append(index)
    fresh: list[int] = []
    for kind, indexes in new_by_kind.items():
        fresh += _unpaired([after[i].line for i in indexes], old_by_kind.get(kind, []), indexes)
    return [after[index] for index in sorted(fresh)]


def _unpaired(new_lines: list[int], old_lines: list[int], indexes: list[int]) -> list[int]:
    """The ``indexes`` (one per new line) left once each old line is paired with the nearest
    new line still free, the closest pairs first (equal places pair first)."""
    if not old_lines:
        return indexes
    if len(new_lines) * len(old_lines) > PAIRS_LIMIT:
        order = sorted(range(len(new_lines)), key=lambda i: new_lines[i])
        return [indexes[i] for i in order[len(old_lines):]]
    pairs = sorted((abs(new - old), i, j) for i, new in enumerate(new_lines)
                   for j, old in enumerate(old_lines))
    taken_new: set[int] = set()
    taken_old: set[int] = set()
    for _distance, i, j in pairs:
        if i not in taken_new and j not in taken_old:
            taken_new.add(i)
            taken_old.add(j)
    return [indexes[i] for i in range(len(new_lines)) if i not in taken_new]


def _count(problems: Sequence[Diagnostic]) -> str:
    """``2 errors, 1 warning``."""
    parts = []
    for severity in REPORTED:
        n = sum(1 for problem in problems if problem.severity == severity)
        if n:
            parts.append(f"{n} {severity}{'' if n == 1 else 's'}")
    return ", ".join(parts)


def _line(name: str, problem: Diagnostic) -> str:
    where = f"{name}:{problem.line}" + (f":{problem.column}" if problem.column else "")
    message = " ".join(problem.message.split())
    if len(message) > MESSAGE_LIMIT:
        message = message[: MESSAGE_LIMIT - 1] + "…"
    by = " ".join(part for part in (problem.source, problem.code) if part)
    return f"{where}: {problem.severity}: {message}" + (f" [{by}]" if by else "")


def report(found: Sequence[tuple[str, Sequence[Diagnostic]]], origin: str) -> str | None:
    """The text appended to a tool result: the new problems of each (shown name, problems)
    file, errors first, at most ``SHOWN`` listed and the rest counted; None when there are
    none. ``origin`` says who reported them (``the editor``)."""
    rows = [(name, problem) for name, problems in found for problem in problems]
    if not rows:
        return None
    rows.sort(key=lambda row: (REPORTED.index(row[1].severity), row[0], row[1].line))
    every = [problem for _name, problem in rows]
    lines = [f"New problems after this change ({origin}; they were not there before it): "
             f"{_count(every)}."]
    lines += [_line(name, problem) for name, problem in rows[:SHOWN]]
    if len(rows) > SHOWN:
        lines.append(f"… and {len(rows) - SHOWN} more ({_count(every[SHOWN:])}).")
    return "\n".join(lines)
