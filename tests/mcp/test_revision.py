"""The MCP revision Tiller speaks, end to end: the 2026-07-28 revision (``server/discover``,
stateless requests) to a server of the pinned SDK (tests/support/mcp/scripted_server.py), the
``initialize`` handshake to an older one (npm's ``server-everything``); Tiller declares
elicitation (form and URL) and nothing that 2026-07-28 deprecates (roots, sampling, logging).
That Tiller calls none of the SDK's deprecated APIs is mypy's (``enable_error_code =
["deprecated"]`` in pyproject.toml: the SDK marks them ``@deprecated``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import spawn_tiller
from support.mcp_servers import SCRIPTED, everything_argv, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.process]


async def test_the_new_revision_where_offered_and_no_deprecated_capability(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    node, entry = everything_argv()
    config = write_config(tmp_path, {
        "s": {"command": sys.executable, "args": [str(SCRIPTED)], "startup_timeout": 30},
        "everything": {"command": node, "args": [entry, "stdio"], "startup_timeout": 30},
    })
    fake_openai.enqueue(tool_call_reply([("c1", "mcp__s__client", {})]), text_reply("ok"))
    async with spawn_tiller(fake_openai, tmp_path, "--config", str(config),
                            "--permission-mode", "auto") as tiller:
        servers = {s["name"]: s for s in (await tiller.request("mcp/list", timeout=60))["servers"]}
        await tiller.request("agent/prompt", {"message": "who is the client?"}, timeout=60)

    assert servers["s"]["status"] == "ready" and servers["everything"]["status"] == "ready"
    assert servers["s"]["protocolVersion"] == "2026-07-28"
    assert servers["everything"]["protocolVersion"] in (
        "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
    end = next(e for e in tiller.events if e["type"] == "tool_execution_end")
    seen = json.loads(end["result"]["content"][0]["text"])
    assert seen["protocolVersion"] == "2026-07-28"
    assert seen["capabilities"] == {"elicitation": {"form": {}, "url": {}}}
