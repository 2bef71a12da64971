"""Which workspace hook files the user trusts: remembered per workspace, file and content.

A workspace's ``.tiller/settings.json`` and ``.claude/settings.json`` come with the code (a
cloned repository): their hooks run commands as the user, so they run only once the user said
so. An answer is remembered for the file's exact content (its SHA-256): a changed file is asked
about again. ``TrustStore`` keeps the "always"/"never" answers in ``hooks-trust.json`` under
Tiller's data folder (0600, written whole and renamed into place); a file it cannot read counts
as empty, so every workspace is asked again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from tiller.store.private import PRIVATE_FILE, private_dir

__all__ = ["TRUST_FILE", "TrustStore", "content_hash"]

log = logging.getLogger(__name__)

TRUST_FILE = "hooks-trust.json"


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class TrustStore:
    """The remembered answers, in ``folder / TRUST_FILE``. Blocking file I/O: call it from a
    worker thread."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / TRUST_FILE

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("hooks: cannot read %s (%s): every workspace is asked again",
                        self.path, exc)
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, workspace: Path, file: str, digest: str) -> bool | None:
        """The answer for ``file`` of ``workspace`` at content ``digest``; None: never asked
        (or asked about other content)."""
        entry = self._read().get(str(workspace), {}).get(file)
        if not isinstance(entry, dict) or entry.get("sha256") != digest:
            return None
        trusted = entry.get("trusted")
        return trusted if isinstance(trusted, bool) else None

    def put(self, workspace: Path, file: str, digest: str, trusted: bool) -> None:
        """Remember the answer for this content (the file's earlier answers are forgotten)."""
        data = self._read()
        files = data.setdefault(str(workspace), {})
        if not isinstance(files, dict):
            files = data[str(workspace)] = {}
        files[file] = {"sha256": digest, "trusted": trusted}
        try:
            private_dir(self.path.parent)
            fd, temp = tempfile.mkstemp(dir=self.path.parent, prefix=".hooks-trust-")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(data, out, indent=1, sort_keys=True)
            os.chmod(temp, PRIVATE_FILE)
            os.replace(temp, self.path)
        except OSError as exc:
            log.warning("hooks: cannot remember the answer in %s: %s", self.path, exc)
