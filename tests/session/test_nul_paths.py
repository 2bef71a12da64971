"""End to end (issue 26, 17): a path with a NUL character in a request's params is invalid
params (-32602 naming the field), never "a bug in Tiller" (-32603), on both fronts; the server
keeps serving."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.acp_raw import raw_acp
from support.fake_openai import FakeOpenAI
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
