"""Issue 27, end to end: ``bash`` commands in the bubblewrap sandbox, through the real server.

The workspace and a home folder live under /var/tmp, not /tmp: the sandbox's private /tmp
would hide a tree under /tmp anyway, and the checks must show what the read-only root, the
protected paths and the hidden folders do. Each attack runs in ``ask`` without a question
(a sandboxed command needs none) and must fail without its effect on the machine; the same
checks run as root and, when the tests run as root, as an unprivileged user (uid 65534, the
way tests/test_procs.py runs the server), for whom bubblewrap needs a user namespace.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import clean_env
from support.paths import REPO
from support.unprivileged import NOBODY, open_workspace, python_as_nobody
from tiller.client import TillerClient

pytestmark = [pytest.mark.anyio, pytest.mark.process]

SECRET = f"secret-{uuid.uuid4().hex}"


def require_bwrap() -> None:
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap is not installed: apt-get install bubblewrap (.ci/run does)")


@dataclass
class Tree:
    """``home`` (with ~/.ssh holding ``SECRET`` and Tiller's config dir) and the workspace
    ``proj`` (a git repository with a passing test) inside it."""

    home: Path
    proj: Path

    @property
    def config_dir(self) -> Path:
        return self.home / ".config" / "tiller"


def make_tree(root: Path, owner: int | None) -> Tree:
    home = root / "home"
    proj = home / "proj"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(SECRET)
    config_dir = home / ".config" / "tiller"
    config_dir.mkdir(parents=True)
    (config_dir / "config.toml").write_text("# the user's\n")
    proj.mkdir()
    (proj / "test_sample.py").write_text("def test_sum():\n    assert 1 + 1 == 2\n")
    subprocess.run(["git", "init", "-q", str(proj)], check=True)
    if owner is not None:  # git refuses a repository another user owns
        for path in [root, *root.rglob("*")]:
            os.lchown(path, owner, owner)
    return Tree(home, proj)


@pytest.fixture(params=["root", "nobody"] if os.geteuid() == 0 else ["user"])
def user(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def tree(user: str) -> Iterator[Tree]:
    require_bwrap()
    with open_workspace("/var/tmp") as root:
        yield make_tree(root, NOBODY if user == "nobody" else None)


async def spawn(fake: FakeOpenAI, tree: Tree, user: str, *args: str,
                extra_env: dict[str, str] | None = None) -> TillerClient:
    """The server in ``tree.proj`` as ``user``, asking the test for permissions."""
    env = clean_env(HOME=str(tree.home), XDG_CONFIG_HOME=str(tree.home / ".config"),
                    XDG_DATA_HOME=str(tree.home / ".local" / "share"),
                    PYTHONDONTWRITEBYTECODE="1", **(extra_env or {}))
    argv = ["--base-url", fake.url, "--cwd", str(tree.proj),
            "--session-dir", str(tree.home / ".local" / "share" / "tiller" / "sessions"), *args]
    python, python_env = interpreter(user)
    env.update(python_env)
    return await TillerClient.spawn(argv, env=env, cwd=tree.proj, command=[*python, "-m", "tiller"])


def interpreter(user: str) -> tuple[list[str], dict[str, str]]:
    """How to run Python as ``user`` so that it runs in the sandbox too (a venv under /root
    does not, for uid 65534 in a user namespace), and the environment it needs."""
    if user != "nobody":
        return [sys.executable], {}
    return python_as_nobody(within=["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--"])


def ends(client: TillerClient) -> dict[str, dict[str, Any]]:
    """Each tool call's ``tool_execution_end`` event, by call id."""
    return {e["toolCallId"]: e for e in client.events if e["type"] == "tool_execution_end"}


def text(end: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in end["result"]["content"])


def host_sleepers(seconds: str) -> list[int]:
    """Pids of the machine's ``sleep SECONDS`` processes (not the bwrap or shell whose command
    line holds those words)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().decode().split("\0")
            except OSError:
                continue
            if Path(argv[0]).name == "sleep" and seconds in argv:
                found.append(int(entry.name))
    return found


async def sleepers_appear(seconds: str, within: float = 30.0) -> list[int]:
    """``host_sleepers(seconds)`` once there is one (the shell that printed "started" has
    yet to ``exec`` its sleep: nothing on the wire says when it did, so /proc is polled), or
    [] after ``within`` seconds."""
    with anyio.move_on_after(within):
        while not (found := host_sleepers(seconds)):  # noqa: ASYNC110
            await anyio.sleep(0.02)
        return found
    return []


async def test_attacks_fail_inside_workspace_write(
    fake_openai: FakeOpenAI, tree: Tree, user: str
) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    port = listener.getsockname()[1]
    daemon_marker = f"{uuid.uuid4().int % 10_000_000 + 1000}.25"  # sleep 1234567.25 is unique
    attacks = {
        "outside": f"echo pwned > {tree.home}/outside.txt",
        "git_config": "echo '[core] fsmonitor = evil' >> .git/config",
        "git_hooks": "echo 'evil' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
        "config_dir": f"echo 'provider = \"evil\"' >> {tree.config_dir}/config.toml",
        "secret": f"cat {tree.home}/.ssh/id_ed25519",
        "loopback": f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected",
        "daemon": f"setsid sleep {daemon_marker} >/dev/null 2>&1 & "
                  f"nohup sleep {daemon_marker} >/dev/null 2>&1 & echo started",
    }
    asked: list[Any] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"outcome": "rejectOnce"}

    async with await spawn(fake_openai, tree, user) as tiller:
        tiller.on_request("client/requestPermission", answer)
        init = await tiller.request("initialize", {"capabilities": {"permissions": True}})
        attacks["server_proc"] = f"cat /proc/{tiller.process.pid}/status"  # the server's
        fake_openai.enqueue(
            tool_call_reply([(name, "bash", {"command": command})
                             for name, command in attacks.items()]),
            text_reply("done"),
        )
        result = await tiller.request("agent/prompt", {"message": "try"})
        state = await tiller.request("agent/getState")
        survivors = host_sleepers(daemon_marker)  # the session is open
        assert await tiller.close() == 0

    try:
        listener.accept()
        accepted = True
    except BlockingIOError:
        accepted = False
    listener.close()
    assert init["capabilities"]["sandbox"]["available"] is True, init["capabilities"]
    assert init["capabilities"]["sandbox"]["mode"] == "workspace-write"
    assert state["sandbox"]["commands"] == {"mode": "workspace-write", "network": False}
    assert result["stopReason"] == "stop"
    assert asked == []  # every command ran sandboxed, without a question
    done = ends(tiller)
    for name in ["outside", "git_config", "git_hooks", "config_dir", "secret", "loopback",
                 "server_proc"]:
        assert done[name]["isError"] is True, (name, text(done[name]))
        assert done[name]["result"]["details"]["sandbox"] == {
            "mode": "workspace-write", "network": False}, name
    assert not (tree.home / "outside.txt").exists()
    assert "fsmonitor" not in (tree.proj / ".git" / "config").read_text()
    assert not (tree.proj / ".git" / "hooks" / "pre-commit").exists()
    assert (tree.config_dir / "config.toml").read_text() == "# the user's\n"
    assert SECRET not in json.dumps(done["secret"])
    assert "connected" not in text(done["loopback"]) and not accepted
    assert f"/proc/{tiller.process.pid}/status" in text(done["server_proc"])
    # the model is told what stopped it, and how to ask for more
    assert "read-only file system: the sandbox allows writes only in the workspace" in \
        text(done["outside"])
    assert 'escalate: "unsandboxed"' in text(done["outside"])
    # the daemons started, and died with the command's pid namespace
    assert "started" in text(done["daemon"]) and done["daemon"]["isError"] is False
    assert survivors == []


async def test_builds_and_tests_still_work_in_the_workspace(
    fake_openai: FakeOpenAI, tree: Tree, user: str
) -> None:
    python = interpreter(user)[0][-1]
    if REPO.resolve().is_relative_to("/tmp"):
        # a checkout under /tmp (a CI clone) holds the venv and pytest, which the private /tmp
        # would hide: the user's own toolchain is never there, this test's is
        (tree.config_dir / "config.toml").write_text(
            f"[sandbox]\nwritable = [{json.dumps(str(REPO.resolve()))}]\n")
    fake_openai.enqueue(
        tool_call_reply([
            ("pytest", "bash", {"command": f"{python} -m pytest -q -p no:cacheprovider "
                                           "test_sample.py"}),
            ("git", "bash", {"command": "git status --short"}),
            ("npm", "bash", {"command": "npm --version"}),
            ("write", "bash", {"command": "mkdir -p build && echo made > build/out.txt && "
                                          "echo tmp > /tmp/scratch && cat /tmp/scratch"}),
        ]),
        text_reply("done"),
    )
    async with await spawn(fake_openai, tree, user, "--permission-mode", "auto") as tiller:
        await tiller.request("initialize")
        result = await tiller.request("agent/prompt", {"message": "build"})
        assert await tiller.close() == 0

    assert result["stopReason"] == "stop"
    done = ends(tiller)
    assert done["pytest"]["isError"] is False, text(done["pytest"])
    assert "1 passed" in text(done["pytest"])
    assert done["git"]["isError"] is False and "?? test_sample.py" in text(done["git"])
    assert done["npm"]["isError"] is False, text(done["npm"])
    assert re.search(r"^\d+\.\d+\.\d+", text(done["npm"]), re.MULTILINE), text(done["npm"])
    assert done["write"]["isError"] is False and "tmp" in text(done["write"])
    assert (tree.proj / "build" / "out.txt").read_text() == "made\n"
    assert done["write"]["result"]["details"]["sandbox"]["mode"] == "workspace-write"


async def test_escalation_asks_with_the_reason_and_runs_unsandboxed_when_allowed(
    fake_openai: FakeOpenAI, tree: Tree, user: str
) -> None:
    outside = tree.home / "outside.txt"
    fake_openai.enqueue(
        tool_call_reply([("esc", "bash", {
            "command": f"echo allowed > {outside}", "escalate": "unsandboxed",
            "reason": "write the report next to the project"})]),
        tool_call_reply([("esc2", "bash", {
            "command": f"echo refused > {outside}.2", "escalate": "unsandboxed",
            "reason": "again"})]),
        text_reply("done"),
    )
    asked: list[dict[str, Any]] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"outcome": "allowOnce" if len(asked) == 1 else "rejectOnce"}

    async with await spawn(fake_openai, tree, user) as tiller:
        tiller.on_request("client/requestPermission", answer)
        await tiller.request("initialize", {"capabilities": {"permissions": True}})
        result = await tiller.request("agent/prompt", {"message": "write it"})
        assert await tiller.close() == 0

    assert result["stopReason"] == "stop"
    assert len(asked) == 2
    first = asked[0]
    assert "write the report next to the project" in first["reason"]
    assert "outside the sandbox" in first["reason"]
    assert first["preview"]["sandbox"] == {
        "mode": "off", "network": True, "escalated": "unsandboxed",
        "reason": "write the report next to the project"}
    assert outside.read_text() == "allowed\n"  # it ran outside: the home folder is writable
    assert not Path(f"{outside}.2").exists()
    done = ends(tiller)
    assert done["esc"]["isError"] is False
    assert done["esc"]["result"]["details"]["sandbox"]["escalated"] == "unsandboxed"
    starts = {e["toolCallId"]: e for e in tiller.events if e["type"] == "tool_execution_start"}
    assert starts["esc"]["args"]["escalate"] == "unsandboxed"


async def test_auto_refuses_an_escalation_and_network_escalation_reaches_loopback(
    fake_openai: FakeOpenAI, tree: Tree, user: str
) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    outside = tree.home / "outside.txt"
    fake_openai.enqueue(
        tool_call_reply([
            ("esc", "bash", {"command": f"echo x > {outside}", "escalate": "unsandboxed",
                             "reason": "needed"}),
            ("net", "bash", {"command": f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected",
                             "escalate": "network", "reason": "talk to the dev server"}),
        ]),
        text_reply("done"),
    )
    async with await spawn(fake_openai, tree, user, "--permission-mode", "auto") as tiller:
        await tiller.request("initialize")
        result = await tiller.request("agent/prompt", {"message": "go"})
        assert await tiller.close() == 0
    listener.close()

    assert result["stopReason"] == "stop"
    done = ends(tiller)
    assert done["esc"]["isError"] is True and not outside.exists()
    assert "never leave the sandbox" in text(done["esc"])
    assert done["net"]["isError"] is True  # network is an escalation too: refused in auto
    assert "connected" not in text(done["net"])


async def test_without_bwrap_the_sandbox_is_said_unavailable_and_required_refuses(
    fake_openai: FakeOpenAI, tree: Tree, user: str
) -> None:
    missing = {"TILLER_BWRAP": str(tree.home / "no-bwrap")}
    fake_openai.enqueue(tool_call_reply([("c", "bash", {"command": "echo ran"})]),
                        text_reply("done"),
                        tool_call_reply([("r", "bash", {"command": "echo ran"})]),
                        text_reply("done"))
    async with await spawn(fake_openai, tree, user, "--permission-mode", "auto",
                           extra_env=missing) as tiller:
        init = await tiller.request("initialize")
        await tiller.request("agent/prompt", {"message": "run"})
        assert await tiller.close() == 0
    sandbox = init["capabilities"]["sandbox"]
    assert sandbox["available"] is False and "not installed" in sandbox["reason"]
    fallback = ends(tiller)["c"]
    assert fallback["isError"] is False and "ran" in text(fallback)
    assert fallback["result"]["details"]["sandbox"]["mode"] == "off"

    async with await spawn(fake_openai, tree, user, "--permission-mode", "auto",
                           "--sandbox", "required", extra_env=missing) as tiller:
        await tiller.request("initialize")
        await tiller.request("agent/prompt", {"message": "run"})
        assert await tiller.close() == 0
    refused = ends(tiller)["r"]
    assert refused["isError"] is True and "ran" not in text(refused)
    assert "sandbox is required" in text(refused)


async def test_read_only_mode_refuses_workspace_writes_and_abort_ends_the_sandbox(
    fake_openai: FakeOpenAI, tree: Tree, user: str
) -> None:
    marker = f"{uuid.uuid4().int % 10_000_000 + 1000}.75"
    fake_openai.enqueue(
        tool_call_reply([("write", "bash", {"command": "echo x > inside.txt"})]),
        text_reply("could not"),
        tool_call_reply([("long", "bash", {"command": f"echo started; exec sleep {marker}"})]),
    )
    async with await spawn(fake_openai, tree, user, "--permission-mode", "auto",
                           "--sandbox", "read-only") as tiller:
        await tiller.request("initialize")
        await tiller.request("agent/prompt", {"message": "write"})
        await tiller.send({"jsonrpc": "2.0", "id": 50, "method": "agent/prompt",
                           "params": {"message": "sleep"}})

        def started(message: dict[str, Any]) -> bool:
            params = message.get("params") or {}
            output = str((params.get("partialResult") or {}).get("output", ""))
            return params.get("type") == "tool_execution_update" and "started" in output

        await tiller.wait_for(started)
        running = await sleepers_appear(marker)
        assert await tiller.request("agent/abort") == {}
        await tiller.wait_event("agent_settled", start=len(tiller.received) - 1)
        survivors = host_sleepers(marker)
        assert await tiller.close() == 0

    done = ends(tiller)
    assert done["write"]["isError"] is True and not (tree.proj / "inside.txt").exists()
    assert "the sandbox allows writes only in /tmp" in text(done["write"])
    assert done["write"]["result"]["details"]["sandbox"]["mode"] == "read-only"
    assert len(running) == 1 and survivors == []  # the sleeper ran, and died with the abort
