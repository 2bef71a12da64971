"""End to end: ``session/load`` answers from the log as saved, then the session goes live.

The answer must be exactly what the live session then holds (the same request answered again
by the live session, ``agent/getMessages``); a request sent right behind the load waits for the
session; a message the models refuse makes the session fail after the answer, with the error on
the next request for it; two loads of one session make it live once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from support.helpers import spawn_tiller
from tiller.client import RpcError, TillerClient
from tiller.store.log import SessionLog
from tiller.store.saved import log_path
from tiller.types import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

pytestmark = [pytest.mark.anyio, pytest.mark.process]

SESSION = "5e55" * 8
OTHER = "0be7" * 8
PNG = "iVBORw0KGgo="


def write_log(cwd: Path, session_id: str) -> SessionLog:
    """A new log of ``session_id`` in workspace ``cwd``, where ``spawn_tiller`` finds it."""
    path = log_path(cwd / ".sessions", cwd, session_id)
    return SessionLog.create(path, {"id": session_id, "cwd": str(cwd), "provider": "openai",
                                    "model": "gpt-4o-mini"}, durable=False)


def rich_log(cwd: Path, *, crashed: bool, padding: int = 0) -> None:
    """A session with every kind of message and entry: thinking, tool calls and results (one
    with an image), a compaction, a model change, queued messages (one delivered); ``crashed``:
    a run left open with a tool call that started and one that did not. ``padding`` messages
    first make it take a while to read."""
    log = write_log(cwd, SESSION)
    for number in range(padding):
        log.append("message", message=UserMessage(content=f"padding {number} " * 20).dump())
    log.append("run_start")
    log.append("message", message=UserMessage(content="before the compaction").dump())
    log.append("message", message=AssistantMessage(  # compacted away; its spending still counts
        content=[TextContent(text="an old answer")],
        usage=Usage(input_tokens=100, output_tokens=7, cache_read_tokens=50, cost=0.5)).dump())
    kept = log.append("message", message=UserMessage(content=[
        TextContent(text="look at this"), ImageContent(data=PNG, mime_type="image/png")]).dump())
    log.append("compaction", summary="we looked", firstKeptEntryId=kept.id, tokensBefore=900)
    call = ToolCall(id="c1", name="read", arguments={"path": "a.txt"})
    log.append("message", message=AssistantMessage(
        content=[ThinkingContent(thinking="hm", signature="sig"), TextContent(text="reading"),
                 call], provider="openai", model="gpt-4o-mini", stop_reason="toolUse",
        usage=Usage(input_tokens=12, output_tokens=3, cost=0.25)).dump())
    log.append("tool_start", toolCallId="c1", toolName="read", args=call.arguments)
    log.append("tool_end", toolCallId="c1", isError=False)
    log.append("message", message=ToolResultMessage(
        tool_call_id="c1", tool_name="read", details={"lines": 2},
        content=[TextContent(text="1\tä ☃ \u2028"), ImageContent(data=PNG, mime_type="image/png")],
    ).dump())
    delivered = log.append("queued", queue="steering",
                           message=UserMessage(content="go left").dump())
    log.append("message", message=UserMessage(content="go left").dump(), queueId=delivered.id)
    log.append("model_change", provider="openai", model="gpt-4o")
    log.append("queued", queue="steering", message=UserMessage(content="then right").dump())
    log.append("queued", queue="followUp", message=UserMessage(content="and after").dump())
    if crashed:
        calls = [ToolCall(id="c2", name="bash", arguments={"command": "make"}),
                 ToolCall(id="c3", name="bash", arguments={"command": "make test"})]
        log.append("message", message=AssistantMessage(content=list(calls),
                                                       stop_reason="toolUse").dump())
        log.append("tool_start", toolCallId="c2", toolName="bash", args=calls[0].arguments)
    else:
        log.append("message", message=AssistantMessage(content=[TextContent(text="done")]).dump())
        log.append("run_end", stopReason="stop")
    log.close()


def saved_lines(cwd: Path, session_id: str) -> list[dict[str, Any]]:
    path = log_path(cwd / ".sessions", cwd, session_id)
    assert path is not None
    return [json.loads(line) for line in path.read_text().splitlines()]


async def load_with(tiller: TillerClient, session_id: str, *methods: str) -> list[Any]:
    """``session/load`` and, sent right behind it (before its answer), each of ``methods`` for
    the same session; their results in that order (an error as its RpcError)."""
    results: list[Any] = [None] * (1 + len(methods))

    async def ask(index: int, method: str) -> None:
        try:
            results[index] = await tiller.request(method, {"sessionId": session_id}, timeout=60)
        except RpcError as error:
            results[index] = error

    async with anyio.create_task_group() as group:
        for index, method in enumerate(("session/load", *methods)):
            group.start_soon(ask, index, method)
            await anyio.lowlevel.checkpoint()  # each request written before the next one starts
    return results


@pytest.mark.parametrize("crashed", [False, True])
async def test_the_answer_is_what_the_live_session_holds(tmp_path: Path, crashed: bool) -> None:
    rich_log(tmp_path, crashed=crashed)
    async with spawn_tiller(None, tmp_path) as tiller:
        loaded, messages, state = await load_with(
            tiller, SESSION, "agent/getMessages", "agent/getState")
        again = await tiller.request("session/load", {"sessionId": SESSION})  # the live session's
    async with spawn_tiller(None, tmp_path) as restarted:
        reloaded = await restarted.request("session/load", {"sessionId": SESSION})

    assert loaded == again and messages["messages"] == loaded["messages"]
    assert loaded["model"] == "gpt-4o" and state["model"] == "gpt-4o"
    assert state["usage"] == {"inputTokens": 112, "outputTokens": 10, "cacheReadTokens": 50,
                              "cacheWriteTokens": 0, "cost": 0.75}  # every run's, as saved
    assert (loaded["pendingSteering"], loaded["pendingFollowUp"]) == (1, 1)
    contents = [message["content"] for message in loaded["messages"]]
    assert contents[0].startswith("[Summary") and contents[0].endswith("we looked")
    assert contents[1][0] == {"type": "text", "text": "look at this"}
    assert len(loaded["entryIds"]) == len(loaded["messages"]) and loaded["entryIds"][0] == ""
    results = [m for m in loaded["messages"] if m["role"] == "toolResult"]
    if crashed:  # both calls got a synthetic result, written to the log once, before the answer
        assert [(m["toolCallId"], m["isError"]) for m in results[1:]] == [
            ("c2", True), ("c3", True)]
        assert "interrupted" in results[1]["content"][0]["text"]
        assert "not executed" in results[2]["content"][0]["text"]
        assert state["isRunning"] is False
        lines = saved_lines(tmp_path, SESSION)
        assert [line["type"] for line in lines[-3:]] == ["message", "message", "run_end"]
        assert loaded["entryIds"][-2:] == [lines[-3]["id"], lines[-2]["id"]]
    else:
        assert [m["toolCallId"] for m in results] == ["c1"]
    assert reloaded["messages"] == loaded["messages"]  # a repair is made once


async def test_a_message_the_models_refuse_fails_the_session_after_the_answer(
    tmp_path: Path,
) -> None:
    log = write_log(tmp_path, SESSION)
    log.append("message", message=UserMessage(content="hello").dump())
    bad = log.append("message", message={"role": "assistant", "content": [],
                                         "usage": {"inputTokens": "many"}})
    log.close()
    log = write_log(tmp_path, OTHER)
    log.append("message", message=UserMessage(content="a good session").dump())
    log.close()

    async with spawn_tiller(None, tmp_path) as tiller:
        loaded, state = await load_with(tiller, SESSION, "agent/getState")
        with pytest.raises(RpcError) as later:
            await tiller.request("agent/prompt", {"sessionId": SESSION, "message": "hi"})
        listed = await tiller.request("session/list", {"cwd": str(tmp_path)})
        other, other_state = await load_with(tiller, OTHER, "agent/getState")

    assert [m["role"] for m in loaded["messages"]] == ["user", "assistant"]
    assert loaded["messages"][1]["usage"] == {"inputTokens": "many"}  # as saved
    assert isinstance(state, RpcError) and state.code == -32016
    assert bad.id in state.message and "inputTokens" in state.message
    assert later.value.code == -32016
    assert {s["sessionId"]: s["live"] for s in listed["sessions"]} == {SESSION: False,
                                                                     OTHER: False}
    assert other["messages"][0]["content"] == "a good session"
    assert other_state["sessionId"] == OTHER and other_state["messageCount"] == 1


async def test_two_loads_of_one_session_make_it_live_once(tmp_path: Path) -> None:
    """The second load waits for the first: read at once, both would repair the log."""
    rich_log(tmp_path, crashed=True, padding=3000)
    async with spawn_tiller(None, tmp_path) as tiller:
        first, second = await load_with(tiller, SESSION, "session/load")
        listed = await tiller.request("session/list", {"cwd": str(tmp_path)})

    assert first == second
    assert [s["live"] for s in listed["sessions"]] == [True]
    repairs = [line for line in saved_lines(tmp_path, SESSION) if line.get("type") == "message"
               and line["message"].get("isError")]
    assert [line["message"]["toolCallId"] for line in repairs] == ["c2", "c3"]


async def test_load_params_are_read_as_every_methods(tmp_path: Path) -> None:
    """``{"sessionId": "..."}`` is read without the models; anything else goes through them, as
    for every method: coerced or refused (-32602), unknown names ignored."""
    log = write_log(tmp_path, SESSION)
    log.append("message", message=UserMessage(content="hello").dump())
    log.close()
    async with spawn_tiller(None, tmp_path) as tiller:
        refused = []
        for params in ({}, {"sessionId": 5}, {"sessionId": None}, [SESSION]):
            with pytest.raises(RpcError) as caught:
                await tiller.request("session/load", params)
            refused.append((caught.value.code, caught.value.message))
        with pytest.raises(RpcError) as unknown:
            await tiller.request("session/load", {"sessionId": "0" * 32})
        loaded = await tiller.request("session/load", {"session_id": SESSION, "other": 1})

    assert [code for code, _ in refused] == [-32602] * 4
    assert "sessionId" in refused[0][1] or "session_id" in refused[0][1]
    assert unknown.value.code == -32013
    assert loaded["sessionId"] == SESSION and loaded["messages"][0]["content"] == "hello"
