"""``@frozen`` keeps what ``@dataclass(frozen=True)`` promised the classes that moved to it: fields
set once, no new names, no deletion, hashing by the compared fields; and what it does not do
(``slots``) it refuses. Importing ``tiller`` leaves pydantic without plugins, and its models
still validate."""

from __future__ import annotations

import copy
import pickle
import sys
from dataclasses import FrozenInstanceError, dataclass, field, replace

import pytest
from pydantic import BaseModel

from tiller.frozen import frozen


@frozen
class Point:
    x: int
    y: int = 0
    tags: tuple[str, ...] = ()
    note: str = field(default="", compare=False)


@frozen(kw_only=True)
class Derived:
    text: str
    length: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "length", len(self.text))


@frozen(eq=False)
class Handle:
    name: str


@frozen
class OwnHash:
    name: str

    def __hash__(self) -> int:
        return 7


@dataclass(frozen=True)
class StdPoint:
    x: int
    y: int = 0
    tags: tuple[str, ...] = ()
    note: str = field(default="", compare=False)


def test_a_set_field_cannot_be_assigned_deleted_or_joined_by_a_new_name() -> None:
    point = Point(1, 2)
    with pytest.raises(FrozenInstanceError, match="'x'"):
        point.x = 3  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        del point.y  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError, match="'extra'"):
        point.extra = 1  # type: ignore[attr-defined]
    assert (point.x, point.y) == (1, 2) and not hasattr(point, "extra")


def test_it_hashes_and_compares_as_a_frozen_dataclass() -> None:
    assert hash(Point(1, 2, ("a",), note="n")) == hash(StdPoint(1, 2, ("a",), note="other"))
    assert Point(1, 2, note="a") == Point(1, 2, note="b") and Point(1, 2) != Point(2, 1)
    assert len({Point(1), Point(1), Point(2)}) == 2
    assert repr(Point(1)) == "Point(x=1, y=0, tags=(), note='')"


def test_eq_false_hashes_by_identity_and_an_own_hash_is_kept() -> None:
    one, two = Handle("a"), Handle("a")
    assert one != two and hash(one) != hash(two) and len({one, two}) == 2
    assert hash(OwnHash("a")) == 7


def test_post_init_replace_copy_and_pickle_work_as_before() -> None:
    derived = Derived(text="four")
    assert derived.length == 4
    with pytest.raises(FrozenInstanceError):
        derived.length = 5  # type: ignore[misc]
    moved = replace(Point(1, 2), y=5)
    assert moved == Point(1, 5)
    assert copy.deepcopy(moved) == moved and pickle.loads(pickle.dumps(moved)) == moved
    with pytest.raises(TypeError):
        Derived("positional")  # type: ignore[misc]  # kw_only reached dataclass


def test_what_it_does_not_do_is_refused() -> None:
    with pytest.raises(TypeError, match="got slots"):
        frozen(slots=True)
    with pytest.raises(TypeError, match="got frozen"):
        frozen(frozen=True)
    with pytest.raises(TypeError, match="got order"):
        frozen(order=True)


def test_pydantic_finds_no_plugins_and_its_models_still_validate() -> None:
    loader = sys.modules["pydantic.plugin._loader"]
    assert loader.get_plugins() == ()

    class Model(BaseModel):
        count: int

    assert Model.model_validate({"count": "3"}).count == 3
    assert type(Model.__pydantic_validator__).__name__ == "SchemaValidator"  # not pluggable


@frozen(repr=False)
class Quiet:
    secret: str
    shown: int = field(default=0, repr=False)


@frozen
class OwnRepr:
    name: str

    def __repr__(self) -> str:
        return "mine"


def test_repr_and_eq_are_a_frozen_dataclasses() -> None:
    nan = float("nan")
    assert Point(1, 2, (nan,)) != Point(1, 2, (float("nan"),))
    assert StdPoint(1, 2, (nan,)) == StdPoint(1, 2, (nan,))
    assert Point(1, 2, (nan,)) == Point(1, 2, (nan,))  # the same object: equal, as in a tuple
    assert Point(1) != StdPoint(1) and Point(1).__eq__(StdPoint(1)) is NotImplemented
    assert repr(Derived(text="ab")) == "Derived(text='ab', length=2)"
    assert repr(OwnRepr("a")) == "mine" and repr(Quiet("s")).startswith("<")
    assert repr(Handle("h")) == "Handle(name='h')"
