"""End to end: MCP resources through the real ``tiller`` server and the real
``@modelcontextprotocol/server-everything`` (npm, under tests/support/mcp): the model's
``mcp_list_resources`` and ``mcp_read_resource`` tools (read-only: the gate never asks), a
resource template filled in, and ``@server:uri`` mentions in a prompt.

The model is the loopback OpenAI fake: its recorded requests show what the model saw.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import spawn_tiller
from support.mcp_servers import SCRIPTED, everything_argv, write_config
from tiller.client import RpcError

pytestmark = [pytest.mark.anyio, pytest.mark.process]


def everything_config(tmp_path: Path, **extra: dict[str, Any]) -> Path:
    node, entry = everything_argv()
    return write_config(tmp_path, {
        "everything": {"command": node, "args": [entry, "stdio"], "startup_timeout": 30},
        **extra,
    })


def tool_names(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools", [])}


def tool_results(request: dict[str, Any]) -> dict[str, str]:
    """The tool messages a model request carried, by tool call id."""
    found: dict[str, str] = {}
    for message in request["messages"]:
        if message["role"] == "tool":
            content = message["content"]
            found[message["tool_call_id"]] = content if isinstance(content, str) else "".join(
                part.get("text", "") for part in content)
    return found


def user_text(request: dict[str, Any]) -> str:
    user = [m for m in request["messages"] if m["role"] == "user"][-1]
    content = user["content"]
    return content if isinstance(content, str) else "".join(
        part.get("text", "") for part in content)


async def test_the_model_lists_and_reads_resources_without_being_asked(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    # the scripted server declares resources but has none: nothing of it in the listing
    config = everything_config(tmp_path, s={"command": sys.executable, "args": [str(SCRIPTED)]})
    fake_openai.enqueue(
        tool_call_reply([("l1", "mcp_list_resources", {})]),
        tool_call_reply([
            ("r1", "mcp_read_resource",
             {"server": "everything", "uri": "demo://resource/dynamic/text/7"}),
            ("r2", "mcp_read_resource",
             {"server": "everything", "uri": "demo://resource/static/document/features.md"}),
            ("r3", "mcp_read_resource", {"server": "s", "uri": "demo://x"}),
            ("r4", "mcp_read_resource", {"server": "git", "uri": "demo://x"}),
            ("l2", "mcp_list_resources", {"server": "everything"}),
        ]),
        text_reply("read"),
    )
    asked: list[dict[str, Any]] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"outcome": "rejectOnce"}

    async with spawn_tiller(fake_openai, tmp_path, "--config", str(config)) as tiller:
        tiller.on_request("client/requestPermission", answer)
        await tiller.request("initialize", {"capabilities": {"permissions": True}})
        await tiller.request("agent/prompt", {"message": "what resources are there?"},
                             timeout=90)

    assert asked == []  # both tools only read: the gate lets them through in the ask mode
    first = fake_openai.requests[0]
    assert {"mcp_list_resources", "mcp_read_resource"} <= tool_names(first)
    listing = tool_results(fake_openai.requests[1])["l1"]
    lines = listing.splitlines()
    assert "everything: demo://resource/static/document/features.md  features.md " \
           "(text/markdown) - Static document file exposed from /docs: features.md" in lines
    assert "everything: resource templates" in lines
    templates = [line for line in lines if line.startswith("  everything: demo://resource/")]
    assert any(line.startswith("  everything: demo://resource/dynamic/text/{resourceId}")
               for line in templates)
    assert not any(line.startswith("s:") for line in lines)

    results = tool_results(fake_openai.requests[2])
    assert results["r1"].startswith("[resource demo://resource/dynamic/text/7]\nResource 7: "
                                    "This is a plaintext resource")
    assert results["r2"].startswith(
        "[resource demo://resource/static/document/features.md]\n# Everything Server - Features")
    assert results["r3"] == "MCP server s failed on reading demo://x: MCPError: Unknown " \
                            "resource: demo://x"  # the server's error, as an error result
    assert results["r4"] == "no ready MCP server 'git' offers resources (those that do: " \
                            "everything, s)"
    assert results["l2"] == listing


async def test_a_mention_sends_the_resource_along_and_a_bad_one_fails_the_prompt(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(text_reply("seen"))
    async with spawn_tiller(fake_openai, tmp_path, "--config", str(everything_config(tmp_path)),
                            "--permission-mode", "auto") as tiller:
        await tiller.request("agent/prompt", {
            "message": "compare @everything:demo://resource/dynamic/text/3, "
                       "and mail@example.com @nobody:demo://x"}, timeout=90)
        with pytest.raises(RpcError) as refused:
            await tiller.request("agent/prompt", {
                "message": "read @everything:demo://resource/nothing/here"}, timeout=60)

    text = user_text(fake_openai.requests[0])
    assert text.startswith("compare @everything:demo://resource/dynamic/text/3, and mail@")
    body = text.split('<resource server="everything" uri="demo://resource/dynamic/text/3">\n')
    assert len(body) == 2 and body[1].startswith("Resource 3: This is a plaintext resource")
    assert body[1].rstrip().endswith("</resource>")
    assert "nobody" not in body[1]  # not a server of the session: left as typed
    assert refused.value.code == -32018
    assert "@everything:demo://resource/nothing/here" in refused.value.message
    assert len(fake_openai.requests) == 1  # the refused prompt never reached the model
