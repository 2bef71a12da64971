"""acpx, a headless ACP client nobody here wrote, drives the real ``tiller --acp`` against the
loopback OpenAI fake (tests/fake_openai.py), as its users would from a shell.

acpx 0.19.1 and the Node 22 it needs (>= 22.13; Debian's Node 20 gets an ancient acpx) are
pinned in tests/support/acpx/package.json and installed by ``.ci/run`` (``npm ci`` there).
Without them the tests are skipped, unless ``TILLER_ACPX_E2E=required`` (``.ci/run`` sets it),
which makes a missing install a failure. acpx keeps its state under ``$HOME/.acpx``: each test
gives it a home of its own, and a queue-owner time-to-live of a second, so its background
owner (which holds the ``tiller`` process between prompts) ends by itself.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from support.fake_openai import FakeOpenAI, error_reply, text_reply, tool_call_reply
from support.helpers import clean_env

ROOT = Path(__file__).resolve().parents[3]
ACPX_HOME = ROOT / "tests" / "support" / "acpx" / "node_modules" / ".bin"
ACPX, NODE = ACPX_HOME / "acpx", ACPX_HOME / "node"
READY = ACPX.exists() and NODE.exists()
REQUIRED = os.environ.get("TILLER_ACPX_E2E") == "required"

pytestmark = [
    pytest.mark.process,
    pytest.mark.timeout(300),
    pytest.mark.skipif(not READY and not REQUIRED,
                       reason="`npm ci` in tests/support/acpx installs acpx and Node 22 "
                              "(.ci/run does)"),
]

TILLER = ROOT / ".venv" / "bin" / "tiller"


class Acpx:
    """acpx with ``--agent`` set to ``tiller --acp`` on ``fake``, in workspace ``cwd``, with a
    home of its own."""

    def __init__(self, fake: FakeOpenAI, tmp_path: Path) -> None:
        assert READY, "acpx is not installed: `npm ci` in tests/support/acpx (.ci/run does)"
        self.cwd = tmp_path / "ws"
        self.cwd.mkdir()
        home = tmp_path / "home"
        home.mkdir()
        tiller = TILLER if TILLER.exists() else Path("tiller")
        self.agent = (f"{tiller} --acp --base-url {fake.url} "
                      f"--session-dir {tmp_path / 'sessions'}")
        self.env = clean_env(HOME=str(home), PATH=f"{ACPX_HOME}:{os.environ['PATH']}")

    def argv(self, *args: str) -> list[str]:
        return [str(ACPX), "--agent", self.agent, "--cwd", str(self.cwd), "--ttl", "1", *args]

    def run(self, *args: str, code: int = 0) -> str:
        """Run acpx to its end; its stdout (fails the test on another exit code)."""
        done = subprocess.run(self.argv(*args), env=self.env, capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
        return done.stdout

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.argv(*args), env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def wait_idle(self, session: str) -> None:
        """Until the session's queue owner has ended (its ``tiller`` with it): acpx's own
        ``status`` says ``idle`` (bounded: the owner lives a second after its last prompt)."""
        for _ in range(300):
            if "status: idle" in self.run("status", "-s", session):
                return
        pytest.fail(f"acpx's owner of {session} did not end")


def test_acpx_prints_a_bash_calls_output_and_a_failed_calls_reason(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """acpx declares terminals: the output of a command run in one used to show only as
    ``{exitCode, truncated, terminalId}``; a failed call's reason must be agent text too."""
    fake_openai.enqueue(
        tool_call_reply([("b1", "bash", {"command": "echo $((6*7))"})]),
        text_reply("It is forty-two."),
        error_reply(400, "The model `gpt-nope` does not exist"),
    )
    acpx = Acpx(fake_openai, tmp_path)
    ran = acpx.run("--approve-all", "exec", "compute it")
    failed = acpx.run("exec", "hello", code=1)

    lines = [line.strip() for line in ran.splitlines()]
    assert "[tool] echo $((6*7)) (completed)" in lines
    assert "42" in lines  # the command's output, in the final tool_call_update
    assert "It is forty-two." in lines and "[done] end_turn" in lines
    reason = "openai: 400 Bad Request: The model `gpt-nope` does not exist"
    assert f"Error: {reason}" in failed.splitlines()  # said as the agent's text
    assert f"[error] RUNTIME: {reason}" in failed.splitlines()  # and still a failed turn


def test_acpx_cancels_a_turn_and_resumes_a_named_session(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """A named session, a prompt, a cancelled one, then, once acpx's owner and its ``tiller``
    have ended, a prompt that resumes the session with its history. ``sessions list`` (ACP's
    session/list) shows the used session only, not the one ``sessions new`` made and nothing
    used (acpx listed it as ``-``)."""
    held = threading.Event()
    fake_openai.enqueue(text_reply("Noted: banana."), text_reply("never sent", gate=held),
                        text_reply("The word was banana."))
    acpx = Acpx(fake_openai, tmp_path)
    acpx.run("sessions", "new", "--name", "scratch")  # never used
    acpx.wait_idle("scratch")
    acpx.run("sessions", "new", "--name", "backend")
    first = acpx.run("prompt", "-s", "backend", "remember the word banana")
    waiting = acpx.start("prompt", "-s", "backend", "now wait")
    try:
        fake_openai.wait_for_requests(2, timeout=120)  # acpx and tiller start on a busy machine
        assert "cancel requested" in acpx.run("cancel", "-s", "backend")
        cancelled, _ = waiting.communicate(timeout=60)
    finally:
        held.set()
        if waiting.poll() is None:
            waiting.kill()
    acpx.wait_idle("backend")
    resumed = acpx.run("prompt", "-s", "backend", "what was the word?")
    listed = acpx.run("sessions", "list")
    acpx.wait_idle("backend")

    assert "Noted: banana." in first.splitlines()
    assert waiting.returncode == 0 and "[done] cancelled" in cancelled.splitlines()
    assert "[client] session/resume (running)" in resumed.splitlines()
    assert "The word was banana." in resumed.splitlines()
    seen = [m["content"] for m in fake_openai.requests[2]["messages"] if m["role"] == "user"]
    assert seen == ["remember the word banana", "now wait", "what was the word?"]
    rows = [line.split("\t") for line in listed.splitlines() if line.strip()]
    assert [row[1] for row in rows] == ["remember the word banana"]  # not the unused one
