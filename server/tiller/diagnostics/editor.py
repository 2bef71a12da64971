"""The editor's diagnostics through ``client/getDiagnostics`` (a client that declared
``diagnostics`` in ``initialize``): what its language servers report for a file, once they have
caught up with its text.

The editor is given ``timeoutMs`` to answer (it answers with what it has by then); Tiller waits
``GRACE`` seconds longer for the answer to arrive, then gives up (``$/cancelRequest``). An error
answer, no answer or an answer that is not one (no ``files`` list) gives no diagnostics
(logged); an item that is not a diagnostic is skipped.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tiller.diagnostics.problems import Diagnostic
from tiller.gate.editor import ClientRequest, describe_error

__all__ = ["GRACE", "EditorDiagnostics", "read_answer"]

log = logging.getLogger(__name__)

GRACE = 2.0
"""Seconds Tiller waits for an answer beyond the editor's ``timeoutMs``."""


@dataclass
class EditorDiagnostics:
    """``client/getDiagnostics`` for session ``session_id`` over ``request``; the editor has
    ``timeout`` seconds to answer."""

    request: ClientRequest
    session_id: str
    timeout: float = 3.0

    def origin(self, path: Path) -> str:
        """Who reports ``path``'s problems, for the report."""
        return "the editor's diagnostics"

    async def diagnostics(self, path: Path, tool_call_id: str) -> list[Diagnostic] | None:
        """``path``'s diagnostics as the editor has them; None when it could not say."""
        params = {"sessionId": self.session_id, "toolCallId": tool_call_id,
                  "paths": [str(path)], "timeoutMs": round(self.timeout * 1000)}
        try:
            result = await self.request("client/getDiagnostics", params, self.timeout + GRACE)
        except Exception as exc:
            log.warning("client/getDiagnostics for %s failed: %s", path, describe_error(exc))
            return None
        found = read_answer(result, path)
        if found is None:
            log.warning("client/getDiagnostics for %s: not an answer: %.200r", path, result)
        return found


def read_answer(result: Any, path: Path) -> list[Diagnostic] | None:
    """The diagnostics of ``path`` in a ``client/getDiagnostics`` result (the entry naming it,
    or the only one); None for a result without a ``files`` list."""
    # Imported here: the client-request models are not needed before an editor answers (on the
    # ACP front, ~3 ms of every start otherwise).
    from tiller.protocol.client_requests import DiagnosticItem

    files = result.get("files") if isinstance(result, dict) else None
    if not isinstance(files, list):
        return None
    entries = [entry for entry in files if isinstance(entry, dict)]
    wanted = os.path.realpath(path)
    named = [entry for entry in entries if isinstance(entry.get("path"), str)
             and os.path.realpath(entry["path"]) == wanted]
    chosen = named or (entries if len(entries) == 1 else [])
    found: list[Diagnostic] = []
    for entry in chosen:
        items = entry.get("diagnostics")
        for item in items if isinstance(items, list) else []:
            try:
                wire = DiagnosticItem.model_validate(item)
            except ValidationError:
                log.debug("client/getDiagnostics: skipped %.200r", item)
                continue
            found.append(Diagnostic(
                line=wire.line, message=wire.message, severity=wire.severity,
                column=wire.column, source=wire.source,
                code=None if wire.code is None else str(wire.code)))
    return found
