"""End to end: ``session/load`` imports only what a live session needs. What only a tool call
or a prompt uses (the bash parser of the permission rules, the diff engine) loads on first use."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.helpers import clean_env
from tiller.store.log import SessionLog
from tiller.store.saved import log_path
from tiller.types import UserMessage

pytestmark = pytest.mark.process

NOT_FOR_A_LOAD = ("tree_sitter", "tree_sitter_bash", "difflib")
"""Modules a loaded session that runs nothing never needs."""


def imported_by_a_load(cwd: Path, session_dir: Path, session_id: str) -> set[str]:
    """Every module a ``tiller`` process imported by the time it answered ``initialize`` and
    ``session/load`` of ``session_id`` (then stdin is closed)."""
    process = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "tiller", "--session-dir", str(session_dir),
         "--cwd", str(cwd), "--base-url", "http://127.0.0.1:9/v1"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env(),
        cwd=cwd,
    )
    assert process.stdin is not None and process.stdout is not None
    requests = [("initialize", {"clientInfo": {"name": "test"}, "capabilities": {}}),
                ("session/load", {"sessionId": session_id})]
    try:
        for number, (method, params) in enumerate(requests, start=1):
            message = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
            process.stdin.write(json.dumps(message).encode() + b"\n")
            process.stdin.flush()
            answer: dict[str, object] = {}
            while answer.get("id") != number:  # the answer, past any notification
                line = process.stdout.readline()
                assert line, f"the server exited before answering {method}"
                answer = json.loads(line)
            assert "result" in answer, answer
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait()
    return set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", stderr.decode(), re.M))


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
