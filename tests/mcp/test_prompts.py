"""End to end: MCP servers' prompts as slash commands ``/mcp__<server>__<prompt>``, from the
real ``@modelcontextprotocol/server-everything`` (npm, under tests/support/mcp) and from
``tests/support/mcp/scripted_server.py`` (a prompt added later, with ``prompts/list_changed``).

The model is the loopback OpenAI fake: its recorded requests show the expanded prompt.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import spawn_tiller
from support.mcp_servers import SCRIPTED, everything_argv, write_config
from tiller.client import RpcError, TillerClient

pytestmark = [pytest.mark.anyio, pytest.mark.process]


def last_user_text(request: dict[str, Any]) -> str:
    """The text of the last user message a model request carried."""
    user = [m for m in request["messages"] if m["role"] == "user"][-1]
    content = user["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


def mcp_commands(commands: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in commands if c["source"] == "mcp"}


def everything_config(tmp_path: Path) -> Path:
    node, entry = everything_argv()
    return write_config(tmp_path, {
        "everything": {"command": node, "args": [entry, "stdio"], "startup_timeout": 30},
    })


async def test_everything_prompts_are_listed_after_mcp_list_and_expand_with_arguments(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(text_reply("sunny"), text_reply("read it"))
    async with spawn_tiller(fake_openai, tmp_path, "--config", str(everything_config(tmp_path)),
                            "--permission-mode", "auto") as tiller:
        before = (await tiller.request("commands/list"))["commands"]
        await tiller.request("mcp/list", timeout=60)
        listed = (await tiller.request("commands/list"))["commands"]
        changed = [e for e in tiller.events if e["type"] == "commands_changed"]
        await tiller.request("agent/prompt", {
            "message": "/mcp__everything__args-prompt Paris New Mexico"}, timeout=60)
        await tiller.request("agent/prompt", {
            "message": "/mcp__everything__resource-prompt Text 3"}, timeout=60)
        with pytest.raises(RpcError) as refused:
            await tiller.request("agent/prompt", {"message": "/mcp__everything__args-prompt"},
                                 timeout=60)

    assert mcp_commands(before) == {}
    commands = mcp_commands(listed)
    assert commands["mcp__everything__args-prompt"] == {
        "name": "mcp__everything__args-prompt",
        "description": "A prompt with two arguments, one required and one optional",
        "argumentHint": "<city> [state]", "source": "mcp",
    }
    assert commands["mcp__everything__simple-prompt"]["description"] == \
        "A prompt with no arguments"
    assert "argumentHint" not in commands["mcp__everything__simple-prompt"]
    assert commands["mcp__everything__resource-prompt"]["argumentHint"] == \
        "<resourceType> <resourceId>"
    assert mcp_commands(changed[-1]["commands"]) == commands

    # the last declared argument takes the rest of the words
    assert last_user_text(fake_openai.requests[0]) == "What's weather in Paris, New Mexico?"
    resource = last_user_text(fake_openai.requests[1])
    assert resource.startswith("This prompt includes the Text resource with id: 3.")
    assert "[resource demo://resource/dynamic/text/3]\nResource 3:" in resource

    assert refused.value.code == -32018
    assert "everything" in refused.value.message and "city" in refused.value.message
    assert len(fake_openai.requests) == 2  # the refused prompt never reached the model


async def test_a_prompt_starts_the_servers_before_its_command_is_expanded(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(text_reply("hi"))
    async with spawn_tiller(fake_openai, tmp_path, "--config", str(everything_config(tmp_path)),
                            "--permission-mode", "auto") as tiller:
        result = await tiller.request("agent/prompt", {
            "message": "/mcp__everything__args-prompt Lyon"}, timeout=60)
    assert result["stopReason"] == "stop"
    assert last_user_text(fake_openai.requests[0]) == "What's weather in Lyon?"


async def wait_for_command(tiller: TillerClient, name: str) -> dict[str, Any]:
    """The first ``commands_changed`` event that lists ``name`` (10 s deadline)."""
    with anyio.fail_after(10):
        while True:
            for event in tiller.events:
                if event["type"] == "commands_changed" and name in mcp_commands(
                        event["commands"]):
                    return event
            await anyio.sleep(0.05)


async def test_prompts_list_changed_adds_a_command(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    config = write_config(tmp_path, {"s": {"command": sys.executable, "args": [str(SCRIPTED)]}})
    fake_openai.enqueue(
        tool_call_reply([("g1", "mcp__s__grow_prompt", {})]), text_reply("grown"),
        text_reply("later then"),
    )
    async with spawn_tiller(fake_openai, tmp_path, "--config", str(config),
                            "--permission-mode", "auto") as tiller:
        await tiller.request("mcp/list", timeout=60)
        assert "mcp__s__later" not in mcp_commands(
            (await tiller.request("commands/list"))["commands"])
        await tiller.request("agent/prompt", {"message": "grow"}, timeout=60)
        event = await wait_for_command(tiller, "mcp__s__later")
        listed = mcp_commands((await tiller.request("commands/list"))["commands"])
        await tiller.request("agent/prompt", {"message": "/mcp__s__later the weather"})

    assert mcp_commands(event["commands"])["mcp__s__later"]["argumentHint"] == "<topic>"
    assert listed["mcp__s__later"]["source"] == "mcp"
    assert last_user_text(fake_openai.requests[2]) == "Later, talk about the weather."
