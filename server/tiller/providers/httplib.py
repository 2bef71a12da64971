"""The HTTP library under the providers (httpx2, with httpcore2 under it), imported once through
``load`` without ``importlib.metadata``.

Each of the two reads its own version when imported (``importlib.metadata.version``), and
importing ``importlib.metadata`` takes ~12 ms (it imports ``email``, ``zipfile``, ``csv``...):
a tenth of a first prompt's latency when the prompt comes at once, or 4% of spawn -> ready if
imported ahead (README, Performance). ``load`` imports them while ``importlib.metadata`` is a
stand-in whose ``version`` reads the ``Version:`` line of the distribution's ``METADATA`` in its
``.dist-info`` folder, found as ``importlib.metadata`` finds it (the first ``sys.path`` entry
holding one). Anything else asked of the stand-in, or a distribution it cannot find that way,
loads the real module and answers from it, so a thread importing ``importlib.metadata`` at the
same moment gets what it would have got. Once ``importlib.metadata`` is imported, ``load``
imports as anyone would.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

__all__ = ["dist_info_version", "load"]

_METADATA = "importlib.metadata"
_lock = threading.Lock()  # one load at a time
_real_lock = threading.RLock()  # the stand-in's swap for the real module


def load() -> None:
    """httpx2 and httpcore2 imported, now if not yet: call before the first ``import httpx2``
    (after it, an import is a lookup)."""
    if "httpx2" in sys.modules:
        return
    with _lock, _metadata_stand_in():
        import httpcore2  # noqa: F401
        import httpx2  # noqa: F401


def dist_info_version(name: str, listdir: Callable[[str], list[str]] = os.listdir) -> str | None:
    """The version of the installed distribution ``name`` from the ``METADATA`` of its
    ``.dist-info`` folder in the first ``sys.path`` entry that has one; None if there is none
    (another kind of install, or not installed). ``listdir`` lists a folder (the stand-in's
    lists each once for both lookups)."""
    wanted = _normalized(name)
    for entry in sys.path:
        try:
            names = listdir(entry or ".")
        except OSError:
            continue
        for folder in names:
            if not folder.endswith(".dist-info") or "-" not in folder:
                continue
            if _normalized(folder.split("-", 1)[0]) != wanted:
                continue
            try:
                with open(os.path.join(entry, folder, "METADATA"), encoding="utf-8") as file:
                    for line in file:
                        if line.startswith("Version:"):
                            return line.split(":", 1)[1].strip()
                        if not line.strip():
                            break  # the headers end at the first blank line
            except OSError:
                pass
            return None  # the first folder found is the one importlib.metadata would read
    return None


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


@contextmanager
def _metadata_stand_in() -> Iterator[None]:
    """``importlib.metadata`` is the stand-in (module docstring) inside the block, unless the
    real one is imported already."""
    if _METADATA in sys.modules:
        yield
        return
    import importlib

    stand_in = ModuleType(_METADATA, "Tiller's stand-in (tiller.providers.httplib).")

    def real() -> ModuleType:
        """The real module: imported now, in place of the stand-in, if not yet."""
        with _real_lock:
            if sys.modules.get(_METADATA) is stand_in:
                del sys.modules[_METADATA]
            return importlib.import_module(_METADATA)

    listdir = functools.cache(os.listdir)  # sys.path's folders, listed once for both lookups

    def version(name: str) -> str:
        found = dist_info_version(name, listdir)
        return found if found is not None else real().version(name)

    def attribute(name: str) -> Any:
        if name.startswith("__"):  # the import system's questions (``__path__``...)
            raise AttributeError(name)
        return getattr(real(), name)

    stand_in.version = version  # type: ignore[attr-defined]
    stand_in.__getattr__ = attribute  # type: ignore[method-assign]
    sys.modules[_METADATA] = stand_in
    had = getattr(importlib, "metadata", None)
    importlib.metadata = stand_in  # what `import importlib.metadata` binds
    try:
        yield
    finally:
        with _real_lock:
            if sys.modules.get(_METADATA) is stand_in:
                del sys.modules[_METADATA]
            if getattr(importlib, "metadata", None) is stand_in:
                if had is None:
                    del importlib.metadata
                else:
                    importlib.metadata = had

