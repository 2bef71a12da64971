"""End to end (issue 26, 17): a path with a NUL character in a request's params is invalid
params (-32602 naming the field), never "a bug in Tiller" (-32603), on both fronts; the server
keeps serving. A model's tool call with one in a path, a command or a pattern gets an error
result naming the argument, never an exception of the system call it would have reached."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.acp_raw import raw_acp
from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import spawn_tiller
from tiller.client import RpcError

pytestmark = [pytest.mark.anyio, pytest.mark.process]

NUL = "a path cannot contain a NUL character"


async def test_a_nul_in_a_path_is_invalid_params(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        with pytest.raises(RpcError) as new:
            await tiller.request("session/new", {"cwd": f"{tmp_path}\u0000x"})
        with pytest.raises(RpcError) as listed:
            await tiller.request("session/list", {"cwd": "/tmp\u0000"})
        sid = (await tiller.request("session/new"))["sessionId"]
        with pytest.raises(RpcError) as revert:
            await tiller.request("session/revert",
                                 {"sessionId": sid, "entryId": "e", "paths": ["a\u0000b"]})
        state = await tiller.request("agent/getState", {"sessionId": sid})

    assert new.value.code == -32602
    assert new.value.message == f"Invalid params: cwd: Value error, {NUL}"
    assert listed.value.code == -32602 and "cwd" in listed.value.message
    assert revert.value.code == -32602 and "paths.0" in revert.value.message
    assert state["isRunning"] is False


async def test_acp_session_new_with_a_nul_in_cwd(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    async with raw_acp(fake_openai, tmp_path) as client:
        await client.call("initialize", {"protocolVersion": 1})
        refused = await client.request("session/new", {"cwd": f"{tmp_path}\u0000x",
                                                       "mcpServers": []})
        extra = await client.request("session/new", {
            "cwd": str(tmp_path), "mcpServers": [], "additionalDirectories": ["/tmp/a\u0000b"]})
        fine = await client.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})

    assert refused["error"]["code"] == -32602 and NUL in refused["error"]["message"]
    assert extra["error"]["code"] == -32602 and NUL in extra["error"]["message"]
    assert "additionalDirectories.0" in extra["error"]["message"]
    assert "sessionId" in fine


async def test_a_nul_in_a_tool_calls_path_command_or_pattern_is_an_error_result(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    calls = [("read", "path", {"path": "a\u0000b"}), ("ls", "path", {"path": "a\u0000"}),
             ("bash", "command", {"command": "echo \u0000"}),
             ("grep", "pattern", {"pattern": "a\u0000"}),
             ("grep", "glob", {"pattern": "a", "glob": "*\u0000"}),
             ("find", "pattern", {"pattern": "*\u0000"}),
             ("write", "path", {"path": "x\u0000", "content": "y"})]
    fake_openai.enqueue(
        tool_call_reply([(f"c{n}", tool, args) for n, (tool, _, args) in enumerate(calls)]),
        text_reply("done"))
    async with spawn_tiller(fake_openai, tmp_path, "--permission-mode", "auto") as tiller:
        result = await tiller.prompt("go")
        ends = {e["toolCallId"]: e["result"] for e in tiller.events
                if e["type"] == "tool_execution_end"}

    assert result["stopReason"] == "stop"
    assert sorted(ends) == [f"c{n}" for n in range(len(calls))]
    for n, (tool, argument, _) in enumerate(calls):
        end = ends[f"c{n}"]
        text = end["content"][0]["text"]
        assert end["isError"] and tool in text and argument in text, text
        assert "NUL character" in text and "embedded null byte" not in text, text
    assert sorted(p.name for p in tmp_path.iterdir()) == [".sessions"]
