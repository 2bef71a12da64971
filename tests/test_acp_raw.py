"""ACP end to end over raw stdio, for what real clients nobody here wrote ran into (issue 32):
Toad's id-less error responses, replay fidelity, empty sessions, a client's fs error detail,
updates a client's protocol version lacks, a failed model call. Every message the agent sends
is checked against ACP's schema (tests/acp_raw.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acp_raw import ClientError, raw_acp
from fake_openai import FakeOpenAI, text_reply, tool_call_reply

pytestmark = pytest.mark.anyio


async def start(client: Any, cwd: Path, version: int = 1,
                capabilities: dict[str, Any] | None = None) -> str:
    await client.call("initialize", {"protocolVersion": version,
                                     "clientCapabilities": capabilities or {}})
    return str((await client.call("session/new", {"cwd": str(cwd), "mcpServers": []}))
               ["sessionId"])


async def test_responses_to_nothing_are_not_answered(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """Toad rejects updates it does not know with id-less error responses; answering those
    (JSON-RPC forbids it) could ping-pong forever."""
    async with raw_acp(fake_openai, tmp_path) as client:
        await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        mark = len(client.received)
        for response in [
            {"jsonrpc": "2.0", "error": {"code": -32602, "message": "Invalid params"}},
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": "Internal"}},
            {"jsonrpc": "2.0", "id": "tiller-99", "result": {}},
        ]:
            await client.send(response)
        created = await client.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})

    assert "result" in created
    answers = [m for m in client.received[mark:] if "method" not in m]
    assert answers == [created]  # nothing answered the three responses


def tool_results(fake: FakeOpenAI, index: int) -> list[str]:
    return [m["content"] for m in fake.requests[index]["messages"] if m["role"] == "tool"]


async def test_a_clients_fs_error_detail_reaches_the_model(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """acpx refuses a write with ``data.details``; the model must read why, not only
    "Internal error"."""
    fake_openai.enqueue(
        tool_call_reply([("w1", "write", {"path": "out.txt", "content": "x\n"})]),
        text_reply("could not write"),
    )

    async def refuse_writes(method: str, params: dict[str, Any]) -> Any:
        if method == "fs/write_text_file":
            raise ClientError(-32603, "Internal error",
                              {"details": "Permission denied for fs/write_text_file"})
        raise ClientError(-32601, f"no {method} here")

    async with raw_acp(fake_openai, tmp_path, answer=refuse_writes) as client:
        session_id = await start(client, tmp_path, capabilities={
            "fs": {"readTextFile": False, "writeTextFile": True}})
        await client.call("session/set_mode", {"sessionId": session_id,
                                               "modeId": "acceptEdits"})
        result = await client.call("session/prompt", {
            "sessionId": session_id, "prompt": [{"type": "text", "text": "write it"}]})

    assert result["stopReason"] == "end_turn"
    [written] = tool_results(fake_openai, 1)
    assert "Internal error: Permission denied for fs/write_text_file" in written
    final = next(u for u in client.updates() if u.get("toolCallId") == "w1"
                 and u.get("status") == "failed")
    assert "Permission denied for fs/write_text_file" in str(final["content"])
    assert not (tmp_path / "out.txt").exists()
