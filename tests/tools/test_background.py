"""The parts of ``tiller.tools.background`` that need no server: the output ring, the decoding
at cut points, and one table's processes (real ``sh`` processes) read, waited for and killed.
End to end through the real server: tests/session/test_background_processes.py."""

from __future__ import annotations

import os
import re
from pathlib import Path

import anyio
import pytest

from tiller.procs import ProcessScope
from tiller.tools.background import (
    EVENT_MAX_BYTES,
    OutputRing,
    ProcessTable,
    decode,
)
from tiller.tools.base import ToolContext
from tiller.tools.pattern import ModelPattern
from tiller.tools.process import (
    ProcessIdParams,
    ProcessKillTool,
    ProcessOutputParams,
    ProcessOutputTool,
)
from tiller.types import AgentEvent, ProcessExit, ProcessOutput

pytestmark = pytest.mark.anyio


def test_the_ring_keeps_the_newest_bytes_and_counts_what_it_dropped() -> None:
    ring = OutputRing(limit=10)
    for chunk in (b"abc", b"defgh", b"ijklmnop"):
        ring.append(chunk)
    assert ring.total == 16 and ring.start == 6
    assert ring.since(0) == (b"ghijklmnop", 6)
    assert ring.since(12) == (b"mnop", 0)
    assert ring.since(16) == (b"", 0)
    ring.append(b"x" * 25)  # one chunk larger than the ring
    assert ring.since(0) == (b"x" * 10, 31) and ring.total == 41


def test_the_ring_gives_its_last_lines() -> None:
    ring = OutputRing(limit=100)
    ring.append(b"one\ntwo\nthree\n")
    assert ring.tail_lines(2) == (b"two\nthree\n", 4)
    ring.append(b"four")  # a last line without its newline counts
    assert ring.tail_lines(2) == (b"three\nfour", 8)
    assert ring.tail_lines(10) == (b"one\ntwo\nthree\nfour", 0)


def test_decoding_never_shows_half_a_character() -> None:
    text = "é€".encode()  # 2 + 3 bytes
    assert decode(text[:4], final=False) == ("é", 2)  # the euro sign waits for its last byte
    assert decode(text[:4], final=True)[0] == "é\ufffd"
    assert decode(text[1:], cut_start=True) == ("€", 4)  # a cut lead byte: its tail skipped


async def collect(table: ProcessTable, command: str, cwd: Path) -> None:
    await table.start(["sh", "-c", command], env={"PATH": "/usr/bin:/bin"}, cwd=cwd,
                      command=command, tool_call_id="call")


async def test_a_fast_writer_is_held_bounded_and_announced_in_bounded_events(
    tmp_path: Path,
) -> None:
    events: list[AgentEvent] = []
    table = ProcessTable(ProcessScope(), events.append)
    await collect(table, "head -c 5000000 /dev/zero | tr '\\0' x; echo; echo end", tmp_path)
    process = table.get(1)
    assert process is not None
    with anyio.fail_after(60):
        await process.ended.wait()
    info = process.info()
    assert (info.state, info.exit_code, info.output_bytes) == ("exited", 0, 5000005)
    assert info.dropped_bytes == 5000005 - (1 << 20)
    text, dropped = process.read_new()
    assert dropped == info.dropped_bytes and text.endswith("x\nend\n") and len(text) == 1 << 20
    outputs = [e for e in events if isinstance(e, ProcessOutput)]
    assert all(len(e.data.encode()) <= EVENT_MAX_BYTES for e in outputs)
    sent = sum(len(e.data.encode()) + (e.skipped or 0) for e in outputs)
    assert sent == 5000005  # every byte is either in an event or counted as skipped
    assert isinstance(events[-1], ProcessExit) and events[-1].process.state == "exited"
    [notice] = table.take_notices()
    assert isinstance(notice.content, str)
    assert notice.content.startswith(
        "[Background process 1 `head -c 5000000 /dev/zero | tr '\\0' x; echo; echo end` "
        "exited with code 0; last lines:\n…xxx")
    assert notice.content.endswith("x\nend]") and len(notice.content) < 2200
    assert table.take_notices() == []  # told once


async def test_wait_for_moves_past_each_match(tmp_path: Path) -> None:
    table = ProcessTable(ProcessScope())
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    await collect(table, f"echo ready; read line < {fifo}; echo compiled 1; echo compiled 2",
                  tmp_path)
    tool = ProcessOutputTool(table)
    ctx = ToolContext(cwd=tmp_path, tool_call_id="call")
    first = await tool.execute(ProcessOutputParams(id=1, waitFor="ready"), ctx)
    assert first.content[0].text.startswith("ready\n")  # type: ignore[union-attr]
    process = table.get(1)
    assert process is not None and process.running

    async def release() -> None:
        await anyio.to_thread.run_sync(fifo.write_text, "go\n")

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(release)
        second = await tool.execute(ProcessOutputParams(id=1, waitFor=r"compiled \d"), ctx)
    assert re.search(r"compiled 1", second.content[0].text)  # type: ignore[union-attr]
    # the next wait starts after "compiled 1": "compiled 2" matches, then the process ends
    assert await process.wait_for(ModelPattern(r"compiled \d", "waitFor pattern").search, 30)
    assert not await process.wait_for(ModelPattern(r"compiled \d", "waitFor pattern").search, 30)
    assert not process.running


async def test_process_kill_terms_then_kills_and_the_model_gets_no_notice(
    tmp_path: Path,
) -> None:
    table = ProcessTable(ProcessScope())
    await collect(table, "trap '' TERM; echo started; sleep 1000", tmp_path)
    process = table.get(1)
    assert process is not None
    assert await process.wait_for(ModelPattern("started", "waitFor pattern").search, 30)
    result = await ProcessKillTool(table).execute(
        ProcessIdParams(id=1), ToolContext(cwd=tmp_path, tool_call_id="k"))
    assert result.content[0].text == "Process 1 was killed (signal SIGKILL)"  # type: ignore[union-attr]
    assert table.take_notices() == []
    again = await ProcessKillTool(table).execute(
        ProcessIdParams(id=1), ToolContext(cwd=tmp_path, tool_call_id="k2"))
    assert "already; nothing to kill" in again.content[0].text  # type: ignore[union-attr]
