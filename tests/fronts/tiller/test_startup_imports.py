"""End to end: answering ``initialize`` imports only what it needs. The provider SDKs, the MCP
SDK and the ACP front load on first use (``python -X importtime`` lists every import)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.helpers import clean_env

pytestmark = pytest.mark.process

LAZY = ("openai", "anthropic", "mcp", "httpx2", "tiller.fronts.acp", "tiller.providers.openai",
        "tiller.providers.anthropic")
SESSION_ONLY = (
    "tiller.tools.bash", "tiller.tools.edit", "tiller.tools.find", "tiller.tools.grep",
    "tiller.tools.ls", "tiller.tools.read", "tiller.tools.todo", "tiller.tools.write",
    "tiller.agent.compaction", "tiller.agent.model_call", "tiller.agent.retry",
    "tiller.gate.permissions", "tiller.agent.tool_batch", "tree_sitter", "tree_sitter_bash",
)
"""Modules only a session needs (the tools' engines, the run's machinery, the bash parser):
answering ``initialize`` never loads them."""
MODELS = (
    "pydantic", "pydantic_core", "tiller.types", "tiller.protocol.models",
    "tiller.protocol.methods", "tiller.fronts.tiller.handlers", "tiller.fronts.tiller.events",
    "tiller.session.session", "tiller.session.registry",
)
"""The models and the handlers of every other method: ``initialize`` is answered without them."""


def imported_while_serving(cwd: Path, *messages: dict[str, object]) -> set[str]:
    """Every module a ``tiller`` process imported while answering ``messages`` (then EOF)."""
    stdin = "".join(json.dumps(message) + "\n" for message in messages)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tiller", "--no-session", "--cwd", str(cwd),
         "--base-url", "http://127.0.0.1:9/v1"],
        input=stdin, capture_output=True, text=True, env=clean_env(), cwd=cwd, timeout=60,
        check=True,
    )
    assert '"id": 1' in done.stdout or '"id":1' in done.stdout  # initialize was answered
    return set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", done.stderr, re.M))


def test_initialize_imports_no_sdk_and_no_acp(tmp_path: Path) -> None:
    modules = imported_while_serving(tmp_path, {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"clientInfo": {"name": "test"}, "capabilities": {}},
    })
    assert "tiller.fronts.tiller.front" in modules  # the listing is real
    assert sorted(name for name in modules if name.split(".")[0] in LAZY or name in LAZY) == []


def test_initialize_imports_no_tool_engine_nor_run_machinery(tmp_path: Path) -> None:
    modules = imported_while_serving(tmp_path, {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"clientInfo": {"name": "test"}, "capabilities": {}},
    })
    assert "tiller.config" in modules  # the listing is real
    assert sorted(modules & set(SESSION_ONLY)) == []


def test_initialize_needs_no_model(tmp_path: Path) -> None:
    modules = imported_while_serving(tmp_path, {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"clientInfo": {"name": "test"}, "protocolVersion": 1,
                   "capabilities": {"permissions": True, "fs": {"readTextFile": True}}},
    })
    assert {"tiller.fronts.tiller.front", "tiller.protocol.names"} <= modules  # the listing is real
    assert sorted(modules & set(MODELS)) == []


def test_the_next_method_loads_them(tmp_path: Path) -> None:
    modules = imported_while_serving(
        tmp_path,
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}},
        {"jsonrpc": "2.0", "id": 2, "method": "models/list", "params": {}},
    )
    assert {"pydantic", "tiller.protocol.methods", "tiller.fronts.tiller.handlers"} <= modules
