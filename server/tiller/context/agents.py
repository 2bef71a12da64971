"""Agent definitions: what a subagent started by the ``task`` tool is (tiller.tools.task).

An agent is a Markdown file whose front matter (tiller.context.frontmatter) says ``name``,
``description`` (listed to the model) and optionally ``tools`` (an allow-list of tool names or
globs, ``mcp__git__*``; absent: every tool of the parent), ``disallowedTools``, ``model``
(``inherit``: the parent's), ``provider``, ``thinking`` and ``maxTurns``; the body is the
agent's system prompt. Files are looked up like prompt templates: ``<workspace>/.tiller/agents/``,
``<workspace>/.claude/agents/`` (Claude Code's), then ``<config dir>/agents/``; the first file to
claim a name wins, and every file wins over the built-in ``general-purpose`` and ``explore``
agents. Claude Code's tool names (``Read``, ``Glob``, ``MultiEdit``...) and its model aliases
(``sonnet``, ``opus``, ``haiku``: the parent's model here) are understood.

A file that cannot be read, whose front matter is broken or says something unusable (no
``name`` or ``description``, an unknown ``thinking`` level, a ``maxTurns`` that is not a positive
number) is skipped with a log line and listed in ``AgentCatalog.invalid`` with the reason; one
that leads out of its root through a symlink is refused the same way (tiller.context.confined).
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Literal

from tiller.context.commands import NAME, markdown_files, roots_of, stat_key
from tiller.context.confined import RefusedFile, RefusedFileError, read_confined_text
from tiller.context.frontmatter import FrontMatterError, front_matter_lists
from tiller.frozen import frozen
from tiller.modes import THINKING_LEVELS, ThinkingLevel

__all__ = [
    "BUILTIN_AGENTS",
    "AgentCatalog",
    "AgentDefinition",
    "AgentSourceKind",
    "read_agent",
    "select_tools",
]

log = logging.getLogger(__name__)

AgentSourceKind = Literal["builtin", "workspace", "claude", "user"]
"""Where an agent comes from: built in, ``.tiller/agents/``, ``.claude/agents/``, the config
dir's ``agents/``."""

CLAUDE_TOOL_NAMES = {"glob": "find", "multiedit": "edit", "todowrite": "todo",
                     "agent": "task"}
"""Claude Code's tool names that are another tool here (compared lowercased; the rest, such as
``Read`` or ``Bash``, are Tiller's names capitalised)."""
INHERITED_MODELS = frozenset({"inherit", "sonnet", "opus", "haiku"})
"""``model`` values that mean the parent's model (Claude Code's aliases name no provider)."""


@frozen
class AgentDefinition:
    """One agent. ``tools`` None: every tool the parent may give; otherwise names or globs.
    ``model`` / ``provider`` / ``thinking`` None: the parent's. ``prompt``: the system prompt."""

    name: str
    description: str
    prompt: str
    source: AgentSourceKind
    tools: tuple[str, ...] | None = None
    disallowed: tuple[str, ...] = ()
    model: str | None = None
    provider: str | None = None
    thinking: ThinkingLevel | None = None
    max_turns: int | None = None
    path: Path | None = None


GENERAL_PROMPT = (
    "You are a subagent of Tiller, a coding agent: another agent gave you one self-contained "
    "task. Work on it with the tools until it is done, in small verified steps. You cannot ask "
    "the user or the other agent anything: decide for yourself, and say what you assumed. End "
    "with a short report: what you found or changed (each file), and anything left undone. "
    "That report is all the other agent will see."
)
EXPLORE_PROMPT = (
    "You are a read-only explorer, a subagent of Tiller, a coding agent: another agent asked "
    "you a question about the workspace. Search and read (find, grep, ls, read) until you can "
    "answer it; you cannot change anything. End with a concise answer: the facts, with the "
    "file paths and line numbers they come from. That answer is all the other agent will see."
)
BUILTIN_AGENTS = (
    AgentDefinition(
        "general-purpose",
        "A general agent with the same tools as you: hand it a self-contained task (research, "
        "a change across several files, a long investigation) to keep its steps out of your "
        "context. It returns a report of what it did.",
        GENERAL_PROMPT, "builtin"),
    AgentDefinition(
        "explore",
        "A fast read-only agent for finding things in the workspace (files, definitions, how "
        "something works). It cannot change anything. Say how thorough it should be.",
        EXPLORE_PROMPT, "builtin", tools=("read", "grep", "find", "ls")),
)


def _names(value: str | None, items: list[str] | None) -> tuple[str, ...] | None:
    """A tool list given as ``a, b``, ``[a, b]`` or a block list; None when not given."""
    if items is not None:
        raw = items
    elif value is None:
        return None
    else:
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1]
        raw = [part.strip().strip("'\"") for part in text.split(",")]
    return tuple(_tool_name(part) for part in raw if part.strip())


def _tool_name(name: str) -> str:
    """Tiller's name of a tool named in an agent file: Claude Code's ``Read`` is ``read``,
    ``Glob`` ``find``; a name with a glob or ``mcp__`` is kept as written."""
    name = name.strip()
    if name.startswith("mcp__") or any(c in name for c in "*?["):
        return name
    lowered = name.lower()
    return CLAUDE_TOOL_NAMES.get(lowered, lowered)


def read_agent(path: Path, root: Path, source: AgentSourceKind) -> AgentDefinition:
    """The agent defined by ``path``, read confined to ``root``. Raises RefusedFileError when
    it leads out of it, OSError / UnicodeDecodeError when unreadable, FrontMatterError when its
    front matter is broken or unusable."""
    fields, lists, body = front_matter_lists(read_confined_text(path, root))
    name, description = fields.get("name", "").strip(), fields.get("description", "").strip()
    if not name or not description:
        raise FrontMatterError("the front matter needs both 'name' and 'description'")
    if not NAME.match(name):
        raise FrontMatterError(f"{name!r} is not a usable agent name")
    thinking = fields.get("thinking") or None
    if thinking is not None and thinking not in THINKING_LEVELS:
        raise FrontMatterError(f"thinking: {thinking!r} is not one of "
                               f"{', '.join(THINKING_LEVELS)}")
    max_turns: int | None = None
    if raw_turns := fields.get("maxTurns"):
        if not raw_turns.isdigit() or int(raw_turns) < 1:
            raise FrontMatterError(f"maxTurns: {raw_turns!r} is not a positive whole number")
        max_turns = int(raw_turns)
    model = fields.get("model") or None
    if model is not None and model.lower() in INHERITED_MODELS:
        model = None
    tools = _names(fields.get("tools") if "tools" in fields else None, lists.get("tools"))
    if "tools" in fields and not fields["tools"] and "tools" not in lists:
        tools = ()  # `tools:` with nothing under it: no tools at all
    return AgentDefinition(
        name=name, description=" ".join(description.split()), prompt=body.strip(),
        source=source, tools=tools,
        disallowed=_names(fields.get("disallowedTools"), lists.get("disallowedTools")) or (),
        model=model, provider=fields.get("provider") or None,
        thinking=thinking,
        max_turns=max_turns, path=path,
    )


class AgentCatalog:
    """The agents of a workspace: files from ``folders`` (each with its source kind, read
    confined to its root), then the built-ins. ``refresh`` re-reads them when a file changed;
    ``invalid`` lists the files skipped at the last load, with the reason."""

    def __init__(self, folders: Sequence[tuple[Path, AgentSourceKind]],
                 roots: Sequence[Path] | None = None) -> None:
        self.folders = [folder for folder, _ in folders]
        self.kinds = {folder: kind for folder, kind in folders}
        self.roots = roots_of(self.folders, roots)
        self.agents: list[AgentDefinition] = list(BUILTIN_AGENTS)
        self.invalid: list[RefusedFile] = []
        self._print: Hashable = None
        self.refresh()

    def fingerprint(self) -> Hashable:
        return stat_key([*self.folders, *markdown_files(self.folders)])

    def refresh(self) -> bool:
        """Reload when a file changed (blocking file I/O); True if the list changed."""
        stamp = self.fingerprint()
        if stamp == self._print:
            return False
        self._print = stamp
        found: dict[str, AgentDefinition] = {}
        invalid: list[RefusedFile] = []
        for path in markdown_files(self.folders):
            try:
                agent = read_agent(path, self.roots[path.parent], self.kinds[path.parent])
            except RefusedFileError as exc:
                log.warning("agent file %s refused: %s", path, exc)
                invalid.append(exc.refused)
                continue
            except (OSError, UnicodeDecodeError, FrontMatterError) as exc:
                log.warning("agent file %s skipped: %s", path, exc)
                what = "its front matter" if isinstance(exc, FrontMatterError) else "unreadable"
                invalid.append(RefusedFile(path, f"{what}: {exc}"))
                continue
            found.setdefault(agent.name, agent)
        for agent in BUILTIN_AGENTS:
            found.setdefault(agent.name, agent)
        agents = list(found.values())
        changed = agents != self.agents or invalid != self.invalid
        self.agents, self.invalid = agents, invalid
        return changed

    def find(self, name: str) -> AgentDefinition | None:
        return next((agent for agent in self.agents if agent.name == name), None)

    def why_missing(self, name: str) -> str:
        """Why no agent is called ``name``: its file was skipped (and why), or there is none."""
        for refused in self.invalid:
            if refused.path.stem == name:
                return f"its file {refused.path} was skipped ({refused.reason})"
        return "there is no such agent"


def select_tools(
    agent: AgentDefinition, names: Sequence[str]
) -> tuple[list[str], dict[str, str]]:
    """Which of ``names`` (the tools a child could have) ``agent`` gets, in order, and each
    other one with the reason it is withheld (an error a call of it gets)."""
    chosen: list[str] = []
    withheld: dict[str, str] = {}
    for name in names:
        allowed = agent.tools is None or any(fnmatch.fnmatchcase(name, pattern)
                                             for pattern in agent.tools)
        if allowed and not any(fnmatch.fnmatchcase(name, p) for p in agent.disallowed):
            chosen.append(name)
        else:
            withheld[name] = f"the {agent.name} agent may not use '{name}'"
    return chosen, withheld
