"""Import hooks for tests of cold starts, active when this folder is on ``PYTHONPATH``:

- ``TILLER_TEST_SLOW_IMPORT=httpx2=1.5``: a slow disk for one module: the first ``import
  httpx2`` of the process takes 1.5 s more (as it does on a loaded machine: about 1.25 s was
  measured), then imports as usual.
- ``TILLER_TEST_IMPORT_LOG=PATH``: the name of every module the process imports from then on,
  from any thread, is appended to PATH, one per line (``python -X importtime`` misses imports
  made in other threads than the main one).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from importlib.abc import MetaPathFinder
from typing import Any

_SETTING = os.environ.get("TILLER_TEST_SLOW_IMPORT", "")
_LOG = os.environ.get("TILLER_TEST_IMPORT_LOG", "")


class _SlowFinder(MetaPathFinder):
    def __init__(self, module: str, seconds: float) -> None:
        self.module, self.seconds = module, seconds

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname == self.module:
            sys.meta_path.remove(self)
            time.sleep(self.seconds)
        return None  # the usual finders import it


class _LoggingFinder(MetaPathFinder):
    def __init__(self, path: str) -> None:
        self._file = open(path, "a", buffering=1)  # noqa: SIM115 (open for the process)
        self._lock = threading.Lock()

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        with self._lock:
            self._file.write(fullname + "\n")
        return None


if "=" in _SETTING:
    _name, _, _seconds = _SETTING.partition("=")
    sys.meta_path.insert(0, _SlowFinder(_name, float(_seconds)))
if _LOG:
    sys.meta_path.insert(0, _LoggingFinder(_LOG))
