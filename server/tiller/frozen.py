"""``@frozen``: a dataclass whose fields are set once, as ``@dataclass(frozen=True)`` makes one,
made for less at start-up.

Python 3.11's ``dataclass`` compiles each method it generates on its own (~60 µs each); a
frozen class gets six (``__init__``, ``__repr__``, ``__eq__``, ``__setattr__``,
``__delattr__``, ``__hash__``). Tiller creates ~60 frozen classes before its first session is
ready: ~25 ms of every start (README, Performance). ``@frozen`` lets ``dataclass`` compile only
``__init__`` and gives the class the other five, written once here, with a frozen dataclass's
behaviour:

- assigning a field that is set, or any name that is not a field, raises
  ``FrozenInstanceError``, as does deleting one (``__init__`` sets each field once; a
  ``__post_init__`` sets a derived one with ``object.__setattr__``, as in a frozen dataclass);
- ``repr`` shows the fields (``field(repr=False)`` leaves one out); instances of the same class
  are equal when their compared fields are, and hash by them;
- a method the class defines itself is kept (a ``__hash__`` too); ``eq=False`` keeps
  ``object``'s equality and hash, ``repr=False`` its repr.

Type checkers see a frozen dataclass (``dataclass_transform``). Options: ``init``, ``repr``,
``eq``, ``kw_only``, ``match_args``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, FrozenInstanceError, dataclass, field, fields
from typing import Any, TypeVar, cast, dataclass_transform, overload

__all__ = ["frozen"]

_C = TypeVar("_C", bound=type)

_OPTIONS = frozenset({"init", "repr", "eq", "kw_only", "match_args"})


@overload
@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def frozen(cls: _C, /) -> _C: ...


@overload
def frozen(cls: None = None, /, **options: Any) -> Callable[[_C], _C]: ...


def frozen(cls: _C | None = None, /, **options: Any) -> _C | Callable[[_C], _C]:
    """``@frozen`` or ``@frozen(**options)`` (module docstring)."""
    if not _OPTIONS.issuperset(options):
        raise TypeError(f"@frozen takes only {', '.join(sorted(_OPTIONS))}: got "
                        f"{', '.join(sorted(set(options) - _OPTIONS))}")
    eq, show = options.pop("eq", True), options.pop("repr", True)

    def make(cls: _C) -> _C:
        own = vars(cls)
        own_hash = own.get("__hash__", MISSING)
        made: Any = dataclass(cls, eq=False, repr=False, **options)
        made.__setattr__ = _set_once
        made.__delattr__ = _no_delete
        every = fields(made)
        if show and "__repr__" not in own:
            made.__repr__ = _repr_of(tuple(f.name for f in every if f.repr))
        if eq:
            compared = tuple(f.name for f in every if f.compare)
            if "__eq__" not in own:
                made.__eq__ = _eq_of(compared)
            if own_hash is MISSING or (own_hash is None and "__eq__" in own):
                hashed = tuple(f.name for f in every
                               if (f.compare if f.hash is None else f.hash))
                made.__hash__ = _hash_of(hashed)
        return cast("_C", made)

    return make if cls is None else make(cls)


def _set_once(self: Any, name: str, value: Any) -> None:
    if name in self.__dict__ or name not in self.__dataclass_fields__:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")
    object.__setattr__(self, name, value)


def _no_delete(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _repr_of(names: tuple[str, ...]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{type(self).__qualname__}({shown})"

    return __repr__


def _eq_of(names: tuple[str, ...]) -> Callable[[Any, object], bool]:
    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return [getattr(self, name) for name in names] == [getattr(other, name) for name in names]

    return __eq__


def _hash_of(names: tuple[str, ...]) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash(tuple([getattr(self, name) for name in names]))

    return __hash__
