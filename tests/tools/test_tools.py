"""The core coding tools (read, write, edit, bash) and the truncation helpers, called directly."""

from __future__ import annotations

import base64
import codecs
import os
import signal
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from tiller.errors import ToolError
from tiller.tools.base import Tool, ToolContext, ToolResult
from tiller.tools.bash import BashParams, BashTool
from tiller.tools.builtin import default_tools
from tiller.tools.edit import EditTool
from tiller.tools.read import ReadTool
from tiller.tools.truncate import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
    truncate_head,
    truncate_tail,
)
from tiller.tools.write import WriteTool
from tiller.types import ImageContent, TextContent

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


class Updates:
    """A ``ctx.update`` callback that records every partial result and signals the first."""

    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.first = anyio.Event()
        self.waiting_for: tuple[str, anyio.Event] | None = None

    def __call__(self, partial: Any) -> None:
        self.calls.append(partial)
        self.first.set()
        if self.waiting_for and self.waiting_for[0] in partial["output"]:
            self.waiting_for[1].set()

    async def wait_for(self, text: str) -> None:
        """Return once an update's output contains ``text``."""
        if any(text in call["output"] for call in self.calls):
            return
        event = anyio.Event()
        self.waiting_for = (text, event)
        await event.wait()


def make_ctx(cwd: Path, updates: Updates | None = None) -> ToolContext:
    return ToolContext(cwd=cwd, tool_call_id="call-1", update=updates or Updates())


async def call(tool: Tool[Any], ctx: ToolContext, **args: Any) -> ToolResult:
    """Validate ``args`` as the loop would and run the tool."""
    return await tool.execute(tool.Params.model_validate(args), ctx)


def text_of(result: ToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


def pid_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (a zombie waiting for its reaper counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def wait_gone(pid: int) -> bool:
    """Poll until ``pid`` is gone; False if it still runs after 10 s (SIGKILL is asynchronous)."""
    deadline = time.monotonic() + 10
    while not pid_gone(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    return pid_gone(pid)


def saved_output(path: str, tail: int) -> tuple[int, str]:
    """The size of the file at ``path`` and its last ``tail`` bytes, decoded."""
    with open(path, "rb") as saved:
        saved.seek(-tail, os.SEEK_END)
        return os.fstat(saved.fileno()).st_size, saved.read().decode()


def kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------------------------------------
# Truncation


def test_default_tools_are_fresh_instances_of_every_tool() -> None:
    first, second = default_tools(), default_tools()
    assert [tool.name for tool in first] == [
        "read", "write", "edit", "bash", "grep", "find", "ls", "todo", "process_output",
        "process_kill", "process_list"]
    assert all(a is not b for a, b in zip(first, second, strict=True))
    assert not BashTool.sequential
    schema = EditTool().parameters_schema()
    assert schema["$defs"]["Replacement"]["required"] == ["oldText", "newText"]


def test_truncate_head_by_lines_keeps_whole_first_lines() -> None:
    text = "".join(f"line {n}\n" for n in range(1, 3001))
    cut = truncate_head(text)
    assert cut.truncated and cut.truncated_by == "lines"
    assert (cut.total_lines, cut.output_lines) == (3000, DEFAULT_MAX_LINES)
    assert cut.content.splitlines() == [f"line {n}" for n in range(1, 2001)]


def test_truncate_head_by_bytes_never_keeps_a_partial_line() -> None:
    first, second = "a" * 40_000, "b" * 20_000
    cut = truncate_head(f"{first}\n{second}\n")
    assert cut.truncated_by == "bytes" and not cut.partial_line
    assert cut.content == first


def test_truncate_tail_keeps_the_last_lines() -> None:
    text = "\n".join(f"{n:04d}" for n in range(1, 12_001))  # 5 bytes a line: bytes win
    cut = truncate_tail(text, max_lines=20_000)
    assert cut.truncated_by == "bytes"
    assert cut.content.endswith("12000")
    assert len(cut.content.encode()) <= DEFAULT_MAX_BYTES
    assert cut.content.split("\n")[0] == f"{12_000 - cut.output_lines + 1:04d}"


@pytest.mark.parametrize("truncate", [truncate_head, truncate_tail])
def test_a_single_long_line_is_cut_on_a_character_boundary(truncate: Any) -> None:
    line = "é€😀" * 10_000  # 2-, 3- and 4-byte characters, 90 KB
    cut = truncate(line)
    assert cut.partial_line and cut.truncated_by == "bytes"
    assert len(cut.content.encode()) <= DEFAULT_MAX_BYTES
    assert len(cut.content.encode()) > DEFAULT_MAX_BYTES - 4
    assert "\ufffd" not in cut.content
    assert line.startswith(cut.content) if truncate is truncate_head else line.endswith(cut.content)


def test_untruncated_text_comes_back_unchanged() -> None:
    cut = truncate_tail("one\ntwo\n")
    assert not cut.truncated and cut.content == "one\ntwo\n" and cut.total_lines == 2


# ---------------------------------------------------------------------------------------------
# read


@pytest.mark.anyio
async def test_read_offset_and_limit(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("".join(f"line{n}\n" for n in range(1, 11)))
    result = await call(ReadTool(), make_ctx(tmp_path), path="f.txt", offset=3, limit=2)
    assert text_of(result) == "line3\nline4\n\n[Showing lines 3-4 of 10. Use offset=5 to continue.]"
    assert result.details == {
        "path": str(tmp_path / "f.txt"),
        "totalLines": 10,
        "truncated": False,
    }
    tail = await call(ReadTool(), make_ctx(tmp_path), path="f.txt", offset=9)
    assert text_of(tail) == "line9\nline10\n"


@pytest.mark.anyio
async def test_read_truncates_by_lines_with_a_continue_notice(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("".join(f"{n}\n" for n in range(1, 5124)))
    result = await call(ReadTool(), make_ctx(tmp_path), path="big.txt")
    body, notice = text_of(result).split("\n\n")
    assert notice == "[Showing lines 1-2000 of 5123. Use offset=2001 to continue.]"
    assert body.split("\n") == [str(n) for n in range(1, 2001)]
    assert result.details["truncated"] is True and result.details["totalLines"] == 5123
    more = await call(ReadTool(), make_ctx(tmp_path), path="big.txt", offset=2001)
    assert text_of(more).startswith("2001\n")
    assert text_of(more).endswith("[Showing lines 2001-4000 of 5123. Use offset=4001 to continue.]")


@pytest.mark.anyio
async def test_read_truncates_by_bytes_at_a_multibyte_line_boundary(tmp_path: Path) -> None:
    line = "日本語のテキスト" * 10  # 240 bytes of 3-byte characters
    (tmp_path / "jp.txt").write_text("".join(f"{line}\n" for _ in range(1000)))
    result = await call(ReadTool(), make_ctx(tmp_path), path="jp.txt")
    body, notice = text_of(result).split("\n\n")
    shown = body.split("\n")
    assert all(row == line for row in shown)
    assert len(body.encode()) <= DEFAULT_MAX_BYTES < len(body.encode()) + 241
    assert notice == (
        f"[Showing lines 1-{len(shown)} of 1000 (50.0KB limit). "
        f"Use offset={len(shown) + 1} to continue.]"
    )


@pytest.mark.anyio
async def test_read_a_line_over_the_byte_limit_says_so(tmp_path: Path) -> None:
    (tmp_path / "min.js").write_text("x€" * 30_000 + "\nsecond\n")
    result = await call(ReadTool(), make_ctx(tmp_path), path="min.js")
    body, notice = text_of(result).split("\n\n")
    assert len(body.encode()) <= DEFAULT_MAX_BYTES and "\ufffd" not in body
    assert notice.startswith("[Line 1 is longer than the 50.0KB limit")
    assert "offset=2" in notice


@pytest.mark.anyio
async def test_read_image_by_magic_bytes_and_by_extension(tmp_path: Path) -> None:
    (tmp_path / "pixel.dat").write_bytes(PNG)
    (tmp_path / "photo.webp").write_bytes(b"not really webp")
    result = await call(ReadTool(), make_ctx(tmp_path), path="pixel.dat")
    text, image = result.content
    assert isinstance(text, TextContent) and "image/png" in text.text
    assert isinstance(image, ImageContent) and image.mime_type == "image/png"
    assert base64.b64decode(image.data) == PNG
    webp = await call(ReadTool(), make_ctx(tmp_path), path="photo.webp")
    assert isinstance(webp.content[1], ImageContent)
    assert webp.content[1].mime_type == "image/webp"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        (None, {"path": "nope.txt"}, "File not found"),
        ("dir", {"path": "sub"}, "is a directory"),
        ("binary", {"path": "blob.bin"}, "is a binary file"),
        ("lines", {"path": "f.txt", "offset": 900}, "offset 900 is beyond the end of the file"),
    ],
)
async def test_read_errors(tmp_path: Path, setup: str | None, args: Any, message: str) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "blob.bin").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" * 50)
    (tmp_path / "f.txt").write_text("x\n" * 120)
    with pytest.raises(ToolError) as caught:
        await call(ReadTool(), make_ctx(tmp_path), **args)
    assert message in str(caught.value)
    if setup == "lines":
        assert str(caught.value) == "offset 900 is beyond the end of the file (120 lines)"


@pytest.mark.anyio
async def test_read_expands_home_and_accepts_absolute_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "notes.txt").write_text("hi\n")
    elsewhere = make_ctx(tmp_path / "does-not-matter")
    assert text_of(await call(ReadTool(), elsewhere, path="~/notes.txt")) == "hi\n"
    absolute = str(tmp_path / "notes.txt")
    assert text_of(await call(ReadTool(), elsewhere, path=absolute)) == "hi\n"


# ---------------------------------------------------------------------------------------------
# write


@pytest.mark.anyio
async def test_write_creates_directories_and_reports_a_diff(tmp_path: Path) -> None:
    result = await call(WriteTool(), make_ctx(tmp_path), path="a/b/new.txt", content="héllo\n")
    assert (tmp_path / "a/b/new.txt").read_text() == "héllo\n"
    assert text_of(result) == "Wrote 7 bytes to a/b/new.txt"
    assert result.details["path"] == str(tmp_path / "a/b/new.txt")
    assert result.details["diff"].startswith("--- /dev/null\n+++ b/a/b/new.txt\n")
    assert "+héllo" in result.details["diff"]
    assert result.details["firstChangedLine"] == 1
    (tmp_path / "empty.txt").write_text("")  # an existing empty file is not a new one
    emptied = await call(WriteTool(), make_ctx(tmp_path), path="empty.txt", content="x\n")
    assert emptied.details["diff"].startswith("--- a/empty.txt\n")


@pytest.mark.anyio
async def test_write_over_an_existing_file_diffs_against_it(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("one\ntwo\nthree\n")
    result = await call(WriteTool(), make_ctx(tmp_path), path="f.txt", content="one\ntwo\n3\n")
    diff = result.details["diff"]
    assert diff.startswith("--- a/f.txt\n+++ b/f.txt\n")
    assert "-three\n+3\n" in diff
    assert result.details["firstChangedLine"] == 3


# ---------------------------------------------------------------------------------------------
# edit


@pytest.mark.anyio
async def test_edit_applies_several_edits_matched_against_the_original(tmp_path: Path) -> None:
    target = tmp_path / "f.py"
    target.write_text("x = 1\ny = 2\nz = 3\n")
    edits = [{"oldText": "x = 1", "newText": "y = 2"}, {"oldText": "y = 2", "newText": "w = 0"}]
    result = await call(EditTool(), make_ctx(tmp_path), path="f.py", edits=edits)
    assert target.read_text() == "y = 2\nw = 0\nz = 3\n"
    assert text_of(result) == "Applied 2 edits to f.py"
    assert "-x = 1\n y = 2\n+w = 0\n z = 3\n" in result.details["diff"]
    assert result.details["firstChangedLine"] == 1


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("edits", "message"),
    [
        (
            [{"oldText": "alpha", "newText": "A"}, {"oldText": "omega", "newText": "O"}],
            "edits[1].oldText was not found in f.txt",
        ),
        (
            [{"oldText": "beta", "newText": "B"}],
            "edits[0].oldText occurs 3 times in f.txt; include more surrounding context",
        ),
        (
            [{"oldText": "alpha beta", "newText": "X"}, {"oldText": "beta gamma", "newText": "Y"}],
            "edits[0] and edits[1] overlap in f.txt",
        ),
        ([{"oldText": "", "newText": "x"}], "edits[0].oldText is empty"),
        ([{"oldText": "alpha", "newText": "alpha"}], "No changes made to f.txt"),
    ],
)
async def test_edit_rejects_bad_edits_and_leaves_the_file(
    tmp_path: Path, edits: list[dict[str, str]], message: str
) -> None:
    target = tmp_path / "f.txt"
    original = "alpha beta gamma\nbeta\nbeta\n"
    target.write_text(original)
    with pytest.raises(ToolError, match=r"^" + message.replace("[", r"\[").replace("]", r"\]")):
        await call(EditTool(), make_ctx(tmp_path), path="f.txt", edits=edits)
    assert target.read_text() == original


@pytest.mark.anyio
async def test_edit_keeps_crlf_line_endings(tmp_path: Path) -> None:
    target = tmp_path / "win.txt"
    target.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    edits = [{"oldText": "one\ntwo", "newText": "1\n2\n2.5"}]
    result = await call(EditTool(), make_ctx(tmp_path), path="win.txt", edits=edits)
    assert target.read_bytes() == b"1\r\n2\r\n2.5\r\nthree\r\n"
    assert "\r" not in result.details["diff"]


@pytest.mark.anyio
async def test_edit_keeps_a_utf8_bom_and_accepts_snake_case(tmp_path: Path) -> None:
    target = tmp_path / "bom.txt"
    target.write_bytes(codecs.BOM_UTF8 + b"hello\n")
    edits = [{"old_text": "hello", "new_text": "bye"}]
    result = await call(EditTool(), make_ctx(tmp_path), path="bom.txt", edits=edits)
    assert target.read_bytes() == codecs.BOM_UTF8 + b"bye\n"
    assert text_of(result) == "Applied 1 edit to bom.txt"


@pytest.mark.anyio
async def test_edit_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="File not found"):
        await call(
            EditTool(), make_ctx(tmp_path), path="x", edits=[{"oldText": "a", "newText": "b"}]
        )


# ---------------------------------------------------------------------------------------------
# bash


@pytest.mark.anyio
async def test_bash_runs_in_cwd_and_merges_stderr(tmp_path: Path) -> None:
    result = await call(BashTool(), make_ctx(tmp_path), command="pwd; echo err >&2; echo out")
    assert text_of(result) == f"{tmp_path}\nerr\nout\n"
    assert result.details == {"exitCode": 0, "truncated": False}
    assert not result.is_error


@pytest.mark.anyio
async def test_bash_nonzero_exit_is_an_error_with_the_output(tmp_path: Path) -> None:
    with pytest.raises(ToolError) as caught:
        await call(BashTool(), make_ctx(tmp_path), command="echo partial; exit 3")
    assert str(caught.value) == "partial\n\nCommand exited with code 3"


@pytest.mark.anyio
async def test_bash_streams_output_before_the_command_ends(tmp_path: Path) -> None:
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    updates = Updates()
    outcome: list[ToolResult] = []

    async def run() -> None:
        command = "echo started; read line < go; echo finished $line"
        outcome.append(await call(BashTool(), make_ctx(tmp_path, updates), command=command))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(run)
            await updates.first.wait()
            assert updates.calls[0] == {"output": "started\n"}
            assert not outcome  # blocked on the FIFO until we write to it
            await anyio.to_thread.run_sync(fifo.write_text, "now\n")
    assert text_of(outcome[0]) == "started\nfinished now\n"
    assert updates.calls[-1] == {"output": "started\nfinished now\n"}


@pytest.mark.anyio
async def test_bash_timeout_kills_the_process_group(tmp_path: Path) -> None:
    command = "echo before; sleep 300 & echo $! > child.pid; wait"
    with pytest.raises(ToolError) as caught:
        await call(BashTool(), make_ctx(tmp_path), command=command, timeout=1)
    assert str(caught.value) == "before\n\nCommand timed out after 1 seconds"
    child = int((tmp_path / "child.pid").read_text())
    try:
        assert wait_gone(child)
    finally:
        kill_quietly(child)


@pytest.mark.anyio
async def test_bash_cancellation_kills_the_process_group(tmp_path: Path) -> None:
    updates = Updates()
    outcome: list[ToolResult] = []
    command = "echo $$ > shell.pid; sleep 300 & echo $! > child.pid; echo ready; wait"

    async def run() -> None:
        outcome.append(await call(BashTool(), make_ctx(tmp_path, updates), command=command))

    with anyio.fail_after(30):
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(run)
                await updates.wait_for("ready")
                scope.cancel()
    assert scope.cancelled_caught and not outcome
    pids = [int((tmp_path / name).read_text()) for name in ("shell.pid", "child.pid")]
    try:
        for pid in pids:
            assert wait_gone(pid)
    finally:
        for pid in pids:
            kill_quietly(pid)


@pytest.mark.anyio
async def test_bash_kills_background_children_that_hold_the_output(tmp_path: Path) -> None:
    command = "sleep 300 & echo $! > child.pid; echo main done"
    with anyio.fail_after(30):
        result = await call(BashTool(), make_ctx(tmp_path), command=command)
    assert text_of(result).startswith("main done\n")
    assert "background processes kept its output open: its process group was killed" in (
        text_of(result)
    )
    child = int((tmp_path / "child.pid").read_text())
    try:
        assert wait_gone(child)
    finally:
        kill_quietly(child)


@pytest.mark.anyio
async def test_bash_leaves_background_children_with_redirected_output(tmp_path: Path) -> None:
    command = "sleep 300 > /dev/null 2>&1 & echo $! > child.pid; echo main done"
    with anyio.fail_after(30):
        result = await call(BashTool(), make_ctx(tmp_path), command=command)
    child = int((tmp_path / "child.pid").read_text())
    try:
        assert text_of(result) == "main done\n"
        assert not pid_gone(child)
    finally:
        kill_quietly(child)


@pytest.mark.anyio
async def test_bash_output_stays_bounded_and_the_full_output_is_saved(tmp_path: Path) -> None:
    size = 10 * 1024 * 1024
    line = "0123456789abcdefghijklmnopqrstuvwxyz"
    updates = Updates()
    command = f"yes {line} | head -c {size}"
    result = await call(BashTool(), make_ctx(tmp_path, updates), command=command)
    text = text_of(result)
    full = result.details["fullOutputPath"]
    try:
        assert len(text.encode()) <= DEFAULT_MAX_BYTES + 512
        assert result.details["truncated"] is True and result.details["exitCode"] == 0
        assert os.path.basename(full).startswith("tiller-bash-")
        total_lines = -(-size // (len(line) + 1))
        body, notice = text.split("\n\n")
        assert body.split("\n")[0] == line
        assert f"of {total_lines} (the last " in notice and full in notice
        assert saved_output(full, len(body)) == (size, body)
        assert all(len(call["output"].encode()) <= DEFAULT_MAX_BYTES for call in updates.calls)
    finally:
        os.unlink(full)


@pytest.mark.anyio
async def test_bash_truncated_by_lines_still_saves_the_full_output(tmp_path: Path) -> None:
    result = await call(BashTool(), make_ctx(tmp_path), command="seq 1 3000")
    body, notice = text_of(result).split("\n\n")
    full = result.details["fullOutputPath"]
    try:
        assert body.split("\n") == [str(n) for n in range(1001, 3001)]
        assert notice == f"[Showing lines 1001-3000 of 3000. Full output: {full}]"
        expected = "".join(f"{n}\n" for n in range(1, 3001))
        assert saved_output(full, len(expected)) == (len(expected), expected)
    finally:
        os.unlink(full)


@pytest.mark.anyio
async def test_bash_decodes_invalid_utf8_with_replacement(tmp_path: Path) -> None:
    result = await call(BashTool(), make_ctx(tmp_path), command=r"printf 'a\377b\n'")
    assert text_of(result) == "a\ufffdb\n"


@pytest.mark.anyio
async def test_bash_keeps_secrets_out_of_the_command_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-should-not-leak")
    monkeypatch.setenv("TILLER_PLAIN_SETTING", "visible")
    ctx = ToolContext(cwd=tmp_path, tool_call_id="env")
    command = BashParams(command="env")
    sanitized = await BashTool().execute(command, ctx)
    assert "should-not-leak" not in sanitized.content[0].text
    assert "TILLER_PLAIN_SETTING=visible" in sanitized.content[0].text
    trusting = await BashTool(sanitize_env=False).execute(command, ctx)
    assert "sk-should-not-leak" in trusting.content[0].text
