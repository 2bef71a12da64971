"""The VS Code extension end to end, in a real VS Code: code-server 4.100.3 (VS Code 1.100.3) in
headless Chromium driven by puppeteer-core, with the packaged .vsix installed and the real
``tiller`` (this checkout) talking to a scripted loopback model (tests/support/fake_openai.py).

Needs the one-time set-up ``editors/vscode/e2e/setup.sh`` (code-server, chromium, puppeteer-core
and @vscode/vsce under ``~/.cache/tiller/code-server``, or ``$TILLER_E2E_HOME``). Without it the
test is skipped, unless ``TILLER_VSCODE_E2E=required`` (``make test-vscode`` sets it), which makes
a missing set-up a failure. The browser side is editors/vscode/e2e/drive.cjs: it runs the story
below step by step and prints one JSON line per step; screenshots go to a folder this test prints.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import UNSANDBOXED, clean_env
from support.paths import EDITORS

EXTENSION = EDITORS / "vscode"
E2E_HOME = Path(
    os.environ.get("TILLER_E2E_HOME", Path.home() / ".cache" / "tiller" / "code-server")
)
CODE_SERVER = E2E_HOME / "node_modules" / ".bin" / "code-server"
VSCE = E2E_HOME / "node_modules" / ".bin" / "vsce"
CHROMIUM = shutil.which("chromium")
READY = (E2E_HOME / ".done-4.100.3").is_file() and CHROMIUM is not None
REQUIRED = os.environ.get("TILLER_VSCODE_E2E") == "required"
SCREENSHOTS = Path(
    os.environ.get("TILLER_E2E_SCREENSHOTS", E2E_HOME.parent / "vscode-e2e-screenshots")
)

pytestmark = [
    pytest.mark.process,
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        not READY and not REQUIRED,
        reason="run editors/vscode/e2e/setup.sh once (or `make test-vscode`)",
    ),
]


def run(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    """Run a command; fail the test with its output unless it exits 0."""
    done = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    output = done.stdout + done.stderr
    if done.returncode != 0:
        pytest.fail(f"`{' '.join(args)}` exited {done.returncode}:\n{output}")
    return output


@pytest.fixture(scope="module")
def vsix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The extension built and packaged with vsce (which fails on packaging warnings here)."""
    assert READY, "the e2e set-up is missing: run editors/vscode/e2e/setup.sh"
    if not (EXTENSION / "node_modules").is_dir():
        run("npm", "ci", "--no-audit", "--no-fund", cwd=EXTENSION)
    run("npm", "run", "build", cwd=EXTENSION)
    out = tmp_path_factory.mktemp("vsix") / "tiller.vsix"
    output = run(str(VSCE), "package", "--out", str(out), cwd=EXTENSION)
    assert "WARNING" not in output, output
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class CodeServer:
    """A code-server for one workspace, with its own user data and extensions folders."""

    def __init__(self, root: Path, workspace: Path, settings: dict[str, Any], vsix: Path) -> None:
        self.root, self.workspace = root, workspace
        self.user_data, self.extensions = root / "user-data", root / "extensions"
        (self.user_data / "User").mkdir(parents=True)
        (self.user_data / "User" / "settings.json").write_text(json.dumps(settings, indent=2))
        self.port = free_port()
        self.config = root / "config.yaml"
        self.config.write_text(f"bind-addr: 127.0.0.1:{self.port}\nauth: none\ncert: false\n")
        self.env = clean_env(OPENAI_API_KEY="sk-e2e", HOME=str(root / "home"))
        self.log = root / "code-server.log"
        run(*self.argv(), "--install-extension", str(vsix), cwd=root, env=self.env)
        self.proc: subprocess.Popen[str] | None = None

    def argv(self) -> list[str]:
        return [str(CODE_SERVER), "--config", str(self.config), "--user-data-dir",
                str(self.user_data), "--extensions-dir", str(self.extensions),
                "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust"]

    def start(self) -> str:
        """Start it and return the URL that opens the workspace, once it listens."""
        self.proc = subprocess.Popen(
            [*self.argv(), str(self.workspace)], cwd=self.root, env=self.env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        assert self.proc.stdout is not None
        with self.log.open("w") as log:
            for line in self.proc.stdout:
                log.write(line)
                if "HTTP server listening on" in line:
                    break
            else:
                pytest.fail(f"code-server exited:\n{self.log.read_text()}")
        return f"http://127.0.0.1:{self.port}/?folder={self.workspace}"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    try:
        yield server
    finally:
        server.close()


def drive(story: dict[str, Any], root: Path) -> list[dict[str, Any]]:
    """Run drive.cjs on `story`; return its step reports, failing with them on an error."""
    path = root / "story.json"
    path.write_text(json.dumps(story))
    env = clean_env(NODE_PATH=str(E2E_HOME / "node_modules"))
    done = subprocess.run(
        ["node", str(EXTENSION / "e2e" / "drive.cjs"), str(path)], cwd=root, env=env,
        capture_output=True, text=True, timeout=600, check=False,
    )
    reports = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0:
        last = reports[-1] if reports else {}
        pytest.fail(f"drive.cjs failed at step {last.get('step')!r}: {last.get('error', '')[:1500]}"
                    f"\n{done.stderr[-3000:]}")
    return reports


NOTES = "written by the agent\n"
CONTINUED = "Continued after the stop."
SAME = "Same conversation after the restart."
PNG = (  # a 1x1 red PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
STREAM = "Hello from the **scripted** model, streamed in small pieces to VS Code."
TS_SOURCE = "export const flag: boolean = 0;\nexport const one: number = 1;\n"
TS_EDIT = {"path": "calc.ts", "edits": [{"oldText": "= 1;", "newText": '= "one";'}]}
TS_REPLY = "one is a word now."


def test_chat_in_real_vscode(vsix: Path, fake: FakeOpenAI, tmp_path: Path) -> None:
    root = tmp_path
    # Not under tmp_path: pytest keeps only its last few temporary folders.
    shots = SCREENSHOTS
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)
    print(f"\nscreenshots: {shots}")
    workspace = root / "workspace"
    workspace.mkdir()
    (workspace / "calc.ts").write_text(TS_SOURCE)
    toml = root / "config.toml"  # the language server's answers come sooner: a bound only
    toml.write_text("[diagnostics]\neditor_timeout = 30\n")
    png = root / "red.png"
    png.write_bytes(base64.b64decode(PNG))
    settings = {
        "files.autoSave": "off",
        "workbench.startupEditor": "none",
        "security.workspace.trust.enabled": False,
        "extensions.autoUpdate": False,
        "telemetry.telemetryLevel": "off",
        "tiller.path": str(Path(sys.executable).parent / "tiller"),
        "tiller.provider": "openai",
        "tiller.baseUrl": fake.url,
        "tiller.model": "fake-model",
        # the review and withdraw steps answer the question a command asks: unsandboxed
        "tiller.extraArgs": ["--session-dir", str(root / "sessions"), "--config", str(toml),
                             *UNSANDBOXED],
    }
    fake.enqueue(
        text_reply(STREAM, chunk_size=3),
        tool_call_reply([("call_1", "write", {"path": "notes.txt", "content": NOTES})]),
        tool_call_reply([("call_2", "bash", {"command": "cat notes.txt"})]),
        text_reply("The notes are on disk."),
        tool_call_reply([("call_1", "bash", {"command": "touch withdrawn.txt"})]),
        text_reply(CONTINUED),
        text_reply(SAME),
        text_reply("The notes say they were written by the agent."),
        tool_call_reply([("call_9", "write", {"path": "undone.txt", "content": "to be undone\n"})]),
        text_reply("Wrote undone.txt."),
        text_reply("A tiny red square."),
        tool_call_reply([("call_ts", "edit", TS_EDIT)]),
        text_reply(TS_REPLY),
    )
    steps: list[dict[str, Any]] = [
        {"name": "stream", "kind": "stream", "prompt": "say hello",
         "reply": STREAM.replace("**", ""), "bold": "scripted", "model": "fake-model"},
        {"name": "review", "kind": "review", "prompt": "write the notes", "file": "notes.txt",
         "command": "cat notes.txt", "reply": "The notes are on disk.",
         "output": NOTES.strip()},
        {"name": "withdraw", "kind": "withdraw", "prompt": "touch a file",
         "command": "touch withdrawn.txt"},
        {"name": "continue", "kind": "continue", "reply": CONTINUED},
        {"name": "reload", "kind": "reload", "command": "cat notes.txt", "changed": "notes.txt",
         "texts": ["say hello", STREAM.replace("**", ""), "write the notes", CONTINUED]},
        {"name": "settings", "kind": "settings", "prompt": "still there?", "reply": SAME,
         "file": str(workspace / ".vscode" / "settings.json"),
         "change": {"tiller.extraArgs": [*settings["tiller.extraArgs"], "--max-turns", "30"]},
         "texts": ["say hello", CONTINUED]},
        {"name": "mention", "kind": "mention", "prompt": "what do @notes.txt say?",
         "file": "notes.txt", "reply": "The notes say they were written by the agent."},
        {"name": "undo", "kind": "undo", "prompt": "write undone.txt", "file": "undone.txt",
         "reply": "Wrote undone.txt."},
        {"name": "image", "kind": "image", "prompt": "what is in this image?", "png": str(png),
         "reply": "A tiny red square."},
        {"name": "history", "kind": "history", "title": "say hello",
         "texts": ["say hello", "A tiny red square."]},
        {"name": "diagnostics", "kind": "diagnostics", "file": "calc.ts",
         "prompt": "make one a word", "reply": TS_REPLY},
    ]
    server = CodeServer(root, workspace, settings, vsix)
    try:
        url = server.start()
        story = {"url": url, "chromium": CHROMIUM, "screenshots": str(shots), "steps": steps}
        reports = drive(story, root)
    finally:
        server.stop()
    assert [r["step"] for r in reports] == ["open", *[s["name"] for s in steps]]
    fake.assert_script_complete()
    assert fake.requests[0]["messages"][-1]["content"] == "say hello"
    assert not (workspace / "withdrawn.txt").exists()
    # The allowed write was saved: the agent's next bash read it from disk.
    assert (workspace / "notes.txt").read_text() == NOTES
    cat_result = fake.requests[3]["messages"][-1]
    assert cat_result["role"] == "tool" and NOTES.strip() in cat_result["content"]
    # After the settings change the restarted server still had the whole conversation.
    after_restart = [m["content"] for m in fake.requests[-7]["messages"] if m["role"] == "user"]
    assert after_restart[0] == "say hello" and after_restart[-1] == "still there?"
    # The @notes.txt mention sent the file's content along with the prompt.
    mentioned = json.dumps(fake.requests[-6]["messages"][-1]["content"])
    assert "what do @notes.txt say?" in mentioned and '<file path=\\"notes.txt\\">' in mentioned
    assert NOTES.strip() in mentioned
    # The attached image went to the model as an image part of the user message.
    image_parts = fake.requests[-3]["messages"][-1]["content"]
    image_url = {"url": f"data:image/png;base64,{PNG}"}
    assert {"type": "image_url", "image_url": image_url} in image_parts
    # Undo of the last run removed the file it created; the earlier run's file stays.
    assert not (workspace / "undone.txt").exists()
    assert (workspace / "notes.txt").read_text() == NOTES
    # The edit's result told the model the TypeScript server's new error, not the old one.
    edited = fake.requests[-1]["messages"][-1]
    assert edited["role"] == "tool" and edited["tool_call_id"] == "call_ts"
    assert edited["content"].startswith("Applied 1 edit to calc.ts\n\nNew problems after this "
                                         "change (the editor's diagnostics; they were not there "
                                         "before it): 1 error.\ncalc.ts:2:14: error: ")
    assert "Type 'string' is not assignable to type 'number'." in edited["content"]
    assert "[ts 2322]" in edited["content"] and "'boolean'" not in edited["content"]
    assert (workspace / "calc.ts").read_text() == TS_SOURCE.replace("= 1;", '= "one";')
