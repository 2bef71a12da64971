"""End to end: ``session/load`` imports only what a live session needs. What only a tool call
or a prompt uses (the bash parser of the permission rules, the diff engine) loads on first use."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.helpers import clean_env, serve_in_turn
from support.paths import SUPPORT
from tiller.store.log import SessionLog
from tiller.store.saved import log_path
from tiller.types import UserMessage

pytestmark = pytest.mark.process

NOT_FOR_A_LOAD = ("tree_sitter", "tree_sitter_bash", "difflib")
"""Modules a loaded session that runs nothing never needs."""


def imported_by_a_load(cwd: Path, session_dir: Path, session_id: str) -> set[str]:
    """Every module a ``tiller`` process imported, from any thread, by the time it answered
    ``initialize``, ``session/load`` of ``session_id`` and ``agent/getState`` of the session,
    live (then stdin is closed): what the warm-up after ``initialize`` imported included."""
    imports = cwd / "imports.txt"
    requests = [("initialize", {"clientInfo": {"name": "test"}, "capabilities": {}}),
                ("session/load", {"sessionId": session_id}),
                ("agent/getState", {"sessionId": session_id})]  # answered once it is live
    serve_in_turn(
        cwd, ["-m", "tiller", "--session-dir", str(session_dir), "--cwd", str(cwd),
              "--base-url", "http://127.0.0.1:9/v1"],
        *({"jsonrpc": "2.0", "id": number, "method": method, "params": params}
          for number, (method, params) in enumerate(requests, start=1)),
        env=clean_env(PYTHONPATH=str(SUPPORT / "slow_import"),
                      TILLER_TEST_IMPORT_LOG=str(imports)))
    return set(imports.read_text().split())


def test_session_load_imports_no_bash_parser(tmp_path: Path) -> None:
    session_dir = tmp_path / ".sessions"
    session_id = "0123456789abcdef"
    path = log_path(session_dir, tmp_path, session_id)
    session_log = SessionLog.create(path, {"id": session_id, "cwd": str(tmp_path)}, durable=False)
    session_log.append("message", message=UserMessage(content="hello").dump())
    session_log.close()
    modules = imported_by_a_load(tmp_path, session_dir, session_id)
    # the listing is real:
    assert "tiller.session.registry" in modules and "tiller.gate.permissions" in modules
    assert sorted(modules & set(NOT_FOR_A_LOAD)) == []
