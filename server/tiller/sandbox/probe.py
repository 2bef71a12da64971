"""Whether commands can be sandboxed here: bubblewrap installed and allowed to make its
namespaces. Probed once per process by running bwrap with the options every sandboxed command
uses (``start()`` at start-up runs it in a thread, so ``initialize`` does not wait for it);
``availability()`` returns the answer, probing now if nothing started it.

The answer is logged once (a warning when the sandbox is unavailable). macOS (Seatbelt's
``sandbox-exec``) and other systems are not supported yet: the answer says so.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import threading

from tiller.frozen import frozen

__all__ = ["Availability", "availability", "bwrap_path", "reset", "shell", "start"]

log = logging.getLogger(__name__)

PROBE_TIMEOUT = 10.0
"""Seconds the probe may take; a bwrap that hangs that long counts as unusable."""
BWRAP_ENV = "TILLER_BWRAP"
"""An environment variable naming the bwrap binary to use (default: ``bwrap`` on PATH)."""


@frozen
class Availability:
    """``ok``: commands can run sandboxed; else ``reason`` says why not, in words a user can
    act on. ``kind``: the sandbox used (``bubblewrap``)."""

    ok: bool
    reason: str | None = None
    kind: str = "bubblewrap"

    def wire(self) -> dict[str, object]:
        """As protocol.md's ``SandboxAvailability``: ``{available, kind, reason?}``."""
        found: dict[str, object] = {"available": self.ok, "kind": self.kind}
        if self.reason is not None:
            found["reason"] = self.reason
        return found


_lock = threading.Lock()
_result: Availability | None = None
_thread: threading.Thread | None = None


def shell() -> str:
    """The shell commands run in: ``/bin/bash``, else ``/bin/sh``."""
    return "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"


def bwrap_path() -> str | None:
    """The bwrap binary: ``$TILLER_BWRAP`` if set, else ``bwrap`` on PATH; None if missing."""
    chosen = os.environ.get(BWRAP_ENV)
    if chosen:
        return chosen if os.access(chosen, os.X_OK) else None
    return shutil.which("bwrap")


def _probe() -> Availability:
    if sys.platform == "darwin":
        return Availability(False, "the sandbox is not supported on macOS yet (Seatbelt's "
                            "sandbox-exec is planned): commands run unsandboxed", "seatbelt")
    if not sys.platform.startswith("linux"):
        return Availability(False, f"the sandbox is not supported on {sys.platform}: commands "
                            "run unsandboxed", "none")
    bwrap = bwrap_path()
    if bwrap is None:
        return Availability(False, "bubblewrap (bwrap) is not installed: install it "
                            "(apt-get install bubblewrap, dnf install bubblewrap) to run "
                            "commands in the sandbox")
    argv = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-net", "--cap-drop", "ALL",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--", shell(), "-c", ":"]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=PROBE_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Availability(False, f"bubblewrap ({bwrap}) could not be run: {exc}")
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        detail = said[-1] if said else f"exit status {done.returncode}"
        return Availability(False, f"bubblewrap ({bwrap}) cannot make its namespaces here: "
                            f"{detail} (are unprivileged user namespaces allowed? "
                            "sysctl kernel.unprivileged_userns_clone, "
                            "kernel.apparmor_restrict_unprivileged_userns)")
    return Availability(True)


def _run() -> None:
    global _result
    found = _probe()
    with _lock:
        if _result is None:
            _result = found
            if found.ok:
                log.info("commands run in the %s sandbox", found.kind)
            else:
                log.warning("%s", found.reason)


def start() -> None:
    """Start the probe in a thread (once); ``availability()`` waits for it."""
    global _thread
    with _lock:
        if _thread is not None or _result is not None:
            return
        _thread = threading.Thread(target=_run, name="sandbox-probe", daemon=True)
        _thread.start()


def availability() -> Availability:
    """Whether commands can be sandboxed here (probed once per process; blocking until then)."""
    start()
    thread = _thread
    if thread is not None:
        thread.join()
    assert _result is not None
    return _result


def reset() -> None:
    """Forget the answer (tests that change ``$TILLER_BWRAP``)."""
    global _result, _thread
    with _lock:
        _result, _thread = None, None
