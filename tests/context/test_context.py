"""Unit tests of the parsers and finders behind context files, templates and skills, with the bad
input they must survive: tiller.context.frontmatter, tiller.context.commands, tiller.context.skills,
tiller.context.project."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from tiller.context.commands import CommandCatalog, TemplateSource, expand_arguments, split_command
from tiller.context.frontmatter import FrontMatterError, parse_front_matter
from tiller.context.project import (
    MAX_CONTEXT_BYTES,
    ProjectContext,
    PromptSettings,
    agent_prompt,
    find_context_files,
)
from tiller.context.skills import SkillSource
from tiller.providers.embedded import SYSTEM_PROMPT as EMBEDDED_PROMPT

pytestmark = pytest.mark.anyio


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------ front matter


def test_front_matter_fields_and_body() -> None:
    text = ('---\ndescription: "Review: a file"\nargument-hint: <file>  # shown on Tab\n'
            "# a comment\n\nmetadata:\n  owner: me\n  tags: [a, b]\nquoted: 'it''s'\n---\n"
            "Body $1\n")
    fields, body = parse_front_matter(text)
    assert fields == {"description": "Review: a file", "argument-hint": "<file>",
                      "metadata": "", "quoted": "it's"}
    assert body == "Body $1\n"
    assert parse_front_matter("no front matter\n---\n") == ({}, "no front matter\n---\n")


@pytest.mark.parametrize(("text", "problem"), [
    ("---\ndescription: x\n", "not closed"),
    ("---\njust words\n---\n", "line 2: expected 'key: value'"),
    ("---\na: 1\na: 2\n---\n", "duplicate key 'a'"),
    ('---\na: "open\n---\n', "unclosed quote"),
    ("---\n  indented: first\n---\n", "unexpected indentation"),
    ("---\na: 1\n  nested: under a value\n---\n", "unexpected indentation"),
    ("---\n: no key\n---\n", "expected 'key: value'"),
])
def test_broken_front_matter_is_an_error_naming_the_line(text: str, problem: str) -> None:
    with pytest.raises(FrontMatterError, match=problem):
        parse_front_matter(text)


# ------------------------------------------------------------------------ templates


def test_arguments_expand_by_name_and_position() -> None:
    template = "Fix $1 in $2 ($ARGUMENTS); $9 is empty"
    assert expand_arguments(template, 'bug "src/a b.py"') == (
        'Fix bug in src/a b.py (bug "src/a b.py"); ' + " is empty")
    assert expand_arguments("Say $1", 'unclosed "quote') == "Say unclosed"
    assert expand_arguments("No placeholders.", "extra words") == "No placeholders.\n\nextra words"
    assert expand_arguments("No placeholders.", "") == "No placeholders."
    assert split_command("/review  a.py b.py\nmore") == ("review", "a.py b.py\nmore")
    assert split_command("/") is None and split_command("not /a command") is None


async def test_templates_load_skip_broken_ones_and_first_folder_wins(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    workspace, user = tmp_path / "ws", tmp_path / "user"
    write(workspace / "review.md", "---\ndescription: Review it\nargument-hint: <file>\n---\n"
          "Review $1 carefully.\n")
    write(user / "review.md", "---\ndescription: the user's review\n---\nhidden\n")
    write(user / "plain.md", "\n# Plain heading\nText.\n")
    write(user / "broken.md", "---\ndescription: never closed\n")
    write(user / "bad name.md", "x\n")
    (user / "binary.md").write_bytes(b"\xff\xfe\x00bad")
    write(user / "notes.txt", "not a template")
    with caplog.at_level(logging.WARNING, logger="tiller.context.commands"):
        catalog = CommandCatalog([TemplateSource([workspace, user, tmp_path / "missing"])])
    assert [(c.name, c.description, c.argument_hint) for c in catalog.commands] == [
        ("review", "Review it", "<file>"), ("plain", "Plain heading", None)]
    assert await catalog.expand("/review a.py") == "Review a.py carefully.\n"
    assert await catalog.expand("/unknown a.py") is None
    skipped = caplog.text
    assert "broken.md skipped" in skipped and "not closed" in skipped
    assert "bad name.md skipped" in skipped and "binary.md skipped" in skipped


def test_the_catalog_notices_added_edited_and_removed_files(tmp_path: Path) -> None:
    folder = tmp_path / "prompts"
    catalog = CommandCatalog([TemplateSource([folder])])
    assert catalog.commands == [] and catalog.refresh() is False
    write(folder / "a.md", "---\ndescription: first\n---\nA\n")
    assert catalog.refresh() is True and [c.description for c in catalog.commands] == ["first"]
    assert catalog.refresh() is False
    path = write(folder / "a.md", "---\ndescription: second one\n---\nA\n")
    os.utime(path, ns=(1, 1))  # a different mtime even on a coarse clock
    assert catalog.refresh() is True and [c.description for c in catalog.commands] == ["second one"]
    path.unlink()
    assert catalog.refresh() is True and catalog.commands == []


# ------------------------------------------------------------------------ skills


async def test_skills_need_name_and_description(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    skills = tmp_path / "skills"
    write(skills / "pdf" / "SKILL.md", "---\nname: pdf\ndescription: Fill PDF forms\n---\nSteps\n")
    write(skills / "nodesc" / "SKILL.md", "---\nname: nodesc\n---\nx\n")
    write(skills / "broken" / "SKILL.md", "---\nname: broken\ndescription x\n---\n")
    write(skills / "spaces" / "SKILL.md", "---\nname: has spaces\ndescription: d\n---\n")
    write(skills / "empty" / "README.md", "no SKILL.md here")
    source = SkillSource([skills])
    with caplog.at_level(logging.WARNING, logger="tiller.context.skills"):
        commands = source.load()
    assert [(c.name, c.source, c.description) for c in commands] == [
        ("skill:pdf", "skill", "Fill PDF forms")]
    for name in ("nodesc", "broken", "spaces"):
        assert f"{name}/SKILL.md skipped" in caplog.text
    inlined = await source.render(commands[0], "fill form.pdf")
    assert inlined.startswith(f'<skill name="pdf" path="{skills / "pdf" / "SKILL.md"}">\n---')
    assert "Steps\n</skill>" in inlined and inlined.endswith("\n\nfill form.pdf")


# ------------------------------------------------------------------------ context files


def test_context_files_from_the_git_root_down_nearest_last(tmp_path: Path) -> None:
    user, repo = tmp_path / "config", tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    write(tmp_path / "AGENTS.md", "above the git root: not read")
    write(user / "AGENTS.md", "user")
    write(repo / "AGENTS.md", "root")
    write(repo / "CLAUDE.md", "root claude: AGENTS.md wins")
    write(repo / "pkg" / "CLAUDE.md", "pkg claude")
    cwd = repo / "pkg" / "sub"
    write(cwd / "AGENTS.md", "sub")
    found = find_context_files(cwd, user)
    assert [(f.path, f.text) for f in found] == [
        (user / "AGENTS.md", "user"), (repo / "AGENTS.md", "root"),
        (repo / "pkg" / "CLAUDE.md", "pkg claude"), (cwd / "AGENTS.md", "sub")]
    assert find_context_files(cwd / "missing-is-fine", None)[-1].path == cwd / "AGENTS.md"


def test_a_big_context_file_is_cut_with_a_note(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    write(tmp_path / "AGENTS.md", "é" * MAX_CONTEXT_BYTES)  # 2 bytes each: cut mid-character
    [found] = find_context_files(tmp_path, None)
    assert found.truncated and found.size == 2 * MAX_CONTEXT_BYTES
    body, note = found.text.split("\n\n[Tiller cut this file")
    assert body == "é" * (MAX_CONTEXT_BYTES // 2)
    assert f"it is {2 * MAX_CONTEXT_BYTES} bytes" in note


def test_the_system_prompt_is_base_append_files_skills(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    write(tmp_path / "AGENTS.md", "Use tabs.")
    write(tmp_path / ".agents" / "skills" / "x" / "SKILL.md", "---\nname: x\ndescription: X\n---\n")
    prompt = ProjectContext(tmp_path, None, PromptSettings("BASE", "MORE")).system_prompt()
    assert prompt.index("BASE") < prompt.index("MORE") < prompt.index(
        f"## {tmp_path / 'AGENTS.md'}\n\nUse tabs.") < prompt.index("# Skills")
    assert "- x: X (" in prompt
    off = ProjectContext(tmp_path, None, PromptSettings("BASE", None, context_files=False))
    assert off.files == [] and "Use tabs." not in off.system_prompt()
    settings = PromptSettings.from_header({"systemPrompt": "B", "contextFiles": False})
    assert settings == PromptSettings("B", None, False)
    assert PromptSettings.from_header({"systemPrompt": None}) == PromptSettings(None, None, True)


def test_the_embedded_model_gets_its_own_prompt_without_tools_files_or_skills(
    tmp_path: Path,
) -> None:
    """The chat-only model is told of no tools, context files or skills (it has no tools to
    follow them with); a model with tools gets the built-in agent prompt and all of them."""
    (tmp_path / ".git").mkdir()
    write(tmp_path / "AGENTS.md", "Use tabs.")
    write(tmp_path / ".agents" / "skills" / "x" / "SKILL.md", "---\nname: x\ndescription: X\n---\n")
    context = ProjectContext(tmp_path, None, PromptSettings(None, "Be brief."))

    chat = context.system_prompt(chat_only=True)
    assert chat == f"{EMBEDDED_PROMPT}\n\nBe brief."
    assert "tool" not in chat.lower() and "Use tabs." not in chat and "# Skills" not in chat
    assert context.prompt_files(chat_only=True) == []
    agent = context.system_prompt()
    assert agent.startswith(agent_prompt(tmp_path)) and "Use the tools" in agent
    assert "Use tabs." in agent and "# Skills" in agent
    assert [f.path for f in context.prompt_files()] == [tmp_path / "AGENTS.md"]
