"""``tiller.store.private``: files that hold what was typed or said are the user's alone —
created 0600 in folders created 0700, an existing file's group and other bits cleared, an
existing folder left as it is. Plus the server's own ``--log-file``."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from support.helpers import clean_env
from tiller.store.private import private_file


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_and_its_new_folders_are_private(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "log"
    private_file(target)
    assert target.read_bytes() == b""
    assert (_mode(target), _mode(target.parent), _mode(target.parent.parent)) == (
        0o600, 0o700, 0o700)


def test_an_existing_file_keeps_its_text_and_loses_what_others_could_do(tmp_path: Path) -> None:
    shared = tmp_path / "history"
    shared.write_text("typed\n")
    shared.chmod(0o664)
    tmp_path.chmod(0o755)
    private_file(shared)
    assert shared.read_text() == "typed\n"
    assert (_mode(shared), _mode(tmp_path)) == (0o600, 0o755)


@pytest.mark.process
def test_the_servers_log_file_is_private(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "server.log"
    command = [sys.executable, "-m", "tiller", "--no-session", "--cwd", str(tmp_path),
               "--log-file", str(log), "--log-level", "DEBUG"]
    done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
                          env=clean_env())
    assert done.returncode == 0, done.stderr
    assert log.stat().st_size > 0
    assert (_mode(log), _mode(log.parent)) == (0o600, 0o700)
