"""Skills (the Agent Skills layout): folders holding a ``SKILL.md`` whose front matter has a
``name`` and a ``description``.

Their names, descriptions and paths go into the system prompt (``skills_prompt``); the model
reads a skill's file with ``read`` when a task matches. ``/skill:name arguments`` forces one:
``SkillSource.render`` inlines the file into that prompt. A skill whose file cannot be read,
whose front matter is broken or lacks ``name``/``description``, or whose name is not a command
name, is skipped with a log line and listed nowhere; one that leads out of its folder's root is
skipped and listed in ``refused`` (tiller.context.confined). ``/skill:`` reads the file again
the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence
from pathlib import Path

from tiller.context.commands import NAME, Command, roots_of, stat_key
from tiller.context.confined import RefusedFile, RefusedFileError, read_confined_text
from tiller.context.frontmatter import FrontMatterError, parse_front_matter
from tiller.frozen import frozen

__all__ = ["SKILL_PREFIX", "Skill", "SkillSource", "skills_prompt"]

log = logging.getLogger(__name__)

SKILL_PREFIX = "skill:"
"""A skill's command is ``/skill:<name>``."""


@frozen
class Skill:
    name: str
    description: str
    path: Path
    """The skill's SKILL.md."""
    root: Path | None = None
    """What its files are read confined to (None: the skill's folder's parent)."""


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


def read_skill(path: Path, root: Path | None = None) -> Skill:
    """The skill whose SKILL.md is ``path``, read confined to ``root`` (default: the folder
    holding the skill's folder); raises RefusedFileError when it leads out of it, ValueError
    (FrontMatterError included) or OSError when it is unusable."""
    root = root or path.parent.parent
    fields, _body = parse_front_matter(read_confined_text(path, root))
    name, description = fields.get("name", ""), fields.get("description", "")
    if not name or not description:
        raise FrontMatterError("the front matter needs both 'name' and 'description'")
    if not NAME.match(name):
        raise FrontMatterError(f"{name!r} is not a usable skill name")
    return Skill(name, description, path, root)


class SkillSource:
    """The skills under ``folders`` as ``skill:<name>`` commands (a ``CommandSource``); the
    first folder's skill wins a name."""

    def __init__(self, folders: Sequence[Path], roots: Sequence[Path] | None = None) -> None:
        self.folders = list(folders)
        self.roots = roots_of(self.folders, roots)
        self.skills: list[Skill] = []
        self.refused: list[RefusedFile] = []

    def fingerprint(self) -> Hashable:
        return stat_key([*self.folders, *_skill_files(self.folders)])

    def load(self) -> list[Command]:
        skills: dict[str, Skill] = {}
        refused: list[RefusedFile] = []
        for path in _skill_files(self.folders):
            try:
                skill = read_skill(path, self.roots[path.parent.parent])
            except RefusedFileError as exc:
                log.warning("skill %s refused: %s", path, exc)
                refused.append(exc.refused)
                continue
            except (OSError, ValueError) as exc:
                log.warning("skill %s skipped: %s", path, exc)
                continue
            skills.setdefault(skill.name, skill)
        self.skills, self.refused = list(skills.values()), refused
        return [Command(SKILL_PREFIX + s.name, s.description, "skill", None, s.path)
                for s in self.skills]

    async def render(self, command: Command, arguments: str) -> str:
        """The skill's file inline, then what was typed after the command."""
        path = command.path
        assert path is not None
        skill = next((s for s in self.skills if s.path == path), None)
        root = skill.root if skill is not None and skill.root is not None else path.parent.parent
        try:
            text = read_confined_text(path, root)
        except (OSError, UnicodeDecodeError, RefusedFileError) as exc:
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
