"""End to end: without the editor's diagnostics, the config file's ``[diagnostics]`` command for
a file's glob reports what an edit broke: the real ruff (a dev dependency, in the venv) on a
Python file edited into an error (through Tiller's protocol and through ACP); a command in the
generic line formats, run in the session's sandbox with the secrets out of its environment; a
command that hangs, killed at its timeout.
The model is the loopback OpenAI fake; its next request shows the result it read.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import text_block

from support.acp_client import Recorder, spawn_acp, start, tool_messages
from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import UNSANDBOXED, clean_env, process_gone, spawn_tiller
from support.paths import REPO

pytestmark = [pytest.mark.anyio, pytest.mark.process]

RUFF = Path(sys.executable).with_name("ruff")


def tool_message(request: dict[str, Any], call_id: str) -> str:
    message = next(m for m in request["messages"] if m.get("tool_call_id") == call_id)
    content = message["content"]
    return content if isinstance(content, str) else "".join(part["text"] for part in content)


def config(folder: Path, section: str) -> str:
    """A config file with ``section`` as its ``[diagnostics]``. A checkout under /tmp (a CI
    clone) holds the venv's ruff, which the sandbox's private /tmp would hide: it is bound in
    (a user's own tools are never there, this test's are)."""
    path = folder / "config.toml"
    text = "[diagnostics]\n" + section
    if REPO.resolve().is_relative_to("/tmp"):
        text += f"\n[sandbox]\nwritable = [{json.dumps(str(REPO.resolve()))}]\n"
    path.write_text(text)
    return str(path)


async def test_ruff_reports_the_error_an_edit_introduced(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    assert RUFF.is_file(), "ruff is a dev dependency: `make install`"
    work = tmp_path / "work"
    work.mkdir()
    (work / "calc.py").write_text("import os\n\n\ndef f():\n    return 1\n")
    command = f"{RUFF} check --isolated --no-cache --output-format json {{path}}"
    toml = config(tmp_path, f"'*.py' = '{command}'\n")
    edit = {"path": "calc.py", "edits": [{"oldText": "return 1", "newText": "return y"}]}
    fake_openai.enqueue(tool_call_reply([("call_e1", "edit", edit)]), text_reply("oops"))

    async with spawn_tiller(fake_openai, work, "--permission-mode", "auto",
                            "--config", toml) as tiller:
        await tiller.request("initialize", {"capabilities": {}})
        result = await tiller.request("agent/prompt", {"message": "edit"}, timeout=60)

    assert result["stopReason"] == "stop"
    text = tool_message(fake_openai.requests[1], "call_e1")
    assert text == (
        f"Applied 1 edit to calc.py\n\nNew problems after this change (reported by "
        f"`{command}`; they were not there before it): 1 error.\n"
        "calc.py:5:12: error: Undefined name `y` [ruff F821]")  # not F401, there before


async def test_a_command_s_lines_run_in_the_sandbox_without_secrets(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap is not installed: apt-get install bubblewrap (.ci/run does)")
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    command = ('echo "{path}:1:1: warning: token=${GITHUB_TOKEN:-unset}"; '
               'touch "$HOME/outside" 2>/dev/null || echo "{path}(2,3): error: read-only"; '
               'echo "other.txt:1: error: not this file"; exit 1')
    toml = config(tmp_path, f"'*.txt' = '{command}'\n")
    write = {"path": "notes.txt", "content": "hello\n"}
    fake_openai.enqueue(tool_call_reply([("call_w1", "write", write)]), text_reply("ok"))

    env = clean_env(HOME=str(home), GITHUB_TOKEN="ghp_secret")
    async with spawn_tiller(fake_openai, work, "--permission-mode", "auto", "--config", toml,
                            env=env) as tiller:
        await tiller.request("agent/prompt", {"message": "write"}, timeout=60)

    text = tool_message(fake_openai.requests[1], "call_w1")
    assert text.endswith(
        "they were not there before it): 1 error, 1 warning.\n"
        "notes.txt:2:3: error: read-only [echo]\n"
        "notes.txt:1:1: warning: token=unset [echo]")
    assert not (home / "outside").exists()


async def test_a_command_that_hangs_is_killed_and_the_edit_stands(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    toml = config(tmp_path, "timeout = 0.5\n'*.txt' = 'echo $$ > {path}.pid; exec sleep 60'\n")
    write = {"path": "notes.txt", "content": "hello\n"}
    fake_openai.enqueue(tool_call_reply([("call_w1", "write", write)]), text_reply("ok"))

    async with spawn_tiller(fake_openai, work, "--permission-mode", "auto", "--config", toml,
                            *UNSANDBOXED) as tiller:
        await tiller.request("agent/prompt", {"message": "write"}, timeout=60)
        pid = int((work / "notes.txt.pid").read_text())
        assert process_gone(pid)

    text = tool_message(fake_openai.requests[1], "call_w1")
    assert "New problems" not in text and (work / "notes.txt").read_text() == "hello\n"


async def test_an_acp_client_gets_the_command_s_report_too(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "calc.py").write_text("def f():\n    return 1\n")
    command = f"{RUFF} check --isolated --no-cache --output-format json {{path}}"
    toml = config(tmp_path, f"'*.py' = '{command}'\n")
    edit = {"path": "calc.py", "edits": [{"oldText": "return 1", "newText": "return y"}]}
    fake_openai.enqueue(tool_call_reply([("e1", "edit", edit)]), text_reply("oops"))

    recorder = Recorder()
    async with spawn_acp(recorder, fake_openai, work, "--config", toml) as conn:
        session_id = await start(conn, work, mode="auto")
        await conn.prompt(session_id=session_id, prompt=[text_block("edit")])

    assert tool_messages(fake_openai, 1)[0].endswith(
        "they were not there before it): 1 error.\ncalc.py:2:12: error: Undefined name `y` "
        "[ruff F821]")
