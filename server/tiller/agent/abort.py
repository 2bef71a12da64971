"""``AbortSignal``: one run's abort switch, shared by the loop and tool execution."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio

__all__ = ["AbortSignal"]


class AbortSignal:
    """One run's abort switch. ``scope()`` opens a cancel scope that ``abort()`` cancels."""

    def __init__(self) -> None:
        self._aborted = False
        self._scopes: set[anyio.CancelScope] = set()

    @property
    def aborted(self) -> bool:
        return self._aborted

    def abort(self) -> None:
        """Cancel every open scope and every scope opened from now on. Idempotent."""
        self._aborted = True
        for scope in list(self._scopes):
            scope.cancel()

    @contextmanager
    def scope(self) -> Iterator[anyio.CancelScope]:
        scope = anyio.CancelScope()
        if self._aborted:
            scope.cancel()
        self._scopes.add(scope)
        try:
            with scope:
                yield scope
        finally:
            self._scopes.discard(scope)
