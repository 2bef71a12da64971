"""The file tools (read, edit, write) with an editor's file access (``ToolContext.files``).

A fake editor holds "buffers" (path -> text, unsaved edits included) and records every call;
the disk under ``tmp_path`` holds different, stale text, so each test can tell which one a tool
used.
"""

from __future__ import annotations

import base64
import codecs
from pathlib import Path
from typing import Any

import anyio
import pytest

from tiller.agent.abort import AbortSignal
from tiller.agent.settings import AgentSettings
from tiller.agent.tool_batch import execute_tool_calls
from tiller.errors import ToolError
from tiller.tools import files as files_module
from tiller.tools.base import EditorFiles, Tool, ToolContext, ToolResult
from tiller.tools.edit import EditTool
from tiller.tools.read import ReadTool
from tiller.tools.write import WriteTool
from tiller.types import ImageContent, TextContent, ToolCall

pytestmark = pytest.mark.anyio

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


class FakeEditor:
    """An in-memory ``EditorFiles``: ``buffers`` maps absolute paths to the editor's text.

    ``calls`` records ``("read", path, line, limit)`` and ``("write", path, content)``. A path
    without a buffer fails to read, as a client does for a missing file; ``fail`` names the
    operations ("read", "write") that fail for every path; ``delay`` makes each call sleep first.
    """

    def __init__(
        self,
        buffers: dict[Path, str] | None = None,
        *,
        can_read: bool = True,
        can_write: bool = True,
        fail: frozenset[str] = frozenset(),
        delay: float = 0.0,
    ) -> None:
        self.buffers = dict(buffers or {})
        self.can_read = can_read
        self.can_write = can_write
        self.keeps_unsaved = False
        self.fail = fail
        self.delay = delay
        self.calls: list[tuple[Any, ...]] = []

    async def read_text(self, path: Path, line: int | None = None, limit: int | None = None) -> str:
        self.calls.append(("read", path, line, limit))
        await anyio.sleep(self.delay)
        if "read" in self.fail:
            raise ToolError("client/readTextFile failed: the editor is gone")
        if path not in self.buffers:
            raise ToolError(f"client/readTextFile failed: no file {path}")
        return self.buffers[path]

    async def write_text(self, path: Path, content: str) -> None:
        self.calls.append(("write", path, content))
        await anyio.sleep(self.delay)
        if "write" in self.fail:
            raise ToolError("client/writeTextFile failed: the buffer is read-only")
        self.buffers[path] = content

    def ops(self) -> list[str]:
        return [call[0] for call in self.calls]


def _typed(editor: FakeEditor) -> EditorFiles:
    return editor  # mypy checks here that the fake satisfies the protocol


def ctx_with(cwd: Path, editor: FakeEditor | None) -> ToolContext:
    return ToolContext(cwd=cwd, tool_call_id="call-1", files=None if editor is None else editor)


async def call(tool: Tool[Any], ctx: ToolContext, **args: Any) -> ToolResult:
    """Validate ``args`` as the loop would and run the tool."""
    return await tool.execute(tool.Params.model_validate(args), ctx)


def text_of(result: ToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


# ---------------------------------------------------------------------------------------------
# read


async def test_read_returns_the_buffer_with_its_unsaved_edits(tmp_path: Path) -> None:
    target = tmp_path / "f.py"
    target.write_text("saved = 1\n")
    editor = FakeEditor({target: "unsaved = 2\nmore = 3\n"})
    result = await call(ReadTool(), ctx_with(tmp_path, editor), path="f.py")
    assert text_of(result) == "unsaved = 2\nmore = 3\n"
    assert result.details == {"path": str(target), "totalLines": 2, "truncated": False}
    assert editor.calls == [("read", target, None, None)]  # the whole text, absolute path
    assert _typed(editor).can_read


def _lines(count: int, make: Any = str) -> str:
    return "".join(f"{make(n)}\n" for n in range(1, count + 1))


PARITY_CASES: list[tuple[str, dict[str, int]]] = [
    (_lines(10, lambda n: f"line{n}"), {"offset": 3, "limit": 2}),
    (_lines(10, lambda n: f"line{n}"), {"offset": 9}),
    (_lines(10, lambda n: f"line{n}"), {"offset": 10, "limit": 5}),
    (_lines(5123), {}),
    (_lines(5123), {"offset": 2001}),
    (_lines(1000, lambda _n: "日本語のテキスト" * 10), {}),
    ("x€" * 30_000 + "\nsecond\n", {}),
    ("x€" * 30_000 + "\nsecond\n", {"offset": 2}),
    ("\ufeffbom first\nsecond\n", {}),
    ("\ufeffbom first\nsecond\n", {"offset": 1, "limit": 1}),
    ("one\r\ntwo\r\nthree", {"offset": 2}),
    ("no newline at the end", {}),
    ("a\n\n\nb\n", {"limit": 3}),
    ("", {}),
]


@pytest.mark.parametrize(("text", "window"), PARITY_CASES)
async def test_read_from_the_buffer_is_identical_to_a_disk_read(
    tmp_path: Path, text: str, window: dict[str, int]
) -> None:
    disk_dir, editor_dir = tmp_path / "disk", tmp_path / "editor"
    disk_dir.mkdir()
    editor_dir.mkdir()
    (disk_dir / "f.txt").write_bytes(text.encode("utf-8"))
    (editor_dir / "f.txt").write_text("stale text on disk\n")
    editor = FakeEditor({editor_dir / "f.txt": text})
    from_disk = await call(ReadTool(), ctx_with(disk_dir, None), path="f.txt", **window)
    from_editor = await call(ReadTool(), ctx_with(editor_dir, editor), path="f.txt", **window)
    assert text_of(from_editor) == text_of(from_disk)
    assert from_editor.details == {**from_disk.details, "path": str(editor_dir / "f.txt")}
    assert editor.ops() == ["read"]


async def test_read_past_the_end_of_the_buffer_fails_as_on_disk(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_text("x\n" * 500)
    editor = FakeEditor({target: "x\n" * 120})
    with pytest.raises(ToolError) as caught:
        await call(ReadTool(), ctx_with(tmp_path, editor), path="f.txt", offset=900)
    assert str(caught.value) == "offset 900 is beyond the end of the file (120 lines)"


async def test_read_a_buffer_not_yet_saved_and_a_file_nobody_has(tmp_path: Path) -> None:
    editor = FakeEditor({tmp_path / "new.txt": "draft\n"})
    result = await call(ReadTool(), ctx_with(tmp_path, editor), path="new.txt")
    assert text_of(result) == "draft\n"
    with pytest.raises(ToolError, match="^client/readTextFile failed: no file"):
        await call(ReadTool(), ctx_with(tmp_path, editor), path="nope.txt")


async def test_read_when_the_client_fails_is_the_clients_error(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("on disk\n")
    editor = FakeEditor(fail=frozenset({"read"}))
    with pytest.raises(ToolError, match="the editor is gone"):
        await call(ReadTool(), ctx_with(tmp_path, editor), path="f.txt")


async def test_images_binaries_and_directories_are_judged_on_disk(tmp_path: Path) -> None:
    (tmp_path / "pixel.png").write_bytes(PNG)
    (tmp_path / "blob.bin").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" * 50)
    (tmp_path / "sub").mkdir()
    editor = FakeEditor({tmp_path / "pixel.png": "not an image", tmp_path / "blob.bin": "text"})
    result = await call(ReadTool(), ctx_with(tmp_path, editor), path="pixel.png")
    image = result.content[1]
    assert isinstance(image, ImageContent) and base64.b64decode(image.data) == PNG
    with pytest.raises(ToolError, match="is a binary file"):
        await call(ReadTool(), ctx_with(tmp_path, editor), path="blob.bin")
    with pytest.raises(ToolError, match="is a directory"):
        await call(ReadTool(), ctx_with(tmp_path, editor), path="sub")
    assert editor.calls == []


async def test_read_uses_the_disk_when_the_editor_cannot_read(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("on disk\n")
    editor = FakeEditor({tmp_path / "f.txt": "in the buffer\n"}, can_read=False)
    result = await call(ReadTool(), ctx_with(tmp_path, editor), path="f.txt")
    assert text_of(result) == "on disk\n"
    assert editor.calls == []


# ---------------------------------------------------------------------------------------------
# edit


async def test_edit_matches_the_buffer_and_writes_it_back_not_the_disk(tmp_path: Path) -> None:
    target = tmp_path / "f.py"
    target.write_text("x = 1\n")
    editor = FakeEditor({target: "x = 1\ny = 2  # unsaved\n"})
    edits = [{"oldText": "y = 2  # unsaved", "newText": "y = 3"}]
    result = await call(EditTool(), ctx_with(tmp_path, editor), path="f.py", edits=edits)
    assert text_of(result) == "Applied 1 edit to f.py"
    assert editor.buffers[target] == "x = 1\ny = 3\n"
    assert target.read_text() == "x = 1\n"
    assert editor.ops() == ["read", "write"] and editor.calls[1][1] == target
    assert "-y = 2  # unsaved\n+y = 3\n" in result.details["diff"]
    assert result.details["firstChangedLine"] == 2


async def test_edit_of_text_only_on_disk_fails_and_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "f.py"
    target.write_text("old_name = 1\n")
    editor = FakeEditor({target: "new_name = 1\n"})
    edits = [{"oldText": "old_name", "newText": "other"}]
    with pytest.raises(ToolError, match=r"^edits\[0\]\.oldText was not found in f\.py"):
        await call(EditTool(), ctx_with(tmp_path, editor), path="f.py", edits=edits)
    assert editor.ops() == ["read"]
    assert editor.buffers[target] == "new_name = 1\n" and target.read_text() == "old_name = 1\n"


async def test_edit_keeps_crlf_and_bom_of_the_buffer(tmp_path: Path) -> None:
    target = tmp_path / "win.txt"
    editor = FakeEditor({target: "\ufeffone\r\ntwo\r\nthree\r\n"})
    edits = [{"oldText": "one\ntwo", "newText": "1\n2"}]
    result = await call(EditTool(), ctx_with(tmp_path, editor), path="win.txt", edits=edits)
    assert editor.buffers[target] == "\ufeff1\r\n2\r\nthree\r\n"
    assert "\r" not in result.details["diff"] and "\ufeff" not in result.details["diff"]
    assert not target.exists()


async def test_edit_from_disk_into_the_editor_when_it_can_only_write(tmp_path: Path) -> None:
    target = tmp_path / "bom.txt"
    target.write_bytes(codecs.BOM_UTF8 + b"hello\n")
    editor = FakeEditor({target: "ignored buffer\n"}, can_read=False)
    edits = [{"oldText": "hello", "newText": "bye"}]
    await call(EditTool(), ctx_with(tmp_path, editor), path="bom.txt", edits=edits)
    assert editor.calls == [("write", target, "\ufeffbye\n")]
    assert target.read_bytes() == codecs.BOM_UTF8 + b"hello\n"


async def test_edit_from_the_buffer_onto_disk_when_the_editor_can_only_read(
    tmp_path: Path,
) -> None:
    target = tmp_path / "f.txt"
    target.write_text("stale\n")
    editor = FakeEditor({target: "fresh\n"}, can_write=False)
    edits = [{"oldText": "fresh", "newText": "fresher"}]
    await call(EditTool(), ctx_with(tmp_path, editor), path="f.txt", edits=edits)
    assert target.read_text() == "fresher\n"
    assert editor.ops() == ["read"]


async def test_edit_without_either_capability_is_the_disk_edit(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_text("alpha\n")
    editor = FakeEditor({target: "beta\n"}, can_read=False, can_write=False)
    edits = [{"oldText": "alpha", "newText": "gamma"}]
    await call(EditTool(), ctx_with(tmp_path, editor), path="f.txt", edits=edits)
    assert target.read_text() == "gamma\n" and editor.calls == []


async def test_edit_with_a_failing_client_is_an_error(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    editor = FakeEditor({target: "alpha\n"}, fail=frozenset({"write"}))
    edits = [{"oldText": "alpha", "newText": "beta"}]
    with pytest.raises(ToolError, match="^client/writeTextFile failed"):
        await call(EditTool(), ctx_with(tmp_path, editor), path="f.txt", edits=edits)
    with pytest.raises(ToolError, match="^client/readTextFile failed: no file"):
        await call(EditTool(), ctx_with(tmp_path, editor), path="missing.txt", edits=edits)


async def test_parallel_edits_of_one_buffer_both_land(tmp_path: Path) -> None:
    """Read-modify-write through a slow editor is serialised per file: no lost update."""
    target = tmp_path / "f.txt"
    editor = FakeEditor({target: "a = 1\nb = 1\n"}, delay=0.01)
    ctx = ctx_with(tmp_path, editor)

    async def bump(name: str) -> None:
        edits = [{"oldText": f"{name} = 1", "newText": f"{name} = 2"}]
        await call(EditTool(), ctx, path="f.txt", edits=edits)

    async with anyio.create_task_group() as group:
        for name in "ab":
            group.start_soon(bump, name)
    assert editor.buffers[target] == "a = 2\nb = 2\n"
    assert editor.ops() == ["read", "write", "read", "write"]
    assert files_module._path_locks == {}


# ---------------------------------------------------------------------------------------------
# write


async def test_write_goes_to_the_editor_and_diffs_against_the_buffer(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_text("one\ntwo\nthree\n")
    editor = FakeEditor({target: "one\nTWO\nthree\n"})
    result = await call(WriteTool(), ctx_with(tmp_path, editor), path="f.txt", content="one\n2\n")
    assert text_of(result) == "Wrote 6 bytes to f.txt"
    assert editor.buffers[target] == "one\n2\n"
    assert target.read_text() == "one\ntwo\nthree\n"
    assert "-TWO\n-three\n+2\n" in result.details["diff"]
    assert result.details["firstChangedLine"] == 2
    assert editor.ops() == ["read", "write"]


async def test_write_of_a_new_file_leaves_creating_it_to_the_editor(tmp_path: Path) -> None:
    editor = FakeEditor()
    result = await call(
        WriteTool(), ctx_with(tmp_path, editor), path="a/b/new.txt", content="héllo\n"
    )
    assert editor.buffers == {tmp_path / "a/b/new.txt": "héllo\n"}
    assert not (tmp_path / "a").exists()
    assert text_of(result) == "Wrote 7 bytes to a/b/new.txt"
    assert "+héllo" in result.details["diff"] and result.details["firstChangedLine"] == 1


async def test_write_when_the_editor_can_only_write_diffs_against_the_disk(
    tmp_path: Path,
) -> None:
    target = tmp_path / "f.txt"
    target.write_text("disk\n")
    editor = FakeEditor({target: "buffer\n"}, can_read=False)
    result = await call(WriteTool(), ctx_with(tmp_path, editor), path="f.txt", content="new\n")
    assert "-disk\n+new\n" in result.details["diff"]
    assert editor.ops() == ["write"] and target.read_text() == "disk\n"


async def test_write_when_the_editor_can_only_read_is_the_disk_write(tmp_path: Path) -> None:
    editor = FakeEditor(can_write=False)
    await call(WriteTool(), ctx_with(tmp_path, editor), path="d/f.txt", content="new\n")
    assert (tmp_path / "d/f.txt").read_text() == "new\n" and editor.calls == []


async def test_write_refuses_a_directory_and_reports_client_failures(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    editor = FakeEditor(fail=frozenset({"write"}))
    with pytest.raises(ToolError, match="is a directory"):
        await call(WriteTool(), ctx_with(tmp_path, editor), path="sub", content="x")
    with pytest.raises(ToolError, match="^client/writeTextFile failed"):
        await call(WriteTool(), ctx_with(tmp_path, editor), path="f.txt", content="x")
    assert not (tmp_path / "f.txt").exists()


# ---------------------------------------------------------------------------------------------
# through the batch runner


async def test_a_client_failure_becomes_an_error_result_the_model_reads(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("on disk\n")
    editor = FakeEditor(fail=frozenset({"read"}))
    calls = [ToolCall(id="c1", name="read", arguments={"path": "f.txt"})]
    settings = AgentSettings(tools=[ReadTool()], cwd=tmp_path, files=editor)
    batch = await execute_tool_calls(calls, settings, lambda _event: None, AbortSignal())
    (result,) = batch.results
    assert result.is_error
    assert "".join(block.text for block in result.content if isinstance(block, TextContent)) == (
        "client/readTextFile failed: the editor is gone"
    )
