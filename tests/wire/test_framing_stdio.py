"""End to end over raw stdio bytes: bad framing, deep nesting and ``$/cancelRequest`` as a
request each get exactly one answer, and the server keeps serving the frames that follow."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from support.fake_openai import FakeOpenAI, text_reply
from support.frames import BAD_FRAMES, BODY, N
from support.helpers import spawn_tiller, wait_requests
from tiller.client import TillerClient

pytestmark = [pytest.mark.anyio, pytest.mark.process]



def lsp(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def raw(message: bytes, framing: str) -> bytes:
    """A hand-made body in ``framing``."""
    return b"Content-Length: %d\r\n\r\n%s" % (len(message), message) if framing == "lsp" else (
        message + b"\n"
    )


def responses(tiller: TillerClient, start: int = 0) -> list[dict[str, Any]]:
    return [m for m in tiller.received[start:] if "method" not in m]


async def answered(tiller: TillerClient, msg_id: int) -> dict[str, Any]:
    """Send agent/getState with ``msg_id`` and return its response."""
    with anyio.fail_after(8):
        return await tiller.request_raw("agent/getState", msg_id=msg_id)


@pytest.mark.parametrize("kind", list(BAD_FRAMES))
async def test_a_bad_lsp_frame_gets_one_parse_error_and_the_next_frame_is_served(
    tmp_path: Path, kind: str
) -> None:
    async with spawn_tiller(None, tmp_path, framing="lsp") as tiller:
        assert "result" in await answered(tiller, 100)  # the framing is now LSP
        start = len(tiller.received)
        await tiller.send_raw(BAD_FRAMES[kind])
        after = await answered(tiller, 2)
        assert after["result"]["isRunning"] is False
        assert "result" in await answered(tiller, 3)

    got = responses(tiller, start)
    assert [(m.get("id"), m.get("error", {}).get("code")) for m in got] == [
        (None, -32700), (2, None), (3, None)
    ], kind


async def test_bad_lsp_frames_back_to_back_get_one_parse_error_each(tmp_path: Path) -> None:
    """Resynchronising never eats a following bad frame's own error, nor answers twice."""
    kinds = ["short", "negative", "zero", "long", "non-numeric", "no-blank-line",
             "nul-in-value", "absurd", "not-json", "much-longer"]
    async with spawn_tiller(None, tmp_path, framing="lsp") as tiller:
        assert "result" in await answered(tiller, 100)
        start = len(tiller.received)
        await tiller.send_raw(b"".join(BAD_FRAMES[kind] for kind in kinds))
        assert "result" in await answered(tiller, 2)

    got = responses(tiller, start)
    assert [m["error"]["code"] for m in got[:-1]] == [-32700] * len(kinds)
    assert {m["id"] for m in got[:-1]} == {None} and got[-1]["id"] == 2


async def test_a_valid_frame_swallowed_by_a_long_length_is_not_served_twice(
    tmp_path: Path,
) -> None:
    """The frame a too-long length runs into is served once, from its own header."""
    async with spawn_tiller(None, tmp_path, framing="lsp") as tiller:
        assert "result" in await answered(tiller, 100)
        start = len(tiller.received)
        follower = lsp({"jsonrpc": "2.0", "id": 2, "method": "agent/getState"})
        await tiller.send_raw(b"Content-Length: %d\r\n\r\n%s" % (N + 30, BODY) + follower)
        await tiller.wait_for(lambda m: m.get("id") == 2, start=start, timeout=15)
        assert "result" in await answered(tiller, 3)

    assert [m.get("id") for m in responses(tiller, start)] == [None, 2, 3]


def nested_params(depth: int) -> bytes:
    return b'{"jsonrpc": "2.0", "id": 7, "method": "agent/getState", "params": {"x": ' + (
        b'{"a": ' * depth + b"1" + b"}" * depth + b"}}"
    )


@pytest.mark.parametrize("framing", ["ndjson", "lsp"])
@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (nested_params(600), (7, -32600)),  # decodable, so the id is readable
        # Too deep to decode: the id is read from the frame's top level (issue 26, 13).
        (nested_params(2_000), (7, -32600)),
        (nested_params(100_000), (7, -32600)),
        (b'{"jsonrpc": "2.0", "method": "agent/getState", "params": ' + b"[" * 5_000
         + b"]" * 5_000 + b', "id": "after"}', ("after", -32600)),  # the id after the params
        (b'{"jsonrpc": "2.0", "method": "x", "params": [' + b'"[{\\"]", [' * 3_000
         + b"]" * 3_001 + b', "id": 8}', (8, -32600)),  # brackets in strings are not counted
        (b'{"id": [1], "method": "x", "params": ' + b"[" * 5_000 + b"]" * 5_000 + b"}",
         (None, -32600)),  # an id that is not a string or an integer
        (b"[" * 100_000 + b"]" * 100_000, (None, -32600)),
        (b"[" * 100_000, (None, -32600)),  # unterminated, too
    ],
    ids=["600-deep-params", "2000-deep-params", "100k-deep-params", "id-after-deep-params",
         "brackets-in-strings", "invalid-id", "100k-deep-array", "100k-open-brackets"],
)
async def test_deep_nesting_gets_exactly_one_error_and_the_server_keeps_serving(
    tmp_path: Path, framing: str, message: bytes, expected: tuple[Any, int]
) -> None:
    async with spawn_tiller(None, tmp_path, framing=framing) as tiller:
        assert "result" in await answered(tiller, 100)
        start = len(tiller.received)
        await tiller.send_raw(raw(message, framing))
        assert "result" in await answered(tiller, 2)

    got = responses(tiller, start)
    assert [m["id"] for m in got] == [expected[0], 2]
    assert got[0]["error"]["code"] == expected[1]
    assert "nest" in got[0]["error"]["message"]


@pytest.mark.parametrize("framing", ["ndjson", "lsp"])
async def test_a_response_too_deep_to_decode_is_never_answered(
    tmp_path: Path, framing: str
) -> None:
    """A deep *response* (``result``, no ``method``) is dropped like any bad response."""
    deep = b'{"jsonrpc": "2.0", "id": 5, "result": ' + b"[" * 5_000 + b"]" * 5_000 + b"}"
    async with spawn_tiller(None, tmp_path, framing=framing) as tiller:
        assert "result" in await answered(tiller, 100)
        start = len(tiller.received)
        await tiller.send_raw(raw(deep, framing))
        assert "result" in await answered(tiller, 2)

    assert [m.get("id") for m in responses(tiller, start)] == [2]


async def test_nesting_under_the_limit_is_served(tmp_path: Path) -> None:
    """500 levels is allowed, and nothing after the reader recurses too deep on it."""
    async with spawn_tiller(None, tmp_path) as tiller:
        await tiller.send_raw(nested_params(500) + b"\n")
        response = await tiller.wait_for(lambda m: m.get("id") == 7, timeout=15)
    assert response["result"]["isRunning"] is False


async def test_cancel_request_sent_as_a_request_is_answered_and_still_cancels(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    gate = threading.Event()
    fake_openai.enqueue(text_reply("never finished", gate=gate))
    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        await tiller.send({"jsonrpc": "2.0", "id": 50, "method": "agent/prompt",
                           "params": {"message": "run"}})
        await wait_requests(fake_openai, 1)
        cancel = await tiller.request_raw("$/cancelRequest", {"id": 50}, msg_id="cancel-1")
        prompt = await tiller.wait_for(lambda m: m.get("id") == 50, timeout=15)
        unknown = await tiller.request_raw("$/cancelRequest", {"id": 999}, msg_id="cancel-2")
        gate.set()

    assert cancel == {"jsonrpc": "2.0", "id": "cancel-1", "result": None}
    assert prompt["result"]["stopReason"] == "aborted"
    assert unknown == {"jsonrpc": "2.0", "id": "cancel-2", "result": None}
    assert [m.get("id") for m in responses(tiller)].count("cancel-1") == 1


@pytest.mark.parametrize("bad_id", [[1], {"a": 1}, None, True, 1.5])
async def test_cancel_request_with_an_id_that_names_no_request_gets_one_answer(
    tmp_path: Path, bad_id: Any
) -> None:
    """Issue 26, 14: ``params.id`` a list or an object (unhashable) used to raise inside the
    cancel and leave the request unanswered. It is answered -32602 once; serving goes on."""
    async with spawn_tiller(None, tmp_path) as tiller:
        start = len(tiller.received)
        answer = await tiller.request_raw("$/cancelRequest", {"id": bad_id}, msg_id="c-1",
                                          timeout=15)
        await tiller.notify("$/cancelRequest", {"id": bad_id})
        assert "result" in await answered(tiller, 2)

    assert answer["error"]["code"] == -32602
    assert answer["error"]["message"] == (
        "Invalid params: id: the id of a request, a string or an integer")
    assert [m.get("id") for m in responses(tiller, start)] == ["c-1", 2]
