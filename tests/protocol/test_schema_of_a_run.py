"""End to end: every message of a real run conforms to ``tiller schema``.

One connection exercises every method, every event type and every server-to-client request:
a tool batch that asks permission (steering sent while it waits) and goes through the editor's
files, a retried model call, a compaction, a failed run and JSON-RPC errors. Each message the
server sent is checked by ``schema_check.WireLog``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from support.fake_openai import FakeOpenAI, error_reply, text_reply, tool_call_reply
from support.helpers import record_sent, spawn_tiller
from support.paths import SCRIPTED_MCP_SERVER
from support.schema_check import SCHEMA, WireLog
from tiller.client import RpcError, TillerClient

pytestmark = [pytest.mark.anyio, pytest.mark.process]


def config(tmp_path: Path) -> str:
    path = tmp_path / "config.toml"
    path.write_text(
        'model = "tiny"\nthinking = "high"\n[retry]\nmax_retries = 2\nbase_delay = 0.01\n'
        "[compaction]\nreserve_tokens = 500\nkeep_recent_tokens = 300\n"
        '[[models]]\nprovider = "openai"\nid = "tiny"\ncontext_window = 3000\n'
        "cost = { input = 2.0, output = 10.0 }\n"
        '[[hooks.PostToolUse]]\nmatcher = "todo"\n'
        'hooks = [{ type = "command", command = "true" }]\n'
    )
    return str(path)


async def expect_error(tiller: TillerClient, code: int, method: str, params: Any = None) -> None:
    with pytest.raises(RpcError) as error:
        await tiller.request(method, params)
    assert error.value.code == code


async def test_every_message_of_a_real_run_conforms(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("saved\n")
    fake_openai.enqueue(
        tool_call_reply([("call_w", "write", {"path": "notes.txt", "content": "new\n"}),
                         ("call_b", "bash", {"command": "echo hello"}),
                         ("call_t", "todo", {"todos": [{"content": "edit",
                                                        "status": "completed"}]})]),
        text_reply("Steered."),
        error_reply(429, "slow down", headers={"retry-after-ms": "10"}),
        text_reply("Made it."),
        text_reply("the summary"),
        error_reply(401, "Incorrect API key provided"),
        text_reply("Recovered."),
        tool_call_reply([("call_bg", "bash", {"command": "echo up; exec sleep 1000",
                                               "background": True})]),
        text_reply("Started."),
    )
    steered: list[Any] = []

    async with spawn_tiller(fake_openai, tmp_path, "--config", config(tmp_path)) as tiller:
        sent = record_sent(tiller)

        async def permission(params: dict[str, Any]) -> dict[str, Any]:
            if not steered:
                steered.append(await tiller.request("agent/steer", {"message": "use tabs"}))
            return {"outcome": "allowOnce"}

        async def read_text(params: dict[str, Any]) -> dict[str, Any]:
            return {"content": "unsaved\n"}

        async def write_text(params: dict[str, Any]) -> None:
            return None

        asked: list[dict[str, Any]] = []

        async def diagnostics(params: dict[str, Any]) -> dict[str, Any]:
            asked.append(params)
            found = [{"line": 1, "column": 1, "severity": "warning", "message": "new text",
                      "source": "spell", "code": 7}] if len(asked) > 1 else []
            return {"files": [{"path": params["paths"][0], "diagnostics": found}]}

        tiller.on_request("client/requestPermission", permission)
        tiller.on_request("client/readTextFile", read_text)
        tiller.on_request("client/writeTextFile", write_text)
        tiller.on_request("client/getDiagnostics", diagnostics)
        await tiller.request("initialize", {
            "clientInfo": {"name": "schema-test"},
            "capabilities": {"permissions": True, "diagnostics": True,
                             "fs": {"readTextFile": True, "writeTextFile": True}},
        })
        await tiller.request("models/list")
        await tiller.request("agent/setQueueModes", {"steering": "one-at-a-time"})
        await tiller.request("agent/setPermissionMode", {"mode": "ask"})
        await tiller.request("agent/setModel", {"provider": "openai", "model": "tiny"})
        # thinking = "high" in the config, and tiny does not think: a notice says so
        assert (await tiller.request("agent/prompt", {"message": "edit"}))["stopReason"] == "stop"
        await tiller.request("agent/setThinkingLevel", {"level": "off"})
        template = tmp_path / ".tiller" / "prompts" / "again.md"
        template.parent.mkdir(parents=True)
        template.write_text("---\ndescription: Once more\n---\nagain\n")
        await tiller.request("agent/prompt", {"message": "/again"})  # commands_changed first
        await tiller.request("commands/list")
        await tiller.request("agents/list")
        assert (await tiller.request("agent/compact"))["compacted"] is True
        assert (await tiller.request("agent/prompt", {"message": "fail"}))["stopReason"] == "error"
        await tiller.request("agent/continue")
        await tiller.request("agent/prompt", {"message": "start the server"})
        await tiller.request("process/list")
        await tiller.request("process/output", {"processId": 1, "lines": 5})
        await tiller.request("process/kill", {"processId": 1})
        await expect_error(tiller, -32022, "process/kill", {"processId": 9})
        state = await tiller.request("agent/getState")
        await tiller.request("agent/getMessages", {"sessionId": state["sessionId"]})
        await tiller.request("agent/followUp", {"message": "later"})
        scripted = {"name": "s", "command": sys.executable,
                    "args": [str(SCRIPTED_MCP_SERVER)]}
        other = (await tiller.request("session/new", {"permissionMode": "auto",
                                                      "mcpServers": [scripted]}))["sessionId"]
        await tiller.request("mcp/list", {"sessionId": other})
        await tiller.request("session/list", {"limit": 5})
        loaded = await tiller.request("session/load", {"sessionId": state["sessionId"]})
        await tiller.request("session/changes", {"sessionId": state["sessionId"]})
        await tiller.request("session/revert", {"sessionId": state["sessionId"],
                                                "entryId": loaded["entryIds"][-1]})
        fork = {"sessionId": state["sessionId"], "entryId": loaded["entryIds"][0]}
        forked = (await tiller.request("session/fork", fork))["sessionId"]
        await tiller.request("session/close", {"sessionId": forked})
        await tiller.request("session/delete", {"sessionId": other})
        await expect_error(tiller, -32011, "agent/abort")
        await expect_error(tiller, -32013, "session/load", {"sessionId": "0" * 32})
        await expect_error(tiller, -32602, "agent/prompt", {})
        await expect_error(tiller, -32601, "agent/nothing")
        received = list(tiller.received)

    assert steered == [{"queued": 1}]
    assert len(asked) == 2  # the write's file, before and after
    log = WireLog(sent, received)
    assert log.problems == []
    assert {name for kind, name in log.checked if kind == "event"} == set(SCHEMA["x-events"])
    # the MCP sign-in and the MCP servers' questions need an OAuth server and an asking one:
    # tests/mcp/test_oauth.py and test_elicitation.py check their messages the same way
    assert {name for kind, name in log.checked if kind == "result"} == (
        set(SCHEMA["x-methods"]) - {"agent/abort", "mcp/login", "mcp/logout"}
    )
    assert {name for kind, name in log.checked if kind == "method"} == (
        set(SCHEMA["x-serverRequests"]) - {"client/elicit", "client/openUrl"} | {"agent/event"}
    )
    assert {name for kind, name in log.checked if kind == "error"} == {
        "-32011", "-32013", "-32602", "-32601", "-32022"
    }
