"""MCP servers for the MCP tests: npm's ``server-everything`` (installed under tests/support/mcp
by ``.ci/run``), the SDK-built scripted server, and config files naming them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from support.paths import SCRIPTED_MCP_SERVER, SUPPORT

SCRIPTED = SCRIPTED_MCP_SERVER
EVERYTHING = (SUPPORT / "mcp" / "node_modules" / "@modelcontextprotocol" / "server-everything"
              / "dist" / "index.js")


def everything_argv() -> list[str]:
    """node and server-everything's entry point; skips (with the reason) only without node."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the server-everything tests need it")
    if not EVERYTHING.is_file():
        pytest.fail(f"{EVERYTHING} is missing: run `npm ci` in tests/support/mcp (.ci/run does)")
    return [node, str(EVERYTHING)]


def toml_list(items: list[str]) -> str:
    return json.dumps(items)


def write_config(tmp_path: Path, servers: dict[str, dict[str, Any]], extra: str = "") -> Path:
    """A config file with ``[mcp_servers.NAME]`` tables (values as JSON, which TOML reads)."""
    lines = [extra]
    for name, table in servers.items():
        lines.append(f"[mcp_servers.{name}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in table.items()]
    path = tmp_path / "config.toml"
    path.write_text("\n".join(lines) + "\n")
    return path
