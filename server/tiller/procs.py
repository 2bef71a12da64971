"""Process hygiene: keys out of the reach of the commands the server runs.

Linux only; elsewhere every function here does nothing (there is no ``prctl``).

- ``harden()``, at start-up: ``PR_SET_DUMPABLE 0`` makes the server's ``/proc/PID/environ``,
  memory and fds unreadable to other processes of the same user (the commands it runs included;
  root can still read them).
- ``scrub_environ(names)``: drop the provider keys from ``os.environ`` once the config holds
  them, so no child inherits them.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import Iterable

__all__ = ["harden", "scrub_environ"]

log = logging.getLogger(__name__)

_PR_SET_DUMPABLE = 4


def harden() -> None:
    """Make the server non-dumpable; logs (never raises) on failure."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for option, value, what in ((_PR_SET_DUMPABLE, 0, "non-dumpable"),):
        if libc.prctl(option, value, 0, 0, 0) != 0:
            error = os.strerror(ctypes.get_errno())
            log.warning("could not make the server %s: %s", what, error)


def scrub_environ(names: Iterable[str]) -> None:
    """Remove ``names`` from ``os.environ`` (and the C environment) where present."""
    for name in names:
        os.environ.pop(name, None)
