"""``initialize``'s params are read without pydantic when they have the usual shape
(``tiller.fronts.tiller.front.Initialize``); whatever else a client sends goes through the pydantic
model (``initialize``'s row in ``tiller.protocol.methods``). Over every combination below, both
readings agree: the same values, or both refuse."""

from __future__ import annotations

import itertools
from typing import Any

from pydantic import ValidationError

from tiller.fronts.tiller.hello import Initialize
from tiller.protocol.methods import METHODS

InitializeParams = METHODS["initialize"].params

MISSING = object()
CHOICES: dict[str, list[Any]] = {
    "protocolVersion": [MISSING, None, 1, 2, True, 1.0, "1", -1],
    "deltaWindowMs": [MISSING, None, 0, 16, 16.5, 1000, 1000.5, -1, True, "16", 10**9],
    "clientInfo": [MISSING, None, {"name": "x"}, {"name": "x", "version": "1"},
                   {"name": "x", "version": None}, {}, {"name": 1}, {"name": "x", "extra": 1},
                   "x"],
    "capabilities": [MISSING, None, {}, {"permissions": True}, {"permissions": None},
                     {"permissions": "yes"}, {"permissions": 1}, {"fs": None}, {"fs": {}},
                     {"fs": {"readTextFile": True, "keepsUnsaved": False}},
                     {"fs": {"read_text_file": True}}, {"fs": {"readTextFile": "true"}},
                     {"terminal": True}, [], {"fs": []}],
    "": [MISSING, {"other": 1}, {"delta_window_ms": 5}],
}


def pydantic_reading(raw: dict[str, Any]) -> tuple[Any, ...] | str:
    try:
        params: Any = InitializeParams.model_validate(raw)
    except ValidationError:
        return "refused"
    return params.capabilities.dump(), params.protocol_version, params.delta_window_ms


def tiller_reading(raw: dict[str, Any]) -> tuple[Any, ...] | str:
    try:
        params = Initialize.model_validate(raw)
    except ValidationError:
        return "refused"
    return params.capabilities, params.protocol_version, params.delta_window_ms


def test_both_readings_agree_on_every_combination() -> None:
    plain = 0
    for values in itertools.product(*CHOICES.values()):
        raw: dict[str, Any] = {}
        for name, value in zip(CHOICES, values, strict=True):
            if value is not MISSING:
                raw.update(value) if name == "" else raw.__setitem__(name, value)
        assert tiller_reading(raw) == pydantic_reading(raw), raw
        plain += Initialize.plain(raw) is not None
    assert plain > 1000  # the pydantic-free reading is really the one used for usual params


def test_the_editors_params_are_read_without_pydantic() -> None:
    for raw in (
        {"clientInfo": {"name": "tiller.nvim", "version": "0.1"},
         "capabilities": {"permissions": True, "fs": {"readTextFile": True,
                                                      "writeTextFile": True,
                                                      "keepsUnsaved": False}}},
        {"protocolVersion": 1, "capabilities": {"permissions": True}, "deltaWindowMs": 0},
        {},
    ):
        assert Initialize.plain(raw) is not None, raw

