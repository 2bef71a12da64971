"""The built-in catalog of Anthropic's models: what Tiller assumes when ``GET /v1/models`` has
not told it (or cannot: a proxy without the endpoint), and the prices, which no endpoint gives.

Checked against Anthropic's models overview, pricing and deprecation pages on ``CHECKED``
(USD per million tokens; ``cache_write`` is the 5-minute write, ``cache_write_1h`` the 1-hour
one). Retired models are left out; ``claude-opus-4-5`` is deprecated (retiring 2027-01-22).
``claude-haiku-5-5`` is priced for prompts up to 100,000 tokens (Anthropic bills longer ones
at five times that). The models endpoint's facts (context window, output limit, thinking and
effort capabilities, lifecycle) replace these when known; the config file's ``[[models]]``
replace both. Imports nothing but ``tiller.providers.base``.
"""

from __future__ import annotations

from typing import Literal

from tiller.modes import THINKING_LEVELS, ThinkingLevel
from tiller.providers.base import Lifecycle, ModelCost, ModelInfo

__all__ = ["ANTHROPIC_DEFAULT_MODEL", "ANTHROPIC_MODELS", "CHECKED"]

CHECKED = "2026-12-01"
ANTHROPIC_DEFAULT_MODEL = "claude-sonnet-5-5"

_ALL: tuple[ThinkingLevel, ...] = THINKING_LEVELS
_ALWAYS_ON: tuple[ThinkingLevel, ...] = THINKING_LEVELS[1:]
_NO_XHIGH: tuple[ThinkingLevel, ...] = tuple(level for level in THINKING_LEVELS
                                              if level != "xhigh")
_M = 1_000_000


def _model(model_id: str, line: str, window: int, output: int, cost: ModelCost,
           levels: tuple[ThinkingLevel, ...], shape: Literal["adaptive", "budget"] = "adaptive",
           created: str | None = None, lifecycle: Lifecycle = "active",
           deprecated_at: str | None = None, retires_at: str | None = None) -> ModelInfo:
    return ModelInfo(
        "anthropic", model_id, window, output, cost, True, levels, shape, line=line,
        created=created, lifecycle=lifecycle, deprecated_at=deprecated_at,
        retires_at=retires_at, checked=CHECKED,
    )


ANTHROPIC_MODELS: tuple[ModelInfo, ...] = (
    _model("claude-fable-5-2", "fable", _M, 128_000, ModelCost(8, 40, 0.20, 10, 16),
           _ALWAYS_ON, created="2026-11-09"),
    _model("claude-fable-5-1", "fable", _M, 128_000, ModelCost(10, 50, 0.25, 12.5, 20),
           _ALWAYS_ON),
    _model("claude-opus-5-5", "opus", _M, 128_000, ModelCost(4, 20, 0.20, 5, 8), _ALWAYS_ON),
    _model("claude-opus-5", "opus", _M, 128_000, ModelCost(5, 25, 0.50, 6.25, 10), _ALL,
           created="2026-07-24"),
    _model("claude-sonnet-5-5", "sonnet", _M, 128_000, ModelCost(2, 10, 0.10, 2.5, 4), _ALL),
    _model("claude-sonnet-5", "sonnet", _M, 128_000, ModelCost(2, 10, 0.20, 2.5, 4), _ALL,
           created="2026-06-30"),
    _model("claude-haiku-5-5", "haiku", _M, 128_000, ModelCost(0.10, 0.50, 0.01, 0.125, 0.20),
           _ALL),
    _model("claude-opus-4-8", "opus", _M, 128_000, ModelCost(5, 25, 0.50, 6.25, 10), _ALL),
    _model("claude-sonnet-4-6", "sonnet", _M, 64_000, ModelCost(3, 15, 0.30, 3.75, 6),
           _NO_XHIGH),
    _model("claude-haiku-4-5", "haiku", 200_000, 64_000, ModelCost(1, 5, 0.10, 1.25, 2), _ALL,
           "budget", created="2025-10-01"),
    _model("claude-opus-4-5", "opus", 200_000, 64_000, ModelCost(5, 25, 0.50, 6.25, 10), _ALL,
           "budget", created="2025-11-01", lifecycle="deprecated", deprecated_at="2026-11-23",
           retires_at="2027-01-22"),
)
"""Newest first within each line."""
