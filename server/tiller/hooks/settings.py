"""Hook settings in Claude Code's format, from Tiller's config file or a ``settings.json``.

The shape (the same in TOML and JSON)::

    {"hooks": {"PreToolUse": [{"matcher": "Bash",
                               "hooks": [{"type": "command", "command": "...", "timeout": 30}]}]}}

``parse_hooks`` reads the value of ``hooks``: an event name to a list of matcher groups, each
with commands. What Tiller does not run is kept out and said in ``HookSet.ignored`` (an event it
does not have, a handler type other than ``command``, a key such as ``if`` or ``async`` it does
not honour), so Claude Code's files parse unchanged; a shape that is wrong (a group that is not
an object, a command without ``command``, a bad regular expression) is a ConfigError naming
where.

A matcher selects by name (the tool's, for tool events; ``startup``/``resume`` for
SessionStart; ``manual``/``auto`` for PreCompact; the other events have none): absent, ``""``
or ``*`` match everything; letters, digits, ``_`` and ``|`` only are exact names (``Edit|Write``);
``*`` and ``?`` without other regular-expression characters are a glob (``mcp__git__*``); anything
else is a regular expression searched in the name (``mcp__.*__write.*``).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import field
from typing import Any

from tiller.errors import ConfigError
from tiller.frozen import frozen
from tiller.modes import HOOK_EVENTS, HookEventName

__all__ = [
    "DEFAULT_TIMEOUT",
    "HookCommand",
    "HookGroup",
    "HookSet",
    "match_names",
    "parse_hooks",
    "read_settings_file",
]

DEFAULT_TIMEOUT = 60.0
"""Seconds a hook command may run when its entry names no ``timeout`` (Claude Code's)."""
_COMMAND_KEYS = frozenset({"type", "command", "timeout"})
_NAMES = re.compile(r"[A-Za-z0-9_|]+")
_REGEX_CHARACTERS = frozenset(".^$+()[]{}\\")


@frozen
class HookCommand:
    """One command hook: a shell command line and the seconds it may run."""

    command: str
    timeout: float = DEFAULT_TIMEOUT


def match_names(matcher: str | None, where: str) -> Callable[[str], bool]:
    """The test a matcher makes of a name (the module docstring's rules); ConfigError naming
    ``where`` for a regular expression that does not compile."""
    if matcher is None or matcher in ("", "*"):
        return lambda _name: True
    if _NAMES.fullmatch(matcher):
        names = frozenset(matcher.split("|"))
        return lambda name: name in names
    if ("*" in matcher or "?" in matcher) and not set(matcher) & _REGEX_CHARACTERS:
        return lambda name: fnmatch.fnmatchcase(name, matcher)
    try:
        pattern = re.compile(matcher)
    except re.error as exc:
        raise ConfigError(f"{where}: matcher {matcher!r} is not a regular expression: {exc}") \
            from None
    return lambda name: pattern.search(name) is not None


@frozen
class HookGroup:
    """The commands an event runs when its ``matcher`` matches; ``source`` names the file."""

    event: HookEventName
    matcher: str | None
    commands: tuple[HookCommand, ...]
    source: str
    test: Callable[[str], bool] = field(compare=False, repr=False, default=lambda _name: True)

    def matches(self, names: Iterable[str]) -> bool:
        """Whether the matcher matches one of ``names`` (an event without names: always)."""
        names = list(names)
        return not names or any(self.test(name) for name in names)


@frozen
class HookSet:
    """Hooks from one or more sources, in order; ``ignored`` says what was left out."""

    groups: tuple[HookGroup, ...] = ()
    ignored: tuple[str, ...] = ()

    def __add__(self, other: HookSet) -> HookSet:
        return HookSet(self.groups + other.groups, self.ignored + other.ignored)

    def __bool__(self) -> bool:
        return bool(self.groups)

    def matching(self, event: HookEventName,
                 names: Iterable[str] = ()) -> list[tuple[HookGroup, HookCommand]]:
        """Each command to run for ``event`` (whose subject has ``names``), in order; a command
        line listed twice runs once."""
        names = list(names)
        found: list[tuple[HookGroup, HookCommand]] = []
        seen: set[str] = set()
        for group in self.groups:
            if group.event != event or not group.matches(names):
                continue
            for command in group.commands:
                if command.command not in seen:
                    seen.add(command.command)
                    found.append((group, command))
        return found

    def described(self) -> list[str]:
        """Each command with its event and matcher, as the user is asked to trust them."""
        return [f"{group.event}{f' ({group.matcher})' if group.matcher else ''}: "
                f"{command.command}" for group in self.groups for command in group.commands]


def parse_hooks(value: Any, where: str, source: str) -> HookSet:
    """The hooks of a ``hooks`` value (an object of event names to matcher groups)."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: hooks must be an object of event names")
    groups: list[HookGroup] = []
    ignored: list[str] = []
    for event, entries in value.items():
        at = f"{where}: hooks.{event}"
        if not isinstance(entries, list):
            raise ConfigError(f"{at} must be a list of matcher groups")
        if event not in HOOK_EVENTS:
            ignored.append(f"{source}: {event} hooks are not run (Tiller runs "
                           f"{', '.join(HOOK_EVENTS)})")
            continue
        for index, entry in enumerate(entries):
            group = _group(event, entry, f"{at}[{index}]", source, ignored)
            if group.commands:
                groups.append(group)
    return HookSet(tuple(groups), tuple(ignored))


def _group(event: HookEventName, entry: Any, where: str, source: str,
           ignored: list[str]) -> HookGroup:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} must be an object with hooks (and a matcher)")
    matcher = entry.get("matcher")
    if matcher is not None and not isinstance(matcher, str):
        raise ConfigError(f"{where}: matcher must be a string")
    handlers = entry.get("hooks", [])
    if not isinstance(handlers, list):
        raise ConfigError(f"{where}: hooks must be a list")
    commands = []
    for index, handler in enumerate(handlers):
        at = f"{where}.hooks[{index}]"
        if not isinstance(handler, dict):
            raise ConfigError(f"{at} must be an object")
        kind = handler.get("type", "command")
        if kind != "command":
            ignored.append(f"{source}: a {event} hook of type {kind!r} is not run (Tiller runs "
                           "command hooks)")
            continue
        command = handler.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ConfigError(f"{at}: command must be a non-empty string")
        timeout = handler.get("timeout", DEFAULT_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigError(f"{at}: timeout must be a positive number of seconds")
        if extra := sorted(set(handler) - _COMMAND_KEYS):
            ignored.append(f"{source}: {event} hook {command!r}: {', '.join(extra)} not "
                           "honoured (it runs whenever its matcher matches, and is waited for)")
        commands.append(HookCommand(command, float(timeout)))
    return HookGroup(event, matcher, tuple(commands), source,
                     test=match_names(matcher, where))


def read_settings_file(data: bytes, shown: str) -> HookSet:
    """The hooks of a JSON settings file's content ``data`` (Claude Code's ``settings.json``;
    keys other than ``hooks`` are not Tiller's and are left alone); ``shown`` names it in
    messages. The caller reads the file once: what it hashed is what is parsed. ConfigError for
    content that is not a JSON object or whose hooks are malformed."""
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{shown}: cannot read it as JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise ConfigError(f"{shown}: not a JSON object")
    if "hooks" not in parsed:
        return HookSet()
    return parse_hooks(parsed["hooks"], shown, shown)
