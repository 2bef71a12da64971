"""The VS Code extension (editors/vscode): type-check, build, and its Node test suite, whose
client tests drive the real ``tiller`` (``python -m tiller``) against loopback FakeOpenAIs.

VS Code itself cannot run here, so the extension's protocol client (src/client.ts, which does
not import ``vscode``) is tested under Node. The contract with the Node tests
(editors/vscode/test/support.ts):

- ``TILLER_CMD``: the server command as a JSON array.
- ``TILLER_SCENARIOS``: scenario name -> ``{baseUrl, ...}``; each scenario has its own FakeOpenAI
  scripted with exactly the replies that Node test expects, so one failing test cannot shift
  another's replies. After Node exits, each fake's requests are checked here too.
- ``TILLER_WORKDIR``: the server's ``--cwd``. Held replies use no timing: the ``steer`` scenario's
  tool is ``cat <fifo>``, which the Node test itself writes once steer/followUp are acknowledged.
- ``TILLER_E2E=required``: the Node tests fail instead of skipping if the above are missing.

Skipped only when ``node`` or ``npm`` is missing.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import UNSANDBOXED, clean_env, roles
from support.paths import EDITORS
from tiller.tools.files import unified_diff

EXTENSION = EDITORS / "vscode"
NODE = shutil.which("node")
NPM = shutil.which("npm")

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(NODE is None or NPM is None, reason="node and npm are needed"),
    pytest.mark.timeout(600),
]

STREAM_TEXT = (
    "Hello **world** from <b>Tiller</b> & friends: `a < b`.\n\n"
    "- one\n- two\n"
)
SLEEP = "sleep 60 & echo pid=$!; wait"


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    """Run a command in editors/vscode; fail with its output unless it exits 0."""
    try:
        done = subprocess.run(
            args, cwd=EXTENSION, env=env, capture_output=True, text=True, timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        partial = [part.decode(errors="replace") if isinstance(part, bytes) else part or ""
                   for part in (exc.stdout, exc.stderr)]
        pytest.fail(f"`{shlex.join(args)}` timed out after {timeout:g}s:\n{''.join(partial)}")
    output = done.stdout + done.stderr
    if done.returncode != 0:
        pytest.fail(f"`{shlex.join(args)}` exited {done.returncode}:\n{output}")
    return output


@pytest.fixture(scope="module")
def built() -> Path:
    """node_modules installed (``npm ci`` from the lock file), type-checked, compiled to out/."""
    assert NPM is not None
    if not (EXTENSION / "node_modules").is_dir():
        lock = (EXTENSION / "package-lock.json").is_file()
        run(NPM, "ci" if lock else "install", "--no-audit", "--no-fund")
    run(NPM, "run", "check")
    run(NPM, "run", "build")
    return EXTENSION / "out" / "test"


def test_typescript_checks_and_builds(built: Path) -> None:
    # The fixture ran `npm run check` (tsc --noEmit, strict) and `npm run build`.
    assert (EXTENSION / "out" / "src" / "extension.js").is_file()
    assert (EXTENSION / "out" / "src" / "client.js").is_file()
    package = json.loads((EXTENSION / "package.json").read_text())
    commands = {c["command"] for c in package["contributes"]["commands"]}
    assert {"tiller.prompt", "tiller.steer", "tiller.followUp", "tiller.abort"} <= commands
    settings = package["contributes"]["configuration"]["properties"]
    assert settings["tiller.path"]["default"] == "tiller"
    assert {"tiller.provider", "tiller.model", "tiller.baseUrl", "tiller.extraArgs"} <= set(
        settings
    )


def _diff_cases() -> list[dict[str, str]]:
    """Old/new pairs with the diff the server itself would put in a permission preview."""
    long = "".join(f"line {i}\n" for i in range(40))
    trimmed = "".join(f"line {i}\n" for i in range(40) if i not in (3, 30))
    pairs = [
        ("one\ntwo\nthree\n", "one\nTWO\nthree\n"),
        ("", "brand new\nfile\n"),
        ("no newline", "no newline\nnow there is one\n"),
        ("a\nb\n", "a\nb"),
        (long, trimmed.replace("line 20", "LINE 20")),
    ]
    return [{"old": old, "new": new, "diff": unified_diff(old, new, "f.txt")} for old, new in pairs]


@pytest.fixture
def fakes() -> Iterator[dict[str, FakeOpenAI]]:
    names = ["stream", "tools", "steer", "reject", "files", "abort", "cancel", "dispose",
             "extension"]
    servers = {name: FakeOpenAI().start() for name in names}
    try:
        yield servers
    finally:
        for server in servers.values():
            server.close()


def test_node_suite_against_the_real_server(
    built: Path, fakes: dict[str, FakeOpenAI], tmp_path: Path
) -> None:
    assert NODE is not None
    workdir = (tmp_path / "work").resolve()
    workdir.mkdir()
    fifo = workdir / "release.fifo"
    os.mkfifo(fifo)

    steer = {
        "toolCallId": "call_wait",
        "fifo": str(fifo),
        "prompt": "start the slow job",
        "steer": "use tabs, not spaces",
        "followUp": "then run the tests",
    }
    tools = {"toolCallId": "call_echo", "command": "echo hello-from-vscode",
             "output": "hello-from-vscode"}
    fakes["stream"].enqueue(text_reply(STREAM_TEXT, chunk_size=3))
    fakes["tools"].enqueue(
        tool_call_reply([(tools["toolCallId"], "bash", {"command": tools["command"]})]),
        text_reply("Echoed."),
    )
    wait_for_fifo = {"command": f"cat {shlex.quote(str(fifo))}"}
    fakes["steer"].enqueue(
        tool_call_reply([(steer["toolCallId"], "bash", wait_for_fifo)]),
        text_reply("Steered."),
        text_reply("Followed up."),
    )
    reject = {"toolCallId": "call_touch", "file": "rejected.txt", "reason": "not in my repo"}
    fakes["reject"].enqueue(
        tool_call_reply([(reject["toolCallId"], "bash", {"command": f"touch {reject['file']}"})]),
        text_reply("OK, I won't."),
    )
    # The editor holds unsaved changes to notes.txt; the disk has an older version.
    files = {
        "notes": "notes.txt",
        "buffer": "unsaved first line\nsecond\nthird\n",
        "edited": "unsaved first line\nSECOND\nthird\n",
        "created": "sub/new.txt",
        "createdContent": "fresh file\n",
    }
    (workdir / files["notes"]).write_text("saved on disk\nsecond\n")
    fakes["files"].enqueue(
        tool_call_reply([("call_read", "read", {"path": files["notes"]})]),
        tool_call_reply([("call_edit", "edit", {
            "path": files["notes"], "edits": [{"oldText": "second", "newText": "SECOND"}]})]),
        tool_call_reply([("call_write", "write", {
            "path": files["created"], "content": files["createdContent"]})]),
        text_reply("Edited."),
    )
    for name in ("abort", "cancel", "dispose"):
        fakes[name].enqueue(tool_call_reply([("call_sleep", "bash", {"command": SLEEP})]))
    # extension.test.ts: the chat view, permission dialogs and buffer writes with a fake vscode.
    extension = {"command": "echo from-the-extension", "echoed": "from-the-extension",
                 "file": "made.txt", "content": "made in VS Code\n"}
    fakes["extension"].enqueue(
        tool_call_reply([("call_x1", "bash", {"command": extension["command"]})]),
        tool_call_reply([("call_x2", "write", {"path": extension["file"],
                                               "content": extension["content"]})]),
        text_reply("All **done**."),
    )

    scenarios: dict[str, object] = {
        "stream": {"baseUrl": fakes["stream"].url, "text": STREAM_TEXT},
        "tools": {"baseUrl": fakes["tools"].url, **tools},
        "steer": {"baseUrl": fakes["steer"].url, **steer},
        "reject": {"baseUrl": fakes["reject"].url, **reject},
        "files": {"baseUrl": fakes["files"].url, **files},
        "abort": {"baseUrl": fakes["abort"].url, "toolCallId": "call_sleep"},
        "cancel": {"baseUrl": fakes["cancel"].url, "toolCallId": "call_sleep"},
        "dispose": {"baseUrl": fakes["dispose"].url, "toolCallId": "call_sleep"},
        "extension": {"baseUrl": fakes["extension"].url, **extension},
        "diffs": _diff_cases(),
    }
    env = clean_env(
        TILLER_CMD=json.dumps([sys.executable, "-m", "tiller", *UNSANDBOXED]),
        TILLER_SCENARIOS=json.dumps(scenarios),
        TILLER_WORKDIR=str(workdir),
        TILLER_E2E="required",
        NO_COLOR="1",
    )
    test_files = sorted(str(path) for path in built.glob("*.test.js"))
    assert len(test_files) >= 4, test_files

    output = run(NODE, "--test", "--test-reporter=tap", *test_files, env=env, timeout=300)

    def summary(key: str) -> int:
        lines = [line for line in output.splitlines() if line.startswith(f"# {key} ")]
        assert lines, f"no '# {key}' in node's output:\n{output}"
        return int(lines[-1].split()[-1])

    assert summary("fail") == 0 and summary("cancelled") == 0, output
    assert summary("skipped") == 0, f"Node tests were skipped:\n{output}"
    assert summary("pass") == summary("tests") >= 39, output

    # What the model was sent, scenario by scenario.
    for fake in fakes.values():
        fake.assert_script_complete()
    assert roles(fakes["stream"].requests[0]) == ["system", "user"]
    tool_round = fakes["tools"].requests[1]
    assert roles(tool_round) == ["system", "user", "assistant", "tool"]
    assert "hello-from-vscode" in tool_round["messages"][3]["content"]
    steered, followed = fakes["steer"].requests[1:]
    assert roles(steered) == ["system", "user", "assistant", "tool", "user"]
    assert steered["messages"][3]["content"].strip() == "released"
    assert steered["messages"][4]["content"] == steer["steer"]
    assert roles(followed)[-2:] == ["assistant", "user"]
    assert followed["messages"][-1]["content"] == steer["followUp"]
    rejected = fakes["reject"].requests[1]["messages"][-1]
    assert rejected["role"] == "tool" and "rejected" in rejected["content"]
    assert reject["reason"] in rejected["content"]
    assert not (workdir / reject["file"]).exists()
    read_result = fakes["files"].requests[1]["messages"][-1]["content"]
    assert "unsaved first line" in read_result  # the editor's buffer, not the disk
    assert (workdir / files["notes"]).read_text() == "saved on disk\nsecond\n"
    assert not (workdir / files["created"]).exists()
    for name in ("abort", "cancel", "dispose"):
        assert len(fakes[name].requests) == 1
    assert fakes["extension"].requests[0]["messages"][1]["content"] == "make the file"
