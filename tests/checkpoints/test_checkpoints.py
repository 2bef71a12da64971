"""End to end: checkpoints over stdio. The real ``tiller`` runs write/edit/bash calls scripted
through the fake OpenAI server, while the test edits the same workspace like a user would;
``session/changes`` and ``session/revert`` must tell the two apart, leave the user's own git
repository alone, and keep working after a ``kill -9``."""

from __future__ import annotations

import hashlib
import os
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import text_block

from support.acp_client import Recorder, spawn_acp, start
from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import clean_env, spawn_tiller, wait_requests
from tiller.checkpoints.shadow import ShadowRepo
from tiller.client import RpcError

pytestmark = pytest.mark.anyio


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "--no-optional-locks", *args], cwd=repo, check=True,
                          capture_output=True, text=True)
    return done.stdout


def user_repo(ws: Path) -> None:
    """A git repository with a commit, a stash entry and a hook that would leave a trace."""
    ws.mkdir()
    git(ws, "init", "-q")
    git(ws, "config", "user.email", "u@example.com")
    git(ws, "config", "user.name", "U")
    (ws / "a.py").write_text("a = 1\n")
    (ws / "b.py").write_text("b = 1\n")
    (ws / "gone.txt").write_text("delete me\n")
    (ws / "unrelated.txt").write_text("mine\n")
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", "start")
    (ws / "b.py").write_text("b = 2\n")
    git(ws, "stash", "-q")
    hook = ws / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\ntouch {ws.parent / 'hook-ran'}\n")
    hook.chmod(0o755)


def repo_state(ws: Path) -> dict[str, str]:
    """What a checkpoint must never change in the user's repository."""
    dot_git = ws / ".git"
    return {
        "index": hashlib.sha256((dot_git / "index").read_bytes()).hexdigest(),
        "HEAD": (dot_git / "HEAD").read_text(),
        "stash": git(ws, "stash", "list"),
        "refs": git(ws, "for-each-ref"),
        "config": (dot_git / "config").read_text(),
        "hooks": " ".join(sorted(p.name for p in (dot_git / "hooks").iterdir())),
    }


def five_changes_script(gate: threading.Event) -> list[Any]:
    edit_a = {"path": "a.py", "edits": [{"oldText": "a = 1", "newText": "a = 2"}]}
    edit_b = {"path": "b.py", "edits": [{"oldText": "b = 1", "newText": "b = 3"}]}
    return [
        tool_call_reply([("c1", "edit", edit_a), ("c2", "edit", edit_b),
                         ("c3", "write", {"path": "new.txt", "content": "new\n"})]),
        tool_call_reply([("c4", "bash", {"command": "rm gone.txt && echo made > made.txt"})],
                        gate=gate),
        text_reply("Done."),
    ]


@pytest.mark.process
async def test_changes_and_revert_tell_the_agent_from_the_user(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    user_repo(ws)
    before = repo_state(ws)
    assert git(ws, "status", "--porcelain=v2") == ""
    gate = threading.Event()
    fake_openai.enqueue(*five_changes_script(gate))
    async with spawn_tiller(fake_openai, ws, "--session-dir", str(tmp_path / "data")) as tiller:
        init = await tiller.request("initialize", {"capabilities": {}})
        assert init["capabilities"]["checkpoints"] == {"enabled": True}
        sid = (await tiller.request("session/new"))["sessionId"]
        await tiller.send({"jsonrpc": "2.0", "id": 900, "method": "agent/prompt",
                           "params": {"sessionId": sid, "message": "change things"}})
        await wait_requests(fake_openai, 2)  # turn 1 is over; turn 2 waits for the gate
        # The batch's calls run concurrently: each checkpoint event lists the turn's files so
        # far, so the turn's last one has all three (how many events there are varies).
        first = [e for e in tiller.events
                 if e["type"] == "checkpoint" and e["sessionId"] == sid][-1]
        (ws / "unrelated.txt").write_text("mine, edited\n")
        (ws / "a.py").write_text("a = 2\nuser = True\n")
        gate.set()
        await tiller.wait_for(lambda m: m.get("id") == 900)
        changes = await tiller.request("session/changes", {"sessionId": sid})
        state = await tiller.request("agent/getState", {"sessionId": sid})
        loaded = await tiller.request("session/load", {"sessionId": sid})
        start = loaded["entryIds"][0]
        reverted = await tiller.request("session/revert", {"sessionId": sid, "entryId": start})
        forced = await tiller.request("session/revert", {"sessionId": sid, "entryId": start,
                                                         "paths": ["a.py"], "force": True})

    assert state["checkpoints"] == {"enabled": True}
    assert sorted(first["files"]) == ["a.py", "b.py", "new.txt"]
    by_path = {f["path"]: f for f in changes["files"]}
    assert {p: f["status"] for p, f in by_path.items()} == {
        "a.py": "modified", "b.py": "modified", "new.txt": "added", "gone.txt": "deleted",
        "made.txt": "added",
    }
    assert [c["entryId"] for c in changes["checkpoints"]][:1] == [first["entryId"]]
    assert [sorted(c["files"]) for c in changes["checkpoints"]] == [
        ["a.py", "b.py", "new.txt"], ["gone.txt", "made.txt"]]
    assert "-a = 1\n+a = 2\n" in by_path["a.py"]["diff"]
    assert "user" not in by_path["a.py"]["diff"]  # the user's later edit is not the agent's
    assert (by_path["b.py"]["additions"], by_path["b.py"]["deletions"]) == (1, 1)
    assert by_path["gone.txt"]["deletions"] == 1 and by_path["made.txt"]["additions"] == 1

    assert sorted(reverted["restored"]) == ["b.py", "gone.txt", "made.txt", "new.txt"]
    assert reverted["conflicts"] == ["a.py"]
    assert forced == {"restored": ["a.py"], "conflicts": [], "skipped": []}
    assert (ws / "a.py").read_text() == "a = 1\n"
    assert (ws / "b.py").read_text() == "b = 1\n"
    assert (ws / "gone.txt").read_text() == "delete me\n"
    assert not (ws / "new.txt").exists() and not (ws / "made.txt").exists()
    assert (ws / "unrelated.txt").read_text() == "mine, edited\n"  # the user's stays

    assert repo_state(ws) == before
    assert not (tmp_path / "hook-ran").exists()
    status_after = git(ws, "status", "--porcelain=v2")
    changed = [line.split()[-1] for line in status_after.splitlines()]
    assert changed == ["unrelated.txt"], status_after


@pytest.mark.process
async def test_revert_works_after_kill_9_and_load(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "keep.txt").write_text("original\n")
    fake_openai.enqueue(
        tool_call_reply([("c1", "write", {"path": "keep.txt", "content": "agent\n"}),
                         ("c2", "write", {"path": "extra.txt", "content": "extra\n"})]),
        text_reply("Written."),
    )
    async with spawn_tiller(fake_openai, ws, "--session-dir", str(tmp_path / "data")) as doomed:
        sid = (await doomed.request("session/new"))["sessionId"]
        await doomed.request("agent/prompt", {"sessionId": sid, "message": "write"})
        checkpoint = next(e for e in doomed.events if e["type"] == "checkpoint")
        doomed.process.send_signal(signal.SIGKILL)
        assert await doomed.process.wait() == -signal.SIGKILL
    assert (ws / "keep.txt").read_text() == "agent\n"

    async with spawn_tiller(fake_openai, ws, "--session-dir", str(tmp_path / "data")) as revived:
        loaded = await revived.request("session/load", {"sessionId": sid})
        changes = await revived.request("session/changes", {"sessionId": sid})
        result = await revived.request("session/revert",
                                       {"sessionId": sid, "entryId": checkpoint["entryId"]})

    assert [f["path"] for f in changes["files"]] == ["extra.txt", "keep.txt"]
    # The turn sits after the assistant message that called the writes.
    [turn] = changes["checkpoints"]
    before = loaded["messages"][loaded["entryIds"].index(turn["afterEntryId"])]
    assert before["role"] == "assistant" and before["content"][0]["type"] == "toolCall"
    assert sorted(result["restored"]) == ["extra.txt", "keep.txt"]
    assert (ws / "keep.txt").read_text() == "original\n"
    assert not (ws / "extra.txt").exists()


@pytest.mark.process
async def test_revert_does_not_write_through_a_symlinked_folder(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """Issue 26, 5: the agent deletes ``d/f.txt``; the user then replaces ``d/`` with a
    symlink to a folder outside the workspace. Revert (even forced) must not create
    ``outside/f.txt``: it says why it left the file alone."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "d").mkdir(parents=True)
    (ws / "d" / "f.txt").write_text("agent deletes me\n")
    outside.mkdir()
    fake_openai.enqueue(
        tool_call_reply([("c1", "bash", {"command": "rm d/f.txt"})]), text_reply("Done."),
    )
    async with spawn_tiller(fake_openai, ws, "--session-dir", str(tmp_path / "data")) as tiller:
        sid = (await tiller.request("session/new"))["sessionId"]
        await tiller.request("agent/prompt", {"sessionId": sid, "message": "change d"})
        checkpoint = next(e for e in tiller.events if e["type"] == "checkpoint")
        (ws / "d").rmdir()
        (ws / "d").symlink_to(outside)
        revert = {"sessionId": sid, "entryId": checkpoint["entryId"]}
        plain = await tiller.request("session/revert", revert)
        forced = await tiller.request("session/revert", {**revert, "force": True})

    assert checkpoint["files"] == ["d/f.txt"]
    assert list(outside.iterdir()) == []
    refused = "not restored: d is a symlink, and revert does not write through one"
    for result in (plain, forced):
        assert result == {"restored": [], "conflicts": [],
                          "skipped": [{"path": "d/f.txt", "reason": refused}]}


@pytest.mark.process
@pytest.mark.parametrize(
    ("command", "changed"),
    [
        ("rm -r pkg && echo x > pkg", {"pkg": "added", "pkg/a.py": "deleted"}),
        ("rm -r pkg && ln -s ../outside pkg", {"pkg": "added", "pkg/a.py": "deleted"}),
        ("rm data && mkdir data && echo y > data/inner.txt",
         {"data": "deleted", "data/inner.txt": "added"}),
    ],
    ids=["folder-to-file", "folder-to-symlink", "file-to-folder"],
)
async def test_a_folder_replaced_by_a_file_or_a_symlink_keeps_checkpoints_working(
    fake_openai: FakeOpenAI, tmp_path: Path, command: str, changed: dict[str, str]
) -> None:
    """Issue 26, 7: after ``rm -r pkg && echo x > pkg`` every snapshot failed (git refused
    ``pkg`` as both a file and a folder): no more checkpoint events, and session/changes and
    revert answered -32603 for the rest of the session. The symlink's target (``outside/a.py``
    exists) is never read as the workspace's."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "a.py").write_text("a = 1\n")
    (ws / "data").write_text("data\n")
    outside.mkdir()
    (outside / "a.py").write_text("outside\n")
    fake_openai.enqueue(
        tool_call_reply([("c1", "bash", {"command": command})]),
        tool_call_reply([("c2", "write", {"path": "later.txt", "content": "later\n"})]),
        text_reply("Done."),
    )
    async with spawn_tiller(fake_openai, ws, "--session-dir", str(tmp_path / "data")) as tiller:
        sid = (await tiller.request("session/new"))["sessionId"]
        await tiller.request("agent/prompt", {"sessionId": sid, "message": "reshape"})
        changes = await tiller.request("session/changes", {"sessionId": sid})
        start = (await tiller.request("session/load", {"sessionId": sid}))["entryIds"][0]
        reverted = await tiller.request("session/revert", {"sessionId": sid, "entryId": start})

    events = [e for e in tiller.events if e["type"] == "checkpoint"]
    assert [sorted(e["files"]) for e in events] == [sorted(changed), ["later.txt"]]
    assert {f["path"]: f["status"] for f in changes["files"]} == {**changed,
                                                                "later.txt": "added"}
    assert sorted(reverted["restored"]) == sorted([*changed, "later.txt"])
    assert reverted["conflicts"] == [] and reverted["skipped"] == []
    assert (ws / "pkg").is_dir() and not (ws / "pkg").is_symlink()
    assert (ws / "pkg" / "a.py").read_text() == "a = 1\n"
    assert (ws / "data").read_text() == "data\n"
    assert not (ws / "later.txt").exists()
    assert (outside / "a.py").read_text() == "outside\n"
    assert sorted(p.name for p in outside.iterdir()) == ["a.py"]


@pytest.mark.process
async def test_no_revert_while_a_run_is_active(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    held = threading.Event()
    fake_openai.enqueue(
        tool_call_reply([("c1", "write", {"path": "a.txt", "content": "agent\n"})]),
        text_reply("Written."),
        text_reply("later", gate=held),
    )
    async with spawn_tiller(fake_openai, ws, "--session-dir", str(tmp_path / "data")) as tiller:
        sid = (await tiller.request("session/new"))["sessionId"]
        await tiller.request("agent/prompt", {"sessionId": sid, "message": "write"})
        checkpoint = next(e for e in tiller.events if e["type"] == "checkpoint")
        async with anyio.create_task_group() as group:
            group.start_soon(tiller.request, "agent/prompt", {"sessionId": sid, "message": "more"})
            await wait_requests(fake_openai, 3)  # the second run waits for its model
            with pytest.raises(RpcError) as busy:
                await tiller.request("session/revert",
                                     {"sessionId": sid, "entryId": checkpoint["entryId"]})
            held.set()

    assert busy.value.code == -32010 and "abort it before a revert" in busy.value.message
    assert (ws / "a.txt").read_text() == "agent\n"


@pytest.mark.process
async def test_no_fork_with_revert_files_while_the_source_runs(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """Issue 26, 9: a fork with ``revertFiles`` rewinds the workspace under the source's
    running command, so it is refused as ``session/revert`` is (and no fork is made); without
    ``revertFiles`` a fork of a running session is fine."""
    ws = tmp_path / "ws"
    ws.mkdir()
    held = threading.Event()
    fake_openai.enqueue(
        tool_call_reply([("c1", "write", {"path": "a.txt", "content": "agent\n"})]),
        text_reply("Written."),
        text_reply("later", gate=held),
    )
    async with spawn_tiller(fake_openai, ws, "--session-dir", str(tmp_path / "data")) as tiller:
        sid = (await tiller.request("session/new"))["sessionId"]
        await tiller.request("agent/prompt", {"sessionId": sid, "message": "write"})
        first = (await tiller.request("session/load", {"sessionId": sid}))["entryIds"][0]
        async with anyio.create_task_group() as group:
            group.start_soon(tiller.request, "agent/prompt", {"sessionId": sid, "message": "more"})
            await wait_requests(fake_openai, 3)  # the second run waits for its model
            with pytest.raises(RpcError) as busy:
                await tiller.request("session/fork", {"sessionId": sid, "entryId": first,
                                                      "revertFiles": True})
            plain = await tiller.request("session/fork", {"sessionId": sid, "entryId": first})
            held.set()
        listed = await tiller.request("session/list")

    assert busy.value.code == -32010
    assert busy.value.message == (
        "the session has an active run: abort it before a fork with revertFiles")
    assert (ws / "a.txt").read_text() == "agent\n"  # nothing was reverted
    assert "revert" not in plain
    assert len(listed["sessions"]) == 2  # the source and the plain fork only


@pytest.mark.process
async def test_binary_files_and_files_past_the_size_cap(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "logo.bin").write_bytes(b"\x89PNG\x00\x01")
    command = ("printf 'x\\000y' > logo.bin && head -c 5000 /dev/zero | tr '\\0' a > big.txt"
               " && echo small > small.txt")
    fake_openai.enqueue(tool_call_reply([("c1", "bash", {"command": command})]),
                        text_reply("ok"))
    args = ("--session-dir", str(tmp_path / "data"), "--checkpoint-max-bytes", "1000")
    async with spawn_tiller(fake_openai, ws, *args) as tiller:
        sid = (await tiller.request("session/new"))["sessionId"]
        await tiller.request("agent/prompt", {"sessionId": sid, "message": "go"})
        event = next(e for e in tiller.events if e["type"] == "checkpoint")
        changes = await tiller.request("session/changes", {"sessionId": sid})
        result = await tiller.request("session/revert",
                                      {"sessionId": sid, "entryId": event["entryId"]})

    assert event["files"] == ["logo.bin", "small.txt"] and event["notCovered"] == ["big.txt"]
    files = {f["path"]: f for f in changes["files"]}
    assert sorted(files) == ["logo.bin", "small.txt"]
    assert files["logo.bin"]["binary"] is True and files["logo.bin"]["status"] == "modified"
    assert "Binary files" in files["logo.bin"]["diff"]
    assert sorted(result["restored"]) == ["logo.bin", "small.txt"]
    assert (ws / "logo.bin").read_bytes() == b"\x89PNG\x00\x01"
    assert (ws / "big.txt").stat().st_size == 5000  # not covered: left as it is


@pytest.mark.process
async def test_files_crossing_the_size_cap_are_reported_and_never_lost(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """Issue 26, 8, with a cap of 1,000 bytes: ``grows.txt`` (covered) grown past the cap was
    neither reported nor restored, silently; ``new-big.txt`` created over the cap was missing
    from session/changes' notCovered; the user's ``users-big.txt`` (over the cap) shrunk by
    the agent was reported as "added", and revert deleted it."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "grows.txt").write_text("small\n")
    (ws / "users-big.txt").write_text("u" * 5000)
    command = ("head -c 5000 /dev/zero | tr '\\0' g > grows.txt"
               " && head -c 5000 /dev/zero | tr '\\0' n > new-big.txt"
               " && echo shrunk > users-big.txt && echo small > made.txt")
    fake_openai.enqueue(tool_call_reply([("c1", "bash", {"command": command})]),
                        text_reply("ok"))
    args = ("--session-dir", str(tmp_path / "data"), "--checkpoint-max-bytes", "1000")
    async with spawn_tiller(fake_openai, ws, *args) as tiller:
        sid = (await tiller.request("session/new"))["sessionId"]
        await tiller.request("agent/prompt", {"sessionId": sid, "message": "go"})
        event = next(e for e in tiller.events if e["type"] == "checkpoint")
        changes = await tiller.request("session/changes", {"sessionId": sid})
        result = await tiller.request("session/revert",
                                      {"sessionId": sid, "entryId": event["entryId"]})

    assert event["notCovered"] == ["grows.txt", "new-big.txt"]
    assert [(f["path"], f["status"]) for f in changes["files"]] == [("made.txt", "added")]
    assert changes["notCovered"] == ["grows.txt", "new-big.txt", "users-big.txt"]
    assert result["restored"] == ["made.txt"] and result["conflicts"] == []
    assert result["skipped"] == [
        {"path": "grows.txt", "reason": "not covered: it grew past the size cap"},
        {"path": "new-big.txt", "reason": "not covered: over the size cap"},
        {"path": "users-big.txt",
         "reason": "not covered: it was over the size cap before the agent changed it"},
    ]
    assert (ws / "users-big.txt").read_text() == "shrunk\n"  # never deleted
    assert (ws / "grows.txt").stat().st_size == 5000
    assert not (ws / "made.txt").exists()


def shadow_contents(git_dir: Path) -> bytes:
    """Every object of the shadow repository, contents included."""
    return subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "--batch-all-objects",
                           "--batch"], check=True, capture_output=True).stdout


@pytest.mark.process
async def test_session_data_is_private_and_delete_forgets_what_only_it_saw(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """Issue 26, 10: session folders were 0755, logs 0644, shadow objects 0444, and after
    session/delete a copy of the workspace's ``.env`` stayed in the shadow repository. Now
    nothing under the session directory is open to other users, and deleting session A
    removes its index and the objects only A referenced; session B (same workspace, its own
    ``.env``) keeps its changes and its revert."""
    ws, data = tmp_path / "ws", tmp_path / "data"
    ws.mkdir()
    (ws / ".env").write_text("TOKEN=secret-of-session-a\n")
    (ws / "shared.txt").write_text("both sessions see this\n")
    fake_openai.enqueue(
        tool_call_reply([("c1", "write", {"path": "a.txt", "content": "from a\n"})]),
        text_reply("A done."),
        tool_call_reply([("c2", "write", {"path": "b.txt", "content": "from b\n"})]),
        text_reply("B done."),
    )
    async with spawn_tiller(fake_openai, ws, "--session-dir", str(data)) as tiller:
        a = (await tiller.request("session/new"))["sessionId"]
        await tiller.request("agent/prompt", {"sessionId": a, "message": "write a"})
        (ws / ".env").write_text("TOKEN=secret-of-session-b\n")
        b = (await tiller.request("session/new"))["sessionId"]
        await tiller.request("agent/prompt", {"sessionId": b, "message": "write b"})
        git_dir = next(data.rglob("checkpoints.git"))
        before = shadow_contents(git_dir)
        modes = {path: path.lstat().st_mode for path in [data, *data.rglob("*")]}
        await tiller.request("session/delete", {"sessionId": a})
        after = shadow_contents(git_dir)
        changes = await tiller.request("session/changes", {"sessionId": b})
        start = (await tiller.request("session/load", {"sessionId": b}))["entryIds"][0]
        reverted = await tiller.request("session/revert", {"sessionId": b, "entryId": start})

    open_to_others = {str(path.relative_to(data)): oct(mode & 0o777)
                      for path, mode in modes.items() if mode & 0o077}
    assert open_to_others == {}
    assert any(stat.S_ISREG(mode) for mode in modes.values())
    assert b"secret-of-session-a" in before and b"secret-of-session-a" not in after
    assert b"secret-of-session-b" in after and b"both sessions see this" in after
    assert not list(git_dir.glob(f"index-{a}*")) and list(git_dir.glob(f"index-{b}"))
    assert [f["path"] for f in changes["files"]] == ["b.txt"]
    assert reverted["restored"] == ["b.txt"] and not (ws / "b.txt").exists()
    assert (ws / "a.txt").read_text() == "from a\n"  # A's changes were not undone


@pytest.mark.process
async def test_fork_with_revert_files_and_editor_writes(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.md").write_text("v1\n")
    fake_openai.enqueue(
        tool_call_reply([("c1", "bash", {"command": "echo v2 > notes.md"})]),
        text_reply("ok"),
    )
    written: list[tuple[str, str]] = []

    async def write_text(params: Any) -> None:
        written.append((params["path"], params["content"]))
        Path(params["path"]).write_text(params["content"])

    async with spawn_tiller(fake_openai, ws, "--session-dir", str(tmp_path / "data")) as tiller:
        tiller.on_request("client/writeTextFile", write_text)
        await tiller.request("initialize", {"capabilities": {"fs": {"writeTextFile": True}}})
        sid = (await tiller.request("session/new"))["sessionId"]
        await tiller.request("agent/prompt", {"sessionId": sid, "message": "bump"})
        loaded = await tiller.request("session/load", {"sessionId": sid})
        forked = await tiller.request("session/fork", {
            "sessionId": sid, "entryId": loaded["entryIds"][0], "revertFiles": True})

    assert forked["revert"] == {"restored": ["notes.md"], "conflicts": [], "skipped": []}
    assert written == [(str(ws / "notes.md"), "v1\n")]  # through the editor
    assert (ws / "notes.md").read_text() == "v1\n"
    assert [m["role"] for m in forked["messages"]] == ["user"]


@pytest.mark.process
async def test_without_git_checkpoints_are_off_and_runs_work(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(tool_call_reply([("c1", "write", {"path": "f.txt", "content": "x"})]),
                        text_reply("ok"))
    env = clean_env(PATH=str(tmp_path / "no-bin"))
    async with spawn_tiller(fake_openai, tmp_path, env=env) as tiller:
        init = await tiller.request("initialize", {"capabilities": {}})
        sid = (await tiller.request("session/new"))["sessionId"]
        result = await tiller.request("agent/prompt", {"sessionId": sid, "message": "go"})
        state = await tiller.request("agent/getState", {"sessionId": sid})
        with pytest.raises(RpcError) as refused:
            await tiller.request("session/changes", {"sessionId": sid})

    off = {"enabled": False, "reason": "git is not on PATH"}
    assert init["capabilities"]["checkpoints"] == off and state["checkpoints"] == off
    assert result["stopReason"] == "stop" and (tmp_path / "f.txt").read_text() == "x"
    assert refused.value.code == -32017 and "git is not on PATH" in refused.value.message
    assert not any(e["type"] == "checkpoint" for e in tiller.events)


@pytest.mark.process
async def test_acp_changes_and_revert(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "app.py").write_text("x = 1\n")
    fake_openai.enqueue(
        tool_call_reply([("c1", "bash", {"command": "echo 'x = 2' > app.py"})]),
        text_reply("ok"),
    )
    async with spawn_acp(Recorder(), fake_openai, ws, "--session-dir",
                         str(tmp_path / "data")) as conn:
        session_id = await start(conn, ws, mode="auto")
        await conn.prompt(session_id=session_id, prompt=[text_block("bump")])
        changes = await conn.ext_method("tiller/changes", {"sessionId": session_id})
        [turn] = changes["checkpoints"]
        reverted = await conn.ext_method("tiller/revert",
                                         {"sessionId": session_id, "entryId": turn["entryId"]})

    assert [(f["path"], f["status"]) for f in changes["files"]] == [("app.py", "modified")]
    assert turn["files"] == ["app.py"]
    assert reverted == {"restored": ["app.py"], "conflicts": [], "skipped": []}
    assert (ws / "app.py").read_text() == "x = 1\n"


def test_the_shadow_stores_bytes_exactly_whatever_gitattributes_say(tmp_path: Path) -> None:
    """A workspace's .gitattributes asking for end-of-line conversion or a filter changes
    nothing: the blob is the file's bytes, and no filter command runs."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".gitattributes").write_text("*.txt text eol=lf filter=evil\n")
    (ws / "dos.txt").write_bytes(b"one\r\ntwo\r\n")
    repo = ShadowRepo(tmp_path / "shadow.git", ws)
    snap = repo.snapshot()
    blob = repo.blobs(snap.tree, ["dos.txt"])["dos.txt"]
    assert repo.read_blob(blob.oid) == b"one\r\ntwo\r\n"
    assert not (ws / ".git").exists()


def test_a_new_sessions_first_snapshot_sees_a_same_size_rewrite_in_the_same_second(
    tmp_path: Path,
) -> None:
    """A session's index starts as a copy of the workspace's latest one. Git trusts an
    entry whose file's size and times (whole seconds) match it, unless the entry is as new
    as the index file. The copy was stamped with the time it was made, so ``.env`` rewritten
    with the same size within the second of the first session's snapshot was recorded with
    the first session's content (CI saw it once: session B's checkpoint held session A's
    secret). The clock is set by hand here: the file's times to a past second, and the first
    index to later within that second, as if it had been written then."""
    ws = tmp_path / "ws"
    ws.mkdir()
    env = ws / ".env"
    second = int(time.time()) - 100
    while time.time() % 1 > 0.5:  # ctime is set by the kernel: keep both writes in one second
        time.sleep(0.01)
    env.write_text("TOKEN=secret-of-session-a\n")
    os.utime(env, (second + 0.2, second + 0.2))
    first = ShadowRepo(tmp_path / "shadow.git", ws, index="index-a")
    first.snapshot()
    os.utime(first.index_file, (second + 0.9, second + 0.9))
    env.write_text("TOKEN=secret-of-session-b\n")
    os.utime(env, (second + 0.5, second + 0.5))
    second_session = ShadowRepo(tmp_path / "shadow.git", ws, index="index-b")
    tree = second_session.snapshot().tree
    blob = second_session.blobs(tree, [".env"])[".env"]
    assert second_session.read_blob(blob.oid) == b"TOKEN=secret-of-session-b\n"
