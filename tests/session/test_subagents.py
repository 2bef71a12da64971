"""Subagents through the real server (issue 29): the ``task`` tool starts child sessions whose
events stream under their own session id with the parent's ids, that run at once, ask for
permission with both ids, are aborted with their parent, steered by their own id, bounded,
durable across kill -9, listed under their parent, and whose usage rolls up into the parent's.

The fake model serves parent and children at once: each child's requests are routed by the
task's prompt (its first user message), the parent's take the main script."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from support.fake_openai import FakeOpenAI, stall_reply, text_reply, tool_call_reply
from support.helpers import record_sent, spawn_tiller, wait_requests
from support.schema_check import WireLog

pytestmark = [pytest.mark.anyio, pytest.mark.process]


def asks(prompt: str) -> Callable[[dict[str, Any]], bool]:
    """A route for the requests of the child whose task prompt is ``prompt``."""

    def match(body: dict[str, Any]) -> bool:
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        return bool(users) and users[0].get("content") == prompt

    return match


def task(call_id: str, prompt: str, agent: str | None = None) -> tuple[str, str, dict[str, Any]]:
    args: dict[str, Any] = {"description": f"Do {prompt}", "prompt": prompt}
    if agent is not None:
        args["agent"] = agent
    return (call_id, "task", args)


def workspace(tmp_path: Path) -> tuple[Path, tuple[str, ...]]:
    """A workspace folder, and the server arguments keeping sessions outside it."""
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws, ("--session-dir", str(tmp_path / "data"))


def of(events: list[dict[str, Any]], session_id: str, kind: str | None = None
       ) -> list[dict[str, Any]]:
    return [e for e in events if e["sessionId"] == session_id
            and (kind is None or e["type"] == kind)]


def tool_result(messages: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    return next(m for m in messages if m["role"] == "toolResult" and m["toolCallId"] == call_id)


async def test_two_tasks_in_one_batch_run_at_once_and_answer_their_own_calls(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws, args = workspace(tmp_path)
    release_a = threading.Event()
    fake_openai.route(asks("job A"), text_reply("A is done", gate=release_a))
    fake_openai.route(asks("job B"), text_reply("B is done"))
    fake_openai.enqueue(tool_call_reply([task("t_a", "job A"), task("t_b", "job B")]),
                        text_reply("both done"))
    async with spawn_tiller(fake_openai, ws, *args, "--permission-mode", "auto") as tiller:
        sid = (await tiller.request("session/new"))["sessionId"]
        async with anyio.create_task_group() as group:
            group.start_soon(tiller.request, "agent/prompt", {"sessionId": sid, "message": "go"})
            await wait_requests(fake_openai, 3)  # both children asked while A is held
            await tiller.wait_event("agent_end", parentToolCallId="t_b")
            release_a.set()
        messages = (await tiller.request("agent/getMessages", {"sessionId": sid}))["messages"]
        events = tiller.events

    starts = of(events, sid, "tool_execution_update")
    child = {u["toolCallId"]: u["partialResult"]["sessionId"] for u in starts}
    assert set(child) == {"t_a", "t_b"} and child["t_a"] != child["t_b"]
    for call_id, child_id in child.items():
        own = of(events, child_id)
        assert {(e["parentSessionId"], e["parentToolCallId"]) for e in own} == {(sid, call_id)}
        assert [e["seq"] for e in own] == list(range(1, len(own) + 1))
    order = [(e["sessionId"], e["type"]) for e in events]
    # Interleaved: A started before B ended, and ended after it.
    assert order.index((child["t_a"], "agent_start")) < order.index((child["t_b"], "agent_end"))
    assert order.index((child["t_b"], "agent_end")) < order.index((child["t_a"], "agent_end"))
    assert tool_result(messages, "t_a")["content"][0]["text"] == "A is done"
    assert tool_result(messages, "t_b")["content"][0]["text"] == "B is done"
    assert tool_result(messages, "t_a")["details"]["sessionId"] == child["t_a"]
    # The parent's results go back in the order the model wrote the calls.
    assert [m["toolCallId"] for m in messages if m["role"] == "toolResult"] == ["t_a", "t_b"]


async def test_a_read_grep_agent_cannot_write_and_is_told_why(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws, args = workspace(tmp_path)
    (ws / ".tiller" / "agents").mkdir(parents=True)
    (ws / ".tiller" / "agents" / "reader.md").write_text(
        "---\nname: reader\ndescription: Reads things\ntools: [read, grep]\n---\nJust read.\n")
    fake_openai.route(asks("look"),
                      tool_call_reply([("w1", "write", {"path": "x.txt", "content": "no"})]),
                      text_reply("I could not write"))
    fake_openai.enqueue(tool_call_reply([task("t1", "look", "reader")]), text_reply("ok"))
    async with spawn_tiller(fake_openai, ws, *args, "--permission-mode", "auto") as tiller:
        sid = (await tiller.request("session/new"))["sessionId"]
        await tiller.request("agent/prompt", {"sessionId": sid, "message": "go"})
        events = tiller.events

    child_request = fake_openai.requests[1]
    assert [t["function"]["name"] for t in child_request["tools"]] == ["read", "grep"]
    assert child_request["messages"][0]["content"].startswith("Just read.")
    [refused] = [e for e in events if e["type"] == "tool_execution_end"
                 and e["toolCallId"] == "w1"]
    text = refused["result"]["content"][0]["text"]
    assert refused["isError"] and refused["sessionId"] != sid
    assert text == ("Tool 'write' is not available here: the reader agent may not use 'write'. "
                    "Available tools: grep, read.")
    assert not (ws / "x.txt").exists()


async def test_a_childs_question_carries_both_ids_and_its_changes_are_the_parents_turn(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws, args = workspace(tmp_path)
    (ws / "notes.txt").write_text("old\n")
    fake_openai.route(asks("edit notes"),
                      tool_call_reply([("w1", "write", {"path": "notes.txt", "content": "new\n"})]),
                      text_reply("Rewrote notes.txt"))
    fake_openai.enqueue(tool_call_reply([task("t1", "edit notes")]), text_reply("done"))
    asked: list[dict[str, Any]] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"outcome": "allowOnce"}

    async with spawn_tiller(fake_openai, ws, *args) as tiller:
        sent = record_sent(tiller)
        tiller.on_request("client/requestPermission", answer)
        await tiller.request("initialize", {"capabilities": {"permissions": True}})
        sid = (await tiller.request("session/new"))["sessionId"]
        await tiller.request("agent/prompt", {"sessionId": sid, "message": "go"})
        messages = (await tiller.request("agent/getMessages", {"sessionId": sid}))["messages"]
        changes = await tiller.request("session/changes", {"sessionId": sid})
        assert (ws / "notes.txt").read_text() == "new\n"
        [turn] = changes["checkpoints"]
        reverted = await tiller.request("session/revert",
                                        {"sessionId": sid, "entryId": turn["entryId"]})
        received = list(tiller.received)

    assert WireLog(sent, received).problems == []  # the child's events and question too
    [question] = asked  # the task call itself was not asked about
    child_id = question["sessionId"]
    assert child_id != sid and question["toolCallId"] == "w1"
    assert (question["parentSessionId"], question["parentToolCallId"]) == (sid, "t1")
    report = tool_result(messages, "t1")
    assert report["content"][0]["text"] == "Rewrote notes.txt\n\nFiles it changed: notes.txt."
    assert report["details"]["files"] == ["notes.txt"]
    assert [f["path"] for f in changes["files"]] == ["notes.txt"]
    assert reverted["restored"] == ["notes.txt"] and (ws / "notes.txt").read_text() == "old\n"


async def test_aborting_the_parent_aborts_both_children(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws, args = workspace(tmp_path)
    fake_openai.route(asks("job A"), stall_reply("thinking about A"))
    fake_openai.route(asks("job B"), stall_reply())
    fake_openai.enqueue(tool_call_reply([task("t_a", "job A"), task("t_b", "job B")]))
    async with spawn_tiller(fake_openai, ws, *args, "--permission-mode", "auto") as tiller:
        sid = (await tiller.request("session/new"))["sessionId"]
        async with anyio.create_task_group() as group:
            results: list[dict[str, Any]] = []

            async def prompt() -> None:
                results.append(await tiller.request(
                    "agent/prompt", {"sessionId": sid, "message": "go"}))

            group.start_soon(prompt)
            await wait_requests(fake_openai, 3)
            await tiller.request("agent/abort", {"sessionId": sid})
        events = tiller.events
        children = [u["partialResult"]["sessionId"] for u in of(events, sid,
                                                                "tool_execution_update")]
        live = [(await tiller.request("session/list", {}))["sessions"][0]["children"]]

    assert results[0]["stopReason"] == "aborted"
    assert len(children) == 2
    for child_id in children:
        [end] = of(events, child_id, "agent_end")
        assert end["stopReason"] == "aborted"
        assert of(events, child_id)[-1]["type"] == "agent_settled"
    ends = of(events, sid, "tool_execution_end")
    assert sorted(e["toolCallId"] for e in ends) == ["t_a", "t_b"]
    assert all(e["isError"] for e in ends)
    assert {c["sessionId"] for c in live[0]} == set(children)
    assert not any(c["live"] for c in live[0])  # closed once their task ended


async def test_kill_9_mid_task_then_parent_and_child_load_consistently(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws, args = workspace(tmp_path)
    fake_openai.route(asks("long job"), tool_call_reply([("b1", "bash", {"command": "true"})]),
                      stall_reply())
    fake_openai.enqueue(tool_call_reply([task("t1", "long job")]))
    async with spawn_tiller(fake_openai, ws, *args, "--permission-mode", "auto") as doomed:
        sid = (await doomed.request("session/new"))["sessionId"]
        async def prompt() -> None:
            with pytest.raises(EOFError):  # never answered: the server dies
                await doomed.request("agent/prompt", {"sessionId": sid, "message": "go"})

        async with anyio.create_task_group() as group:
            group.start_soon(prompt)
            await wait_requests(fake_openai, 3)  # the child's second model call hangs
            doomed.process.send_signal(signal.SIGKILL)
            assert await doomed.process.wait() == -signal.SIGKILL
        child_id = next(e for e in doomed.events
                        if e["type"] == "tool_execution_update")["partialResult"]["sessionId"]

    fake_openai.enqueue(text_reply("picked up again"))
    async with spawn_tiller(fake_openai, ws, *args, "--permission-mode", "auto") as revived:
        listed = (await revived.request("session/list", {}))["sessions"]
        parent = await revived.request("session/load", {"sessionId": sid})
        child = await revived.request("session/load", {"sessionId": child_id})
        state = await revived.request("agent/getState", {"sessionId": child_id})
        resumed = await revived.request("agent/continue", {"sessionId": sid})

    assert [s["sessionId"] for s in listed] == [sid]
    [listed_child] = listed[0]["children"]
    assert listed_child["sessionId"] == child_id and listed_child["parentToolCallId"] == "t1"
    interrupted = parent["messages"][-1]
    assert interrupted["role"] == "toolResult" and interrupted["toolCallId"] == "t1"
    assert interrupted["isError"] and "interrupted" in interrupted["content"][0]["text"]
    assert (child["parentSessionId"], child["parentToolCallId"], child["agent"]) == (
        sid, "t1", "general-purpose")
    assert [m["role"] for m in child["messages"]] == ["user", "assistant", "toolResult"]
    assert child["messages"][0]["content"] == "long job"
    assert (state["parentSessionId"], state["agent"]) == (sid, "general-purpose")
    assert resumed["stopReason"] == "stop"


async def test_usage_rolls_up_into_the_parents_run_and_state_and_survives_a_load(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws, args = workspace(tmp_path)
    fake_openai.route(asks("count"), text_reply("42", usage=(300, 70)))
    fake_openai.enqueue(tool_call_reply([task("t1", "count")], usage=(20, 2)),
                        text_reply("it is 42", usage=(40, 4)))
    async with spawn_tiller(fake_openai, ws, *args, "--permission-mode", "auto") as tiller:
        sid = (await tiller.request("session/new"))["sessionId"]
        result = await tiller.request("agent/prompt", {"sessionId": sid, "message": "go"})
        state = await tiller.request("agent/getState", {"sessionId": sid})
        messages = (await tiller.request("agent/getMessages", {"sessionId": sid}))["messages"]
    async with spawn_tiller(fake_openai, ws, *args) as again:
        await again.request("session/load", {"sessionId": sid})
        loaded = await again.request("agent/getState", {"sessionId": sid})

    assert (result["usage"]["inputTokens"], result["usage"]["outputTokens"]) == (360, 76)
    assert state["usage"] == result["usage"] == loaded["usage"]
    report = tool_result(messages, "t1")
    assert (report["usage"]["inputTokens"], report["usage"]["outputTokens"]) == (300, 70)


async def test_a_child_is_steered_by_its_own_id_and_is_bounded(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws, args = workspace(tmp_path)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.toml").write_text("[tasks]\nmax_turns = 2\n")
    held = threading.Event()
    fake_openai.route(asks("wander"),
                      tool_call_reply([("l1", "ls", {})], gate=held),
                      tool_call_reply([("l2", "ls", {})]))
    fake_openai.enqueue(tool_call_reply([task("t1", "wander")]), text_reply("ok"))
    async with spawn_tiller(fake_openai, ws, *args, "--permission-mode", "auto",
                            "--config", str(tmp_path / "config" / "config.toml")) as tiller:
        sid = (await tiller.request("session/new"))["sessionId"]
        async with anyio.create_task_group() as group:
            group.start_soon(tiller.request, "agent/prompt", {"sessionId": sid, "message": "go"})
            update = await tiller.wait_event("tool_execution_update", sessionId=sid)
            child_id = update["partialResult"]["sessionId"]
            queued = await tiller.request("agent/steer",
                                          {"sessionId": child_id, "message": "only the top"})
            held.set()
        messages = (await tiller.request("agent/getMessages", {"sessionId": sid}))["messages"]

    assert queued == {"queued": 1}
    steered = fake_openai.requests[2]  # the child's second call
    assert steered["messages"][-1] == {"role": "user", "content": "only the top"}
    report = tool_result(messages, "t1")
    assert report["isError"] and report["details"]["stopReason"] == "maxTurns"
    assert report["content"][0]["text"].startswith(
        "The general-purpose agent stopped before it finished (maxTurns: stopped after 2 turns")


async def test_a_bad_agent_file_is_reported_and_skipped_and_claude_agents_are_read(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws, args = workspace(tmp_path)
    (ws / ".tiller" / "agents").mkdir(parents=True)
    (ws / ".tiller" / "agents" / "broken.md").write_text(
        "---\nname: broken\ndescription: never closed\nBe broken.\n")
    (ws / ".claude" / "agents").mkdir(parents=True)
    (ws / ".claude" / "agents" / "reviewer.md").write_text(
        "---\nname: reviewer\ndescription: Reviews code\ntools: Read, Grep, Glob\n"
        "model: sonnet\ncolor: blue\n---\nReview it.\n")
    fake_openai.route(asks("review"), tool_call_reply([task("t9", "nested")]),
                      text_reply("looks fine"))
    fake_openai.enqueue(tool_call_reply([task("t1", "x", "broken"), task("t2", "review",
                                                                       "reviewer")]),
                        text_reply("ok"))
    async with spawn_tiller(fake_openai, ws, *args, "--permission-mode", "auto") as tiller:
        sid = (await tiller.request("session/new"))["sessionId"]
        listed = await tiller.request("agents/list", {"sessionId": sid})
        await tiller.request("agent/prompt", {"sessionId": sid, "message": "go"})
        messages = (await tiller.request("agent/getMessages", {"sessionId": sid}))["messages"]
        events = tiller.events

    assert [(a["name"], a["source"]) for a in listed["agents"]] == [
        ("reviewer", "claude"), ("general-purpose", "builtin"), ("explore", "builtin")]
    reviewer = listed["agents"][0]
    assert reviewer["tools"] == ["read", "grep", "find"] and "model" not in reviewer
    [invalid] = listed["invalidFiles"]
    assert invalid["path"] == str(ws / ".tiller" / "agents" / "broken.md")
    assert invalid["reason"] == (
        "its front matter: line 4: expected 'key: value', got 'Be broken.'")
    broken = tool_result(messages, "t1")["content"][0]["text"]
    assert broken.startswith(f"No agent 'broken' to run this task: its file {invalid['path']} "
                             f"was skipped ({invalid['reason']}). The agents are: reviewer,")
    parent_tools = [t["function"]["name"] for t in fake_openai.requests[0]["tools"]]
    assert "task" in parent_tools
    assert "- reviewer: Reviews code" in next(
        t["function"]["description"] for t in fake_openai.requests[0]["tools"]
        if t["function"]["name"] == "task")
    child_tools = [t["function"]["name"] for t in fake_openai.requests[1]["tools"]]
    assert child_tools == ["read", "grep", "find"]  # no task: a child starts none
    [nested] = [e for e in events if e["type"] == "tool_execution_end"
                and e["toolCallId"] == "t9"]
    assert nested["isError"] and "cannot start tasks of its own" in (
        nested["result"]["content"][0]["text"])
    assert tool_result(messages, "t2")["content"][0]["text"] == "looks fine"
