"""Streamed tool-call arguments: what may run, and what may only be shown.

A provider collects a call's arguments as JSON text fragments. ``streamed_tool_call`` makes the
final ``ToolCall``: the arguments are executable only when the text parses as one JSON object
(or is empty: no arguments). Anything else, typically a stream cut mid-string, gets
``arguments_error`` and a best-effort repair (``parse_tool_arguments``) for display only: running
a repair would run something the model never wrote (``rm -rf build/cache`` cut to
``rm -rf build``).
"""

from __future__ import annotations

from typing import Any

from tiller import jsontext
from tiller.types import ToolCall

__all__ = ["MAX_ARGUMENT_DEPTH", "parse_tool_arguments", "streamed_tool_call"]

MAX_ARGUMENT_DEPTH = 64
"""The deepest nesting a call's arguments may have (the arguments object is level 1). Deeper
arguments are neither run nor kept: they would not survive the session log, the wire or the
next request (JSON decoders give up near 1,000 levels), so the call keeps ``{}``."""

_TOO_DEEP = f"nested more than {MAX_ARGUMENT_DEPTH} levels deep"


def streamed_tool_call(call_id: str, name: str, raw: str) -> ToolCall:
    """The call whose streamed arguments are ``raw``. Empty means no arguments. Anything but one
    JSON object at most ``MAX_ARGUMENT_DEPTH`` levels deep sets ``arguments_error`` (the call
    must not run) and keeps a repair for display (``{}`` for arguments nested too deeply)."""
    arguments, error = _parse(raw)
    return ToolCall(id=call_id, name=name, arguments=arguments, arguments_error=error)


def _parse(raw: str) -> tuple[dict[str, Any], str | None]:
    """The arguments in ``raw`` (exact, or repaired for display) and why they may not run (None
    when they may)."""
    text = raw.strip()
    if not text:
        return {}, None
    try:
        value = jsontext.loads(text)
    except RecursionError:
        return {}, _TOO_DEEP
    except ValueError as exc:
        return _repaired(text), f"not valid JSON: {exc}"
    if _too_deep(value):
        return {}, _TOO_DEEP
    if not isinstance(value, dict):
        kind = _JSON_KINDS.get(type(value), "value")
        return {}, f"a JSON {kind}, not an object"
    return value, None


def _too_deep(value: Any) -> bool:
    """Whether ``value`` nests lists and dicts more than ``MAX_ARGUMENT_DEPTH`` levels (counted
    without recursing)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, (dict, list)):
            continue
        if depth > MAX_ARGUMENT_DEPTH:
            return True
        stack.extend((child, depth + 1)
                     for child in (item.values() if isinstance(item, dict) else item))
    return False


_JSON_KINDS: dict[type, str] = {
    list: "array", str: "string", int: "number", float: "number", bool: "boolean",
    type(None): "null",
}


def parse_tool_arguments(raw: str) -> dict[str, Any]:
    """Streamed JSON arguments as a dict: exact when valid, else a best-effort repair of a
    truncated object (close the open string and brackets, drop a trailing incomplete member),
    else ``{}`` (also for arguments nested more than ``MAX_ARGUMENT_DEPTH`` levels). Never
    raises."""
    return _parse(raw)[0]


def _repaired(text: str) -> dict[str, Any]:
    """A truncated object's repair, for display; ``{}`` when there is none, or it nests too
    deeply."""
    try:
        value = _parse_truncated(text)
    except RecursionError:
        return {}
    return value if isinstance(value, dict) and not _too_deep(value) else {}


def _parse_truncated(text: str) -> Any:
    """Parse a JSON prefix by closing it; on failure drop its last member and retry.

    The last member is what follows the last ``,`` (dropped with the comma) or the last ``{`` or
    ``[`` (kept, so the container stays, empty)."""
    candidate = text
    for _ in range(16):
        try:
            return jsontext.loads(_close_json(candidate))
        except ValueError:
            position = max(candidate.rfind(mark) for mark in ",{[")
            if position <= 0:
                return None
            shorter = candidate[: position + 1] if candidate[position] in "{[" else ""
            candidate = shorter if 0 < len(shorter) < len(candidate) else candidate[:position]
    return None


def _close_json(text: str) -> str:
    """``text`` with its open string, dangling separator and open brackets closed."""
    closers: list[str] = []
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            closers.append("]" if char == "[" else "}")
        elif char in "]}" and closers:
            closers.pop()
    if in_string:
        text = (text[:-1] if escaped else text) + '"'
    text = text.rstrip()
    if text.endswith(","):
        text = text[:-1]
    elif text.endswith(":"):
        text += " null"
    return text + "".join(reversed(closers))
