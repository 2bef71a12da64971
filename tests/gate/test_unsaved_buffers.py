"""End to end: a client that keeps the agent's changes unsaved (``fs.keepsUnsaved``) gets a
warning in the write/edit results that shell commands see the saved file; other clients not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import spawn_tiller

pytestmark = [pytest.mark.anyio, pytest.mark.process]

WARNING = "shell commands (bash) and searches read the file from disk"


async def run_with(fake_openai: FakeOpenAI, tmp_path: Path, fs: dict[str, Any]) -> list[str]:
    """Write then edit app.py through an editor declaring ``fs``; the tool results."""
    buffers = {str(tmp_path / "app.py"): "print('unsaved')\n"}

    async def read_text(params: dict[str, Any]) -> dict[str, Any]:
        return {"content": buffers[params["path"]]}

    async def write_text(params: dict[str, Any]) -> dict[str, Any]:
        buffers[params["path"]] = params["content"]
        return {}

    fake_openai.enqueue(
        tool_call_reply([("w1", "write", {"path": "new.py", "content": "x = 1\n"})]),
        tool_call_reply([("e1", "edit", {"path": "app.py", "edits": [
            {"oldText": "unsaved", "newText": "edited"}]})]),
        text_reply("done"),
    )
    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        tiller.on_request("client/readTextFile", read_text)
        tiller.on_request("client/writeTextFile", write_text)
        await tiller.request("initialize", {"capabilities": {"fs": fs}})
        result = await tiller.request("agent/prompt", {"message": "change things"})
    assert result["stopReason"] == "stop"
    return [
        m["content"] for request in fake_openai.requests[1:]
        for m in request["messages"][-1:] if m["role"] == "tool"
    ]


async def test_unsaved_changes_are_flagged(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fs = {"readTextFile": True, "writeTextFile": True, "keepsUnsaved": True}
    wrote, edited = await run_with(fake_openai, tmp_path, fs)
    assert wrote.startswith("Wrote 6 bytes to new.py") and WARNING in wrote
    assert edited.startswith("Applied 1 edit to app.py") and WARNING in edited
    assert not (tmp_path / "new.py").exists()  # the editor has it, unsaved


async def test_saving_clients_get_no_warning(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fs = {"readTextFile": True, "writeTextFile": True}
    wrote, edited = await run_with(fake_openai, tmp_path, fs)
    assert wrote == "Wrote 6 bytes to new.py" and edited == "Applied 1 edit to app.py"
