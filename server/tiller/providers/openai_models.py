"""What Tiller knows of OpenAI's models: the built-in catalogue and the reasoning efforts each
model accepts.

OpenAI's ``GET /v1/models`` says only which ids exist, so prices, windows and efforts come from
here. Checked on ``CHECKED`` against OpenAI's model pages and pricing page
(developers.openai.com) and the ``openai`` SDK 3.57's ``ChatModel`` and ``ReasoningEffort``.
Prices are the standard tier for prompts of up to 272K input tokens (longer prompts cost twice
the input and 1.5 times the output rate; that is not modelled); a cache write is the 30-minute
one (1.25 times the input rate).

Thinking levels map to ``reasoning.effort`` (``reasoning_effort`` on Chat Completions): ``off``
is ``none``, every other level has the effort of the same name. A model that lacks an effort
gets the nearest one it accepts (``effort_for``): GPT-6 Astra and the Sol models from 6.1 on
refuse ``none``, so ``off`` is ``low`` there.
"""

from __future__ import annotations

import re

from tiller.providers.base import ModelCost, ModelInfo

__all__ = [
    "CHECKED",
    "DEFAULT_MODEL",
    "EFFORT_ORDER",
    "OPENAI_MODELS",
    "accepted_efforts",
    "effort_for",
    "level_effort",
    "model_family",
    "reasons",
]

CHECKED = "2026-12-01"
DEFAULT_MODEL = "gpt-6.2-sol"
"""OpenAI's own advice for most API work ("start with GPT-6.2 Sol at medium effort")."""

EFFORT_ORDER = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
"""Every ``ReasoningEffort`` of the SDK, least effort first (``effort_for`` measures in it)."""

_FROM_NONE = ("none", "low", "medium", "high", "xhigh", "max")
_FROM_LOW = ("low", "medium", "high", "xhigh", "max")
_TO_XHIGH = ("none", "low", "medium", "high", "xhigh")

_WINDOW, _OUTPUT = 1_050_000, 128_000


def _model(id: str, input: float, cached: float, write: float, output: float) -> ModelInfo:
    return ModelInfo("openai", id, _WINDOW, _OUTPUT, ModelCost(input, output, cached, write), True)


OPENAI_MODELS: tuple[ModelInfo, ...] = (
    _model("gpt-6.2-sol", 2.00, 0.10, 2.50, 10.00),
    _model("gpt-6.2-astra", 8.00, 0.40, 10.00, 40.00),
    _model("gpt-6.1-sol", 2.00, 0.10, 2.50, 10.00),
    _model("gpt-6.1-terra", 1.00, 0.05, 1.25, 5.00),
    _model("gpt-6-astra", 10.00, 1.00, 12.50, 50.00),
    _model("gpt-6-sol", 2.00, 0.20, 2.50, 10.00),
    _model("gpt-6-luna", 0.10, 0.01, 0.125, 0.50),
    _model("gpt-5.6-sol", 4.00, 0.40, 5.00, 20.00),
    _model("gpt-5.6-terra", 2.00, 0.20, 2.50, 12.00),
    _model("gpt-5.6-luna", 0.20, 0.02, 0.25, 1.20),
    _model("gpt-5.5", 5.00, 0.50, 0.0, 30.00),
)
"""USD per million tokens: input, cached input, cache write, output (in ``ModelCost`` order)."""

_EFFORTS: dict[str, tuple[str, ...]] = {
    "gpt-6.2-sol": _FROM_LOW, "gpt-6.2-astra": _FROM_LOW, "gpt-6.1-sol": _FROM_LOW,
    "gpt-6-astra": _FROM_LOW,
    "gpt-6.1-terra": _FROM_NONE, "gpt-6-sol": _FROM_NONE, "gpt-6-luna": _FROM_NONE,
    "gpt-5.6": _FROM_NONE, "gpt-5.6-sol": _FROM_NONE, "gpt-5.6-terra": _FROM_NONE,
    "gpt-5.6-luna": _FROM_NONE,
    "gpt-5.5": _TO_XHIGH, "gpt-5.4": _TO_XHIGH, "gpt-5.4-mini": _TO_XHIGH,
    "gpt-5.4-nano": _TO_XHIGH, "gpt-5.2": _TO_XHIGH,
    "gpt-5.1": ("none", "low", "medium", "high"),
    "gpt-5": ("minimal", "low", "medium", "high"), "gpt-5-mini": ("minimal", "low", "medium",
                                                                   "high"),
    "gpt-5-nano": ("minimal", "low", "medium", "high"),
    "o3": ("low", "medium", "high"), "o4-mini": ("low", "medium", "high"),
}
_NOT_REASONING = re.compile(r"gpt-4|gpt-3\.5|chatgpt-|gpt-5(\.\d+)?-chat")
_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def model_family(model: str) -> str:
    """``model`` without a snapshot date (``gpt-5.5-2026-04-23`` is ``gpt-5.5``): replies of one
    family can carry each other's reasoning items. A ``provider/`` prefix (OpenRouter) stays."""
    return _SNAPSHOT.sub("", model)


def accepted_efforts(model: str) -> tuple[str, ...] | None:
    """The efforts ``model`` accepts (a family's, or the longest known prefix's), () for a model
    that does not reason, None when unknown."""
    family = model_family(model).rsplit("/", 1)[-1]
    if _NOT_REASONING.match(family):
        return ()
    for length in range(len(family), 0, -1):
        if (efforts := _EFFORTS.get(family[:length])) is not None:
            return efforts
    return None


def reasons(model: str) -> bool | None:
    """Whether ``model`` reasons (takes ``reasoning``): True, False, or None when unknown."""
    efforts = accepted_efforts(model)
    return None if efforts is None else bool(efforts)


def level_effort(level: str) -> str:
    """The effort a thinking level names: ``off`` is ``none``, every other level its own name."""
    return "none" if level == "off" else level


def effort_for(level: str, efforts: tuple[str, ...] | None) -> str:
    """The effort to send for thinking ``level``: its own (``level_effort``), or the nearest of
    ``efforts`` in ``EFFORT_ORDER`` (the lesser of two as near). ``efforts`` None: its own."""
    wanted = level_effort(level)
    if not efforts or wanted in efforts:
        return wanted
    rank = EFFORT_ORDER.index(wanted) if wanted in EFFORT_ORDER else len(EFFORT_ORDER)
    known = [effort for effort in efforts if effort in EFFORT_ORDER]
    if not known:
        return efforts[0]
    return min(known, key=lambda effort: (abs(EFFORT_ORDER.index(effort) - rank),
                                          EFFORT_ORDER.index(effort)))
