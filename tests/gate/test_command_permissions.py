"""End to end: an "always" answer for a command does not let a chained command, a substitution,
a redirection, an environment prefix or a glob whose files pass for options through. The
servers here run commands unsandboxed (``UNSANDBOXED``): sandboxed, they run without a question."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import UNSANDBOXED, spawn_tiller

pytestmark = [pytest.mark.anyio, pytest.mark.process]


async def test_allow_always_for_a_command_does_not_cover_a_chained_command(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    fake_openai.enqueue(
        tool_call_reply([("b1", "bash", {"command": "git --version"})]),
        tool_call_reply([("b2", "bash", {"command": "git --version"})]),
        tool_call_reply([("b3", "bash", {"command": "git --version; echo PWN > ../x"})]),
        text_reply("done"),
    )
    asked: list[str] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["args"]["command"])
        if len(asked) == 1:
            return {"outcome": "allowAlways"}
        return {"outcome": "rejectOnce", "reason": "not that"}

    async with spawn_tiller(fake_openai, workspace, *UNSANDBOXED) as tiller:
        tiller.on_request("client/requestPermission", answer)
        await tiller.request("initialize", {"capabilities": {"permissions": True}})
        result = await tiller.request("agent/prompt", {"message": "check git"})

    assert result["stopReason"] == "stop"
    assert asked == ["git --version", "git --version; echo PWN > ../x"]
    assert not (tmp_path / "x").exists()
    results = [m["content"] for m in fake_openai.requests[3]["messages"] if m["role"] == "tool"]
    assert "git version" in results[0] and "git version" in results[1]
    assert "rejected" in results[2] and "not that" in results[2]


def git_workspace(tmp_path: Path) -> Path:
    """A workspace that is a git repository with one committed-to-nothing file."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / "a.txt").write_text("a\n")
    return workspace


GLOB_PLANT = [  # what the agent writes between the two tar calls (acceptEdits: unasked)
    ("w1", "write", {"path": "pwn.sh", "content": "touch pwned\n"}),
    ("w2", "write", {"path": "--checkpoint=1", "content": ""}),
    ("w3", "write", {"path": "--checkpoint-action=exec=sh pwn.sh", "content": ""}),
]


async def test_a_remembered_glob_cannot_be_turned_into_options_by_file_names(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """Issue 26, 6: after "always" for ``tar cf out.tar *``, files named like tar's options
    must not make the same words run ``pwn.sh``: the glob is asked about again."""
    workspace = git_workspace(tmp_path)
    fake_openai.enqueue(
        tool_call_reply([("t1", "bash", {"command": "tar cf out.tar *"})]),
        tool_call_reply(GLOB_PLANT),
        tool_call_reply([("t2", "bash", {"command": "tar cf out.tar *"})]),
        text_reply("archived"),
    )
    asked: list[str] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["args"].get("command", params["args"].get("path")))
        if len(asked) == 1:
            return {"outcome": "allowAlways"}
        return {"outcome": "rejectOnce", "reason": "not again"}

    async with spawn_tiller(fake_openai, workspace, *UNSANDBOXED,
                            "--permission-mode", "acceptEdits") as tiller:
        tiller.on_request("client/requestPermission", answer)
        await tiller.request("initialize", {"capabilities": {"permissions": True}})
        result = await tiller.request("agent/prompt", {"message": "archive it"})

    assert result["stopReason"] == "stop"
    assert (workspace / "--checkpoint-action=exec=sh pwn.sh").exists()  # the plant was written
    assert asked == ["tar cf out.tar *", "tar cf out.tar *"]
    assert not (workspace / "pwned").exists()
    request = fake_openai.requests[3]
    [first, *_, last] = [m["content"] for m in request["messages"] if m["role"] == "tool"]
    assert "rejected" in last and "not again" in last
    assert "rejected" not in first


async def test_a_glob_that_starts_with_a_path_is_remembered_and_stays_harmless(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """The documented way to have a glob remembered: ``./*`` expands to names that start with
    ``./``, which tar takes as files, never as options."""
    workspace = git_workspace(tmp_path)
    fake_openai.enqueue(
        tool_call_reply([("t1", "bash", {"command": "tar cf out.tar ./*"})]),
        tool_call_reply(GLOB_PLANT),
        tool_call_reply([("t2", "bash", {"command": "tar cf out.tar ./*"})]),
        tool_call_reply([("t3", "bash", {"command": "tar tf out.tar"})]),
        text_reply("archived"),
    )
    asked: list[str] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["args"]["command"])
        return {"outcome": "allowAlways" if len(asked) == 1 else "allowOnce"}

    async with spawn_tiller(fake_openai, workspace, *UNSANDBOXED,
                            "--permission-mode", "acceptEdits") as tiller:
        tiller.on_request("client/requestPermission", answer)
        await tiller.request("initialize", {"capabilities": {"permissions": True}})
        result = await tiller.request("agent/prompt", {"message": "archive it"})

    assert result["stopReason"] == "stop"
    assert asked == ["tar cf out.tar ./*", "tar tf out.tar"]  # the second tar cf: unasked
    assert not (workspace / "pwned").exists()
    listing = [m["content"] for m in fake_openai.requests[4]["messages"] if m["role"] == "tool"]
    assert "./--checkpoint-action=exec=sh pwn.sh" in listing[-1]


BYPASSES = [  # after "always" for `git status` and `tar cf out.tar ./*`, each must be asked
    # compound commands
    "git status; touch p01",
    "git status && touch p02",
    "git status | sh -c 'touch p03'",
    "git status |& bash -c 'touch p04'",
    "git status\ntouch p05",
    "git status & touch p06",
    "(git status; touch p07)",
    "{ git status; touch p08; }",
    "if git status; then touch p09; fi",
    "for x in 1; do git status; touch p10; done",
    "f() { touch p11; }; git status; f",
    # substitutions and expansions
    "git status $(touch p12)",
    "git status `touch p13`",
    'git status "$(touch p14)"',
    "git status <(touch p15)",
    "git status $(($(touch p16)))",
    "git status ${PWD}",
    "tar cf out.tar ./{*,p17}",
    # redirections
    "git status > p18",
    "git status >> p19",
    "git status 2> p20",
    "git status &> p21",
    "git status < /etc/passwd",
    "git status <<EOF\n$(touch p23)\nEOF",
    # assignments, environment prefixes and wrappers
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='touch p25' "
    "git status",
    "env GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='touch p26' "
    "git status",
    "eval 'git status; touch p27'",
    "bash -c 'git status; touch p28'",
    "xargs -a /dev/null touch p29; git status",
    "timeout 5 sh -c 'touch p30'",
    # state carried into the next part, quoting tricks, globs
    "alias git='touch p31'; git status",
    "git sta\\\ntus; touch p32",
    "git status\r; touch p33",
    "tar cf out.tar * p34",
]


async def test_what_a_remembered_command_does_not_cover_is_asked(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """Compound commands, substitutions, redirections, environment prefixes, wrappers, state
    and globs around two remembered commands are all asked about (and rejected here): none
    runs unasked."""
    assert len(BYPASSES) == 34
    workspace = git_workspace(tmp_path)
    fake_openai.enqueue(
        tool_call_reply([("r1", "bash", {"command": "git status"}),
                         ("r2", "bash", {"command": "tar cf out.tar ./*"})]),
        tool_call_reply([(f"b{i:02}", "bash", {"command": c}) for i, c in enumerate(BYPASSES)]),
        tool_call_reply([("r3", "bash", {"command": "git status && tar cf out.tar ./*"})]),
        text_reply("done"),
    )
    asked: list[str] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["args"]["command"])
        if params["args"]["command"] in ("git status", "tar cf out.tar ./*"):
            return {"outcome": "allowAlways"}
        return {"outcome": "rejectOnce"}

    async with spawn_tiller(fake_openai, workspace, *UNSANDBOXED) as tiller:
        tiller.on_request("client/requestPermission", answer)
        await tiller.request("initialize", {"capabilities": {"permissions": True}})
        result = await tiller.request("agent/prompt", {"message": "try everything"})

    assert result["stopReason"] == "stop"
    assert sorted(asked) == sorted(["git status", "tar cf out.tar ./*", *BYPASSES])
    assert sorted(p.name for p in workspace.iterdir() if p.name.startswith("p")) == []
    results = [m["content"] for m in fake_openai.requests[3]["messages"] if m["role"] == "tool"]
    assert "rejected" not in results[-1]  # the two remembered commands still run unasked
