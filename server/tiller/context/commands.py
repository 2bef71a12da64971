"""Slash commands: prompt templates, and the catalog every command source feeds.

A command is ``/name arguments`` at the start of a prompt. Each source (``TemplateSource``
here, ``tiller.context.skills.SkillSource``, an MCP client's prompts) implements ``CommandSource``;
a ``CommandCatalog`` merges them (the first source to claim a name wins), notices changes with
each source's cheap ``fingerprint`` and expands a prompt through the source that owns its
command. An unknown ``/name`` is not a command: the prompt is sent as typed.

Templates are ``*.md`` files (the name is the file's stem) with optional front matter
(``description``, ``argument-hint``; tiller.context.frontmatter). A template that cannot be read or
whose front matter is broken is skipped with a log line and listed nowhere; one that leads out of
its folder's root (a symlink to a key file) is skipped and listed in the source's ``refused``
(tiller.context.confined), which the catalog gathers.
"""

from __future__ import annotations

import logging
import re
import shlex
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Literal, Protocol

from tiller.context.confined import RefusedFile, RefusedFileError, read_confined_text
from tiller.context.frontmatter import FrontMatterError, parse_front_matter
from tiller.frozen import frozen

__all__ = [
    "Command",
    "CommandCatalog",
    "CommandSource",
    "CommandSourceKind",
    "TemplateSource",
    "expand_arguments",
    "markdown_files",
    "roots_of",
    "split_command",
    "stat_key",
]

log = logging.getLogger(__name__)

CommandSourceKind = Literal["prompt", "mcp", "skill"]

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
"""What a command name may be: no spaces, no slash."""

_PLACEHOLDER = re.compile(r"\$(ARGUMENTS|[1-9])")


@frozen
class Command:
    """One command as listed: ``name`` without the slash; ``path`` is the file it comes from
    (None for a source without files)."""

    name: str
    description: str
    source: CommandSourceKind
    argument_hint: str | None = None
    path: Path | None = None


class CommandSource(Protocol):
    """Where commands come from. ``fingerprint`` must be cheap (stat calls, a counter) and
    change whenever ``load`` would answer differently; ``load`` must not raise (skip what is
    broken, with a log line); ``render`` is the prompt text ``command`` becomes given the text
    typed after it."""

    def fingerprint(self) -> Hashable: ...

    def load(self) -> list[Command]: ...

    async def render(self, command: Command, arguments: str) -> str: ...


def split_command(text: str) -> tuple[str, str] | None:
    """``(name, arguments)`` if ``text`` starts with ``/name``, else None."""
    match = re.match(r"^/(\S+)(?:\s+(.*))?$", text, re.DOTALL)
    if match is None:
        return None
    return match.group(1), (match.group(2) or "").strip()


def expand_arguments(template: str, arguments: str) -> str:
    """``$ARGUMENTS`` becomes ``arguments``; ``$1``..``$9`` its shell-style words ("" when
    missing). A template with no placeholder gets non-empty arguments appended on their own
    paragraph, so nothing typed is lost."""
    try:
        words = shlex.split(arguments)
    except ValueError:  # an unclosed quote: plain words
        words = arguments.split()
    if _PLACEHOLDER.search(template) is None:
        return f"{template.rstrip()}\n\n{arguments}" if arguments else template

    def value(match: re.Match[str]) -> str:
        key = match.group(1)
        if key == "ARGUMENTS":
            return arguments
        index = int(key) - 1
        return words[index] if index < len(words) else ""

    return _PLACEHOLDER.sub(value, template)


def markdown_files(folders: Sequence[Path]) -> list[Path]:
    """The ``*.md`` files directly in ``folders`` (missing folders have none), sorted."""
    found: list[Path] = []
    for folder in folders:
        try:
            found += sorted(p for p in folder.iterdir() if p.suffix == ".md" and p.is_file())
        except OSError:
            continue
    return found


def stat_key(paths: Sequence[Path]) -> tuple[tuple[str, int, int, int, int], ...]:
    """A cheap fingerprint of ``paths``: each one's own and its target's modification time and
    size (a file swapped for a symlink changes it)."""
    key = []
    for path in paths:
        try:
            own, target = path.lstat(), path.stat()
        except OSError:
            continue
        key.append((str(path), own.st_mtime_ns, own.st_size, target.st_mtime_ns,
                    target.st_size))
    return tuple(key)


def roots_of(folders: Sequence[Path], roots: Sequence[Path] | None) -> dict[Path, Path]:
    """Each folder's root (the folder itself when ``roots`` is None)."""
    if roots is not None and len(roots) != len(folders):
        raise ValueError("one root per folder")
    return dict(zip(folders, roots if roots is not None else folders, strict=True))


class TemplateSource:
    """Prompt templates from ``folders``, the first folder's template winning a name; each
    folder's files are read confined to its root in ``roots`` (default: the folder)."""

    def __init__(self, folders: Sequence[Path], roots: Sequence[Path] | None = None) -> None:
        self.folders = list(folders)
        self.roots = roots_of(self.folders, roots)
        self.refused: list[RefusedFile] = []
        self._bodies: dict[str, str] = {}

    def fingerprint(self) -> Hashable:
        return stat_key([*self.folders, *markdown_files(self.folders)])

    def load(self) -> list[Command]:
        commands: dict[str, Command] = {}
        bodies: dict[str, str] = {}
        refused: list[RefusedFile] = []
        for path in markdown_files(self.folders):
            name = path.stem
            if name in commands:
                continue
            if not NAME.match(name):
                log.warning("prompt template %s skipped: %r is not a command name", path, name)
                continue
            try:
                text = read_confined_text(path, self.roots[path.parent])
                fields, body = parse_front_matter(text)
            except RefusedFileError as exc:
                log.warning("prompt template %s refused: %s", path, exc)
                refused.append(exc.refused)
                continue
            except (OSError, UnicodeDecodeError, FrontMatterError) as exc:
                log.warning("prompt template %s skipped: %s", path, exc)
                continue
            description = fields.get("description") or _first_line(body) or name
            hint = fields.get("argument-hint") or None
            commands[name] = Command(name, description, "prompt", hint, path)
            bodies[name] = body
        self._bodies, self.refused = bodies, refused
        return list(commands.values())

    async def render(self, command: Command, arguments: str) -> str:
        return expand_arguments(self._bodies.get(command.name, ""), arguments)


def _first_line(body: str) -> str:
    """The first non-empty line of ``body``, without Markdown heading marks, cut to 80."""
    for line in body.splitlines():
        if line.strip():
            return line.strip().lstrip("#").strip()[:80]
    return ""


class CommandCatalog:
    """The commands of several sources, in source order; a name claimed by an earlier source
    (or earlier in one source) hides later ones."""

    def __init__(self, sources: Sequence[CommandSource]) -> None:
        self.sources = list(sources)
        self._prints: list[Hashable] = [None] * len(self.sources)
        self._loaded: list[list[Command]] = [[] for _ in self.sources]
        self.commands: list[Command] = []
        self._owner: dict[str, CommandSource] = {}
        self.refresh()

    def add_source(self, source: CommandSource) -> None:
        """Add a source after the others (an MCP client's, once it has started)."""
        self.sources.append(source)
        self._prints.append(None)
        self._loaded.append([])
        self.refresh()

    def refresh(self) -> bool:
        """Reload the sources whose fingerprint changed; True if the command list changed.
        Blocking file I/O: call it from a worker thread in async code."""
        for index, source in enumerate(self.sources):
            stamp = source.fingerprint()
            if stamp != self._prints[index]:
                self._prints[index], self._loaded[index] = stamp, source.load()
        commands: list[Command] = []
        owner: dict[str, CommandSource] = {}
        for source, loaded in zip(self.sources, self._loaded, strict=True):
            for command in loaded:
                if command.name not in owner:
                    owner[command.name] = source
                    commands.append(command)
        changed = commands != self.commands
        self.commands, self._owner = commands, owner
        return changed

    @property
    def refused(self) -> list[RefusedFile]:
        """The files the sources refused to read at their last load (a source may have none)."""
        return [refused for source in self.sources
                for refused in getattr(source, "refused", ())]

    def find(self, name: str) -> Command | None:
        return next((c for c in self.commands if c.name == name), None)

    async def expand(self, text: str) -> str | None:
        """The prompt ``text`` becomes if it starts with a known ``/name``; None otherwise."""
        parsed = split_command(text)
        if parsed is None:
            return None
        command = self.find(parsed[0])
        if command is None:
            return None
        return await self._owner[command.name].render(command, parsed[1])
