"""Running one assistant message's tool calls: every call gets exactly one result.

Unknown tools, arguments that fail the tool's schema, a ``before_tool_call`` hook that blocks, a
tool that raises, a timeout and an abort all become error results the model can read. Calls are
prepared (validated, hooked) one by one in source order, then executed in parallel unless a tool
in the batch is sequential. ``tool_execution_end`` events follow completion order; the returned
results follow the assistant's source order. What a batch reads of the agent's settings
(``tiller.agent.settings.AgentSettings``) is spelled out by ``ToolSettings``. A call whose arguments
did not parse as one JSON object (``ToolCall.arguments_error``) never runs: its error result asks
the model to re-send it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio
from pydantic import BaseModel, ValidationError

from tiller.agent.abort import AbortSignal
from tiller.errors import ToolError
from tiller.sandbox.use import SandboxUse
from tiller.tools.base import EditorFiles, Terminal, Tool, ToolContext, ToolResult, describe
from tiller.tools.truncate import printable
from tiller.types import (
    AgentEvent,
    ImageContent,
    TextContent,
    ToolCall,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolResultMessage,
    Usage,
)

__all__ = [
    "AfterToolCall",
    "AfterToolCallResult",
    "BeforeToolCall",
    "BeforeToolCallResult",
    "ToolBatch",
    "ToolSettings",
    "execute_tool_calls",
    "fail_tool_calls",
]

log = logging.getLogger(__name__)

ABORTED_MESSAGE = "Tool call aborted: the user stopped the run before it finished."


@dataclass
class BeforeToolCallResult:
    """``block=True`` fails the call with ``reason`` instead of running it. An allowed call's
    ``resolved_path`` is the real path its ``path`` argument was judged on; the tool gets it
    as ``ToolContext.resolved_path`` and acts on that path, not on a new resolution. Likewise
    ``sandbox``: how a command was judged to run (``ToolContext.sandbox``)."""

    block: bool = False
    reason: str | None = None
    resolved_path: Path | None = None
    sandbox: SandboxUse | None = None


@dataclass
class AfterToolCallResult:
    """Replaces the result's content and/or error flag; ``None`` fields keep the original."""

    content: list[TextContent | ImageContent] | None = None
    is_error: bool | None = None


BeforeToolCall = Callable[[ToolCall, dict[str, Any]], Awaitable[BeforeToolCallResult | None]]
AfterToolCall = Callable[[ToolCall, ToolResultMessage], Awaitable[AfterToolCallResult | None]]


class ToolSettings(Protocol):
    """The settings a batch runs with: the tools, the workspace, the editor's files, the hooks
    and the per-call timeout (None: no timeout)."""

    @property
    def tools(self) -> Sequence[Tool[Any]]: ...
    @property
    def cwd(self) -> Path: ...
    @property
    def files(self) -> EditorFiles | None: ...
    @property
    def terminal(self) -> Terminal | None: ...
    @property
    def before_tool_call(self) -> BeforeToolCall | None: ...
    @property
    def after_tool_call(self) -> AfterToolCall | None: ...
    @property
    def tool_timeout(self) -> float | None: ...
    @property
    def withheld_tools(self) -> Mapping[str, str]: ...


@dataclass
class ToolBatch:
    """The results in source order; ``terminate`` only if every result asked for it."""

    results: list[ToolResultMessage]
    terminate: bool = False
    aborted: bool = False


def _error_result(call: ToolCall, text: str) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        content=[TextContent(text=text)],
        is_error=True,
    )


def _printable(block: TextContent | ImageContent) -> TextContent | ImageContent:
    """A result's block as it can be sent: its text ``printable`` (a tool, an MCP server or an
    exception's message may carry bytes that are not UTF-8)."""
    if isinstance(block, TextContent) and (text := printable(block.text)) is not block.text:
        return TextContent(text=text)
    return block


def _start_event(call: ToolCall, tools: Sequence[Tool[Any]], cwd: Path) -> ToolExecutionStart:
    """``tool_execution_start`` for ``call``, showing it as its tool describes itself."""
    info = describe(tools, call.name)
    path = info.call_path(call.arguments, cwd)
    return ToolExecutionStart(
        tool_call_id=call.id, tool_name=call.name, args=call.arguments,
        title=info.call_title(call.name, call.arguments), kind=info.kind,
        path=None if path is None else str(path),
    )


def fail_tool_calls(
    calls: Sequence[ToolCall], reason: str, settings: ToolSettings,
    emit: Callable[[AgentEvent], None],
) -> ToolBatch:
    """Answer every call with an error result carrying ``reason``, running none of them."""
    results = []
    for call in calls:
        emit(_start_event(call, settings.tools, settings.cwd))
        result = _error_result(call, reason)
        emit(ToolExecutionEnd(
            tool_call_id=call.id, tool_name=call.name, result=result, is_error=True
        ))
        results.append(result)
    return ToolBatch(results)


def _format_validation_error(tool_name: str, error: ValidationError) -> str:
    problems = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "(arguments)"
        problems.append(f"{where}: {item['msg']}")
    return f"Invalid arguments for tool '{tool_name}': " + "; ".join(problems)


def _unparsed_arguments_message(call: ToolCall) -> str:
    return (
        f"Tool call not executed: its arguments were not one JSON object "
        f"({call.arguments_error}). Please re-send the call with its arguments as one "
        f"complete JSON object."
    )


@dataclass
class _Prepared:
    index: int
    call: ToolCall
    tool: Tool[Any]
    params: BaseModel
    resolved_path: Path | None = None
    sandbox: SandboxUse | None = None


class _BatchRunner:
    def __init__(
        self,
        calls: Sequence[ToolCall],
        settings: ToolSettings,
        emit: Callable[[AgentEvent], None],
    ) -> None:
        self.files = settings.files
        self.terminal = settings.terminal
        self.calls = calls
        self.tools = {tool.name: tool for tool in settings.tools}
        self.tool_list = settings.tools
        self.emit = emit
        self.cwd = settings.cwd
        self.before = settings.before_tool_call
        self.after = settings.after_tool_call
        self.timeout = settings.tool_timeout
        self.withheld = settings.withheld_tools
        self.results: dict[int, ToolResultMessage] = {}
        self.spent: dict[int, Usage] = {}
        """Model usage each call caused (``ToolContext.spend``): a subagent's."""
        self.terminate: dict[int, bool] = {}
        self.started: set[int] = set()
        self.done: dict[int, tuple[ToolResultMessage, bool]] = {}
        """Calls the tool finished whose ``after_tool_call`` hook still runs: an abort then
        keeps the tool's own result (the call did happen)."""

    def start(self, index: int, call: ToolCall) -> None:
        self.started.add(index)
        self.emit(_start_event(call, self.tool_list, self.cwd))

    def finish(self, index: int, result: ToolResultMessage, terminate: bool = False) -> None:
        if index in self.spent:  # also on an error or aborted result: it was spent
            result = result.model_copy(update={"usage": self.spent[index]})
        self.results[index] = result
        self.terminate[index] = terminate
        self.emit(ToolExecutionEnd(
            tool_call_id=result.tool_call_id,
            tool_name=result.tool_name,
            result=result,
            is_error=result.is_error,
        ))

    async def prepare(self, index: int, call: ToolCall) -> _Prepared | None:
        """Validate and hook one call; on failure finish it with an error and return None."""
        self.start(index, call)
        tool = self.tools.get(call.name)
        if tool is None:
            available = ", ".join(sorted(self.tools)) or "none"
            withheld = self.withheld.get(call.name)
            problem = (f"Tool '{call.name}' is not available here: {withheld}" if withheld
                       else f"Unknown tool '{call.name}'")
            self.finish(index, _error_result(call, f"{problem}. Available tools: {available}."))
            return None
        if call.arguments_error is not None:
            self.finish(index, _error_result(call, _unparsed_arguments_message(call)))
            return None
        try:
            params = tool.Params.model_validate(call.arguments)
        except ValidationError as exc:
            self.finish(index, _error_result(call, _format_validation_error(call.name, exc)))
            return None
        if self.before is not None:
            try:
                verdict = await self.before(call, call.arguments)
            except Exception as exc:
                log.exception("before_tool_call hook failed")
                verdict = BeforeToolCallResult(block=True, reason=f"hook failed: {exc}")
            if verdict is not None and verdict.block:
                reason = verdict.reason or "blocked before it ran"
                self.finish(index, _error_result(call, f"Tool call blocked: {reason}"))
                return None
            if verdict is not None:
                return _Prepared(index, call, tool, params, verdict.resolved_path,
                                 verdict.sandbox)
        return _Prepared(index, call, tool, params)

    async def run(self, prepared: _Prepared) -> None:
        call = prepared.call

        def update(partial: Any) -> None:
            self.emit(ToolExecutionUpdate(
                tool_call_id=call.id, tool_name=call.name, partial_result=partial
            ))

        def spend(usage: Usage) -> None:
            index = prepared.index
            self.spent[index] = self.spent[index].add(usage) if index in self.spent else usage

        ctx = ToolContext(
            cwd=self.cwd, tool_call_id=call.id, update=update, files=self.files,
            resolved_path=prepared.resolved_path, terminal=self.terminal,
            sandbox=prepared.sandbox, spend=spend,
        )
        outcome: ToolResult | None = None
        try:
            with anyio.move_on_after(math.inf if self.timeout is None else self.timeout):
                outcome = await prepared.tool.execute(prepared.params, ctx)
        except ToolError as exc:
            outcome = ToolResult.text(str(exc), is_error=True, details=exc.details)
        except Exception as exc:
            log.exception("tool %s raised", call.name)
            outcome = ToolResult.text(
                f"Tool '{call.name}' failed: {type(exc).__name__}: {exc}", is_error=True
            )
        if outcome is None:  # only the deadline's scope can get here without an outcome
            outcome = ToolResult.text(
                f"Tool '{call.name}' timed out after {self.timeout:g} seconds.", is_error=True
            )
        result = ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=[_printable(block) for block in outcome.content],
            details=outcome.details,
            is_error=outcome.is_error,
        )
        self.done[prepared.index] = (result, outcome.terminate)
        result = await self.apply_after_hook(call, result)
        self.finish(prepared.index, result, outcome.terminate)

    async def apply_after_hook(
        self, call: ToolCall, result: ToolResultMessage
    ) -> ToolResultMessage:
        if self.after is None:
            return result
        try:
            change = await self.after(call, result)
        except Exception:
            log.exception("after_tool_call hook failed; keeping the original result")
            return result
        if change is None:
            return result
        update: dict[str, Any] = {}
        if change.content is not None:
            update["content"] = list(change.content)
        if change.is_error is not None:
            update["is_error"] = change.is_error
        return result.model_copy(update=update)


async def execute_tool_calls(
    calls: Sequence[ToolCall],
    settings: ToolSettings,
    emit: Callable[[AgentEvent], None],
    abort: AbortSignal,
) -> ToolBatch:
    """Run a batch under ``abort``; calls cut short by it get an ``aborted`` error result (a
    call cut short in its ``after_tool_call`` hook keeps the tool's result)."""
    runner = _BatchRunner(calls, settings, emit)
    sequential = any(
        (tool := runner.tools.get(call.name)) is not None and tool.sequential for call in calls
    )
    with abort.scope():
        if sequential:  # each call is prepared only when its turn comes
            for index, call in enumerate(calls):
                if (item := await runner.prepare(index, call)) is not None:
                    await runner.run(item)
        else:
            prepared = []
            for index, call in enumerate(calls):
                if (item := await runner.prepare(index, call)) is not None:
                    prepared.append(item)
            async with anyio.create_task_group() as group:
                for item in prepared:
                    group.start_soon(runner.run, item)
    for index, call in enumerate(calls):
        if index not in runner.results and index in runner.done:
            runner.finish(index, *runner.done[index])
        elif index not in runner.results:
            if index not in runner.started:
                runner.start(index, call)
            runner.finish(index, _error_result(call, ABORTED_MESSAGE))
    ordered = [runner.results[index] for index in range(len(calls))]
    terminate = bool(calls) and all(runner.terminate[index] for index in range(len(calls)))
    return ToolBatch(ordered, terminate=terminate, aborted=abort.aborted)
