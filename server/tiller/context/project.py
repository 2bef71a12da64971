"""What a session knows of its project: context files (AGENTS.md), slash commands and skills.

Context files: ``AGENTS.md`` (else ``CLAUDE.md`` in the same folder) from the user's config
dir, then from every folder from the workspace's git root (the nearest folder above the cwd
holding ``.git``; the filesystem root if none) down to the session's cwd, nearest last. Each goes
into the system prompt headed by its path; a file over ``MAX_CONTEXT_BYTES`` is cut with a note.
Each is read confined to its root (tiller.context.confined): the config dir for its own, the
git root for the others, or without a git root the file's own folder. One that leads out of it
is left out and listed in ``refused`` with the reason, as are templates and skills.

The system prompt is: the base prompt (the built-in one, ``agent_prompt``, or
``session/new {systemPrompt}``), ``appendSystemPrompt``, the context files, the skills
(tiller.context.skills). The embedded chat-only model (``tiller.providers.embedded``) gets its
own base prompt instead of the built-in one, and neither context files nor skills: it has no
tools to follow them with. ``ProjectContext`` holds all of it for one session and refreshes its
commands between prompts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from tiller.context.agents import AgentCatalog
from tiller.context.commands import Command, CommandCatalog, CommandSource, TemplateSource
from tiller.context.confined import RefusedFile, RefusedFileError, read_confined
from tiller.context.skills import SkillSource, skills_prompt
from tiller.frozen import frozen
from tiller.providers.embedded import SYSTEM_PROMPT as EMBEDDED_PROMPT
from tiller.types import TextContent, UserContent

__all__ = [
    "CONTEXT_NAMES",
    "MAX_CONTEXT_BYTES",
    "ContextFile",
    "ProjectContext",
    "PromptSettings",
    "agent_prompt",
    "find_context_files",
    "load_context_files",
    "read_context_file",
]

CONTEXT_NAMES = ("AGENTS.md", "CLAUDE.md")
"""The file read in each folder: the first that exists."""

MAX_CONTEXT_BYTES = 64 * 1024


@frozen
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


def read_context_file(path: Path, root: Path | None = None) -> ContextFile | None:
    """The file, cut to MAX_CONTEXT_BYTES with a note; None if it cannot be read. Confined to
    ``root`` (default: the file's folder): raises RefusedFileError when it leads out of it."""
    try:
        data, size = read_confined(path, root or path.parent, MAX_CONTEXT_BYTES + 1)
    except OSError:
        return None
    text = data[:MAX_CONTEXT_BYTES].decode("utf-8", errors="ignore" if len(data) > MAX_CONTEXT_BYTES
                                           else "replace")
    if len(data) > MAX_CONTEXT_BYTES:
        text = (f"{text}\n\n[Tiller cut this file: it is {max(size, len(data))} bytes; only the "
                f"first {MAX_CONTEXT_BYTES} are shown. Read the rest with the read tool.]")
    return ContextFile(path, text, max(size, len(data)))


def load_context_files(
    cwd: Path, user_dir: Path | None
) -> tuple[list[ContextFile], list[RefusedFile]]:
    """The context files for a session in ``cwd``, least specific first (see the module), and
    those refused for leading out of their root."""
    git_root = _git_root(cwd)
    root = git_root or Path(cwd.anchor)
    folders = [root, *reversed([p for p in cwd.parents if p.is_relative_to(root) and p != root])]
    if cwd != root:
        folders.append(cwd)
    places = [(folder, git_root or folder) for folder in folders]
    if user_dir is not None:
        places.insert(0, (user_dir, user_dir))
    found: list[ContextFile] = []
    refused: list[RefusedFile] = []
    seen: set[Path] = set()
    for folder, confine in places:
        for name in CONTEXT_NAMES:
            path = folder / name
            if path.is_file():
                resolved = path.resolve()
                if resolved not in seen:
                    try:
                        context = read_context_file(path, confine)
                    except RefusedFileError as exc:
                        refused.append(exc.refused)
                        context = None
                    if context is not None:
                        found.append(context)
                seen.add(resolved)
                break
    return found, refused


def find_context_files(cwd: Path, user_dir: Path | None) -> list[ContextFile]:
    """The context files for a session in ``cwd``, least specific first (see the module)."""
    return load_context_files(cwd, user_dir)[0]


def agent_prompt(cwd: Path) -> str:
    """The built-in base prompt of a session in ``cwd`` (a model with tools)."""
    return (
        "You are Tiller, a coding agent working inside the user's editor. "
        f"The workspace is {cwd}. Use the tools to read files, make precise edits, "
        "and run commands; prefer small verified steps, and say briefly what you changed."
    )


@frozen
class PromptSettings:
    """How a session's system prompt is made; saved in its log header so a load rebuilds it.
    ``base`` None is the built-in prompt for the session's model (``agent_prompt``, or the
    embedded model's own)."""

    base: str | None = None
    append: str | None = None
    context_files: bool = True

    def header(self) -> dict[str, object]:
        return {"systemPrompt": self.base, "appendSystemPrompt": self.append,
                "contextFiles": self.context_files}

    @classmethod
    def from_header(cls, header: Mapping[str, object]) -> PromptSettings:
        """(A log written before the built-in prompt was left out of it keeps its text.)"""
        base, append = header.get("systemPrompt"), header.get("appendSystemPrompt")
        return cls(base if isinstance(base, str) and base else None,
                   append if isinstance(append, str) else None,
                   header.get("contextFiles") is not False)


class ProjectContext:
    """One session's context files, commands and skills. Templates come from
    ``<cwd>/.tiller/prompts`` then ``<user dir>/prompts``; skills from ``<cwd>/.tiller/skills``,
    ``<cwd>/.agents/skills`` then ``<user dir>/skills``; agents from ``<cwd>/.tiller/agents``,
    ``<cwd>/.claude/agents`` then ``<user dir>/agents``. Construction reads files (blocking)."""

    def __init__(
        self, cwd: Path, user_dir: Path | None, prompt: PromptSettings,
        extra_sources: Sequence[CommandSource] = (),
    ) -> None:
        self.cwd = cwd
        self.prompt = prompt
        self.files: list[ContextFile] = []
        self.refused_context: list[RefusedFile] = []
        """Context files left out because they lead out of their root."""
        if prompt.context_files:
            self.files, self.refused_context = load_context_files(cwd, user_dir)
        user = [user_dir] if user_dir is not None else []
        self.skills = SkillSource([cwd / ".tiller" / "skills", cwd / ".agents" / "skills",
                                   *(d / "skills" for d in user)], roots=[cwd, cwd, *user])
        templates = TemplateSource([cwd / ".tiller" / "prompts", *(d / "prompts" for d in user)],
                                   roots=[cwd, *user])
        self.catalog = CommandCatalog([templates, self.skills, *extra_sources])
        self.agents = AgentCatalog(
            [(cwd / ".tiller" / "agents", "workspace"), (cwd / ".claude" / "agents", "claude"),
             *((d / "agents", "user") for d in user)], roots=[cwd, cwd, *user])
        """The agents the ``task`` tool can start (tiller.context.agents)."""

    @property
    def commands(self) -> list[Command]:
        return self.catalog.commands

    @property
    def refused(self) -> list[RefusedFile]:
        """Every project file (context file, template, skill) refused for leading out of its
        root, as of the last refresh."""
        return [*self.refused_context, *self.catalog.refused]

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

    def prompt_files(self, chat_only: bool = False) -> list[ContextFile]:
        """The context files in the system prompt (none for the embedded chat-only model)."""
        return [] if chat_only else self.files

    def system_prompt(self, chat_only: bool = False) -> str:
        """Base, appended text, context files (each under its path), skills; for the embedded
        chat-only model (``chat_only``) its own base instead of the built-in one, and the
        appended text."""
        builtin = EMBEDDED_PROMPT if chat_only else agent_prompt(self.cwd)
        parts = [self.prompt.base or builtin]
        if self.prompt.append:
            parts.append(self.prompt.append)
        if chat_only:
            return "\n\n".join(parts)
        if self.files:
            parts.append("# Project context\nInstructions from the user's and the project's "
                         "context files, the most specific last; follow them.")
            parts += [f"## {f.path}\n\n{f.text.rstrip()}" for f in self.files]
        if section := skills_prompt(self.skills.skills):
            parts.append(section)
        return "\n\n".join(parts)
