"""ACP end to end over raw stdio, for what real clients nobody here wrote ran into (issue 32):
Toad's id-less error responses, replay fidelity, empty sessions, a client's fs error detail,
updates a client's protocol version lacks, a failed model call. Every message the agent sends
is checked against ACP's schema (tests/support/acp_raw.py)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from support.acp_raw import ClientError, raw_acp
from support.fake_openai import FakeOpenAI, error_reply, text_reply, tool_call_reply
from support.helpers import wait_requests
from tiller.store.log import SessionLog
from tiller.store.saved import log_path
from tiller.types import TextContent, UserMessage

pytestmark = [pytest.mark.anyio, pytest.mark.process]

MODEL = "gpt-5.6-terra"
"""A catalog model with a known context window: usage_update needs one (its ``size``)."""


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


async def test_a_failed_model_call_is_said_in_the_conversation_then_answered_an_error(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """Toad shows "the agent failed to start" for any error answer and codecompanion a table:
    the reason goes out as agent text first, in every client, and again on session/load."""
    fake_openai.enqueue(error_reply(400, "The model `gpt-nope` does not exist"))
    async with raw_acp(fake_openai, tmp_path) as client:
        session_id = await start(client, tmp_path)
        failed = await client.request("session/prompt", {
            "sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]})
        said = [u["content"]["text"] for u in client.updates()
                if u["sessionUpdate"] == "agent_message_chunk"]
        answered_at = client.received.index(failed)
        chunk_at = next(i for i, m in enumerate(client.received)
                        if m.get("method") == "session/update"
                        and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")

    async with raw_acp(fake_openai, tmp_path) as client:
        await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        await client.call("session/load", {"sessionId": session_id, "cwd": str(tmp_path),
                                           "mcpServers": []})
        replayed = [u["content"]["text"] for u in client.updates()
                    if u["sessionUpdate"] == "agent_message_chunk"]

    reason = "openai: 400 Bad Request: The model `gpt-nope` does not exist"
    assert said == [f"Error: {reason}"] and chunk_at < answered_at
    error = failed["error"]
    assert error["code"] == -32020 and error["message"] == reason
    assert error["data"]["details"] == reason and error["data"]["stopReason"] == "error"
    assert replayed == [f"Error: {reason}"]


async def test_a_cancelled_call_sends_no_usage_update_of_zero(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """A cancelled call reports no tokens; a context gauge must keep the last call's count."""
    held = threading.Event()
    fake_openai.enqueue(text_reply("first", usage=(1200, 34)), text_reply("never", gate=held))
    async with raw_acp(fake_openai, tmp_path, "--model", MODEL) as client:
        session_id = await start(client, tmp_path)
        await client.call("session/prompt", {
            "sessionId": session_id, "prompt": [{"type": "text", "text": "one"}]})
        mark = len(client.received)
        async with anyio.create_task_group() as group:
            group.start_soon(client.call, "session/prompt", {
                "sessionId": session_id, "prompt": [{"type": "text", "text": "two"}]})
            await wait_requests(fake_openai, 2)
            await client.notify("session/cancel", {"sessionId": session_id})
        held.set()
        answer = await client.wait_for(lambda m: "result" in m and m["id"] == 4, mark)

    usage = [u for u in client.updates() if u["sessionUpdate"] == "usage_update"]
    assert [u["used"] for u in usage] == [1234]  # the first call's, nothing after the cancel
    assert answer["result"]["stopReason"] == "cancelled"


@pytest.mark.parametrize("version", [0, 1])
async def test_updates_a_clients_protocol_version_lacks_are_not_sent(
    fake_openai: FakeOpenAI, tmp_path: Path, version: int
) -> None:
    """session_info_update, config_option_update and usage_update are in ACP's v1 schema: a
    client that declared version 0 gets none of them, a v1 client all three."""
    fake_openai.enqueue(text_reply("hello", usage=(1200, 34)))
    async with raw_acp(fake_openai, tmp_path, "--model", MODEL) as client:
        session_id = await start(client, tmp_path, version=version)
        await client.call("session/prompt", {
            "sessionId": session_id, "prompt": [{"type": "text", "text": "hi there"}]})
        await client.call("session/set_config_option", {
            "sessionId": session_id, "configId": "thought_level", "value": "low"})

    kinds = {u["sessionUpdate"] for u in client.updates()}
    newer = {"session_info_update", "config_option_update", "usage_update"}
    assert kinds & newer == (newer if version >= 1 else set())
    assert "agent_message_chunk" in kinds


async def test_sessions_without_a_message_are_neither_saved_nor_listed(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """codecompanion and acpx create a session per chat opened; session/list showed each as a
    bare id. An older Tiller's empty log already on disk is not listed either."""
    old_empty = log_path(tmp_path / ".sessions", tmp_path, "e" * 32)
    assert old_empty is not None
    old_empty.parent.mkdir(parents=True)
    old_empty.write_text(json.dumps({"type": "session", "version": 1, "id": "e" * 32,
                                     "cwd": str(tmp_path), "created": 1}) + "\n")
    fake_openai.enqueue(text_reply("hi"))
    async with raw_acp(fake_openai, tmp_path) as client:
        unused = await start(client, tmp_path)
        used = str((await client.call("session/new", {"cwd": str(tmp_path),
                                                      "mcpServers": []}))["sessionId"])
        before = await client.call("session/list", {"cwd": str(tmp_path)})
        await client.call("session/prompt", {
            "sessionId": used, "prompt": [{"type": "text", "text": "hello"}]})
        after = await client.call("session/list", {"cwd": str(tmp_path)})

    assert before["sessions"] == []
    assert [s["sessionId"] for s in after["sessions"]] == [used]
    assert after["sessions"][0]["title"] == "hello"
    unused_log = log_path(tmp_path / ".sessions", tmp_path, unused)
    assert unused_log is not None and not unused_log.exists()


async def test_load_replays_the_prompts_as_the_client_sent_them(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """Two text blocks came back glued ("answer slowly pleaserun the long task"), an @file
    sent as a resource came back as Tiller's ``<resource uri=…>`` text (Toad showed an empty
    message). The model still reads what it read; an old log (no acpContent) still loads."""
    notes = tmp_path / "notes.txt"
    two_texts = [{"type": "text", "text": "answer slowly please"},
                 {"type": "text", "text": "run the long task"}]
    with_file = [
        {"type": "text", "text": "explain @notes.txt"},
        {"type": "resource", "resource": {"uri": notes.as_uri(), "mimeType": "text/plain",
                                          "text": "line one\n"}},
        {"type": "resource_link", "uri": notes.as_uri(), "name": "notes.txt"},
    ]
    fake_openai.enqueue(text_reply("slowly then"), text_reply("it says line one"))
    async with raw_acp(fake_openai, tmp_path) as client:
        session_id = await start(client, tmp_path)
        for blocks in (two_texts, with_file):
            await client.call("session/prompt", {"sessionId": session_id, "prompt": blocks})

    old_log = save_old_session(tmp_path)
    async with raw_acp(fake_openai, tmp_path) as client:
        await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        await client.call("session/load", {"sessionId": session_id, "cwd": str(tmp_path),
                                           "mcpServers": []})
        replayed = [u["content"] for u in client.updates()
                    if u["sessionUpdate"] == "user_message_chunk"]
        mark = len(client.received)
        await client.call("session/load", {"sessionId": old_log, "cwd": str(tmp_path),
                                           "mcpServers": []})
        old = [u["content"] for u in client.updates(mark)
               if u["sessionUpdate"] == "user_message_chunk"]
        listed = await client.call("session/list", {"cwd": str(tmp_path)})

    blank = {"type": "text", "text": "\n\n"}
    assert replayed == [two_texts[0], blank, two_texts[1], *with_file]
    assert old == [{"type": "text", "text": "old one"}, blank, {"type": "text", "text": "two"}]
    model_read = fake_openai.requests[1]["messages"][-1]["content"]
    assert f'<resource uri="{notes.as_uri()}">\nline one\n\n</resource>' in str(model_read)
    titles = {s["sessionId"]: s.get("title") for s in listed["sessions"]}
    assert titles[session_id] == "answer slowly please run the long task"


def save_old_session(cwd: Path) -> str:
    """A log as Tillers before acpContent wrote it: a user message of two text blocks."""
    session_id = "01d" + "a" * 29
    path = log_path(cwd / ".sessions", cwd, session_id)
    assert path is not None
    saved = SessionLog.create(path, {"id": session_id, "cwd": str(cwd), "provider": "openai",
                                     "model": "gpt-4o-mini"}, durable=False)
    content = [TextContent(text="old one"), TextContent(text="two")]
    saved.append("message", message=UserMessage(content=content).dump())
    saved.close()
    return session_id


async def test_a_burst_of_chunks_is_merged_and_sent_before_the_answer(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """protocol.md, "Merged chunks": a reply streamed in one burst goes out as far fewer
    ``agent_message_chunk`` updates than the model sent, the first one at once (with what came
    in the same read), the text
    unchanged, all of them before the ``session/prompt`` answer."""
    chunks = 2_000
    text = "".join(f"w{i % 10} " for i in range(chunks))
    fake_openai.enqueue(text_reply(text, chunk_size=3))
    async with raw_acp(fake_openai, tmp_path) as client:
        session_id = await start(client, tmp_path)
        answer = await client.request("session/prompt", {
            "sessionId": session_id, "prompt": [{"type": "text", "text": "talk"}]})
        answered_at = client.received.index(answer)

    said = [(i, m["params"]["update"]["content"]["text"]) for i, m in enumerate(client.received)
            if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"]
    assert answer["result"]["stopReason"] == "end_turn"
    assert "".join(piece for _, piece in said) == text
    assert said[0][1].startswith("w0 ")  # what the first read brought, not held
    assert len(said) < chunks
    assert all(i < answered_at for i, _ in said)


async def test_a_prompt_block_without_what_the_schema_requires_is_invalid_params(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """Each misshapen block gets -32602 naming the block and the field (not an internal error),
    nothing reaches the model, and the session then runs a good prompt."""
    fake_openai.enqueue(text_reply("fine"))
    bad_blocks = [
        {"type": "text"},
        {"type": "text", "text": 5},
        {"type": "image", "data": "iVBORw0KGgo="},
        {"type": "resource_link", "name": "a.py"},
        {"type": "resource", "resource": "file:///etc/passwd"},
        {"type": "resource", "resource": {"text": "x = 1"}},
    ]
    async with raw_acp(fake_openai, tmp_path) as client:
        session = await start(client, tmp_path)
        errors = [(await client.request("session/prompt", {
            "sessionId": session, "prompt": [{"type": "text", "text": "see"}, block]}))["error"]
            for block in bad_blocks]
        answer = await client.call("session/prompt", {
            "sessionId": session, "prompt": [{"type": "text", "text": "hello"}]})

    assert [error["code"] for error in errors] == [-32602] * len(bad_blocks)
    assert [error["message"].removeprefix("Invalid params: ") for error in errors] == [
        "prompt[1]: the text block needs 'text', a string",
        "prompt[1]: the text block needs 'text', a string",
        "prompt[1]: the image block needs 'mimeType', a string",
        "prompt[1]: the resource_link block needs 'uri', a string",
        "prompt[1]: the resource block needs 'resource', an object",
        "prompt[1]: the resource block's resource needs 'uri', a string",
    ]
    assert answer["stopReason"] == "end_turn"
    [request] = fake_openai.requests
    assert request["messages"][-1]["content"] == "hello"
