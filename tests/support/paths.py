"""Where things are, for tests in any folder: the checkout, the server's package, the editors, and
the servers tests/support holds."""

from __future__ import annotations

from pathlib import Path

__all__ = ["EDITORS", "PACKAGE", "PROTOCOL_MD", "README", "REPO", "SCRIPTED_MCP_SERVER", "SUPPORT"]

SUPPORT = Path(__file__).resolve().parent
REPO = SUPPORT.parent.parent
PACKAGE = REPO / "server" / "tiller"
EDITORS = REPO / "editors"
PROTOCOL_MD = REPO / "protocol.md"
README = REPO / "README.md"
SCRIPTED_MCP_SERVER = SUPPORT / "mcp" / "scripted_server.py"
"""An MCP server built on the official SDK, scripted by its environment (crashes, hangs,
``list_changed``)."""
