"""Skills (the Agent Skills layout): folders holding a ``SKILL.md`` whose front matter has a
``name`` and a ``description``.

Their names, descriptions and paths go into the system prompt (``skills_prompt``); the model
reads a skill's file with ``read`` when a task matches. ``/skill:name arguments`` forces one:
``SkillSource.render`` inlines the file into that prompt. A skill whose file cannot be read,
whose front matter is broken or lacks ``name``/``description``, or whose name is not a command
name, is skipped with a log line and listed nowhere.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tiller.context.commands import NAME, Command
from tiller.context.frontmatter import FrontMatterError, parse_front_matter

__all__ = ["SKILL_PREFIX", "Skill", "SkillSource", "skills_prompt"]

log = logging.getLogger(__name__)

SKILL_PREFIX = "skill:"
"""A skill's command is ``/skill:<name>``."""


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    path: Path
    """The skill's SKILL.md."""


def _skill_files(folders: Sequence[Path]) -> list[Path]:
    """``<folder>/<skill>/SKILL.md`` for every folder, sorted within each folder."""
    found: list[Path] = []
    for folder in folders:
        try:
            found += sorted(p / "SKILL.md" for p in folder.iterdir()
                            if (p / "SKILL.md").is_file())
        except OSError:
            continue
    return found


def read_skill(path: Path) -> Skill:
    """The skill whose SKILL.md is ``path``; raises ValueError (FrontMatterError included) or
    OSError when it is unusable."""
    fields, _body = parse_front_matter(path.read_text(encoding="utf-8"))
    name, description = fields.get("name", ""), fields.get("description", "")
    if not name or not description:
        raise FrontMatterError("the front matter needs both 'name' and 'description'")
    if not NAME.match(name):
        raise FrontMatterError(f"{name!r} is not a usable skill name")
    return Skill(name, description, path)


class SkillSource:
    """The skills under ``folders`` as ``skill:<name>`` commands (a ``CommandSource``); the
    first folder's skill wins a name."""

    def __init__(self, folders: Sequence[Path]) -> None:
        self.folders = list(folders)
        self.skills: list[Skill] = []

    def fingerprint(self) -> Hashable:
        key = []
        for path in [*self.folders, *_skill_files(self.folders)]:
            try:
                stat = path.stat()
            except OSError:
                continue
            key.append((str(path), stat.st_mtime_ns, stat.st_size))
        return tuple(key)

    def load(self) -> list[Command]:
        skills: dict[str, Skill] = {}
        for path in _skill_files(self.folders):
            try:
                skill = read_skill(path)
            except (OSError, ValueError) as exc:
                log.warning("skill %s skipped: %s", path, exc)
                continue
            skills.setdefault(skill.name, skill)
        self.skills = list(skills.values())
        return [Command(SKILL_PREFIX + s.name, s.description, "skill", None, s.path)
                for s in self.skills]

    async def render(self, command: Command, arguments: str) -> str:
        """The skill's file inline, then what was typed after the command."""
        path = command.path
        assert path is not None
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            text = f"(the skill's file could not be read: {exc})"
        name = command.name.removeprefix(SKILL_PREFIX)
        block = (f'<skill name="{name}" path="{path}">\n{text.rstrip()}\n</skill>\n\n'
                 f"Use the skill {name!r} (its files are relative to {path.parent}).")
        return f"{block}\n\n{arguments}" if arguments else block


def skills_prompt(skills: Sequence[Skill]) -> str:
    """The system prompt's section listing ``skills`` ("" for none)."""
    if not skills:
        return ""
    lines = [
        "# Skills",
        "Skills are instructions for particular tasks, each in a SKILL.md file. When a task "
        "matches a skill's description, read its file with the read tool before you start, "
        "and follow it; paths in it are relative to its folder.",
        "",
    ]
    lines += [f"- {s.name}: {s.description} ({s.path})" for s in skills]
    return "\n".join(lines)
