"""End to end: ``initialize`` is answered before anything but what it needs is imported: the
provider SDKs, the MCP SDK, the ACP front, the models and the session machinery load after the
answer (the warm-up that follows it: protocol.md, ``initialize``) or on first use. ``python -X
importtime`` lists every import on stderr, where the server's debug log marks the answer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.helpers import clean_env, serve_in_turn
from support.paths import SUPPORT

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


ANSWERED = "initialize answered before the front was imported"


def served(cwd: Path, *messages: dict[str, object], env: dict[str, str]) -> str:
    return serve_in_turn(
        cwd, ["-X", "importtime", "-m", "tiller", "--no-session", "--cwd", str(cwd),
              "--base-url", "http://127.0.0.1:9/v1", "--log-level", "DEBUG"],
        *messages, env=env)


def imported_while_serving(cwd: Path, *messages: dict[str, object]) -> set[str]:
    """Every module the main thread of a ``tiller`` process imported before it answered
    ``initialize`` (the first of ``messages``); the server's debug log marks the answer."""
    stderr = served(cwd, *messages, env=clean_env())
    assert ANSWERED in stderr
    stderr = stderr.split(ANSWERED, 1)[0]
    return set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", stderr, re.M))


def test_initialize_imports_no_sdk_and_no_acp(tmp_path: Path) -> None:
    modules = imported_while_serving(tmp_path, {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"clientInfo": {"name": "test"}, "capabilities": {}},
    })
    assert "tiller.config" in modules  # the listing is real
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
    assert {"tiller.fronts.tiller.hello", "tiller.protocol.names"} <= modules  # a real listing
    assert sorted(modules & set(MODELS)) == []


def test_the_next_method_loads_them(tmp_path: Path) -> None:
    """What ``initialize`` did without is there by the time the next method is answered (the
    warm-up's thread or the method itself imported it; listed from every thread)."""
    imports = tmp_path / "imports.txt"
    served(tmp_path, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"capabilities": {}}},
           {"jsonrpc": "2.0", "id": 2, "method": "models/list", "params": {}},
           env=clean_env(PYTHONPATH=str(SUPPORT / "slow_import"),
                         TILLER_TEST_IMPORT_LOG=str(imports)))
    modules = set(imports.read_text().split())
    assert {"pydantic", "tiller.protocol.methods", "tiller.fronts.tiller.handlers"} <= modules


@pytest.mark.parametrize("acp", [False, True])
def test_garbage_collection_paused_for_start_up_is_resumed(tmp_path: Path, acp: bool) -> None:
    """``tiller.__main__`` pauses the collector while start-up imports; each front turns it back
    on once ready (Tiller's: when its warm-up ends, here at the latest at shutdown)."""
    initialize = ({"protocolVersion": 1, "clientCapabilities": {}} if acp
                  else {"capabilities": {}})
    stderr = serve_in_turn(
        tmp_path, ["-m", "tiller", "--no-session", "--cwd", str(tmp_path), "--base-url",
                   "http://127.0.0.1:9/v1", "--log-level", "DEBUG", *(["--acp"] if acp else [])],
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize},
        env=clean_env())
    assert stderr.count("garbage collection resumed") == 1, stderr[-3000:]
