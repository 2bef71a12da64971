"""End to end: bad input gets exactly one documented error, and the server keeps serving."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import clean_env, spawn_tiller, wait_requests
from tiller.client import RpcError, TillerClient

pytestmark = [pytest.mark.anyio, pytest.mark.process]


def responses(tiller: TillerClient) -> list[dict[str, Any]]:
    return [m for m in tiller.received if "method" not in m]


async def next_response(tiller: TillerClient, start: int) -> dict[str, Any]:
    return await tiller.wait_for(lambda m: "method" not in m, start=start)


async def still_serving(tiller: TillerClient) -> None:
    state = await tiller.request("agent/getState")
    assert state["isRunning"] is False


@pytest.mark.parametrize("framing", ["ndjson", "lsp"])
async def test_malformed_json_gets_parse_error(tmp_path: Path, framing: str) -> None:
    async with spawn_tiller(None, tmp_path, framing=framing) as tiller:
        body = b'{"jsonrpc": "2.0", "id": 1, "method": '
        raw = body + b"\n" if framing == "ndjson" else (
            b"Content-Length: %d\r\n\r\n" % len(body) + body
        )
        await tiller.send_raw(raw)
        error = await next_response(tiller, 0)
        assert error["id"] is None
        assert error["error"]["code"] == -32700
        await still_serving(tiller)


@pytest.mark.parametrize(
    ("message", "expected_id"),
    [
        ({"id": 5, "method": "agent/getState"}, 5),  # no "jsonrpc"
        ({"jsonrpc": "1.0", "id": 6, "method": "agent/getState"}, 6),
        ({"jsonrpc": "2.0", "id": 7}, 7),  # no method, no result
        ({"jsonrpc": "2.0", "id": 8, "method": 42}, 8),
        ({"jsonrpc": "2.0", "id": 9, "method": "agent/getState", "params": "x"}, 9),
        ({"jsonrpc": "2.0", "id": [1], "method": "agent/getState"}, None),
        ([{"jsonrpc": "2.0", "id": 10, "method": "agent/getState"}], None),  # a batch
        ("just a string", None),
    ],
)
async def test_invalid_requests(tmp_path: Path, message: Any, expected_id: Any) -> None:
    async with spawn_tiller(None, tmp_path) as tiller:
        await tiller.send_raw(json.dumps(message).encode() + b"\n")
        error = await next_response(tiller, 0)
        assert error["id"] == expected_id
        assert error["error"]["code"] == -32600
        await still_serving(tiller)


async def test_responses_that_answer_no_request_are_dropped_unanswered(tmp_path: Path) -> None:
    """JSON-RPC never answers a response: one with a null, missing, unknown or invalid id (or
    no "jsonrpc") is logged and dropped, so two such peers cannot ping-pong."""
    bad_responses: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "error": {"code": -32602, "message": "Invalid params"}},  # no id
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid"}},
        {"jsonrpc": "2.0", "id": "never-sent", "result": {}},
        {"jsonrpc": "2.0", "id": 99, "error": {"code": 1, "message": "no such request"}},
        {"jsonrpc": "2.0", "id": [1], "result": None},
        {"id": None, "result": "no jsonrpc member"},
    ]
    async with spawn_tiller(None, tmp_path) as tiller:
        for message in bad_responses:
            await tiller.send_raw(json.dumps(message).encode() + b"\n")
        await still_serving(tiller)  # handled in order: the bad ones were read first

    assert [m["id"] for m in responses(tiller)] == [1]  # only agent/getState's answer


async def test_unknown_method(tmp_path: Path) -> None:
    async with spawn_tiller(None, tmp_path) as tiller:
        with pytest.raises(RpcError) as caught:
            await tiller.request("agent/fly", {})
        assert caught.value.code == -32601
        assert "agent/fly" in caught.value.message
        await still_serving(tiller)


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("agent/prompt", {}, "message"),
        ("agent/prompt", {"message": 12}, "message"),
        ("agent/prompt", {"message": [{"type": "video"}]}, "message"),
        ("agent/steer", {"sessionId": 3, "message": "x"}, "sessionId"),
        ("agent/setQueueModes", {"steering": "sometimes"}, "steering"),
        ("agent/prompt", [1, 2], "params"),
    ],
)
async def test_invalid_params_name_the_field(
    tmp_path: Path, method: str, params: Any, field: str
) -> None:
    async with spawn_tiller(None, tmp_path) as tiller:
        with pytest.raises(RpcError) as caught:
            await tiller.request(method, params)
        assert caught.value.code == -32602
        assert field in caught.value.message
        assert "Traceback" not in caught.value.message and caught.value.data is None
        await still_serving(tiller)


async def test_a_session_in_a_cwd_that_is_not_a_folder_is_invalid_params(tmp_path: Path) -> None:
    """As ``--cwd``: a missing folder, a file, or a name the system refuses (too long) is
    -32602 saying why, and no session is made."""
    (tmp_path / "file").write_text("x")
    async with spawn_tiller(None, tmp_path) as tiller:
        messages = []
        for cwd in [str(tmp_path / "missing"), str(tmp_path / "file"), "a" * 300]:
            with pytest.raises(RpcError) as caught:
                await tiller.request("session/new", {"cwd": cwd})
            assert caught.value.code == -32602
            assert caught.value.message.startswith(f"Invalid params: cwd: {cwd[:200]!r}: ")
            messages.append(caught.value.message.rsplit(": ", 1)[-1])
        made = await tiller.request("session/new", {"cwd": str(tmp_path)})
        assert await tiller.request("agent/getState", {"sessionId": made["sessionId"]})
    assert messages == ["no such folder", "not a folder", "File name too long"]


async def test_tiller_errors_have_documented_codes(tmp_path: Path) -> None:
    async with spawn_tiller(None, tmp_path, "--provider", "openai") as tiller:
        for method, params, code in [
            ("agent/getState", {"sessionId": "nope"}, -32013),
            ("agent/continue", {}, -32012),
            ("agent/abort", {}, -32011),
            ("agent/prompt", {"message": "hi"}, -32014),  # no key, no base URL
            ("session/new", {"provider": "nonexistent"}, -32014),
        ]:
            with pytest.raises(RpcError) as caught:
                await tiller.request(method, params)
            assert caught.value.code == code, method
        await still_serving(tiller)

    no_key = next(m for m in tiller.received if m.get("error", {}).get("code") == -32014)
    assert "OPENAI_API_KEY" in no_key["error"]["message"]


async def test_every_request_gets_exactly_one_response(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    gate = threading.Event()
    fake_openai.enqueue(text_reply("ok", gate=gate), text_reply("steered"))
    async with spawn_tiller(fake_openai, tmp_path) as tiller, anyio.create_task_group() as tg:
        tg.start_soon(tiller.request, "agent/prompt", {"message": "run"})
        await wait_requests(fake_openai, 1)
        await tiller.send_raw(b"garbage\n")
        for msg_id, method, params in [
            (101, "agent/prompt", {"message": "busy?"}),
            (102, "agent/steer", {"message": "steer"}),
            (103, "agent/nothing", None),
            (104, "agent/followUp", {}),
            ("str-id", "agent/getState", None),
        ]:
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
            if params is not None:
                message["params"] = params
            await tiller.send(message)
        await tiller.wait_for(lambda m: m.get("id") == "str-id")
        gate.set()
        await tiller.wait_event("agent_settled")

    ids = [m.get("id") for m in responses(tiller)]
    assert sorted(map(str, ids)) == sorted(map(str, [None, 1, 101, 102, 103, 104, "str-id"]))
    assert len(ids) == len(set(map(str, ids)))
    by_id = {m.get("id"): m for m in responses(tiller)}
    assert by_id[101]["error"]["code"] == -32010
    assert by_id[102]["result"] == {"queued": 1}
    assert by_id[103]["error"]["code"] == -32601
    assert by_id[104]["error"]["code"] == -32602
    assert by_id[1]["result"]["stopReason"] == "stop"


async def test_missing_key_message_never_contains_secrets(tmp_path: Path) -> None:
    env = clean_env(OPENAI_API_KEY="sk-test-SECRET-value")
    async with spawn_tiller(None, tmp_path, "--base-url", "http://127.0.0.1:9/v1",
                            env=env) as tiller:
        result = await tiller.request("agent/prompt", {"message": "hi"})
    assert result["stopReason"] == "error"
    wire = json.dumps(tiller.received)
    assert "SECRET" not in wire


def test_stdin_that_cannot_be_polled_is_read_too(tmp_path: Path) -> None:
    """/dev/null and regular files as stdin (``tiller < requests.jsonl``) are served, then EOF
    ends the server cleanly."""
    requests = tmp_path / "requests.jsonl"
    requests.write_text('{"jsonrpc": "2.0", "id": 1, "method": "agent/getState"}\n')
    command = [sys.executable, "-m", "tiller", "--no-session", "--cwd", str(tmp_path)]
    with requests.open("rb") as stdin:
        served = subprocess.run(command, stdin=stdin, capture_output=True, timeout=60)
    empty = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)

    assert served.returncode == 0 and json.loads(served.stdout)["result"]["isRunning"] is False
    assert empty.returncode == 0 and empty.stdout == b""


async def test_lone_surrogates_from_the_client_and_the_model_read_as_replacement_characters(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """A lone UTF-16 surrogate escape (``JSON.stringify`` writes one for a string cut inside an
    emoji; a model can stream one) in a prompt, a streamed reply or a tool call's arguments is
    read as U+FFFD: the run goes on, every event is sent, and the saved session loads. A pair
    stays the character it spells."""
    fake_openai.enqueue(
        tool_call_reply([("c1", "write", {"path": "a.txt", "content": "file \udcff \U0001f600"})]),
        text_reply("reply \ud800 end"),
    )
    async with spawn_tiller(fake_openai, tmp_path, "--permission-mode", "auto") as tiller:
        session_id = (await tiller.request("session/new"))["sessionId"]
        result = await tiller.prompt("hi \udcff there", session_id=session_id)
        sent = [e for e in tiller.events if e["type"] == "message_end"]
    async with spawn_tiller(fake_openai, tmp_path) as again:
        loaded = await again.request("session/load", {"sessionId": session_id})

    assert result["stopReason"] == "stop"
    assert (tmp_path / "a.txt").read_text() == "file \ufffd \U0001f600"
    first, second = fake_openai.requests
    assert first["messages"][-1]["content"] == "hi \ufffd there"
    assert sent[0]["message"]["content"] == "hi \ufffd there"
    assert sent[-1]["message"]["content"] == [{"type": "text", "text": "reply \ufffd end"}]
    assert [m["content"] for m in loaded["messages"]][::3] == [
        "hi \ufffd there", [{"type": "text", "text": "reply \ufffd end"}]]
