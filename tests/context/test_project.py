"""End to end: context files, prompt templates, skills and ``commands/list`` through the real
``tiller`` over stdio, against the loopback OpenAI server: what the model is sent, what the
client is told."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from support.fake_openai import FakeOpenAI, text_reply
from support.helpers import clean_env, spawn_tiller

pytestmark = [pytest.mark.anyio, pytest.mark.process]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def project(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A git repo with context files at three levels, a user config dir with one, a template
    in each place and a skill; returns (the session's cwd, the config dir, the environment)."""
    config = tmp_path / "xdg" / "tiller"
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    cwd = repo / "app"
    write(config / "AGENTS.md", "USER-RULES")
    write(repo / "AGENTS.md", "REPO-RULES")
    write(cwd / "CLAUDE.md", "APP-RULES")
    write(tmp_path / "AGENTS.md", "ABOVE-THE-REPO")
    write(cwd / ".tiller" / "prompts" / "fix.md",
          "---\ndescription: Fix an issue\nargument-hint: <issue> <file>\n---\n"
          "Fix issue $1 in $2. Everything: $ARGUMENTS\n")
    write(config / "prompts" / "hello.md", "Say hello to $1.\n")
    write(config / "prompts" / "broken.md", "---\ndescription: not closed\n")
    write(cwd / ".agents" / "skills" / "deploy" / "SKILL.md",
          "---\nname: deploy\ndescription: Deploy the app to staging\n---\nRun make deploy.\n")
    write(config / "skills" / "broken" / "SKILL.md", "---\nname: broken\n---\nno description\n")
    return cwd, config, clean_env(XDG_CONFIG_HOME=str(tmp_path / "xdg"))


def system_prompt(request: dict[str, Any]) -> str:
    first = request["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


def user_text(request: dict[str, Any]) -> str:
    return str([m for m in request["messages"] if m["role"] == "user"][-1]["content"])


async def test_context_files_reach_the_model_in_order_and_getstate_lists_them(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    cwd, config, env = project(tmp_path)
    fake_openai.enqueue(text_reply("ok"), text_reply("ok"), text_reply("ok"))
    async with spawn_tiller(fake_openai, cwd, env=env) as tiller:
        await tiller.request("agent/prompt", {"message": "hi"})
        state = await tiller.request("agent/getState", {})
        custom = await tiller.request("session/new", {
            "systemPrompt": "CUSTOM-BASE", "appendSystemPrompt": "APPENDED"})
        await tiller.request("agent/prompt", {"sessionId": custom["sessionId"], "message": "hi"})
        bare = await tiller.request("session/new", {"contextFiles": False})
        await tiller.request("agent/prompt", {"sessionId": bare["sessionId"], "message": "hi"})
        bare_state = await tiller.request("agent/getState", {"sessionId": bare["sessionId"]})

    default, replaced, without = (system_prompt(r) for r in fake_openai.requests)
    order = [default.index(marker) for marker in ("You are Tiller", "USER-RULES", "REPO-RULES",
                                                  "APP-RULES", "# Skills")]
    assert order == sorted(order)
    assert f"## {config / 'AGENTS.md'}\n\nUSER-RULES" in default
    assert f"## {cwd / 'CLAUDE.md'}\n\nAPP-RULES" in default
    assert "ABOVE-THE-REPO" not in default
    assert [f["path"] for f in state["contextFiles"]] == [
        str(config / "AGENTS.md"), str(cwd.parent / "AGENTS.md"), str(cwd / "CLAUDE.md")]
    assert state["contextFiles"][0] == {"path": str(config / "AGENTS.md"), "size": 10,
                                        "truncated": False}
    assert replaced.startswith("CUSTOM-BASE\n\nAPPENDED\n\n") and "You are Tiller" not in replaced
    assert "REPO-RULES" in replaced
    assert "REPO-RULES" not in without and "USER-RULES" not in without
    assert "deploy" in without and bare_state["contextFiles"] == []
    assert "broken" not in default  # a skill with broken front matter is listed nowhere


async def test_a_template_expands_and_an_unknown_name_is_sent_as_typed(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    cwd, _config, env = project(tmp_path)
    fake_openai.enqueue(text_reply("ok"), text_reply("ok"), text_reply("ok"))
    async with spawn_tiller(fake_openai, cwd, env=env) as tiller:
        await tiller.request("agent/prompt", {"message": "/fix 42 src/app.py"})
        await tiller.request("agent/prompt", {"message": [
            {"type": "text", "text": "/hello world"}]})
        await tiller.request("agent/prompt", {"message": "/nosuch thing"})
        messages = (await tiller.request("agent/getMessages", {}))["messages"]

    expanded = "Fix issue 42 in src/app.py. Everything: 42 src/app.py\n"
    assert user_text(fake_openai.requests[0]) == expanded
    assert "Say hello to world." in user_text(fake_openai.requests[1])
    assert user_text(fake_openai.requests[2]) == "/nosuch thing"
    users = [m["content"] for m in messages if m["role"] == "user"]
    assert users[0] == expanded and users[2] == "/nosuch thing"
    assert users[1][0]["text"] == "Say hello to world.\n"


async def test_commands_list_skills_and_commands_changed(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    cwd, _config, env = project(tmp_path)
    fake_openai.enqueue(text_reply("ok"), text_reply("ok"))
    async with spawn_tiller(fake_openai, cwd, env=env) as tiller:
        listed = (await tiller.request("commands/list", {}))["commands"]
        await tiller.request("agent/prompt", {"message": "/skill:deploy to staging now"})
        assert not [e for e in tiller.events if e["type"] == "commands_changed"]
        new = write(cwd / ".tiller" / "prompts" / "ship.md", "---\ndescription: Ship it\n---\nGo\n")
        os.utime(new, ns=(1, 1))
        (cwd / ".agents" / "skills" / "deploy" / "SKILL.md").unlink()
        await tiller.request("agent/prompt", {"message": "plain"})
        changed = [e for e in tiller.events if e["type"] == "commands_changed"]
        relisted = (await tiller.request("commands/list", {}))["commands"]

    assert listed == [
        {"name": "fix", "description": "Fix an issue", "argumentHint": "<issue> <file>",
         "source": "prompt"},
        {"name": "hello", "description": "Say hello to $1.", "source": "prompt"},
        {"name": "skill:deploy", "description": "Deploy the app to staging", "source": "skill"},
    ]
    skill_path = cwd / ".agents" / "skills" / "deploy" / "SKILL.md"
    assert f"- deploy: Deploy the app to staging ({skill_path})" in system_prompt(
        fake_openai.requests[0])
    inlined = user_text(fake_openai.requests[0])
    assert inlined.startswith(f'<skill name="deploy" path="{skill_path}">')
    assert "Run make deploy." in inlined and inlined.endswith("to staging now")
    [event] = changed
    assert [c["name"] for c in event["commands"]] == ["fix", "ship", "hello"]
    assert [c["name"] for c in relisted] == ["fix", "ship", "hello"]
    first_run, second_run = (e["seq"] for e in tiller.events if e["type"] == "agent_start")
    assert first_run < event["seq"] < second_run  # announced before the prompt that found it
    assert "# Skills" not in system_prompt(fake_openai.requests[1])


async def test_a_loaded_session_rebuilds_its_prompt_from_the_header(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    cwd, _config, env = project(tmp_path)
    fake_openai.enqueue(text_reply("ok"), text_reply("ok"))
    async with spawn_tiller(fake_openai, cwd, env=env) as tiller:
        made = await tiller.request("session/new", {"appendSystemPrompt": "APPENDED",
                                                    "contextFiles": False})
        await tiller.request("agent/prompt", {"sessionId": made["sessionId"], "message": "a"})
    write(cwd / "AGENTS.md", "NEW-APP-RULES")
    async with spawn_tiller(fake_openai, cwd, env=env) as tiller:
        await tiller.request("session/load", {"sessionId": made["sessionId"]})
        await tiller.request("agent/prompt", {"sessionId": made["sessionId"], "message": "b"})

    before, after = (system_prompt(r) for r in fake_openai.requests)
    assert before == after and "APPENDED" in after and "RULES" not in after


async def test_project_files_are_not_read_through_a_symlink_out_of_their_root(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """Issue 26, 4: a hostile repository links its context file, a template and a skill to
    files outside; even in ``readonly`` none of them reaches the model, and the client is told
    which files were refused and why. Links that stay inside their root still work."""
    outside = tmp_path / "outside"
    secret = write(outside / "secret", "SECRET-FROM-OUTSIDE")
    key = write(outside / "id_key", "KEY-FROM-OUTSIDE")
    write(outside / "skill" / "SKILL.md",
          "---\nname: leak\ndescription: Leak a file\n---\nSKILL-FROM-OUTSIDE\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    cwd = repo / "app"
    write(repo / "docs" / "RULES.md", "RULES-INSIDE-THE-REPO")
    write(cwd / "notes" / "ok.md", "Template inside: $1\n")
    prompts = cwd / ".tiller" / "prompts"
    prompts.mkdir(parents=True)
    (repo / "AGENTS.md").symlink_to(os.path.relpath(secret, repo))
    (cwd / "AGENTS.md").symlink_to("../docs/RULES.md")
    (prompts / "review.md").symlink_to(key)
    (prompts / "ok.md").symlink_to("../../notes/ok.md")
    (cwd / ".tiller" / "skills").mkdir()
    (cwd / ".tiller" / "skills" / "leak").symlink_to(outside / "skill")
    fake_openai.enqueue(text_reply("ok"), text_reply("ok"), text_reply("ok"), text_reply("ok"))
    async with spawn_tiller(fake_openai, cwd, "--permission-mode", "readonly") as tiller:
        await tiller.request("agent/prompt", {"message": "hi"})
        for typed in ("/review src/app.py", "/skill:leak", "/ok here"):
            await tiller.request("agent/prompt", {"message": typed})
        state = await tiller.request("agent/getState", {})
        listed = await tiller.request("commands/list", {})

    sent = str(fake_openai.requests)
    for leaked in ("SECRET-FROM-OUTSIDE", "KEY-FROM-OUTSIDE", "SKILL-FROM-OUTSIDE"):
        assert leaked not in sent
    assert "RULES-INSIDE-THE-REPO" in system_prompt(fake_openai.requests[0])
    assert [user_text(r) for r in fake_openai.requests[1:]] == [
        "/review src/app.py", "/skill:leak", "Template inside: here\n"]
    assert [f["path"] for f in state["contextFiles"]] == [str(cwd / "AGENTS.md")]

    def reason(real: Path, root: Path) -> str:
        return (f"it leads to {real}, outside {root}: project files are not read through a "
                "symlink out of their folder")

    agents = {"path": str(repo / "AGENTS.md"), "reason": reason(secret, repo)}
    review = {"path": str(prompts / "review.md"), "reason": reason(key, cwd)}
    skill = {"path": str(cwd / ".tiller" / "skills" / "leak" / "SKILL.md"),
             "reason": reason(outside / "skill" / "SKILL.md", cwd)}
    assert state["refusedFiles"] == [agents, review, skill]
    assert listed["refusedFiles"] == [review, skill]
    assert [c["name"] for c in listed["commands"]] == ["ok"]
