"""End to end: permission requests answered by the client, modes, and workspace escapes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import UNSANDBOXED, spawn_tiller
from tiller.client import TillerClient

pytestmark = [pytest.mark.anyio, pytest.mark.process]

ASKING = {"permissions": True}


async def init(tiller: TillerClient, capabilities: dict[str, Any] | None = None) -> None:
    await tiller.request("initialize", {"capabilities": capabilities or ASKING})


def tool_results(fake: FakeOpenAI, request_index: int) -> list[str]:
    return [m["content"] for m in fake.requests[request_index]["messages"] if m["role"] == "tool"]


async def test_allowed_write_shows_a_diff_and_runs(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("old line\n")
    fake_openai.enqueue(
        tool_call_reply([("w1", "write", {"path": "notes.txt", "content": "new line\n"})]),
        text_reply("written"),
    )
    asked: list[dict[str, Any]] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"outcome": "allowOnce"}

    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        tiller.on_request("client/requestPermission", answer)
        await init(tiller)
        await tiller.request("agent/prompt", {"message": "edit notes"})
        state = await tiller.request("agent/getState")

    assert state["permissionMode"] == "ask"
    [question] = asked
    assert question["toolCallId"] == "w1" and question["toolName"] == "write"
    assert question["options"] == ["allowOnce", "allowAlways", "rejectOnce", "rejectAlways"]
    assert question["preview"]["kind"] == "diff"
    assert "-old line" in question["preview"]["diff"] and "+new line" in question["preview"]["diff"]
    assert (tmp_path / "notes.txt").read_text() == "new line\n"
    waiting = [e for e in tiller.events if e["type"] == "tool_execution_update"]
    assert waiting[0]["partialResult"] == {"status": "awaitingPermission"}


async def test_a_new_files_diff_comes_from_dev_null(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """The question and the result of a write that creates a file diff from ``/dev/null`` (as
    git does), not from ``a/<name>``: a reader must see the file is new."""
    fake_openai.enqueue(
        tool_call_reply([("w1", "write", {"path": "fresh.txt", "content": "hello\n"})]),
        text_reply("created"),
    )
    asked: list[dict[str, Any]] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"outcome": "allowOnce"}

    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        tiller.on_request("client/requestPermission", answer)
        await init(tiller)
        await tiller.request("agent/prompt", {"message": "create it"})

    expected = "--- /dev/null\n+++ b/fresh.txt\n@@ -0,0 +1 @@\n+hello\n"
    assert asked[0]["preview"]["diff"] == expected
    [end] = [e for e in tiller.events if e["type"] == "tool_execution_end"]
    assert end["result"]["details"]["diff"] == expected


async def test_rejection_becomes_an_error_result_and_the_run_goes_on(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(
        tool_call_reply([("b1", "bash", {"command": "touch hacked"})]),
        text_reply("ok, I won't"),
    )

    async def reject(params: dict[str, Any]) -> dict[str, Any]:
        assert params["preview"] == {"kind": "command", "command": "touch hacked",
                                     "cwd": str(tmp_path.resolve()),
                                     "sandbox": {"mode": "off", "network": True,
                                                 "reason": "the sandbox is off"}}
        return {"outcome": "rejectOnce", "reason": "not in my repo"}

    async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as tiller:
        tiller.on_request("client/requestPermission", reject)
        await init(tiller)
        result = await tiller.request("agent/prompt", {"message": "do it"})

    assert result["stopReason"] == "stop"
    assert not (tmp_path / "hacked").exists()
    [message] = tool_results(fake_openai, 1)
    assert "rejected" in message and "not in my repo" in message


async def test_allow_always_is_remembered(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.enqueue(
        tool_call_reply([("e1", "bash", {"command": "echo one"})]),
        tool_call_reply([("e2", "bash", {"command": "echo  'one'"})]),
        tool_call_reply([("r1", "bash", {"command": "rm -f nothing"})]),
        text_reply("done"),
    )
    asked: list[str] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["args"]["command"])
        return {"outcome": "allowAlways" if params["args"]["command"] == "echo one"
                else "rejectAlways"}

    async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as tiller:
        tiller.on_request("client/requestPermission", answer)
        await init(tiller)
        await tiller.request("agent/prompt", {"message": "go"})

    assert asked == ["echo one", "rm -f nothing"]  # the same words were allowed by the first answer
    assert "one" in tool_results(fake_openai, 2)[-1]


async def test_no_answer_in_time_is_a_rejection_and_is_cancelled(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[permissions]\ntimeout = 0.5\n")
    fake_openai.enqueue(
        tool_call_reply([("b1", "bash", {"command": "touch late"})]), text_reply("gave up")
    )
    never = anyio.Event()

    async def ignore(params: dict[str, Any]) -> dict[str, Any]:
        await never.wait()
        return {"outcome": "allowOnce"}

    async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED, "--config", str(config)) as tiller:
        tiller.on_request("client/requestPermission", ignore)
        await init(tiller)
        await tiller.request("agent/prompt", {"message": "go"})
        request = next(m for m in tiller.received if m.get("method") == "client/requestPermission")
        cancel = await tiller.wait_for(lambda m: m.get("method") == "$/cancelRequest")

    assert cancel["params"]["id"] == request["id"]
    assert not (tmp_path / "late").exists()
    assert "no answer" in tool_results(fake_openai, 1)[0]


async def test_abort_while_asking_cancels_the_request(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(tool_call_reply([("b1", "bash", {"command": "touch never"})]))
    never = anyio.Event()

    async def ignore(params: dict[str, Any]) -> dict[str, Any]:
        await never.wait()
        return {"outcome": "allowOnce"}

    async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as tiller, \
            anyio.create_task_group() as tg:
        tiller.on_request("client/requestPermission", ignore)
        await init(tiller)
        results = []

        async def prompt() -> None:
            results.append(await tiller.request("agent/prompt", {"message": "go"}))

        tg.start_soon(prompt)
        asked = await tiller.wait_for(lambda m: m.get("method") == "client/requestPermission")
        await tiller.request("agent/abort")
        cancel = await tiller.wait_for(lambda m: m.get("method") == "$/cancelRequest")
        await tiller.wait_event("agent_settled")

    assert results[0]["stopReason"] == "aborted"
    assert cancel["params"]["id"] == asked["id"]
    end = next(e for e in tiller.events if e["type"] == "tool_execution_end")
    assert end["isError"] is True


async def test_readonly_and_accept_edits_modes(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.enqueue(
        tool_call_reply([("w1", "write", {"path": "a.txt", "content": "x"})]),
        text_reply("denied"),
        tool_call_reply([("w2", "write", {"path": "b.txt", "content": "y"}),
                         ("b2", "bash", {"command": "touch c.txt"})]),
        text_reply("half"),
    )
    asked: list[str] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["toolName"])
        return {"outcome": "rejectOnce"}

    async with spawn_tiller(fake_openai, tmp_path, *UNSANDBOXED) as tiller:
        tiller.on_request("client/requestPermission", answer)
        await init(tiller)
        session = (await tiller.request("session/new", {"permissionMode": "readonly"}))
        sid = session["sessionId"]
        await tiller.request("agent/prompt", {"sessionId": sid, "message": "write a"})
        mode = await tiller.request("agent/setPermissionMode",
                                    {"sessionId": sid, "mode": "acceptEdits"})
        await tiller.request("agent/prompt", {"sessionId": sid, "message": "write b, touch c"})

    assert mode == {"mode": "acceptEdits"}
    assert not (tmp_path / "a.txt").exists()
    assert "read-only" in tool_results(fake_openai, 1)[0]
    assert (tmp_path / "b.txt").read_text() == "y"  # edits allowed without asking
    assert asked == ["bash"] and not (tmp_path / "c.txt").exists()  # commands still ask


@pytest.mark.parametrize("mode", ["acceptEdits", "ask"])
async def test_escapes_from_the_workspace(
    fake_openai: FakeOpenAI, tmp_path: Path, mode: str
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("top secret")
    os.symlink(tmp_path / "secret.txt", workspace / "innocent.txt")
    fake_openai.enqueue(
        tool_call_reply([
            ("r1", "read", {"path": "../secret.txt"}),
            ("r2", "read", {"path": "innocent.txt"}),
            ("r3", "read", {"path": str(tmp_path / "secret.txt")}),
            ("w1", "write", {"path": "sub/../../escape.txt", "content": "out"}),
        ]),
        text_reply("blocked"),
    )
    asked: list[dict[str, Any]] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"outcome": "rejectOnce"}

    async with spawn_tiller(fake_openai, workspace) as tiller:
        tiller.on_request("client/requestPermission", answer)
        await init(tiller)
        sid = (await tiller.request("session/new", {"permissionMode": mode}))["sessionId"]
        await tiller.request("agent/prompt", {"sessionId": sid, "message": "look around"})

    results = tool_results(fake_openai, 1)
    assert len(results) == 4
    assert all("top secret" not in text for text in results)
    assert not (tmp_path / "escape.txt").exists()
    if mode == "acceptEdits":
        assert asked == [] and all("outside the workspace" in text for text in results)
    else:
        assert [q["toolCallId"] for q in asked] == ["r1", "r2", "r3", "w1"]
        assert asked[1]["preview"] == {"kind": "path", "path": str(tmp_path / "secret.txt")}


async def test_unsaved_buffers_are_read_and_written_through_the_client(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    (tmp_path / "app.py").write_text("print('saved on disk')\n")
    buffers = {str(tmp_path.resolve() / "app.py"): "print('unsaved in the editor')\n"}
    writes: list[dict[str, Any]] = []

    async def read_text(params: dict[str, Any]) -> dict[str, Any]:
        return {"content": buffers[params["path"]]}

    async def write_text(params: dict[str, Any]) -> dict[str, Any]:
        writes.append(params)
        buffers[params["path"]] = params["content"]
        return {}

    fake_openai.enqueue(
        tool_call_reply([("r1", "read", {"path": "app.py"})]),
        tool_call_reply([("e1", "edit", {"path": "app.py", "edits": [
            {"oldText": "unsaved in the editor", "newText": "edited in the editor"}]})]),
        text_reply("done"),
    )
    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        tiller.on_request("client/readTextFile", read_text)
        tiller.on_request("client/writeTextFile", write_text)
        await init(tiller, {"fs": {"readTextFile": True, "writeTextFile": True}})
        result = await tiller.request("agent/prompt", {"message": "fix app.py"})

    assert result["stopReason"] == "stop"
    assert "unsaved in the editor" in tool_results(fake_openai, 1)[0]
    assert [w["content"] for w in writes] == ["print('edited in the editor')\n"]
    assert (tmp_path / "app.py").read_text() == "print('saved on disk')\n"  # disk untouched
