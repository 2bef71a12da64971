"""Regular expressions a model writes, in Python's syntax (``process_output``'s ``waitFor``,
``grep``'s pattern when ripgrep is not installed), searched so that no pattern can stall the
server.

They run on the ``regex`` engine, not ``re``. ``re`` never lets another thread run while it
matches, so a pattern that backtracks without end (``^(a|a)*$`` on forty a's and a b: 2**40
steps) would hold the whole server, every session and request, for as long as it runs, worker
thread or not. ``regex`` reads the same syntax, avoids most such backtracking, lets other
threads run while it matches, and stops a search at ``SEARCH_SECONDS``: the call then fails
with a ToolError saying so. Imported when a pattern is first given (~20 ms).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tiller.errors import ToolError

if TYPE_CHECKING:
    import regex

__all__ = ["SEARCH_SECONDS", "ModelPattern"]

SEARCH_SECONDS = 2.0
"""Seconds one search may take before the pattern is refused as backtracking too much."""


class ModelPattern:
    """``source`` compiled (``literal``: matched as plain text; ``ignore_case``); ``name`` is
    what messages call it (``regex pattern``, ``waitFor pattern``). ToolError for a source
    that is not a regular expression."""

    def __init__(
        self, source: str, name: str, *, literal: bool = False, ignore_case: bool = False
    ) -> None:
        import regex

        self.source, self.name = source, name
        try:
            self._compiled: regex.Pattern[str] = regex.compile(
                regex.escape(source) if literal else source,
                regex.IGNORECASE if ignore_case else 0)
        except regex.error as exc:
            raise ToolError(f"Invalid {name} {source!r}: {exc}") from None

    def search(self, text: str) -> int | None:
        """Where the first match in ``text`` ends, or None; ToolError when the search takes
        more than ``SEARCH_SECONDS``. Other threads run meanwhile."""
        try:
            match = self._compiled.search(text, concurrent=True, timeout=SEARCH_SECONDS)
        except TimeoutError:
            raise ToolError(
                f"The {self.name} {self.source!r} took over {SEARCH_SECONDS:g} s on one search: it "
                "backtracks too much (nested repetition such as (a|a)* or (x+x+)+); give a "
                "simpler pattern") from None
        return None if match is None else match.end()
