"""``@frozen``: a dataclass whose fields are set once, as ``@dataclass(frozen=True)`` makes one,
made for less at start-up.

Python 3.11's ``dataclass`` compiles each method it generates on its own, and ``frozen=True``
adds three to a class (``__setattr__``, ``__delattr__``, ``__hash__``) and a longer ``__init__``.
Tiller creates ~60 frozen classes before its first session is ready: ~20 ms of every start
(README, Performance). ``@frozen`` makes a plain dataclass and gives it those three methods,
written once here:

- assigning a field that is set, or any name that is not a field, raises
  ``FrozenInstanceError``, as does deleting one (``__init__`` sets each field once; a
  ``__post_init__`` sets a derived one with ``object.__setattr__``, as in a frozen dataclass);
- with ``eq`` (the default) and no ``__hash__`` of its own, an instance hashes by its
  compared fields, as a frozen dataclass's does.

Type checkers see a frozen dataclass (``dataclass_transform``). ``slots=True`` is refused: use
``@dataclass(frozen=True, slots=True)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import FrozenInstanceError, dataclass, field, fields
from typing import Any, TypeVar, cast, dataclass_transform, overload

__all__ = ["frozen"]

_C = TypeVar("_C", bound=type)


@overload
@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def frozen(cls: _C, /) -> _C: ...


@overload
def frozen(cls: None = None, /, **options: Any) -> Callable[[_C], _C]: ...


def frozen(cls: _C | None = None, /, **options: Any) -> _C | Callable[[_C], _C]:
    """``@frozen`` or ``@frozen(**options)``: ``options`` are ``dataclass``'s but ``frozen``."""
    if "frozen" in options or options.get("slots"):
        raise TypeError("@frozen takes dataclass's options but frozen and slots")

    def make(cls: _C) -> _C:
        made: Any = dataclass(cls, **options)
        made.__setattr__ = _set_once
        made.__delattr__ = _no_delete
        if "__hash__" in vars(made) and made.__hash__ is None:  # eq, no __hash__ of its own
            names = tuple(f.name for f in fields(made) if (f.compare if f.hash is None else f.hash))
            made.__hash__ = _hash_of(names)
        return cast("_C", made)

    return make if cls is None else make(cls)


def _set_once(self: Any, name: str, value: Any) -> None:
    if name in self.__dict__ or name not in self.__dataclass_fields__:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")
    object.__setattr__(self, name, value)


def _no_delete(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _hash_of(names: tuple[str, ...]) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash(tuple([getattr(self, name) for name in names]))

    return __hash__
