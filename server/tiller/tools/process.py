"""The tools that read and end background processes (``tiller.tools.background``):
``process_output``, ``process_kill`` and ``process_list``.

They act only on the processes of their own session's table, which ``bash`` started after the
permission gate let it; so they declare themselves as not changing anything (the gate does not
ask about them; checkpoints take no snapshot around them). A result that shows a process ended
counts as telling the model: no exit notice follows for it.
"""

from __future__ import annotations

import anyio
from pydantic import BaseModel, ConfigDict, Field, model_validator

from tiller.errors import ToolError
from tiller.tools.background import (
    KILL_GRACE,
    OUTPUT_LIMIT,
    BackgroundProcess,
    ProcessTable,
    describe_end,
    elapsed,
)
from tiller.tools.base import Tool, ToolContext, ToolInfo, ToolResult
from tiller.tools.pattern import ModelPattern
from tiller.tools.truncate import format_size, truncate_tail, with_note

__all__ = [
    "ProcessIdParams",
    "ProcessKillTool",
    "ProcessListParams",
    "ProcessListTool",
    "ProcessOutputParams",
    "ProcessOutputTool",
    "status_line",
]

MAX_WAIT = 600.0
"""Seconds ``process_output`` waits at most."""


def status_line(process: BackgroundProcess) -> str:
    """One line saying where a process is: "Process 3 is running (pid 123, 12 s)"."""
    info = process.info()
    if process.running:
        return f"Process {info.id} is running (pid {info.pid}, for {elapsed(info.started_at)})"
    return f"Process {info.id} {describe_end(info)}"


def _lookup(table: ProcessTable, process_id: int) -> BackgroundProcess:
    """The process, or ToolError naming those there are."""
    process = table.get(process_id)
    if process is None:
        known = ", ".join(str(p.id) for p in table) or "none"
        raise ToolError(f"There is no background process {process_id} in this session "
                        f"(there are: {known}); process_list lists them")
    return process


def _shown(text: str) -> str:
    """New output for the model: its tail when it is long, with a note saying so."""
    cut = truncate_tail(text)
    if not cut.truncated:
        return text
    return with_note(cut.content, f"[Showing the last {format_size(cut.output_bytes)} of "
                                  f"{format_size(len(text.encode()))} of new output]")


class ProcessIdParams(BaseModel):
    id: int = Field(description="The background process's id (from bash or process_list)")


class ProcessOutputParams(ProcessIdParams):
    model_config = ConfigDict(populate_by_name=True)

    tail: int | None = Field(
        default=None, ge=1, le=2000,
        description="Instead of the new output, the last N lines of what is kept",
    )
    wait_for: str | None = Field(
        default=None, alias="waitFor",
        description="A regular expression (Python syntax): first wait until the output "
        "matches it (the output after the previous waitFor's match; all of it the first "
        "time), the process ends or the timeout passes",
    )
    wait_exit: bool = Field(
        default=False, alias="waitExit",
        description="First wait until the process ends (or the timeout passes)",
    )
    timeout: float = Field(
        default=30.0, gt=0, le=MAX_WAIT,
        description=f"Seconds to wait at most for waitFor or waitExit (default 30, at most "
        f"{MAX_WAIT:g})",
    )

    @model_validator(mode="after")
    def _one_wait(self) -> ProcessOutputParams:
        if self.wait_for is not None and self.wait_exit:
            raise ValueError("give waitFor or waitExit, not both")
        return self


class ProcessOutputTool(Tool[ProcessOutputParams]):
    name = "process_output"
    info = ToolInfo(kind="other", mutates=False, title="Output of process {id}")
    description = (
        "Read a background process's output (started with bash background: true): the new "
        "output since your last read, or its last lines (tail), and whether it still runs or "
        "how it ended. Optionally wait first, at most timeout seconds, for output matching "
        "waitFor (e.g. until a server says it listens) or for the process to end. Only the "
        f"last {OUTPUT_LIMIT // 1024 // 1024} MB of a process's output are kept."
    )
    Params = ProcessOutputParams

    def __init__(self, table: ProcessTable) -> None:
        self.table = table

    async def execute(self, params: ProcessOutputParams, ctx: ToolContext) -> ToolResult:
        process = _lookup(self.table, params.id)
        notes: list[str] = []
        if params.wait_for is not None:
            pattern = ModelPattern(params.wait_for, "waitFor pattern")
            if not await process.wait_for(pattern.search, params.timeout):
                when = f"within {params.timeout:g} s" if process.running else (
                    "before the process ended")
                notes.append(f"[The output did not match {params.wait_for!r} {when}]")
        elif params.wait_exit and process.running:
            with anyio.move_on_after(params.timeout):
                await process.ended.wait()
            if process.running:
                notes.append(f"[It did not end within {params.timeout:g} s]")
        if params.tail is not None:
            text, dropped = process.tail(params.tail), 0
        else:
            text, dropped = process.read_new()
        if dropped:
            notes.insert(0, f"[{format_size(dropped)} of output written since your last read "
                            f"are gone: only the last {format_size(OUTPUT_LIMIT)} are kept]")
        if not process.running:
            process.told = True
            process.notice_due = False
        body = _shown(text) if text else ("(no new output)" if params.tail is None else
                                          "(no output)")
        for note in [*notes, f"[{status_line(process)}]"]:
            body = with_note(body, note)
        return ToolResult.text(body, details={"process": process.info().dump()})


class ProcessKillTool(Tool[ProcessIdParams]):
    name = "process_kill"
    info = ToolInfo(kind="other", mutates=False, title="Kill process {id}")
    description = (
        "Stop a background process (started with bash background: true) and everything in "
        f"its process group: SIGTERM, then SIGKILL after {KILL_GRACE:g} s if it is still "
        "running."
    )
    Params = ProcessIdParams

    def __init__(self, table: ProcessTable) -> None:
        self.table = table

    async def execute(self, params: ProcessIdParams, ctx: ToolContext) -> ToolResult:
        process = _lookup(self.table, params.id)
        was_running = process.running
        if was_running:
            await process.kill("model")
        process.told = True
        process.notice_due = False
        if was_running and process.running:
            raise ToolError(f"Process {process.id} did not end: {status_line(process)}")
        text = status_line(process) if was_running else (
            f"{status_line(process)} already; nothing to kill")
        return ToolResult.text(text, details={"process": process.info().dump()})


class ProcessListParams(BaseModel):
    pass


class ProcessListTool(Tool[ProcessListParams]):
    name = "process_list"
    info = ToolInfo(kind="other", mutates=False, title="List the background processes")
    description = (
        "List this session's background processes (bash background: true): id, state, "
        "command, and how much output you have not read."
    )
    Params = ProcessListParams

    def __init__(self, table: ProcessTable) -> None:
        self.table = table

    async def execute(self, params: ProcessListParams, ctx: ToolContext) -> ToolResult:
        lines = []
        for process in self.table:
            unread = process.output.total - process.cursor
            more = f", {format_size(unread)} unread" if unread > 0 else ""
            lines.append(f"{status_line(process)}: `{process.command}`{more}")
            if not process.running:
                process.told = True
                process.notice_due = False
        text = "\n".join(lines) if lines else "No background processes in this session."
        return ToolResult.text(text, details={"processes": [p.dump() for p in
                                                            self.table.infos()]})
