"""Confinement of the file tools: a symlink swapped after the permission check cannot redirect a
read, write or edit out of the workspace; a path deeper than Python's recursion limit works, and
one longer than PATH_MAX is a clear error.

The races run in-process through the same pieces the loop uses (``PermissionGate`` as the
``before`` hook of ``execute_tool_calls``); the ``ask`` case runs end to end over stdio.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import spawn_tiller
from tiller.agent.abort import AbortSignal
from tiller.agent.settings import AgentSettings
from tiller.agent.tool_batch import BeforeToolCall, BeforeToolCallResult, execute_tool_calls
from tiller.errors import SymlinkInPathError, ToolError
from tiller.gate.permissions import PermissionGate
from tiller.tools.base import ToolContext
from tiller.tools.builtin import default_tools
from tiller.tools.edit import EditTool
from tiller.tools.read import ReadTool
from tiller.tools.safefs import (
    open_nofollow,
    pin,
    remove_entry,
    restore_file,
    restore_symlink,
)
from tiller.tools.write import WriteTool
from tiller.types import TextContent, ToolCall, ToolResultMessage

pytestmark = pytest.mark.anyio

RACE_CALLS = 1000
TOOLS = default_tools()


async def run_call(
    gate: BeforeToolCall | None, cwd: Path, name: str, args: dict[str, Any], index: int = 0
) -> ToolResultMessage:
    """One tool call through the executor, gated by ``gate`` as the loop gates it."""
    settings = AgentSettings(
        tools=[ReadTool(), WriteTool(), EditTool()], cwd=cwd, before_tool_call=gate
    )
    batch = await execute_tool_calls(
        [ToolCall(id=f"c{index}", name=name, arguments=args)],
        settings,
        lambda _event: None,
        AbortSignal(),
    )
    [result] = batch.results
    return result


def text_of(result: ToolResultMessage) -> str:
    return "".join(part.text for part in result.content if isinstance(part, TextContent))


@contextmanager
def flipping(flip: Callable[[bool], None]) -> Iterator[list[int]]:
    """Run ``flip(True)``, ``flip(False)``, ... in a thread for the block; yields the count."""
    stop = threading.Event()
    flips = [0]

    def loop() -> None:
        state = True
        while not stop.is_set():
            flip(state)
            state = not state
            flips[0] += 1

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield flips
    finally:
        stop.set()
        thread.join()


def repoint(link: Path, target: Path) -> None:
    """Atomically make ``link`` a symlink to ``target``."""
    spare = link.with_name(link.name + ".new")
    os.symlink(target, spare)
    os.replace(spare, link)


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace ``ws`` (with a real directory ``ws/inside``) and a directory outside it."""
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    (workspace / "inside").mkdir(parents=True)
    outside.mkdir()
    return workspace, outside


def call_args(tool: str, index: int) -> dict[str, Any]:
    if tool == "write":
        return {"path": f"link/f{index}.txt", "content": "written\n"}
    if tool == "edit":
        return {"path": "link/f.txt", "edits": [{"oldText": "marker", "newText": "marker."}]}
    return {"path": "link/f.txt"}


@pytest.mark.parametrize("tool", ["write", "edit", "read"])
async def test_a_link_flipped_during_accept_edits_calls_never_leads_outside(
    layout: tuple[Path, Path], tool: str
) -> None:
    workspace, outside = layout
    (workspace / "inside" / "f.txt").write_text("marker inside\n")
    (outside / "f.txt").write_text("marker top secret\n")
    link = workspace / "link"
    os.symlink(workspace / "inside", link)
    gate = PermissionGate("acceptEdits", [workspace], tools=TOOLS)
    results = []
    with flipping(lambda state: repoint(link, outside if state else workspace / "inside")) as n:
        for index in range(RACE_CALLS):
            results.append(await run_call(gate, workspace, tool, call_args(tool, index), index))
    assert n[0] > 0
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]
    assert (outside / "f.txt").read_text() == "marker top secret\n"
    assert not any("top secret" in text_of(result) for result in results)
    denied = [r for r in results if "outside the workspace" in text_of(r)]
    done = [r for r in results if not r.is_error]
    assert denied and done  # the race really went both ways
    if tool == "write":
        assert len(list((workspace / "inside").glob("f*.txt"))) == len(done) + 1


@pytest.mark.parametrize("tool", ["write", "edit", "read"])
async def test_a_directory_swapped_for_a_symlink_after_the_check_is_refused(
    layout: tuple[Path, Path], tool: str
) -> None:
    workspace, outside = layout
    (workspace / "inside" / "f.txt").write_text("marker inside\n")
    (outside / "f.txt").write_text("marker top secret\n")
    gate = PermissionGate("acceptEdits", [workspace], tools=TOOLS)

    async def gate_then_swap(call: ToolCall, args: dict[str, Any]) -> BeforeToolCallResult | None:
        verdict = await gate(call, args)
        os.rename(workspace / "inside", workspace / "parked")
        os.symlink(outside, workspace / "inside")
        return verdict

    args = call_args(tool, 0) | {"path": "inside/f.txt"}
    result = await run_call(gate_then_swap, workspace, tool, args)
    assert result.is_error
    assert "inside is now a symlink" in text_of(result) and "nothing was" in text_of(result)
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]
    assert (outside / "f.txt").read_text() == "marker top secret\n"
    assert (workspace / "parked" / "f.txt").read_text() == "marker inside\n"


async def test_the_tool_writes_the_path_the_gate_pinned(layout: tuple[Path, Path]) -> None:
    workspace, outside = layout
    link = workspace / "link"
    os.symlink(outside, link)
    ctx = ToolContext(
        cwd=workspace, tool_call_id="c1", resolved_path=workspace / "inside" / "f.txt"
    )
    result = await WriteTool().execute(
        WriteTool.Params.model_validate({"path": "link/f.txt", "content": "pinned"}), ctx
    )
    assert not result.is_error
    assert list(outside.iterdir()) == []
    assert (workspace / "inside" / "f.txt").read_text() == "pinned"


def test_open_nofollow_refuses_a_symlink_anywhere_on_the_path(
    layout: tuple[Path, Path],
) -> None:
    workspace, outside = layout
    (outside / "f.txt").write_text("secret")
    os.symlink(outside, workspace / "link")
    os.symlink(outside / "f.txt", workspace / "file-link")
    for path in (workspace / "link" / "f.txt", workspace / "file-link"):
        with pytest.raises(ToolError, match="symlink"), open_nofollow(path, os.O_RDONLY):
            pass


async def test_a_fifo_is_refused_instead_of_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    for tool in ("read", "write"):
        args = {"path": "pipe", "content": "x"}
        gate = PermissionGate("acceptEdits", [tmp_path], tools=TOOLS)
        result = await run_call(gate, tmp_path, tool, args)
        assert result.is_error and "not a regular file" in text_of(result), text_of(result)


def remove_deep(top: Path, depth: int) -> None:
    """Remove ``top/d/d/.../d`` (``depth`` levels, files included) bottom-up, without
    recursion (shutil.rmtree recurses once per level)."""
    for level in range(depth, 0, -1):
        directory = top.joinpath(*["d"] * level)
        if not directory.is_dir():
            continue
        for child in directory.iterdir():
            if not child.is_dir() or child.is_symlink():
                child.unlink()
        directory.rmdir()


async def test_a_1500_component_path_is_written_without_recursion(tmp_path: Path) -> None:
    gate = PermissionGate("acceptEdits", [tmp_path], tools=TOOLS)
    deep = "d/" * 1500 + "f.txt"
    try:
        result = await run_call(gate, tmp_path, "write", {"path": deep, "content": "deep"})
        assert not result.is_error, text_of(result)
        assert (tmp_path / deep).read_text() == "deep"
        read = await run_call(gate, tmp_path, "read", {"path": deep})
        assert text_of(read) == "deep"
    finally:
        remove_deep(tmp_path, 1500)


async def test_a_path_over_path_max_is_a_clear_error(tmp_path: Path) -> None:
    gate = PermissionGate("acceptEdits", [tmp_path], tools=TOOLS)
    for tool in ("write", "read"):
        args = {"path": "dir_/" * 1500 + "f.txt", "content": "x"}
        result = await run_call(gate, tmp_path, tool, args)
        assert result.is_error
        assert "path is too long" in text_of(result), text_of(result)
    assert not (tmp_path / "dir_").exists()


@pytest.mark.process
@pytest.mark.parametrize("swap", ["repoint the link", "replace the directory by a link"])
async def test_a_link_changed_while_the_user_is_asked_cannot_lead_outside(
    fake_openai: FakeOpenAI, layout: tuple[Path, Path], swap: str
) -> None:
    """Re-pointing the link the user saw resolved changes nothing: the write lands on the path
    in the question. Replacing a directory of that path by a link fails the call."""
    workspace, outside = layout
    link = workspace / "link"
    os.symlink(workspace / "inside", link)
    fake_openai.enqueue(
        tool_call_reply([("w1", "write", {"path": "link/note.txt", "content": "hello\n"})]),
        text_reply("done"),
    )
    asked: list[dict[str, Any]] = []

    async def swap_then_allow(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        if swap == "repoint the link":
            repoint(link, outside)
        else:
            os.rename(workspace / "inside", workspace / "parked")
            os.symlink(outside, workspace / "inside")
        return {"outcome": "allowOnce"}

    async with spawn_tiller(fake_openai, workspace) as tiller:
        tiller.on_request("client/requestPermission", swap_then_allow)
        await tiller.request("initialize", {"capabilities": {"permissions": True}})
        sid = (await tiller.request("session/new", {"permissionMode": "ask"}))["sessionId"]
        await tiller.request("agent/prompt", {"sessionId": sid, "message": "write a note"})

    [question] = asked
    seen = workspace.resolve() / "inside" / "note.txt"
    assert question["preview"]["path"] == str(seen)
    assert list(outside.iterdir()) == []
    [message] = [m for m in fake_openai.requests[1]["messages"] if m["role"] == "tool"]
    if swap == "repoint the link":
        assert seen.read_text() == "hello\n"  # the path the user saw, not the new target
        assert message["content"].startswith("Wrote 6 bytes")
    else:
        assert "symlink" in message["content"] and "nothing was" in message["content"]
        assert not (workspace / "parked" / "note.txt").exists()



def test_putting_files_back_never_goes_through_a_symlink(tmp_path: Path) -> None:
    """What ``session/revert`` writes with: a symlinked parent refuses (nothing is created or
    deleted outside); a symlink at the path itself is replaced or removed, not followed."""
    ws, outside = pin(tmp_path / "ws"), pin(tmp_path / "outside")
    ws.mkdir()
    outside.mkdir()
    (outside / "mine.txt").write_text("outside\n")
    (ws / "d").symlink_to(outside)
    for act in (lambda: restore_file(ws / "d" / "new.txt", b"x", 0o644),
                lambda: restore_symlink(ws / "d" / "link", "anywhere"),
                lambda: remove_entry(ws / "d" / "mine.txt")):
        with pytest.raises(SymlinkInPathError) as refused:
            act()
        assert refused.value.at == str(ws / "d")
    assert [p.name for p in outside.iterdir()] == ["mine.txt"]

    (ws / "file.txt").symlink_to(outside / "mine.txt")
    restore_file(ws / "file.txt", b"restored\n", 0o755)
    assert not (ws / "file.txt").is_symlink() and (ws / "file.txt").read_text() == "restored\n"
    assert os.stat(ws / "file.txt").st_mode & 0o777 == 0o755
    (ws / "gone.txt").symlink_to(outside / "mine.txt")
    remove_entry(ws / "gone.txt")
    remove_entry(ws / "never-there" / "x.txt")
    restore_symlink(ws / "deep" / "link", "../file.txt")
    assert os.readlink(ws / "deep" / "link") == "../file.txt"
    assert not (ws / "gone.txt").exists() and (outside / "mine.txt").read_text() == "outside\n"
