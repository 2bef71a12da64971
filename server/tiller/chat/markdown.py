"""Markdown replies and coloured diffs for ``tiller chat`` on a colour terminal (``rich``).

``MarkdownBlocks`` takes a reply's streamed text and gives back its finished blocks (a block
ends at a blank line outside a code fence), each rendered by ``render``: headings, lists, code
blocks, emphasis, as ANSI text ending with a newline; what is not finished yet is its
``pending`` text, which the renderer shows raw meanwhile (``screen_rows`` says how many rows
of the terminal that takes, to erase it). ``diff_style`` names the style of a
unified diff's line. Plain output (not a terminal, or NO_COLOR) uses neither.
"""

from __future__ import annotations

import io

from rich.console import Console
from rich.markdown import Markdown

__all__ = ["MarkdownBlocks", "diff_style", "render", "screen_rows"]

FENCES = ("```", "~~~")


def render(text: str, width: int) -> str:
    """``text`` (Markdown) as ANSI-styled lines ``width`` columns wide at most."""
    buffer = io.StringIO()
    console = Console(
        file=buffer, force_terminal=True, color_system="standard", width=max(width, 20),
        emoji=False, highlight=False,
    )
    console.print(Markdown(text, code_theme="ansi_dark"))
    lines = [line.rstrip() for line in buffer.getvalue().split("\n")]
    return "\n".join(lines).strip("\n") + "\n"  # no blank lines around the block


class MarkdownBlocks:
    """Splits a streamed reply into Markdown blocks; ``feed`` and ``flush`` return the finished
    ones, rendered ``width`` columns wide, separated by a blank line as Markdown shows them."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.pending = ""  # text not yet part of a finished block
        self.shown = 0  # blocks rendered so far in this reply

    def feed(self, delta: str) -> list[str]:
        self.pending += delta
        done: list[str] = []
        while (end := self._block_end()) is not None:
            block, self.pending = self.pending[:end], self.pending[end:].lstrip("\n")
            if block.strip():
                done.append(self._render(block))
        return done

    def flush(self) -> list[str]:
        block, self.pending = self.pending, ""
        done = [self._render(block)] if block.strip() else []
        self.shown = 0
        return done

    def _render(self, block: str) -> str:
        text = render(block, self.width)
        self.shown += 1
        return text if self.shown == 1 else "\n" + text

    def _block_end(self) -> int | None:
        """Where the first finished block ends (at a blank line outside a fence), or None."""
        fenced, offset = False, 0
        for line in self.pending.splitlines(keepends=True):
            if not line.endswith("\n"):
                return None
            if line.lstrip().startswith(FENCES):
                fenced = not fenced
            elif not fenced and not line.strip() and offset:
                return offset
            offset += len(line)
        return None


def diff_style(line: str) -> tuple[str, ...]:
    """The style of one line of a unified diff: headers bold, hunks cyan, +green, -red."""
    if line.startswith(("+++", "---")):
        return ("bold",)
    if line.startswith("@@"):
        return ("cyan",)
    return {"+": ("green",), "-": ("red",)}.get(line[:1], ())


def screen_rows(text: str, columns: int) -> int:
    """The terminal rows ``text`` fills, written from the start of a row, the cursor's row
    included (after a final newline, the empty row it moved to)."""
    columns = max(columns, 1)
    return sum(max(1, -(-len(line) // columns)) for line in text.split("\n"))
