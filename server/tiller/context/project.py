"""What a session knows of its project: context files (AGENTS.md), slash commands and skills.

Context files: ``AGENTS.md`` (else ``CLAUDE.md`` in the same folder) from the user's config
dir, then from every folder from the workspace's git root (the nearest folder above the cwd
holding ``.git``; the filesystem root if none) down to the session's cwd, nearest last. Each goes
into the system prompt headed by its path; a file over ``MAX_CONTEXT_BYTES`` is cut with a note.

The system prompt is: the base prompt (the built-in one, or ``session/new {systemPrompt}``),
``appendSystemPrompt``, the context files, the skills (tiller.context.skills). ``ProjectContext``
holds all of it for one session and refreshes its commands between prompts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tiller.context.commands import Command, CommandCatalog, CommandSource, TemplateSource
from tiller.context.skills import SkillSource, skills_prompt
from tiller.types import TextContent, UserContent

__all__ = [
    "CONTEXT_NAMES",
    "MAX_CONTEXT_BYTES",
    "ContextFile",
    "ProjectContext",
    "PromptSettings",
    "find_context_files",
    "read_context_file",
]

CONTEXT_NAMES = ("AGENTS.md", "CLAUDE.md")
"""The file read in each folder: the first that exists."""

MAX_CONTEXT_BYTES = 64 * 1024


@dataclass(frozen=True)
class ContextFile:
    path: Path
    text: str
    size: int
    """The file's size in bytes (``text`` holds at most MAX_CONTEXT_BYTES of it)."""

    @property
    def truncated(self) -> bool:
        return self.size > MAX_CONTEXT_BYTES




def _git_root(cwd: Path) -> Path | None:
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():
            return folder
    return None


def read_context_file(path: Path) -> ContextFile | None:
    """The file, cut to MAX_CONTEXT_BYTES with a note; None if it cannot be read."""
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_CONTEXT_BYTES + 1)
        size = path.stat().st_size
    except OSError:
        return None
    text = data[:MAX_CONTEXT_BYTES].decode("utf-8", errors="ignore" if len(data) > MAX_CONTEXT_BYTES
                                           else "replace")
    if len(data) > MAX_CONTEXT_BYTES:
        text = (f"{text}\n\n[Tiller cut this file: it is {max(size, len(data))} bytes; only the "
                f"first {MAX_CONTEXT_BYTES} are shown. Read the rest with the read tool.]")
    return ContextFile(path, text, max(size, len(data)))


def find_context_files(cwd: Path, user_dir: Path | None) -> list[ContextFile]:
    """The context files for a session in ``cwd``, least specific first (see the module)."""
    root = _git_root(cwd) or Path(cwd.anchor)
    folders = [root, *reversed([p for p in cwd.parents if p.is_relative_to(root) and p != root])]
    if cwd != root:
        folders.append(cwd)
    if user_dir is not None:
        folders.insert(0, user_dir)
    found: list[ContextFile] = []
    seen: set[Path] = set()
    for folder in folders:
        for name in CONTEXT_NAMES:
            path = folder / name
            if path.is_file():
                resolved = path.resolve()
                context = read_context_file(path) if resolved not in seen else None
                seen.add(resolved)
                if context is not None:
                    found.append(context)
                break
    return found


@dataclass(frozen=True)
class PromptSettings:
    """How a session's system prompt is made; saved in its log header so a load rebuilds it."""

    base: str
    append: str | None = None
    context_files: bool = True

    def header(self) -> dict[str, object]:
        return {"systemPrompt": self.base, "appendSystemPrompt": self.append,
                "contextFiles": self.context_files}

    @classmethod
    def from_header(cls, header: Mapping[str, object], default: str) -> PromptSettings:
        base, append = header.get("systemPrompt"), header.get("appendSystemPrompt")
        return cls(base if isinstance(base, str) and base else default,
                   append if isinstance(append, str) else None,
                   header.get("contextFiles") is not False)


class ProjectContext:
    """One session's context files, commands and skills. Templates come from
    ``<cwd>/.tiller/prompts`` then ``<user dir>/prompts``; skills from ``<cwd>/.tiller/skills``,
    ``<cwd>/.agents/skills`` then ``<user dir>/skills``. Construction reads files (blocking)."""

    def __init__(
        self, cwd: Path, user_dir: Path | None, prompt: PromptSettings,
        extra_sources: Sequence[CommandSource] = (),
    ) -> None:
        self.prompt = prompt
        self.files = find_context_files(cwd, user_dir) if prompt.context_files else []
        user = [user_dir] if user_dir is not None else []
        self.skills = SkillSource([cwd / ".tiller" / "skills", cwd / ".agents" / "skills",
                                   *(d / "skills" for d in user)])
        templates = TemplateSource([cwd / ".tiller" / "prompts", *(d / "prompts" for d in user)])
        self.catalog = CommandCatalog([templates, self.skills, *extra_sources])

    @property
    def commands(self) -> list[Command]:
        return self.catalog.commands

    async def expand(self, message: str | Sequence[UserContent]) -> str | list[UserContent]:
        """``message`` with a leading ``/name ...`` (in its first text block) expanded by the
        command's source; as typed when it names no known command."""
        content = message if isinstance(message, str) else list(message)
        first = content if isinstance(content, str) else next(
            (b for b in content if isinstance(b, TextContent)), None)
        text = first if isinstance(first, str) else first.text if first else ""
        expanded = await self.catalog.expand(text)
        if expanded is None:
            return content
        if isinstance(content, str):
            return expanded
        return [TextContent(text=expanded) if b is first else b for b in content]

    def system_prompt(self) -> str:
        """Base, appended text, context files (each under its path), skills."""
        parts = [self.prompt.base]
        if self.prompt.append:
            parts.append(self.prompt.append)
        if self.files:
            parts.append("# Project context\nInstructions from the user's and the project's "
                         "context files, the most specific last; follow them.")
            parts += [f"## {f.path}\n\n{f.text.rstrip()}" for f in self.files]
        if section := skills_prompt(self.skills.skills):
            parts.append(section)
        return "\n\n".join(parts)
