"""Thinking levels against what a model takes: the level a run uses, and why it differs.

``effective_level(asked, info)`` is the level Tiller sends for a session set to ``asked`` on
the model ``info`` describes: ``asked`` itself when the model takes it or nothing is known of
the model; otherwise the nearest level the model takes (by position in ``THINKING_LEVELS``; a
tie goes to the weaker, cheaper one), with a note a user can read. A model that does not think
gets ``off`` and a note saying so. Imports neither pydantic nor an SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tiller.frozen import frozen
from tiller.modes import THINKING_LEVELS, ThinkingLevel

if TYPE_CHECKING:
    from tiller.providers.base import ModelInfo

__all__ = ["EffectiveLevel", "effective_level", "nearest_level"]


@frozen
class EffectiveLevel:
    """The level a run sends; ``note`` (None when it is the level asked for) says why not."""

    level: ThinkingLevel
    note: str | None = None


def nearest_level(asked: ThinkingLevel, levels: tuple[ThinkingLevel, ...]) -> ThinkingLevel:
    """The level of ``levels`` (not empty) nearest to ``asked``; ties go to the weaker."""
    rank = THINKING_LEVELS.index(asked)
    return min(levels, key=lambda level: (abs(THINKING_LEVELS.index(level) - rank),
                                          THINKING_LEVELS.index(level)))


def effective_level(asked: ThinkingLevel, info: ModelInfo | None) -> EffectiveLevel:
    """``asked`` mapped to what ``info``'s model takes (see the module docstring)."""
    levels = info.levels() if info is not None else None
    if info is None or levels is None or not levels or asked in levels:
        return EffectiveLevel(asked)
    if levels == ("off",):
        return EffectiveLevel("off", f"{info.id} does not think: thinking level {asked} has "
                                     "no effect on it")
    level = nearest_level(asked, levels)
    if asked == "off":
        note = f"{info.id} always thinks: it cannot be turned off, so it runs at {level}"
    else:
        note = (f"{info.id} has no {asked} thinking level: it runs at {level} "
                f"(it takes {', '.join(levels)})")
    return EffectiveLevel(level, note)
