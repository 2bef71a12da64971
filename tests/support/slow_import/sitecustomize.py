"""A slow disk for one module, for tests of cold starts: on ``PYTHONPATH``, with
``TILLER_TEST_SLOW_IMPORT=openai=1.5``, the first ``import openai`` of the process takes 1.5 s
more (as it does on a loaded machine: about 1.25 s was measured), then imports as usual."""

from __future__ import annotations

import os
import sys
import time
from importlib.abc import MetaPathFinder
from typing import Any

_SETTING = os.environ.get("TILLER_TEST_SLOW_IMPORT", "")


class _SlowFinder(MetaPathFinder):
    def __init__(self, module: str, seconds: float) -> None:
        self.module, self.seconds = module, seconds

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname == self.module:
            sys.meta_path.remove(self)
            time.sleep(self.seconds)
        return None  # the usual finders import it


if "=" in _SETTING:
    _name, _, _seconds = _SETTING.partition("=")
    sys.meta_path.insert(0, _SlowFinder(_name, float(_seconds)))
