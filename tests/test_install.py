"""The checkout's set-up (scripts/install.py, the Makefile): the first install says what it is
doing and how long it takes, with a progress line while llama.cpp compiles, instead of minutes
of silence; ``make chat`` installs only what chat needs, ``make install`` (and so ``make test``)
everything.

The script runs for real, on a venv whose ``python`` is a stand-in for pip: it records its
arguments, prints what a verbose ``pip wheel`` of llama-cpp-python prints (ninja's ``[n/m]``
steps) and holds the build until the test lets it finish, so a progress line is seen while the
build is under way, never guessed from a sleep."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.paths import REPO

SCRIPT = REPO / "scripts" / "install.py"
DEADLINE = 30.0
WHEEL = "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"
FAKE_PIP = f"""#!{sys.executable}
import json, os, pathlib, sys, time
args = sys.argv[1:]
with open(os.environ["FAKE_PIP_CALLS"], "a") as calls:
    calls.write(json.dumps(args) + "\\n")
if args[:3] == ["-m", "pip", "wheel"]:
    print("Collecting llama-cpp-python<0.4,>=0.3", flush=True)
    print("  Downloading llama_cpp_python-0.3.36.tar.gz (50.0 MB)", flush=True)
    print("  -- The CXX compiler identification is GNU 12.2.0", flush=True)
    print("  [1/4] Building C object vendor/llama.cpp/ggml/src/ggml.c.o", flush=True)
    print("  [2/4] Building CXX object vendor/llama.cpp/src/llama.cpp.o", flush=True)
    release = pathlib.Path(os.environ["FAKE_BUILD_RELEASE"])
    while not release.exists():
        time.sleep(0.02)
    if release.read_text() == "fail":
        print("  error: the C++ compiler was killed (out of memory?)", flush=True)
        sys.exit(1)
    print("  [4/4] Linking CXX shared library vendor/llama.cpp/bin/libllama.so", flush=True)
    out = pathlib.Path(args[args.index("-w") + 1])
    (out / "{WHEEL}").write_bytes(b"a wheel")
    print("Created wheel for llama-cpp-python", flush=True)
elif "install" in args:
    print("Collecting pydantic<3,>=2.7", flush=True)
    print("Installing collected packages: tiller", flush=True)
"""


class Install:
    """scripts/install.py running on a stand-in venv; ``expect`` reads its output."""

    def __init__(self, tmp_path: Path, *extra: str, wheel_cached: bool = False) -> None:
        self.venv, self.wheels = tmp_path / ".venv", tmp_path / "wheels"
        (self.venv / "bin").mkdir(parents=True)
        python = self.venv / "bin" / "python"
        python.write_text(FAKE_PIP)
        python.chmod(0o755)
        if wheel_cached:
            self.wheels.mkdir()
            (self.wheels / WHEEL).write_bytes(b"built yesterday")
        self.calls, self.release = tmp_path / "calls.jsonl", tmp_path / "release"
        env = {**os.environ, "FAKE_PIP_CALLS": str(self.calls),
               "FAKE_BUILD_RELEASE": str(self.release)}
        self.process = subprocess.Popen(
            [sys.executable, str(SCRIPT), "--venv", str(self.venv), "--wheels", str(self.wheels),
             "--progress-every", "0.05", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def expect(self, text: str) -> str:
        """The next line containing ``text`` (failing at the deadline or the end)."""
        deadline = time.monotonic() + DEADLINE
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                pytest.fail(f"ended without {text!r}:\n" + "\n".join(self.output))
            self.output.append(line)
            if text in line:
                return line
        pytest.fail(f"no {text!r} in time:\n" + "\n".join(self.output))

    def wait(self) -> int:
        status = self.process.wait(timeout=DEADLINE)
        while (line := self.lines.get(timeout=DEADLINE)) is not None:
            self.output.append(line)
        return status

    def pip_calls(self) -> list[list[str]]:
        return [json.loads(line) for line in self.calls.read_text().splitlines()]


@pytest.fixture
def installs(tmp_path: Path) -> Iterator[list[Install]]:
    started: list[Install] = []
    yield started
    for install in started:
        if install.process.poll() is None:
            install.release.write_text("fail")
            install.process.kill()
            install.process.wait()


@pytest.mark.process
def test_the_first_install_says_what_it_builds_and_how_far_it_got(
    tmp_path: Path, installs: list[Install]
) -> None:
    install = Install(tmp_path)
    installs.append(install)
    install.expect("• building llama-cpp-python (llama.cpp, which runs the embedded model) from "
                   "source, once per machine: 4 to 12 minutes on 2 cores")
    install.expect(f"the whole log: {install.wheels / 'build.log'}")
    progress = install.expect("compiling llama.cpp: 2 of 4 steps (50%)")
    assert progress.startswith("  … ") and " s: " in progress  # how long it has been going
    assert not (install.wheels / WHEEL).exists()  # no half-made wheel where installs look
    install.release.write_text("go")
    install.expect("  built in ")
    install.expect("• installing Tiller (editable, from this checkout) and what `tiller chat` "
                   "needs")
    done = install.expect("installed in ")
    assert f"The command is {install.venv}/bin/tiller" in done  # not on PATH by itself

    assert install.wait() == 0, "\n".join(install.output)
    assert (install.wheels / WHEEL).read_bytes() == b"a wheel"
    assert [p.name for p in install.wheels.iterdir() if p.name.startswith(".building")] == []
    assert "[2/4] Building CXX object" in (install.wheels / "build.log").read_text()
    wheel_call, = [call for call in install.pip_calls() if call[2] == "wheel"]
    assert "--verbose" in wheel_call and "--quiet" not in wheel_call
    *_, last = install.pip_calls()
    assert last[:3] == ["-m", "pip", "install"] and str(install.wheels / WHEEL) in last
    assert last[last.index("-e") + 1] == ".[local]"  # chat's needs: no test tools


@pytest.mark.process
def test_a_built_wheel_is_used_and_dev_adds_the_test_tools(
    tmp_path: Path, installs: list[Install]
) -> None:
    install = Install(tmp_path, "--extras", "dev,local", wheel_cached=True)
    installs.append(install)
    install.expect(f"the wheel built before, {install.wheels / WHEEL}")
    install.expect("the extras dev,local (the tests' and linters' tools too)")

    assert install.wait() == 0, "\n".join(install.output)
    assert not [call for call in install.pip_calls() if call[2] == "wheel"]  # not rebuilt
    *_, last = install.pip_calls()
    assert last[last.index("-e") + 1] == ".[dev,local]"
    assert "compiling" not in "\n".join(install.output)


@pytest.mark.process
def test_a_failed_build_shows_the_end_of_its_log(
    tmp_path: Path, installs: list[Install]
) -> None:
    install = Install(tmp_path)
    installs.append(install)
    install.expect("compiling llama.cpp: 2 of 4 steps")
    install.release.write_text("fail")
    install.expect("✗ failed (exit status 1) after ")
    assert install.expect("[2/4] Building CXX object").startswith("  | ")
    assert install.expect("error: the C++ compiler was killed").startswith("  | ")

    assert install.wait() == 1
    assert not (install.wheels / WHEEL).exists()
    assert not [call for call in install.pip_calls() if "-e" in call]  # nothing installed


def dry_run(target: str, tmp_path: Path) -> str:
    """The commands ``make TARGET`` would run on a fresh checkout (``make -n``)."""
    done = subprocess.run(["make", "-n", "--no-print-directory", "-C", str(REPO), target,
                           f"VENV={tmp_path / 'venv'}"],
                          capture_output=True, text=True, timeout=DEADLINE, check=True)
    return done.stdout


def extras(commands: str) -> list[str]:
    """The ``--extras`` each scripts/install.py command installs."""
    return [line.split("--extras ", 1)[1].split()[0] for line in commands.splitlines()
            if "scripts/install.py --venv" in line]


def test_make_chat_installs_what_chat_needs_and_make_install_everything(tmp_path: Path) -> None:
    chat = dry_run("chat", tmp_path)
    assert extras(chat) == ["local"]  # no pytest, mypy, ruff, Neovim, test MCP servers
    assert chat.splitlines()[-1].strip() == f"{tmp_path / 'venv'}/bin/tiller chat"
    for target in ("install", "test", "lint"):
        assert extras(dry_run(target, tmp_path)) == ["dev,local"], target
