"""ACP: an MCP server's ``elicitation/create`` reaches the ACP client as ACP's own
``elicitation/create`` (scoped to the session and the tool call), only when the client
advertised the form mode; end to end with the ACP SDK as the client (every message checked
against ACP's schema) and the real ``@modelcontextprotocol/server-everything``."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import text_block
from acp.schema import (
    ClientCapabilities,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    EnvVariable,
    McpServerStdio,
)

from support.acp_client import Recorder, spawn_acp, tool_messages
from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.mcp_servers import everything_argv

pytestmark = [pytest.mark.anyio, pytest.mark.process]

TOOL = "mcp__everything__trigger-elicitation-request"


def everything() -> McpServerStdio:
    node, entry = everything_argv()
    return McpServerStdio(name="everything", command=node, args=[entry, "stdio"],
                          env=[EnvVariable(name="NODE_NO_WARNINGS", value="1")])


async def run(fake: FakeOpenAI, tmp_path: Path, recorder: Recorder,
              capabilities: ClientCapabilities) -> None:
    async with spawn_acp(recorder, fake, tmp_path, "--permission-mode", "auto",
                         unstable=True) as conn:
        await conn.initialize(protocol_version=1, client_capabilities=capabilities)
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[everything()])
        await conn.prompt(session_id=session.session_id, prompt=[text_block("ask me")])


async def test_the_form_goes_to_the_acp_client_and_its_answer_back(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(tool_call_reply([("e1", TOOL, {})]), tool_call_reply([("e2", TOOL, {})]),
                        text_reply("thanks"))
    recorder = Recorder()
    recorder.elicit_answers = [{"action": "accept", "content": {"name": "Ada", "integer": 9}},
                               {"action": "cancel"}]
    capabilities = ClientCapabilities(
        elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities()))
    await run(fake_openai, tmp_path, recorder, capabilities)

    asked = [m["params"] for m in recorder.raw if m.get("method") == "elicitation/create"]
    assert [params["toolCallId"] for params in asked] == ["e1", "e2"]
    first = asked[0]
    assert first["mode"] == "form" and first["sessionId"]
    assert first["message"] == "Please provide inputs for the following fields:"
    assert first["requestedSchema"]["required"] == ["name"]
    assert first["_meta"] == {"tiller": {"server": "everything"}}
    [accepted] = tool_messages(fake_openai, 1)
    assert "- Name: Ada" in accepted and "- Favorite Integer: 9" in accepted
    assert "User cancelled the elicitation dialog" in tool_messages(fake_openai, 2)[-1]
    assert recorder.final("e1")["status"] == "completed"
    assert "elicitation/create" in recorder.wire.checked  # against ACP's schema


async def test_an_acp_client_without_elicitation_is_never_asked(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(tool_call_reply([("e1", TOOL, {})]), text_reply("oh well"))
    recorder = Recorder()
    await run(fake_openai, tmp_path, recorder, ClientCapabilities())

    assert not [m for m in recorder.raw if m.get("method") == "elicitation/create"]
    [refused] = tool_messages(fake_openai, 1)
    assert "Tiller's client cannot show MCP elicitation requests in form mode (it declared: " \
           "none): the user was not asked" in refused
    assert recorder.final("e1")["status"] == "failed"
