"""ACP mode end to end: the official ``agent-client-protocol`` client drives a real ``tiller``
against the loopback OpenAI fake. Plus the pure diff rebuilding of ``tiller.fronts.acp.diff``."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import (
    RequestError,
    text_block,
)

from support.acp_client import Recorder, spawn_acp, start, tool_messages, user_texts
from support.fake_openai import FakeOpenAI, error_reply, text_reply, tool_call_reply
from support.helpers import UNSANDBOXED, process_gone, wait_requests
from tiller.fronts.acp.diff import apply_hunks, diff_contents, parse_hunks
from tiller.fronts.acp.editor import permission_options, tiller_outcome
from tiller.fronts.acp.updates import UpdateMapper, user_content
from tiller.tools.bash import BashTool
from tiller.tools.builtin import default_tools
from tiller.tools.files import unified_diff
from tiller.types import (
    MessageUpdate,
    ProcessExit,
    ProcessInfo,
    ProcessOutput,
    TextContent,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolResultMessage,
)

pytestmark = pytest.mark.anyio

Message = dict[str, Any]


# ---------------------------------------------------------------------------------- turns


@pytest.mark.process
async def test_a_prompt_with_a_tool_call_streams_its_updates(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(
        tool_call_reply([("b1", "bash", {"command": "echo hello"})], text="Let me run it"),
        text_reply("done"),
    )
    recorder = Recorder()
    async with spawn_acp(recorder, fake_openai, tmp_path, *UNSANDBOXED) as conn:
        init = await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        result = await conn.prompt(session_id=session.session_id,
                                   prompt=[text_block("say hello")])

    capabilities = init.agent_capabilities
    assert init.protocol_version == 1 and capabilities is not None
    assert capabilities.load_session is True
    assert capabilities.prompt_capabilities is not None
    assert capabilities.prompt_capabilities.image is True
    assert session.modes is not None and session.modes.current_mode_id == "ask"
    assert [mode.id for mode in session.modes.available_modes] == [
        "ask", "acceptEdits", "auto", "readonly"]
    assert result.stop_reason == "end_turn"
    assert recorder.labels() == [
        "agent_message_chunk", "tool_call:pending", "request_permission",
        "tool_call_update:in_progress", "tool_call_update:completed", "agent_message_chunk",
    ]
    assert recorder.text("agent_message_chunk") == "Let me run itdone"
    start_update = next(u for u in recorder.session_updates() if u["sessionUpdate"] == "tool_call")
    assert start_update["toolCallId"] == "b1" and start_update["kind"] == "execute"
    assert start_update["title"] == "echo hello"
    assert start_update["rawInput"] == {"command": "echo hello"}
    [question] = recorder.asked()
    assert question["toolCall"]["toolCallId"] == "b1"
    assert [o["optionId"] for o in question["options"]] == [
        "allow_once", "allow_always", "reject_once", "reject_always"]
    assert [o["kind"] for o in question["options"]] == [o["optionId"] for o in question["options"]]
    assert "echo hello" in question["toolCall"]["content"][0]["content"]["text"]
    final = recorder.final("b1")
    assert final["status"] == "completed" and "hello" in final["content"][0]["content"]["text"]
    assert "hello" in tool_messages(fake_openai, 1)[0]
    assert len(recorder.updates) == len(recorder.session_updates())  # all valid for the SDK


@pytest.mark.process
async def test_a_background_command_is_one_tool_call_until_its_process_exits(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    os.mkfifo(tmp_path / "go")
    command = "echo serving; read line < go; echo bye; exit 2"
    fake_openai.enqueue(
        tool_call_reply([("bg1", "bash", {"command": command, "background": True})]),
        text_reply("It runs."),
    )
    recorder = Recorder()
    async with spawn_acp(recorder, fake_openai, tmp_path, *UNSANDBOXED) as conn:
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        result = await conn.prompt(session_id=session.session_id,
                                   prompt=[text_block("start it")])
        after_turn = recorder.labels()
        await anyio.to_thread.run_sync((tmp_path / "go").write_text, "go\n")

        def final(message: Message) -> bool:
            update = (message.get("params") or {}).get("update") or {}
            return update.get("toolCallId") == "bg1" and update.get("status") == "failed"

        await recorder.wait_for(final)

    assert result.stop_reason == "end_turn"
    assert after_turn == ["tool_call:pending", "request_permission", "tool_call_update:in_progress",
                          "agent_message_chunk"]  # the call stays open past the turn
    end = recorder.final("bg1")
    text = end["content"][0]["content"]["text"]
    assert text.startswith("Started background process 1 (pid ")
    assert "serving" in text and text.endswith("bye\n```\n\nProcess 1 exited (code 2).")
    assert end["rawOutput"]["exitCode"] == 2 and end["rawOutput"]["toolCallId"] == "bg1"
    assert "Started background process 1" in tool_messages(fake_openai, 1)[0]


@pytest.mark.process
@pytest.mark.parametrize("answer", ["reject_once", "cancelled"])
async def test_a_rejected_call_fails_and_the_turn_goes_on(
    fake_openai: FakeOpenAI, tmp_path: Path, answer: str
) -> None:
    fake_openai.enqueue(
        tool_call_reply([("b1", "bash", {"command": "touch hacked"})]),
        text_reply("ok, I won't"),
    )
    recorder = Recorder([answer])
    async with spawn_acp(recorder, fake_openai, tmp_path, *UNSANDBOXED) as conn:
        session_id = await start(conn, tmp_path)
        result = await conn.prompt(session_id=session_id, prompt=[text_block("do it")])

    assert result.stop_reason == "end_turn"
    assert not (tmp_path / "hacked").exists()
    assert recorder.final("b1")["status"] == "failed"
    assert "rejected" in tool_messages(fake_openai, 1)[0]


@pytest.mark.process
async def test_file_changes_show_whole_file_diffs(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    old = "".join(f"line {n}\n" for n in range(1, 11))
    (tmp_path / "notes.txt").write_text(old)
    edit = {"path": "notes.txt", "edits": [{"oldText": "line 5\n", "newText": "five\n"}]}
    fake_openai.enqueue(
        tool_call_reply([("e1", "edit", edit),
                         ("w1", "write", {"path": "new.txt", "content": "fresh\n"})]),
        text_reply("changed"),
    )
    recorder = Recorder()
    async with spawn_acp(recorder, fake_openai, tmp_path) as conn:
        session_id = await start(conn, tmp_path)
        await conn.prompt(session_id=session_id, prompt=[text_block("change things")])

    new = old.replace("line 5\n", "five\n")
    notes, fresh = str(tmp_path.resolve() / "notes.txt"), str(tmp_path.resolve() / "new.txt")
    asked = {q["toolCall"]["toolCallId"]: q["toolCall"] for q in recorder.asked()}
    assert asked["e1"]["content"] == [
        {"type": "diff", "path": notes, "oldText": old, "newText": new}]
    assert asked["e1"]["kind"] == "edit" and asked["e1"]["locations"] == [{"path": notes}]
    edited, written = recorder.final("e1"), recorder.final("w1")
    assert edited["content"][0] == {"type": "diff", "path": notes, "oldText": old, "newText": new}
    assert written["content"][0] == {"type": "diff", "path": fresh, "newText": "fresh\n"}
    assert (tmp_path / "notes.txt").read_text() == new


@pytest.mark.process
async def test_offered_fs_methods_carry_file_access(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(
        tool_call_reply([("r1", "read", {"path": "draft.txt"})]),
        tool_call_reply([("w1", "write", {"path": "out.txt", "content": "from the agent\n"})]),
        text_reply("done"),
    )
    recorder = Recorder()
    workspace = tmp_path.resolve()
    recorder.buffers[str(workspace / "draft.txt")] = "unsaved buffer text\n"
    async with spawn_acp(recorder, fake_openai, tmp_path) as conn:
        session_id = await start(conn, tmp_path, fs=True, mode="acceptEdits")
        await conn.prompt(session_id=session_id, prompt=[text_block("copy it")])

    assert "unsaved buffer text" in tool_messages(fake_openai, 1)[0]
    assert recorder.writes == {str(workspace / "out.txt"): "from the agent\n"}
    assert not (tmp_path / "out.txt").exists()  # the editor's buffer, not the disk
    assert recorder.asked() == []  # acceptEdits: workspace writes need no question
    assert recorder.final("w1")["content"][0]["newText"] == "from the agent\n"


@pytest.mark.process
@pytest.mark.parametrize("how", ["session/cancel", "$/cancel_request"])
async def test_cancel_mid_tool_kills_the_process(
    fake_openai: FakeOpenAI, tmp_path: Path, how: str
) -> None:
    fake_openai.enqueue(
        tool_call_reply([("s1", "bash", {"command": "sleep 60 & echo pid=$!; wait"})])
    )
    recorder = Recorder()

    def printed_pid(message: Message) -> bool:
        update = (message.get("params") or {}).get("update") or {}
        return "pid=" in str(update.get("content", ""))

    async with spawn_acp(recorder, fake_openai, tmp_path, *UNSANDBOXED) as conn:
        session_id = await start(conn, tmp_path, mode="auto")
        results = []
        async with anyio.create_task_group() as tg:

            async def prompt() -> None:
                results.append(await conn.prompt(session_id=session_id,
                                                 prompt=[text_block("sleep")]))

            tg.start_soon(prompt)
            update = await recorder.wait_for(printed_pid)
            match = re.search(r"pid=(\d+)", str(update["params"]["update"]["content"]))
            assert match is not None
            pid = int(match.group(1))
            assert not process_gone(pid)
            if how == "session/cancel":
                await conn.cancel(session_id=session_id)
            else:  # ACP's request cancellation, naming the pending session/prompt
                sent = next(m for m in recorder.sent if m.get("method") == "session/prompt")
                await conn._conn.send_notification(how, {"requestId": sent["id"]})

    assert results[0].stop_reason == "cancelled"
    assert process_gone(pid)
    assert recorder.final("s1")["status"] == "failed"
    assert recorder.asked() == []  # auto mode


@pytest.mark.process
async def test_a_prompt_during_a_turn_steers_and_follow_ups_queue(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    held = threading.Event()
    fake_openai.enqueue(text_reply("first", gate=held), text_reply("second"),
                        text_reply("third"))
    recorder = Recorder()
    async with spawn_acp(recorder, fake_openai, tmp_path) as conn:
        session_id = await start(conn, tmp_path)
        results: dict[str, Any] = {}
        async with anyio.create_task_group() as tg:

            async def prompt(name: str) -> None:
                results[name] = await conn.prompt(session_id=session_id,
                                                  prompt=[text_block(name)])

            tg.start_soon(prompt, "start")
            await wait_requests(fake_openai, 1)
            tg.start_soon(prompt, "steer")
            await recorder.wait_for(lambda m: m.get("method") == "session/prompt"
                                    and m["params"]["prompt"][0]["text"] == "steer", sent=True)
            # The server handles messages in order: once followUp is answered, the steering
            # prompt sent before it is queued.
            queued = await conn.ext_method("tiller/followUp",
                                           {"sessionId": session_id, "prompt": "then this"})
            held.set()

    assert queued == {"queued": 1}
    assert results["start"].stop_reason == results["steer"].stop_reason == "end_turn"
    assert user_texts(fake_openai, 1)[-1] == "steer"
    assert user_texts(fake_openai, 2)[-1] == "then this"
    assert recorder.text("agent_message_chunk") == "firstsecondthird"


@pytest.mark.process
async def test_a_failed_run_and_bad_requests_are_errors(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(error_reply(401, "Incorrect API key provided"))
    recorder = Recorder()
    async with spawn_acp(recorder, fake_openai, tmp_path) as conn:
        session_id = await start(conn, tmp_path)
        with pytest.raises(RequestError) as failed:
            await conn.prompt(session_id=session_id, prompt=[text_block("hi")])
        with pytest.raises(RequestError) as unknown:
            await conn.prompt(session_id="0" * 32, prompt=[text_block("hi")])
        with pytest.raises(RequestError) as bad_mode:
            await conn.set_session_mode(session_id=session_id, mode_id="yolo")

    assert failed.value.code == -32020 and "Incorrect API key" in str(failed.value)
    assert failed.value.data["stopReason"] == "error"
    assert unknown.value.code == -32002  # ACP's resource-not-found, not Tiller's -32013
    assert bad_mode.value.code == -32602


# ---------------------------------------------------------------------------------- sessions


@pytest.mark.process
async def test_load_after_a_restart_replays_the_history(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(
        tool_call_reply([("b1", "bash", {"command": "echo hi"})], text="checking"),
        text_reply("all good", reasoning="thought about it"),
        text_reply("again"),
    )
    first = Recorder()
    async with spawn_acp(first, fake_openai, tmp_path) as conn:
        session_id = await start(conn, tmp_path, mode="auto")
        await conn.prompt(session_id=session_id, prompt=[text_block("hello")])

    second = Recorder()
    async with spawn_acp(second, fake_openai, tmp_path) as conn:
        await conn.initialize(protocol_version=1)
        loaded = await conn.load_session(cwd=str(tmp_path), session_id=session_id,
                                         mcp_servers=[])
        replayed = second.session_updates()
        result = await conn.prompt(session_id=session_id, prompt=[text_block("more")])

    kinds = [(u["sessionUpdate"], u.get("status")) for u in replayed]
    assert kinds == [
        ("user_message_chunk", None), ("agent_message_chunk", None), ("tool_call", "pending"),
        ("tool_call_update", "completed"), ("agent_thought_chunk", None),
        ("agent_message_chunk", None),
    ]
    assert [u["content"].get("text") for u in replayed if "content" in u
            and isinstance(u["content"], dict)] == [
        "hello", "checking", "thought about it", "all good"]
    assert "hi" in replayed[3]["content"][0]["content"]["text"]
    assert loaded.modes is not None and loaded.modes.current_mode_id == "ask"
    assert result.stop_reason == "end_turn"
    assert user_texts(fake_openai, 2) == ["hello", "more"]


@pytest.mark.process
async def test_an_integer_protocol_version_selects_acp_without_the_flag(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(text_reply("hi there"))
    recorder = Recorder()
    async with spawn_acp(recorder, fake_openai, tmp_path, flag=False) as conn:
        init = await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        result = await conn.prompt(session_id=session.session_id, prompt=[text_block("hi")])

    assert init.agent_capabilities is not None and init.agent_capabilities.load_session
    assert result.stop_reason == "end_turn"
    assert recorder.text("agent_message_chunk") == "hi there"


# ---------------------------------------------------------------------------------- diffs


def test_hunks_rebuild_the_new_text_or_only_what_changed() -> None:
    old = "".join(f"{n}\n" for n in range(1, 21))
    new = old.replace("3\n", "three\n").replace("18\n", "eighteen\n") + "tail"
    diff = unified_diff(old, new, "f")
    assert apply_hunks(old, parse_hunks(diff)) == new
    whole = diff_contents("/f", diff, old, have_snapshot=True)
    assert whole == [{"type": "diff", "path": "/f", "oldText": old, "newText": new}]
    stale = diff_contents("/f", diff, old.replace("2\n", "two\n"), have_snapshot=True)
    assert len(stale) == 2 and stale[0]["oldText"].startswith("1\n2\n3\n")
    assert stale[1]["newText"].endswith("eighteen\n19\n20\ntail")
    crlf = diff_contents("/f", unified_diff("a\nb\n", "a\nc\n", "f"), "a\r\nb\r\n",
                         have_snapshot=True)
    assert crlf == [{"type": "diff", "path": "/f", "oldText": "a\nb\n", "newText": "a\nc\n"}]
    created = unified_diff(None, "fresh\n", "f")  # a new file: from /dev/null
    assert diff_contents("/f", created, None, have_snapshot=False) == [
        {"type": "diff", "path": "/f", "newText": "fresh\n"}]  # no snapshot, no oldText either


def test_prompt_content_and_permission_answers_map_to_tiller() -> None:
    content = user_content([
        {"type": "text", "text": "look"},
        {"type": "resource_link", "name": "a.py", "uri": "file:///w/a.py"},
        {"type": "resource", "resource": {"uri": "file:///w/b.py", "text": "x = 1"}},
    ])
    assert [block.dump() for block in content] == [
        {"type": "text", "text": "look"},
        {"type": "text", "text": "[a.py](file:///w/a.py)"},
        {"type": "text", "text": '<resource uri="file:///w/b.py">\nx = 1\n</resource>'},
    ]
    with pytest.raises(ValueError, match="audio"):
        user_content([{"type": "audio", "data": "", "mimeType": "audio/wav"}])
    selected = {"outcome": {"outcome": "selected", "optionId": "allow_always"}}
    assert tiller_outcome(selected) == {"outcome": "allowAlways"}
    assert tiller_outcome({"outcome": {"outcome": "cancelled"}})["outcome"] == "rejectOnce"
    assert tiller_outcome(None) == {"outcome": None}
    names = [o["name"] for o in permission_options("bash", {"command": "git push -f"},
                                                        BashTool.info)]
    assert names[1] == "Always allow `git push -f`"
    long = [o["name"] for o in permission_options("bash", {"command": "echo " + "x" * 80},
                                                       BashTool.info)]
    assert long[3] == "Always reject `echo " + "x" * 54 + "…`"


def test_the_mapper_reads_typed_events_and_keeps_raw_output_as_sent(tmp_path: Path) -> None:
    mapper = UpdateMapper(tmp_path, default_tools())
    assert mapper.on_event(MessageUpdate(kind="text", index=0, delta="hi")) == [
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
    ]
    start = ToolExecutionStart(tool_call_id="c1", tool_name="read", args={"path": "a.txt"},
                               title="Read a.txt", kind="read", path=str(tmp_path / "a.txt"))
    [call] = mapper.on_event(start)
    assert call["kind"] == "read" and call["status"] == "pending"
    assert call["locations"] == [{"path": str(tmp_path / "a.txt")}]
    result = ToolResultMessage(tool_call_id="c1", tool_name="read",
                               content=[TextContent(text="x")], details={"lines": (1, 2)})
    [end] = mapper.on_event(ToolExecutionEnd(tool_call_id="c1", tool_name="read",
                                             result=result, is_error=False))
    assert end["status"] == "completed" and end["rawOutput"] == {"lines": [1, 2]}
    assert mapper.replay([result]) == [end]


def test_only_the_starting_call_of_a_background_process_stays_open(tmp_path: Path) -> None:
    mapper = UpdateMapper(tmp_path, default_tools())
    running = ProcessInfo(id=1, command="serve", state="running", pid=9, tool_call_id="s1",
                          started_at=1)

    def end(call_id: str, tool: str) -> list[Message]:
        result = ToolResultMessage(tool_call_id=call_id, tool_name=tool,
                                   content=[TextContent(text="Started")],
                                   details={"process": running.dump()})
        return mapper.on_event(ToolExecutionEnd(tool_call_id=call_id, tool_name=tool,
                                                result=result, is_error=False))

    assert end("s1", "bash")[0]["status"] == "in_progress"
    assert end("o1", "process_output")[0]["status"] == "completed"  # names it, did not start it
    [update] = mapper.on_event(ProcessOutput(process_id=1, data="line\n" * 5000))
    shown = update["content"][0]["content"]["text"]
    assert update["toolCallId"] == "s1" and "status" not in update
    assert shown.startswith("Started\n\n```\n…line\n") and len(shown) < 16500
    assert mapper.on_event(ProcessOutput(process_id=2, data="not ours")) == []
    [last] = mapper.on_event(ProcessExit(process=running.model_copy(
        update={"state": "killed", "signal": "SIGTERM"})))
    assert last["status"] == "failed" and last["content"][0]["content"]["text"].endswith(
        "Process 1 was killed (signal SIGTERM).")
    assert mapper.on_event(ProcessExit(process=running)) == []  # closed once
