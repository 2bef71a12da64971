"""End to end: the editor's diagnostics around the agent's edits, through the real ``tiller``
with a scripted client answering ``client/getDiagnostics`` and the loopback OpenAI fake as the
model: its next request shows the tool result the model read.

Before the edit the file has an old warning; after it the old warning (moved down a line by the
edit) and a new error: only the error reaches the model, with the sentence saying it is new.
An editor that never answers, or answers with an error, costs the result its diagnostics, never
the edit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import record_sent, spawn_tiller
from support.schema_check import WireLog
from tiller.client import RpcError, TillerClient

pytestmark = [pytest.mark.anyio, pytest.mark.process]

OLD = {"line": 2, "column": 1, "severity": "warning", "message": "unused variable 'z'",
       "source": "pyright", "code": "reportUnusedVariable"}
NEW = {"line": 2, "column": 9, "severity": "error", "message": "\"y\" is not defined",
       "source": "pyright", "code": "reportUndefinedVariable"}
EDIT = {"path": "calc.py", "edits": [{"oldText": "def f():\n", "newText": "def f():\n    x = y\n"}]}


def tool_message(request: dict[str, Any], call_id: str) -> str:
    """The text of the tool result ``call_id`` as the model received it."""
    message = next(m for m in request["messages"] if m.get("tool_call_id") == call_id)
    content = message["content"]
    return content if isinstance(content, str) else "".join(part["text"] for part in content)


def config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return str(path)


async def initialize(tiller: TillerClient) -> None:
    await tiller.request("initialize", {"capabilities": {"diagnostics": True}})


async def test_only_the_problem_the_edit_introduced_reaches_the_model(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    (tmp_path / "calc.py").write_text("def f():\n    z = 1\n")
    fake_openai.enqueue(tool_call_reply([("call_e1", "edit", EDIT)]), text_reply("fixed soon"))
    asked: list[dict[str, Any]] = []

    async def diagnostics(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        moved = {**OLD, "line": 3}  # the edit inserted a line above it
        found = [OLD] if len(asked) == 1 else [moved, NEW]
        return {"files": [{"path": params["paths"][0], "diagnostics": found}]}

    async with spawn_tiller(fake_openai, tmp_path, "--permission-mode", "auto") as tiller:
        sent = record_sent(tiller)
        tiller.on_request("client/getDiagnostics", diagnostics)
        await initialize(tiller)
        result = await tiller.request("agent/prompt", {"message": "edit calc"}, timeout=60)
        received = list(tiller.received)

    assert result["stopReason"] == "stop"
    assert (tmp_path / "calc.py").read_text() == "def f():\n    x = y\n    z = 1\n"
    path = str(tmp_path / "calc.py")
    assert [(p["paths"], p["toolCallId"], p["timeoutMs"]) for p in asked] == [
        ([path], "call_e1", 3000), ([path], "call_e1", 3000)]
    text = tool_message(fake_openai.requests[1], "call_e1")
    assert text.startswith("Applied 1 edit to calc.py")
    assert text.endswith(
        "\n\nNew problems after this change (the editor's diagnostics; they were not there "
        "before it): 1 error.\n"
        "calc.py:2:9: error: \"y\" is not defined [pyright reportUndefinedVariable]")
    assert "unused variable" not in text
    end = next(e for e in tiller.events if e["type"] == "tool_execution_end")
    assert end["isError"] is False and end["result"]["content"][-1]["text"] in text
    log = WireLog(sent, received)
    assert log.problems == []
    assert ("method", "client/getDiagnostics") in log.checked


async def test_a_new_file_has_no_baseline_to_ask_for(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    write = {"path": "new.py", "content": "x = y\n"}
    fake_openai.enqueue(tool_call_reply([("call_w1", "write", write)]), text_reply("done"))
    asked: list[dict[str, Any]] = []

    async def diagnostics(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"files": [{"path": params["paths"][0], "diagnostics": [{**NEW, "line": 1}]}]}

    async with spawn_tiller(fake_openai, tmp_path, "--permission-mode", "auto") as tiller:
        tiller.on_request("client/getDiagnostics", diagnostics)
        await initialize(tiller)
        await tiller.request("agent/prompt", {"message": "write"}, timeout=60)

    assert len(asked) == 1  # after the write only
    assert "new.py:1:9: error: \"y\" is not defined" in tool_message(
        fake_openai.requests[1], "call_w1")


async def test_an_editor_that_does_not_answer_in_time_costs_only_the_diagnostics(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    (tmp_path / "calc.py").write_text("def f():\n    z = 1\n")
    fake_openai.enqueue(tool_call_reply([("call_e1", "edit", EDIT)]), text_reply("ok"))
    asked: list[dict[str, Any]] = []

    async with spawn_tiller(fake_openai, tmp_path, "--permission-mode", "auto", "--config",
                            config(tmp_path, "[diagnostics]\neditor_timeout = 0.2\n")) as tiller:

        async def diagnostics(params: dict[str, Any]) -> dict[str, Any]:
            asked.append(params)
            if len(asked) == 1:
                return {"files": []}
            # the editor hangs until Tiller gives up on it, then answers too late
            await tiller.wait_for(lambda m: m.get("method") == "$/cancelRequest", timeout=30)
            return {"files": [{"path": params["paths"][0], "diagnostics": [NEW]}]}

        tiller.on_request("client/getDiagnostics", diagnostics)
        await initialize(tiller)
        result = await tiller.request("agent/prompt", {"message": "edit calc"}, timeout=60)

    assert result["stopReason"] == "stop"
    assert [p["timeoutMs"] for p in asked] == [200, 200]
    text = tool_message(fake_openai.requests[1], "call_e1")
    assert text == "Applied 1 edit to calc.py"
    end = next(e for e in tiller.events if e["type"] == "tool_execution_end")
    assert end["isError"] is False
    assert (tmp_path / "calc.py").read_text() == "def f():\n    x = y\n    z = 1\n"


@pytest.mark.parametrize("failure", ["error", "baseline error", "not an answer"])
async def test_an_editor_that_fails_costs_only_the_diagnostics(
    fake_openai: FakeOpenAI, tmp_path: Path, failure: str
) -> None:
    (tmp_path / "calc.py").write_text("def f():\n    z = 1\n")
    fake_openai.enqueue(tool_call_reply([("call_e1", "edit", EDIT)]), text_reply("ok"))
    asked: list[dict[str, Any]] = []

    async def diagnostics(params: dict[str, Any]) -> Any:
        asked.append(params)
        if failure == "baseline error" and len(asked) == 1:
            raise RpcError(-32603, "the language server crashed")
        if failure == "error" and len(asked) == 2:
            raise RpcError(-32603, "the language server crashed")
        if failure == "not an answer" and len(asked) == 2:
            return [NEW]
        return {"files": [{"path": params["paths"][0], "diagnostics": [NEW]}]}

    async with spawn_tiller(fake_openai, tmp_path, "--permission-mode", "auto") as tiller:
        tiller.on_request("client/getDiagnostics", diagnostics)
        await initialize(tiller)
        await tiller.request("agent/prompt", {"message": "edit calc"}, timeout=60)

    # without a baseline nothing is compared, so the editor is not asked after the edit
    assert len(asked) == (1 if failure == "baseline error" else 2)
    text = tool_message(fake_openai.requests[1], "call_e1")
    assert text == "Applied 1 edit to calc.py"


async def test_a_client_without_the_capability_is_never_asked(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    (tmp_path / "calc.py").write_text("def f():\n    z = 1\n")
    fake_openai.enqueue(tool_call_reply([("call_e1", "edit", EDIT)]), text_reply("ok"))
    asked: list[dict[str, Any]] = []

    async def diagnostics(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"files": []}

    async with spawn_tiller(fake_openai, tmp_path, "--permission-mode", "auto") as tiller:
        tiller.on_request("client/getDiagnostics", diagnostics)
        await tiller.request("initialize", {"capabilities": {}})
        await tiller.request("agent/prompt", {"message": "edit calc"}, timeout=60)

    assert asked == []


async def test_an_abort_while_the_editor_settles_keeps_the_edit_s_result(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    (tmp_path / "calc.py").write_text("def f():\n    z = 1\n")
    fake_openai.enqueue(tool_call_reply([("call_e1", "edit", EDIT)]))
    asked: list[dict[str, Any]] = []

    async with spawn_tiller(fake_openai, tmp_path, "--permission-mode", "auto") as tiller:

        async def diagnostics(params: dict[str, Any]) -> dict[str, Any]:
            asked.append(params)
            if len(asked) == 2:  # after the edit: the user stops the run meanwhile
                await tiller.request("agent/abort")
                await tiller.wait_for(lambda m: m.get("method") == "$/cancelRequest")
            return {"files": [{"path": params["paths"][0], "diagnostics": []}]}

        tiller.on_request("client/getDiagnostics", diagnostics)
        await initialize(tiller)
        result = await tiller.request("agent/prompt", {"message": "edit calc"}, timeout=60)

    assert result["stopReason"] == "aborted"
    end = next(e for e in tiller.events if e["type"] == "tool_execution_end")
    assert end["isError"] is False
    assert end["result"]["content"][0]["text"] == "Applied 1 edit to calc.py"
