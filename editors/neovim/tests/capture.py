"""Capture the screen of a real tiller.nvim session for the README (not a test).

Runs Neovim in a tmux terminal against the real ``tiller`` and the loopback fake of the
OpenAI API from ``tests/fake_openai.py``, types what a user would, and prints the screen when
the first permission question is shown and when the run is over. Usage, from the repository
root: ``.venv/bin/python editors/neovim/tests/capture.py``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply  # noqa: E402


def screen() -> str:
    out = subprocess.run(["tmux", "capture-pane", "-p", "-t", "capture"], capture_output=True,
                         text=True, check=True).stdout
    return out.rstrip() + "\n"


def wait_for(text: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = screen()
        if text in shown:
            return shown
        time.sleep(0.1)
    raise SystemExit(f"{text!r} never appeared:\n{screen()}")


def keys(*items: str) -> None:
    subprocess.run(["tmux", "send-keys", "-t", "capture", *items], check=True)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="tiller-capture-"))
    (work / "greet.py").write_text('def greet(name):\n    return f"hello {name}"\n')
    edit = {"path": "greet.py", "edits": [{
        "oldText": "def greet(name):\n",
        "newText": 'def greet(name):\n    """Say hello to `name`."""\n'}]}
    check = "python3 -c 'import greet; help(greet.greet)' | cat | head -4"
    with FakeOpenAI() as fake:
        fake.enqueue(
            tool_call_reply([("call_1", "edit", edit)], text="I'll add a docstring."),
            tool_call_reply([("call_2", "bash", {"command": check})]),
            text_reply("Done: `greet` now has a docstring, and `help()` shows it."),
        )
        setup = (f"lua require('tiller').setup({{cmd = {{'{ROOT}/.venv/bin/tiller'}}, "
                 f"args = {{'--base-url', '{fake.url}', '--no-session'}}}})")
        nvim = ["nvim", "--clean", "-u", "NONE", "--cmd", f"set rtp+={ROOT}/editors/neovim",
                "--cmd", "set laststatus=2", "-c", setup, "greet.py"]
        subprocess.run(["tmux", "new-session", "-d", "-s", "capture", "-x", "112", "-y", "22",
                        "-c", str(work), *nvim], check=True)
        try:
            wait_for("greet.py")
            keys("V", "j", ":")
            keys("Tiller add a docstring", "Enter")
            print(wait_for("a: allow once"))
            keys("a")
            wait_for("gd: view")
            keys("a")
            print(wait_for("Tiller: idle"))
        finally:
            subprocess.run(["tmux", "kill-session", "-t", "capture"], check=False)


if __name__ == "__main__":
    main()
