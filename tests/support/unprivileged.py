"""Running the server (or Python) as an unprivileged user when the tests run as root: root
reads any process's ``/proc`` entries and needs no user namespace for bubblewrap, so only a
non-root server shows what ``PR_SET_DUMPABLE`` and the sandbox do for an ordinary user."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from support.paths import PACKAGE

__all__ = ["NOBODY", "as_nobody", "open_workspace", "python_as_nobody"]

NOBODY = 65534


def as_nobody() -> list[str]:
    """The command prefix that runs the server as an unprivileged user: root reads any process's
    ``/proc`` entries, so only a non-root server shows what ``PR_SET_DUMPABLE`` protects."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("this test runs as root and needs setpriv (util-linux) to drop to uid "
                    f"{NOBODY}: install util-linux or run the tests as a non-root user")
    return [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def python_as_nobody(within: Sequence[str] = ()) -> tuple[list[str], dict[str, str]]:
    """The command that runs this Python as ``as_nobody`` does, and the environment it needs, for
    a test whose program starts Python again itself (``tiller run`` spawns its server): once the
    user is dropped, this venv's interpreter may live where that user cannot exec it (a pyenv
    under /root), so the same version's system interpreter is used with this venv's
    ``site-packages`` and the server's source on ``PYTHONPATH``. ``within``: a command prefix
    (a bwrap command line) the interpreter must also run under: outside a user namespace the
    dropped user may still pass where, inside one, it cannot."""
    prefix = as_nobody()
    if not prefix:
        return [sys.executable], {}
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    installed = sysconfig.get_paths()
    paths = [installed["purelib"], installed["platlib"], str(PACKAGE.parent)]
    for candidate in (sys.executable, *(f"/usr/{where}bin/python{version}"
                                        for where in ("", "local/"))):
        runs = subprocess.run([*prefix, *within, "/bin/sh", "-c", 'exec "$0" -c ""', candidate],
                              capture_output=True, check=False)
        if runs.returncode == 0:
            return [*prefix, candidate], {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}
    pytest.fail(f"no Python {version} that uid {NOBODY} may run: run the tests as a non-root "
                "user, or install the system's python3")


@contextlib.contextmanager
def open_workspace(parent: str | None = None) -> Iterator[Path]:
    """A workspace any user may use (pytest's tmp_path is private to root), in ``parent``
    (default: the temporary folder), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="tiller-procs-", dir=parent))
    try:
        path.chmod(0o777)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
