"""Subagents: the session side of the ``task`` tool (tiller.tools.task).

A parent session's ``SessionSubagents`` is the tool's ``Subagents`` port. Each ``task`` call
finds its agent (tiller.context.agents), asks the registry for a **child session**
(``Children.spawn``: a session of its own, with its own log and event stream, whose header
records its ``TaskLink``), runs the task's prompt in it to its end, and answers with the
child's final text and what it changed. The child's run is a task of its own, not part of the
tool call's: when the parent is aborted (the call is cancelled), the child is aborted through
its own Agent, ends ``aborted`` like any run, and only then does the call give up. The child's
model usage is handed to the call as it is spent (``ToolContext.spend``), so it counts in the
parent's run and state even when the call is aborted. A child is closed (unloaded; its log
stays) once its task is over. At most ``[tasks] max_concurrent`` children of a session run at
once; the others wait for a slot.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any, Protocol

import anyio

from tiller.context.agents import AgentCatalog, AgentDefinition
from tiller.errors import RequestError
from tiller.frozen import frozen
from tiller.tools.base import ToolContext, ToolResult, describe
from tiller.tools.task import DEFAULT_AGENT, AgentChoice, TaskParams, TaskTool
from tiller.types import (
    AgentEvent,
    AssistantMessage,
    MessageEnd,
    RunResult,
    ToolResultMessage,
)

__all__ = ["Child", "Children", "SessionSubagents", "TaskLink", "TaskSetup", "may_nest",
           "task_tools"]

log = logging.getLogger(__name__)


@frozen
class TaskLink:
    """Where a child session comes from: the parent session, the parent's ``task`` call, the
    agent, how deep it is (1: a child of a top-level session), and the tools it was given
    (by name: a loaded child gets the same)."""

    parent_session_id: str
    parent_tool_call_id: str
    agent_name: str
    depth: int = 1
    tools: tuple[str, ...] = ()

    def header(self) -> dict[str, Any]:
        """As kept in the child's log header (``task``)."""
        return {"parentSessionId": self.parent_session_id,
                "parentToolCallId": self.parent_tool_call_id, "agent": self.agent_name,
                "depth": self.depth, "tools": list(self.tools)}

    def wire(self) -> dict[str, str]:
        """The fields a child's events, questions and listings carry (protocol.md)."""
        return {"parentSessionId": self.parent_session_id,
                "parentToolCallId": self.parent_tool_call_id}

    @classmethod
    def from_header(cls, data: Any) -> TaskLink | None:
        """The link a log header's ``task`` records; None when there is none (or it is not one
        this reading understands: the session then loads as a top-level one)."""
        if not isinstance(data, Mapping):
            return None
        parent, call, agent = (data.get(key) for key in
                               ("parentSessionId", "parentToolCallId", "agent"))
        depth, tools = data.get("depth", 1), data.get("tools", [])
        if not (isinstance(parent, str) and isinstance(call, str) and isinstance(agent, str)
                and isinstance(depth, int) and isinstance(tools, list)):
            return None
        return cls(parent, call, agent, depth, tuple(str(name) for name in tools))


@frozen
class TaskSetup:
    """How a child session is made besides its spec: its link, the parent's tools it shares
    (its MCP tools: a child starts no MCP server of its own), and its run limits."""

    link: TaskLink
    shared_tools: Sequence[Any] = ()
    max_turns: int | None = None
    max_tokens: int | None = None
    withheld: Mapping[str, str] = field(default_factory=dict)
    """Why each tool the child could have had is not its own (filled in by the Session)."""


class Child(Protocol):
    """What the subagents use of a child session (a ``tiller.session.session.Session``)."""

    @property
    def id(self) -> str: ...
    @property
    def cwd(self) -> Path: ...
    @property
    def tools(self) -> Sequence[Any]: ...
    @property
    def is_running(self) -> bool: ...

    def subscribe(self, subscriber: Callable[[AgentEvent], None]) -> None: ...

    async def prompt(self, content: str) -> RunResult: ...

    def abort(self) -> None: ...


class Children(Protocol):
    """The registry as a parent session's subagents need it."""

    def spawn(self, parent: Any, agent: AgentDefinition, tool_call_id: str) -> Child:
        """A new live child session of session ``parent`` for ``agent``, started by call
        ``tool_call_id``. May raise RequestError (its provider cannot be used)."""
        ...

    async def close_child(self, child: Any) -> None:
        """Unload ``child`` (its log stays); nothing if it is not live."""
        ...


class SessionSubagents:
    """The ``Subagents`` port of one parent session (see the module): ``parent`` is the
    session (handed to ``children.spawn``), ``catalog`` gives its agents."""

    def __init__(self, parent: Any, catalog: Callable[[], AgentCatalog], children: Children,
                 max_concurrent: int) -> None:
        self.parent = parent
        self.catalog = catalog
        self.children = children
        self._slots = anyio.Semaphore(max_concurrent)

    def choices(self) -> Sequence[AgentChoice]:
        return [AgentChoice(agent.name, agent.description) for agent in self.catalog().agents]

    async def run(self, params: TaskParams, ctx: ToolContext) -> ToolResult:
        name = params.agent or DEFAULT_AGENT
        catalog = self.catalog()
        agent = catalog.find(name)
        if agent is None:
            known = ", ".join(a.name for a in catalog.agents)
            return ToolResult.text(f"No agent {name!r} to run this task: "
                                   f"{catalog.why_missing(name)}. The agents are: {known}.",
                                   is_error=True)
        async with self._slots:
            try:
                child = self.children.spawn(self.parent, agent, ctx.tool_call_id)
            except RequestError as exc:
                return ToolResult.text(f"The {name} agent could not start: {exc.message}",
                                       is_error=True)
            try:
                ctx.update({"sessionId": child.id, "agent": agent.name})
                child.subscribe(_spending(ctx))
                result = await _run_to_end(child, params.prompt)
            finally:
                with anyio.CancelScope(shield=True):
                    await self.children.close_child(child)
        return _report(agent, child.id, child.cwd, child.tools, result)


def may_nest(task: TaskSetup | None, max_depth: int) -> bool:
    """Whether a session (``task``: a child's set-up, None for a top-level session) is less
    than ``max_depth`` ( ``[tasks] max_depth``) levels deep, so it may start subagents."""
    return (task.link.depth if task is not None else 0) < max_depth


def task_tools(
    tools: list[Any], task: TaskSetup | None, subagents: SessionSubagents | None, *,
    nesting_refused: bool, max_depth: int,
) -> tuple[list[Any], dict[str, str]]:
    """A session's tools: its own ``tools`` with ``task`` when it has ``subagents`` and, for a
    child, the parent's shared tools, cut to those its link names; and why each tool left out
    is withheld (``nesting_refused``: the session could have had ``task`` but for its depth)."""
    if task is not None:
        tools = [*tools, *task.shared_tools]
    withheld: dict[str, str] = {}
    if subagents is not None:
        tools = [*tools, TaskTool(subagents)]
    elif nesting_refused:
        withheld[TaskTool.name] = (
            f"a subagent cannot start tasks of its own (subagents nest {max_depth} "
            f"level{'s' if max_depth != 1 else ''} deep: [tasks] max_depth)")
    if task is None:
        return tools, withheld
    given = set(task.link.tools)
    withheld.update({tool.name: task.withheld.get(
        tool.name, f"the {task.link.agent_name} agent may not use '{tool.name}'")
        for tool in tools if tool.name not in given})
    return [tool for tool in tools if tool.name in given], withheld


def _spending(ctx: ToolContext) -> Any:
    """A subscriber handing the child's model usage to the parent's call as it is spent."""

    def follow(event: AgentEvent) -> None:
        if isinstance(event, MessageEnd):
            message = event.message
            if isinstance(message, AssistantMessage):
                ctx.spend(message.usage)
            elif isinstance(message, ToolResultMessage) and message.usage is not None:
                ctx.spend(message.usage)  # a grandchild's, when tasks nest deeper

    return follow


async def _run_to_end(child: Child, prompt: str) -> RunResult:
    """Run ``prompt`` in ``child`` as a task of its own; if the caller is cancelled (the parent
    was aborted), abort the child's run, wait for it to end, then re-raise."""
    run = asyncio.ensure_future(child.prompt(prompt))
    try:
        return await asyncio.shield(run)
    except asyncio.CancelledError:
        if child.is_running:
            child.abort()
        else:
            run.cancel()  # not begun: nothing to end
        with anyio.CancelScope(shield=True):
            try:
                await run
            except asyncio.CancelledError:
                pass
            except Exception:
                log.exception("subagent %s failed while it was aborted", child.id)
        raise


def _report(agent: AgentDefinition, child_id: str, cwd: Path, tools: Sequence[Any],
            result: RunResult) -> ToolResult:
    """The task call's result: the child's last text, the files its file tools changed and the
    commands it ran; an error when it did not end well."""
    text = next((message.text for message in reversed(result.messages)
                 if isinstance(message, AssistantMessage) and message.text.strip()), "")
    files: list[str] = []
    commands = 0
    for message in result.messages:
        if not isinstance(message, ToolResultMessage) or message.is_error:
            continue
        info = describe(tools, message.tool_name)
        if info.command_arg is not None:
            commands += 1
        elif info.changes_files and isinstance(message.details, Mapping):
            path = message.details.get("path")
            if isinstance(path, str):
                shown = Path(path)
                shown = shown.relative_to(cwd) if shown.is_relative_to(cwd) else shown
                if str(shown) not in files:
                    files.append(str(shown))
    parts = [text.strip() or "(the subagent gave no report)"]
    changed = [f"Files it changed: {', '.join(files)}." if files else ""]
    if commands:
        changed.append(f"It ran {commands} command{'s' if commands > 1 else ''} (they may have "
                       "changed more).")
    if summary := " ".join(part for part in changed if part):
        parts.append(summary)
    ended_well = result.stop_reason in ("stop", "toolUse")
    if not ended_well:
        why = f": {result.error_message}" if result.error_message else ""
        parts.insert(0, f"The {agent.name} agent stopped before it finished "
                        f"({result.stop_reason}{why}). What it had said:")
    details = {"sessionId": child_id, "agent": agent.name, "stopReason": result.stop_reason,
               "files": files}
    return ToolResult.text("\n\n".join(parts), details=details, is_error=not ended_well)
