"""JSON from outside (a client's messages, a model server's stream) decoded to valid Unicode.

JSON may spell a UTF-16 surrogate as an escape (``"\\udcff"``), and a lone one, not in a pair,
decodes to a Python string that cannot be encoded as UTF-8: every event, log line or request
that carried it would fail to serialize. JavaScript's ``JSON.stringify`` writes such escapes
for a string cut in the middle of an emoji, and models stream them. ``loads`` reads each lone
surrogate as U+FFFD (the replacement character), as a UTF-8 decoder reads a broken byte.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["loads", "without_lone_surrogates"]

_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def loads(data: str | bytes) -> Any:
    """``json.loads(data)``, with every lone surrogate in its strings (keys too) as U+FFFD.
    Raises what ``json.loads`` raises."""
    value = json.loads(data)
    escaped = (_ESCAPE_BYTES.search(data) if isinstance(data, bytes)
               else _ESCAPE.search(data))
    return without_lone_surrogates(value) if escaped else value


def without_lone_surrogates(value: Any) -> Any:
    """``value`` (decoded JSON: dicts, lists, strings, scalars) with every surrogate code point
    in its strings replaced by U+FFFD; ``value`` itself when it holds none. Never recurses."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if not isinstance(value, (dict, list)):
        return value
    root: list[Any] = [value]
    stack: list[Any] = [root]
    while stack:
        container = stack.pop()
        if isinstance(container, dict):
            if any(_SURROGATE.search(key) for key in container if isinstance(key, str)):
                renamed = {_SURROGATE.sub("\ufffd", key) if isinstance(key, str) else key: item
                           for key, item in container.items()}
                container.clear()
                container.update(renamed)
            for key, item in container.items():
                _fix(container, key, item, stack)
        else:
            for index, item in enumerate(container):
                _fix(container, index, item, stack)
    return root[0]


def _fix(container: Any, slot: Any, item: Any, stack: list[Any]) -> None:
    if isinstance(item, str):
        if _SURROGATE.search(item):
            container[slot] = _SURROGATE.sub("\ufffd", item)
    elif isinstance(item, (dict, list)):
        stack.append(item)
