"""Agent definitions (tiller.context.agents): the files, Claude Code's too, what makes one
unusable, which one wins a name, which tools an agent gets; the README's and protocol.md's
examples as written; the ``[tasks]`` config table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.paths import PROTOCOL_MD, README
from tiller.config import ServerConfig, TaskSettings, load_config
from tiller.context.agents import BUILTIN_AGENTS, AgentCatalog, read_agent, select_tools
from tiller.errors import ConfigError


def catalog(ws: Path, user: Path | None = None) -> AgentCatalog:
    folders: list[tuple[Path, str]] = [(ws / ".tiller" / "agents", "workspace"),
                                       (ws / ".claude" / "agents", "claude")]
    roots = [ws, ws]
    if user is not None:
        folders.append((user / "agents", "user"))
        roots.append(user)
    return AgentCatalog(folders, roots)  # type: ignore[arg-type]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def markdown_example(document: Path, marker: str) -> str:
    """The ```markdown block of ``document`` that contains ``marker``."""
    blocks = re.findall(r"```markdown\n(.*?)```", document.read_text(), re.DOTALL)
    [block] = [b for b in blocks if marker in b]
    return str(block)


def test_the_readme_and_protocol_examples_are_agents(tmp_path: Path) -> None:
    tester = read_agent(write(tmp_path / "tester.md", markdown_example(README, "name: tester")),
                        tmp_path, "workspace")
    assert (tester.name, tester.tools, tester.thinking, tester.max_turns) == (
        "tester", ("read", "grep", "find", "bash"), "low", 15)
    assert tester.prompt.startswith("You run tests.") and tester.model is None
    reviewer = read_agent(write(tmp_path / "reviewer.md",
                                markdown_example(PROTOCOL_MD, "name: reviewer")),
                          tmp_path, "workspace")
    assert reviewer.tools == ("read", "grep", "find", "mcp__git__*")
    assert reviewer.model is None and reviewer.max_turns == 20  # inherit


def test_claude_code_files_and_list_shapes(tmp_path: Path) -> None:
    claude = write(tmp_path / "a.md", "---\nname: a\ndescription: A\ntools: Read, Glob, "
                   "MultiEdit, TodoWrite, mcp__Git__*\nmodel: haiku\ncolor: red\n---\nbody\n")
    block = write(tmp_path / "b.md", "---\nname: b\ndescription: B\ntools:\n  - Read\n"
                  "  - 'Bash'\ndisallowedTools:\n- bash\nmodel: gpt-6-luna\n"
                  "provider: openai\n---\n")
    none = write(tmp_path / "c.md", "---\nname: c\ndescription: C\ntools: []\n---\n")
    a, b, c = (read_agent(path, tmp_path, "claude") for path in (claude, block, none))
    assert a.tools == ("read", "find", "edit", "todo", "mcp__Git__*") and a.model is None
    assert b.tools == ("read", "bash") and b.disallowed == ("bash",)
    assert (b.model, b.provider) == ("gpt-6-luna", "openai")
    assert c.tools == () and a.tools is not None
    assert select_tools(b, ["read", "write", "bash"]) == (
        ["read"], {"write": "the b agent may not use 'write'",
                   "bash": "the b agent may not use 'bash'"})
    assert select_tools(a, ["read", "mcp__Git__log", "mcp__other__x"])[0] == [
        "read", "mcp__Git__log"]


@pytest.mark.parametrize(("text", "reason"), [
    ("---\nname: x\n---\nbody\n", "needs both 'name' and 'description'"),
    ("---\nname: x\ndescription: d\nthinking: huge\n---\n", "thinking: 'huge' is not one of"),
    ("---\nname: x\ndescription: d\nmaxTurns: 0\n---\n", "maxTurns: '0' is not a positive"),
    ("---\nname: two words\ndescription: d\n---\n", "not a usable agent name"),
    ("---\nname: x\ndescription: d\n", "not closed"),
])
def test_unusable_files_are_skipped_with_the_reason(
    tmp_path: Path, text: str, reason: str
) -> None:
    write(tmp_path / ".tiller" / "agents" / "x.md", text)
    found = catalog(tmp_path)
    assert [agent.name for agent in found.agents] == ["general-purpose", "explore"]
    [invalid] = found.invalid
    assert invalid.path.name == "x.md" and reason in invalid.reason
    assert reason in found.why_missing("x") and "x.md" in found.why_missing("x")
    assert found.why_missing("y") == "there is no such agent"


def test_a_symlink_out_of_the_workspace_is_refused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    secret = write(tmp_path / "outside.md", "---\nname: x\ndescription: d\n---\nsecret\n")
    (ws / ".tiller" / "agents").mkdir(parents=True)
    (ws / ".tiller" / "agents" / "x.md").symlink_to(secret)
    found = catalog(ws)
    assert found.find("x") is None
    assert "outside" in found.invalid[0].reason


def test_the_first_folder_wins_a_name_and_files_win_over_built_ins(tmp_path: Path) -> None:
    ws, user = tmp_path / "ws", tmp_path / "config"
    write(ws / ".claude" / "agents" / "r.md", "---\nname: review\ndescription: claude's\n---\n")
    write(ws / ".tiller" / "agents" / "r.md", "---\nname: review\ndescription: tiller's\n---\n")
    write(user / "agents" / "e.md", "---\nname: explore\ndescription: mine\n---\nexplore!\n")
    found = catalog(ws, user)
    assert [(a.name, a.source) for a in found.agents] == [
        ("review", "workspace"), ("explore", "user"), ("general-purpose", "builtin")]
    assert found.find("review").description == "tiller's"  # type: ignore[union-attr]
    assert not found.refresh()  # nothing changed
    write(ws / ".tiller" / "agents" / "r.md", "---\nname: review\ndescription: newer\n---\n")
    assert found.refresh() and found.find("review").description == "newer"  # type: ignore[union-attr]


def test_the_built_in_explore_agent_only_reads() -> None:
    explore = next(agent for agent in BUILTIN_AGENTS if agent.name == "explore")
    assert select_tools(explore, ["read", "write", "edit", "bash", "grep", "find", "ls",
                                  "todo", "task"])[0] == ["read", "grep", "find", "ls"]


def test_the_tasks_table(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", "[tasks]\nmax_concurrent = 2\nmax_depth = 0\n")
    config = load_config(["--config", str(path)], {})
    assert config.tasks == TaskSettings(max_concurrent=2, max_depth=0)
    assert ServerConfig().tasks == TaskSettings()
    for bad, message in [("max_turns = 0", "max_turns must be positive"),
                         ("depth = 2", "unknown key"), ("max_tokens = 'x'", "must be a int")]:
        write(path, f"[tasks]\n{bad}\n")
        with pytest.raises(ConfigError, match=message):
            load_config(["--config", str(path)], {})
