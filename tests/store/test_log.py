"""The session log format: round trips, torn lines, versions, outlining and replaying state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiller.errors import SessionLogError
from tiller.store.log import (
    ENTRY_TYPES,
    INTERRUPTED_STARTED,
    LOADERS,
    SessionLog,
    interrupted_result,
    outline,
    read_session_file,
    saved_tool_calls,
    shown_tool_calls,
)
from tiller.store.replay import replay
from tiller.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage

SAMPLE_DATA = {
    "message": {"message": UserMessage(content="hello").dump()},
    "model_change": {"provider": "anthropic", "model": "claude-x"},
    "thinking_change": {"level": "high"},
    "tool_start": {"toolCallId": "c1", "toolName": "bash", "args": {"command": "ls"},
                   "title": "ls", "kind": "execute"},
    "tool_end": {"toolCallId": "c1", "isError": False},
    "run_start": {},
    "run_end": {"stopReason": "stop"},
    "queued": {"queue": "steering", "message": UserMessage(content="turn left").dump()},
    "compaction": {"summary": "we talked", "firstKeptEntryId": "x", "tokensBefore": 10},
    "label": {"label": "checkpoint"},
    "checkpoint": {"tree": "4b825dc642cb6eb9a060e54bf8d69288fbee4904", "notCovered": []},
    "checkpoint_end": {"checkpointId": "x", "tree": "4b825dc6", "files": ["a.py"]},
    "revert": {"entryId": "x", "restored": ["a.py"]},
    "process_start": {"sessionId": "abc123", "process": {
        "id": 1, "command": "npm run dev", "state": "running", "pid": 7, "startedAt": 1}},
    "process_end": {"sessionId": "abc123", "process": {
        "id": 1, "command": "npm run dev", "state": "exited", "pid": 7, "startedAt": 1,
        "endedAt": 2, "exitCode": 1}},
}


def new_log(path: Path) -> SessionLog:
    return SessionLog.create(path, {"id": "abc123", "cwd": "/w"}, durable=False)


def test_every_entry_type_round_trips(tmp_path: Path) -> None:
    assert set(SAMPLE_DATA) == set(ENTRY_TYPES)
    path = tmp_path / "s.jsonl"
    session_log = new_log(path)
    written = [session_log.append(kind, **data) for kind, data in SAMPLE_DATA.items()]
    session_log.close()

    loaded = read_session_file(path)
    assert loaded.id == "abc123" and loaded.header["version"] == 1
    assert [e.to_json() for e in loaded.entries] == [e.to_json() for e in written]
    assert [e.parent_id for e in loaded.entries] == [None, *[e.id for e in written[:-1]]]
    assert loaded.torn_tail is False
    fixed = {"type", "id", "parentId", "timestamp"}
    assert all(not fixed & e.data.keys() for e in loaded.entries)


def test_a_new_log_is_written_from_its_first_entry_that_is_not_a_setting(
    tmp_path: Path
) -> None:
    """A session a client opens and never uses leaves no file; its settings changes wait with
    the header and go out, in order, with the first run (or queued message)."""
    path = tmp_path / "s.jsonl"
    session_log = new_log(path)
    model = session_log.append("model_change", provider="openai", model="gpt-4o")
    thinking = session_log.append("thinking_change", level="low")
    assert not path.exists() and not session_log.written
    run = session_log.append("run_start")
    assert session_log.written and run.parent_id == thinking.id
    message = session_log.append("message", message=UserMessage(content="hi").dump())
    session_log.close()

    loaded = read_session_file(path)
    assert loaded.header["id"] == "abc123"
    assert [e.id for e in loaded.entries] == [model.id, thinking.id, run.id, message.id]
    unused = new_log(tmp_path / "unused.jsonl")
    unused.append("model_change", provider="openai", model="gpt-4o")
    unused.close()
    assert not (tmp_path / "unused.jsonl").exists()


def test_text_json_dumps_can_write_reads_back(tmp_path: Path) -> None:
    """A lone surrogate (undecodable bytes a tool passed on) is written as an escape that
    pydantic_core's parser refuses; the line must still load, not be skipped."""
    path = tmp_path / "s.jsonl"
    session_log = new_log(path)
    texts = ["plain", "bytes \udcff\udc80 kept", "emoji \U0001f600 and \u00e9", "nul \x00 end"]
    for text in texts:
        session_log.append("label", label=text)
    session_log.close()
    assert [e.data["label"] for e in read_session_file(path).entries] == texts


def test_torn_last_line_is_ignored_and_repaired(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session_log = new_log(path)
    session_log.append("message", message=UserMessage(content="kept").dump())
    session_log.close()
    with path.open("ab") as handle:
        handle.write(b'{"type":"message","id":"torn","parentId":null,"mess')

    loaded = read_session_file(path)
    assert loaded.torn_tail is True
    assert [e.type for e in loaded.entries] == ["message"]

    reopened = SessionLog.reopen(loaded, durable=False)
    reopened.append("label", label="after the crash")
    reopened.close()
    again = read_session_file(path)
    assert [e.type for e in again.entries] == ["message", "label"]
    assert again.torn_tail is False
    assert all(json.loads(line) for line in path.read_text().splitlines())


def test_a_bad_line_in_the_middle_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.jsonl"
    session_log = new_log(path)
    session_log.append("label", label="one")
    with path.open("ab") as handle:
        handle.write(b"not json at all\n[1, 2]\n\"a string\"\n{\"type\": \"label\"}\n\xff\xfe\n")
    session_log.append("label", label="two")
    session_log.close()
    with caplog.at_level("WARNING", logger="tiller.store.log"):
        loaded = read_session_file(path)
    assert [e.data["label"] for e in loaded.entries] == ["one", "two"]
    assert loaded.torn_tail is False
    skipped = [r.getMessage() for r in caplog.records]
    assert [m.rsplit(" ", 1)[-1] for m in skipped] == ["3", "7"]


def test_versions(tmp_path: Path) -> None:
    assert 1 in LOADERS
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({"type": "session", "version": 99, "id": "x"}) + "\n")
    with pytest.raises(SessionLogError, match="newer Tiller"):
        read_session_file(newer)
    headless = tmp_path / "headless.jsonl"
    headless.write_text(json.dumps({"type": "label", "id": "x"}) + "\n")
    with pytest.raises(SessionLogError, match="no header"):
        read_session_file(headless)


def test_replay_rebuilds_queues_interrupted_tools_and_compaction(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session_log = new_log(path)
    first = session_log.append("message", message=UserMessage(content="old question").dump())
    session_log.append("message", message=AssistantMessage(
        content=[TextContent(text="old answer")]).dump())
    kept = session_log.append("message", message=UserMessage(content="run two tools").dump())
    session_log.append("compaction", summary="the user asked an old question",
                       firstKeptEntryId=kept.id, tokensBefore=100)
    calls = [ToolCall(id="c1", name="bash"), ToolCall(id="c2", name="bash")]
    session_log.append("message", message=AssistantMessage(
        content=list(calls), stop_reason="toolUse").dump())
    session_log.append("tool_start", toolCallId="c1", toolName="bash", args={})
    delivered = session_log.append("queued", queue="steering",
                                   message=UserMessage(content="delivered").dump())
    session_log.append("message", message=UserMessage(content="delivered").dump(),
                       queueId=delivered.id)
    session_log.append("queued", queue="followUp", message=UserMessage(content="later").dump())
    session_log.append("run_start")
    session_log.close()

    loaded = read_session_file(path)
    state = replay(loaded)
    texts = [getattr(m, "content", None) for m in state.messages]
    assert "the user asked an old question" in str(texts[0])
    assert texts[1] == "run two tools"
    assert first.id not in state.entry_ids
    assert [m.content for m in state.follow_ups] == ["later"] and state.steering == []
    assert state.follow_ups[0].queue_id is not None
    assert not any(isinstance(m, ToolResultMessage) for m in state.messages)

    found = outline(loaded)  # the same, messages as saved, plus what a crash left unfinished
    assert [m.dump() for m in state.messages] == found.messages
    assert found.entry_ids == state.entry_ids
    assert (found.pending("steering"), found.pending("followUp")) == (0, 1)
    assert [(call["id"], started) for call, started in found.interrupted] == [
        ("c1", True), ("c2", False)
    ]
    assert found.open_run is True
    assert found.title == "old question"
    assert INTERRUPTED_STARTED.startswith("Tool call interrupted")


def test_tool_calls_are_shown_as_their_starts_recorded_them(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session_log = new_log(path)
    session_log.append("message", message=UserMessage(content="go").dump())
    session_log.append("message", message=AssistantMessage(content=[
        ToolCall(id="c1", name="bash", arguments={"command": "ls"}),
        ToolCall(id="c2", name="write", arguments={"path": "a"}),
    ], stop_reason="toolUse").dump())
    session_log.append("tool_start", toolCallId="c1", toolName="bash", args={"command": "ls"},
                       title="ls", kind="execute")
    # As a log written before starts recorded how they were shown has it:
    session_log.append("tool_start", toolCallId="c2", toolName="write", args={"path": "a"})
    session_log.append("message", message=AssistantMessage(content=[
        ToolCall(id="c1", name="read", arguments={"path": "a"}),  # the id, reused
    ], stop_reason="toolUse").dump())
    session_log.append("tool_start", toolCallId="c1", toolName="read", args={"path": "a"},
                       title="Read a", kind="read", path="/w/a")
    session_log.close()

    found = outline(read_session_file(path))
    calls = saved_tool_calls(found.entry_ids, found.messages)
    assert shown_tool_calls(calls, found.shown) == [
        {"toolCallId": "c1", "title": "ls", "kind": "execute"},
        {"toolCallId": "c2", "title": "write", "kind": "other"},
        {"toolCallId": "c1", "title": "Read a", "kind": "read", "path": "/w/a"},
    ]


def test_the_processes_are_the_sessions_own_last_records(tmp_path: Path) -> None:
    """A process's last record wins; a fork's copy of its source's records is not its own."""
    path = tmp_path / "s.jsonl"
    session_log = new_log(path)
    running = {"id": 1, "command": "serve", "state": "running", "startedAt": 1}
    session_log.append("message", message=UserMessage(content="go").dump())
    session_log.append("process_start", sessionId="source", process={**running, "id": 9})
    session_log.append("process_start", sessionId="abc123", process=running)
    session_log.append("process_start", sessionId="abc123", process={**running, "id": 2})
    session_log.append("process_end", sessionId="abc123",
                       process={**running, "state": "killed", "signal": "SIGTERM"})
    state = replay(read_session_file(path))
    assert [(p["id"], p["state"]) for p in state.processes] == [(1, "killed"), (2, "running")]


def test_the_interrupted_result_is_a_tool_result_message_as_saved() -> None:
    call = ToolCall(id="c1", name="bash", arguments={"command": "ls"}).dump()
    for started in (True, False):
        saved = interrupted_result(call, started)
        message = ToolResultMessage.model_validate(saved)
        assert message.dump() == saved and message.is_error
        assert (message.tool_call_id, message.tool_name) == ("c1", "bash")


@pytest.mark.parametrize("leaf", [None, "e2"])
def test_a_parent_loop_is_refused_not_walked_forever(tmp_path: Path, leaf: str | None) -> None:
    path = tmp_path / "s.jsonl"
    header = {"type": "session", "version": 1, "id": "abc123"}
    links = [("e0", None), ("e1", "e3"), ("e2", "e1"), ("e3", "e2")]  # e3 -> e2 -> e1 -> e3
    entries = [{"type": "label", "id": i, "parentId": p, "label": i} for i, p in links]
    path.write_text("".join(json.dumps(line) + "\n" for line in [header, *entries]))

    loaded = read_session_file(path)
    with pytest.raises(SessionLogError, match="entry 'e[123]' form a loop"):
        loaded.branch(leaf)
    assert [e.id for e in loaded.branch("e0")] == ["e0"]  # a sound branch still walks


def test_a_malformed_entry_is_refused_with_its_id(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session_log = new_log(path)
    session_log.append("message", message=UserMessage(content="hi").dump())
    bad = session_log.append("model_change", provider="anthropic")  # no model
    session_log.close()
    with pytest.raises(SessionLogError, match=f"model_change entry '{bad.id}' is malformed"):
        replay(read_session_file(path))


@pytest.mark.parametrize("order", [("message", "model_change"), ("model_change", "message")])
def test_an_entry_the_outline_cannot_read_is_named_before_an_invalid_message(
    tmp_path: Path, order: tuple[str, str]
) -> None:
    """The outline reads the branch first (a model_change without a model stops it); the
    messages are validated after, so an invalid message is named only when the outline found
    nothing wrong."""
    path = tmp_path / "s.jsonl"
    session_log = new_log(path)
    session_log.append("message", message=UserMessage(content="fine").dump())
    bad: dict[str, str] = {}
    for kind in order:
        if kind == "message":
            bad[kind] = session_log.append("message", message={"role": "user"}).id  # no content
        else:
            bad[kind] = session_log.append("model_change", provider="anthropic").id  # no model
        session_log.append("message", message=UserMessage(content="fine too").dump())
    session_log.close()
    loaded = read_session_file(path)
    with pytest.raises(SessionLogError, match=f"model_change entry '{bad['model_change']}'"):
        outline(loaded)
    dropped = next(e for e in loaded.entries if e.id == bad["model_change"])
    loaded.entries.remove(dropped)
    for entry in loaded.entries:  # the branch, relinked around the dropped entry
        if entry.parent_id == dropped.id:
            entry.parent_id = dropped.parent_id
    with pytest.raises(SessionLogError) as raised:
        replay(loaded)
    message = str(raised.value)
    assert f"message entry '{bad['message']}' is malformed" in message
    assert "ValidationError: 1 validation error for " in message and "content" in message
