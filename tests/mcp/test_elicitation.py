"""End to end: an MCP server asking the user (``elicitation/create``) through the real ``tiller``
server to the client as ``client/elicit``: the real ``@modelcontextprotocol/server-everything``
(npm, under tests/support/mcp) and its ``trigger-elicitation-request`` tool. Accept with the
form's values, decline, cancel; the call's timeout waits for the user; a client that did not
declare the capability is never asked and the server hears why. Every message the server sends
is checked against ``tiller schema`` (the ACP side: tests/fronts/acp/test_elicitation.py).

The model is the loopback OpenAI fake: its recorded requests show the tool results.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import record_sent, spawn_tiller
from support.mcp_servers import SCRIPTED, everything_argv, write_config
from support.schema_check import WireLog
from tiller.client import TillerClient

pytestmark = [pytest.mark.anyio, pytest.mark.process]

TOOL = "mcp__everything__trigger-elicitation-request"


def everything_config(tmp_path: Path, tool_timeout: float = 60) -> Path:
    node, entry = everything_argv()
    return write_config(tmp_path, {"everything": {
        "command": node, "args": [entry, "stdio"], "startup_timeout": 30,
        "tool_timeout": tool_timeout,
    }})


def results(tiller: TillerClient) -> dict[str, dict[str, Any]]:
    """Every ``tool_execution_end``'s result so far, by tool call id, with its text joined."""
    found = {}
    for event in tiller.events:
        if event["type"] == "tool_execution_end":
            result = event["result"]
            found[event["toolCallId"]] = {
                "isError": event["isError"],
                "text": "".join(block.get("text", "") for block in result["content"]),
            }
    return found


async def test_the_user_accepts_declines_and_cancels_a_form(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(
        tool_call_reply([("e1", TOOL, {})]), tool_call_reply([("e2", TOOL, {})]),
        tool_call_reply([("e3", TOOL, {})]), text_reply("thanks"),
    )
    asked: list[dict[str, Any]] = []
    answers = {
        "e1": {"action": "accept", "content": {"name": "Ada Lovelace", "check": True,
                                               "integer": 7}},
        "e2": {"action": "decline"},
        "e3": {"action": "cancel"},
    }

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return answers[params["toolCallId"]]

    async with spawn_tiller(fake_openai, tmp_path, "--config", str(everything_config(tmp_path)),
                            "--permission-mode", "auto") as tiller:
        sent = record_sent(tiller)
        tiller.on_request("client/elicit", answer)
        await tiller.request("initialize", {"capabilities": {"elicitation": {"form": True}}})
        await tiller.request("agent/prompt", {"message": "ask me"}, timeout=90)
        received = list(tiller.received)

    assert [params["toolCallId"] for params in asked] == ["e1", "e2", "e3"]
    first = asked[0]
    assert first["server"] == "everything" and first["mode"] == "form"
    assert first["message"] == "Please provide inputs for the following fields:"
    schema = first["requestedSchema"]
    assert schema["required"] == ["name"]
    assert schema["properties"]["name"]["type"] == "string"
    assert schema["properties"]["integer"] == {
        "title": "Integer", "type": "integer", "minimum": 1, "maximum": 100, "default": 42,
        "description": "Your favorite integer (do not give us your phone number, pin, or "
                       "other sensitive info)"}
    done = results(tiller)
    assert not done["e1"]["isError"]
    assert "- Name: Ada Lovelace\n- Agreed to terms: true\n- Favorite Integer: 7" in \
        done["e1"]["text"]
    assert "User declined to provide the requested information" in done["e2"]["text"]
    assert "User cancelled the elicitation dialog" in done["e3"]["text"]
    waiting = [e for e in tiller.events if e["type"] == "tool_execution_update"
               and e.get("partialResult") == {"status": "awaitingInput"}]
    assert [e["toolCallId"] for e in waiting] == ["e1", "e2", "e3"]
    assert {e["toolName"] for e in waiting} == {TOOL}
    log = WireLog(sent, received)
    assert log.problems == []
    assert ("method", "client/elicit") in log.checked


async def test_the_call_s_timeout_waits_while_the_user_answers(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(tool_call_reply([("e1", TOOL, {})]), text_reply("done"))

    async def slow_user(params: dict[str, Any]) -> dict[str, Any]:
        await anyio.sleep(2.5)  # the user thinks for longer than the tool timeout
        return {"action": "accept", "content": {"name": "Grace"}}

    config = everything_config(tmp_path, tool_timeout=1.5)
    async with spawn_tiller(fake_openai, tmp_path, "--config", str(config),
                            "--permission-mode", "auto") as tiller:
        tiller.on_request("client/elicit", slow_user)
        await tiller.request("initialize", {"capabilities": {"elicitation": {"form": True}}})
        await tiller.request("agent/prompt", {"message": "ask me"}, timeout=90)

    done = results(tiller)["e1"]
    assert not done["isError"], done["text"]
    assert "- Name: Grace" in done["text"]


@pytest.mark.parametrize("capabilities", [{}, {"elicitation": {"url": True}}])
async def test_a_client_without_the_form_capability_is_never_asked(
    fake_openai: FakeOpenAI, tmp_path: Path, capabilities: dict[str, Any]
) -> None:
    fake_openai.enqueue(tool_call_reply([("e1", TOOL, {})]), text_reply("oh well"))
    asked: list[dict[str, Any]] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": {"name": "nobody"}}

    async with spawn_tiller(fake_openai, tmp_path, "--config", str(everything_config(tmp_path)),
                            "--permission-mode", "auto") as tiller:
        tiller.on_request("client/elicit", answer)
        await tiller.request("initialize", {"capabilities": capabilities})
        await tiller.request("agent/prompt", {"message": "ask me"}, timeout=90)

    assert asked == []
    done = results(tiller)["e1"]
    assert done["isError"]
    declared = "url" if capabilities else "none"
    assert ("Tiller's client cannot show MCP elicitation requests in form mode (it declared: "
            f"{declared}): the user was not asked") in done["text"]


async def test_a_2026_07_28_server_asks_through_an_input_request(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    config = write_config(tmp_path, {"s": {"command": sys.executable, "args": [str(SCRIPTED)],
                                           "startup_timeout": 30}})
    fake_openai.enqueue(tool_call_reply([("a1", "mcp__s__ask", {})]),
                        tool_call_reply([("a2", "mcp__s__ask", {})]), text_reply("done"))
    asked: list[dict[str, Any]] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        if params["toolCallId"] == "a1":
            return {"action": "accept", "content": {"name": "Ada"}}
        return {"action": "decline"}

    async with spawn_tiller(fake_openai, tmp_path, "--config", str(config),
                            "--permission-mode", "auto") as tiller:
        sent = record_sent(tiller)
        tiller.on_request("client/elicit", answer)
        await tiller.request("initialize", {"capabilities": {"elicitation": {"form": True}}})
        [server] = (await tiller.request("mcp/list", timeout=60))["servers"]
        await tiller.request("agent/prompt", {"message": "ask me"}, timeout=90)
        received = list(tiller.received)

    assert server["protocolVersion"] == "2026-07-28"
    assert [(p["toolCallId"], p["server"], p["mode"], p["message"]) for p in asked] == [
        ("a1", "s", "form", "Your name?"), ("a2", "s", "form", "Your name?")]
    assert asked[0]["requestedSchema"]["properties"]["name"]["type"] == "string"
    done = results(tiller)
    assert done["a1"] == {"isError": False, "text": "accept: Ada"}
    assert done["a2"] == {"isError": False, "text": "decline: -"}
    assert WireLog(sent, received).problems == []
