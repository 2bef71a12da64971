"""Tiller's front serves exactly the methods of the table: ``initialize`` and ``session/load``
itself, each other row with the ``Methods`` coroutine named after it, validating params with the
row's model; a handler without a row, a row without a handler, or a handler annotated with other
models than its row's fails here. ``initialize`` answers with the names as the table lists them."""

from __future__ import annotations

import inspect
import json
import typing
from typing import Any

import pytest

from tiller.config import load_config
from tiller.fronts.tiller.front import LAZY, OWN, SessionId, TillerFront
from tiller.fronts.tiller.handlers import Methods, handler_name
from tiller.fronts.tiller.hello import Initialize
from tiller.protocol import names
from tiller.protocol.methods import METHODS
from tiller.protocol.models import SessionParams


def config() -> Any:
    return load_config(["--no-session"], {})


def handler_problems(cls: type[Methods]) -> list[str]:
    """What does not match between ``cls``'s coroutine methods and the rows it serves."""
    handlers = {name for name, fn in inspect.getmembers(cls, inspect.iscoroutinefunction)
                if not name.startswith("_")}
    expected = {handler_name(method): method for method in LAZY}
    problems = [f"{name}: a handler without a row" for name in sorted(handlers - set(expected))]
    problems += [f"{expected[name]}: a row without a handler ({name})"
                 for name in sorted(set(expected) - handlers)]
    for name in sorted(handlers & set(expected)):
        row, hints = METHODS[expected[name]], typing.get_type_hints(getattr(cls, name))
        if (hints.get("params"), hints.get("return")) != (row.params, row.result):
            problems.append(f"{expected[name]}: {name} takes {hints.get('params')} and returns "
                            f"{hints.get('return')}, its row says {row.params} -> {row.result}")
    return problems


def test_handler_names_follow_the_wire_names() -> None:
    assert [handler_name(name) for name in ("session/new", "agent/followUp",
                                            "agent/setThinkingLevel", "models/list")] == [
        "session_new", "agent_follow_up", "agent_set_thinking_level", "models_list"]


def test_every_row_has_its_handler_and_every_handler_its_row() -> None:
    assert set(OWN) <= set(names.METHODS) and set(OWN).isdisjoint(LAZY)
    assert [*LAZY] == [name for name in names.METHODS if name not in OWN]
    assert handler_problems(Methods) == []


def test_a_stray_handler_or_a_wrong_annotation_is_found() -> None:
    class Drifted(Methods):
        async def agent_dance(self, params: SessionParams) -> None: ...

        async def models_list(self, params: SessionParams) -> Any:  # type: ignore[override]
            ...

    missing = type("Missing", (Methods,), {"commands_list": None})
    assert handler_problems(Drifted) == [
        "agent_dance: a handler without a row",
        f"models/list: models_list takes {SessionParams} and returns {Any}, its row says "
        f"{METHODS['models/list'].params} -> {METHODS['models/list'].result}",
    ]
    assert handler_problems(missing) == ["commands/list: a row without a handler (commands_list)"]


def test_dispatch_validates_with_the_rows_models() -> None:
    table = Methods(None, None, lambda: None).table(LAZY)  # type: ignore[arg-type]
    assert list(table) == list(LAZY)
    assert {name: params for name, (params, _) in table.items()} == {
        name: METHODS[name].params for name in LAZY}


def test_the_front_registers_exactly_the_tables_methods() -> None:
    served = TillerFront(config()).front.endpoint.methods
    assert set(served) == set(names.METHODS)


@pytest.mark.parametrize(("reader", "method", "raw"), [
    (Initialize, "initialize", {"capabilities": {"permissions": "maybe"}}),
    (SessionId, "session/load", {"sessionId": 5}),
])
def test_the_fronts_own_readers_refuse_what_the_rows_model_refuses(
    reader: Any, method: str, raw: dict[str, Any]
) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as by_the_row:
        METHODS[method].params.model_validate(raw)
    with pytest.raises(ValidationError) as by_the_reader:
        reader.model_validate(raw)
    assert by_the_reader.value.errors() == by_the_row.value.errors()


@pytest.mark.anyio
async def test_initialize_answers_with_the_names() -> None:
    result = json.loads(await TillerFront(config()).initialize(Initialize({})))
    capabilities = result["capabilities"]
    assert capabilities["methods"] == [*names.METHODS, *names.NOTIFICATIONS]
    assert capabilities["serverRequests"] == list(names.SERVER_REQUESTS)
    assert capabilities["events"] == list(names.EVENT_TYPES)
