"""The ACP mapping: Tiller's events and transcript as ACP ``session/update`` payloads, and ACP
prompt content as Tiller user content.

Everything here is a pure function of Tiller's typed events and messages (``tiller.types``) and
ACP's content blocks, so it is tested without a server. ``UpdateMapper`` keeps the little state a
session needs: the file snapshots its diffs are built from (``tiller.fronts.acp.diff``). A call's
title, kind and locations come from how its tool describes itself (``tiller.tools.base.ToolInfo``),
never from its name.

Live events map as follows (everything else, e.g. ``turn_start`` or ``message_end``, sends
nothing: the client already has the prompt it sent and the streamed deltas):

=====================================  ======================================================
Tiller event                           ACP ``sessionUpdate``
=====================================  ======================================================
``message_update`` ``text``            ``agent_message_chunk`` (the delta)
``message_update`` ``thinking``        ``agent_thought_chunk`` (the delta)
``tool_execution_start``               ``tool_call`` (``pending``: it may wait for permission)
(the call is cleared to run)           ``tool_call_update`` ``in_progress`` (see tiller.fronts.acp)
``tool_execution_update`` ``output``   ``tool_call_update`` with the output so far
``tool_execution_update`` terminal     ``tool_call_update`` with ``{type: "terminal"}`` (once)
``tool_execution_end``                 ``tool_call_update`` ``completed``/``failed`` + content
                                       (a call run in the client's terminal: the terminal, then
                                       the output as the model got it)
``retry_scheduled``                    ``agent_thought_chunk`` saying the call is retried
``notice`` (the model: deprecated...)  ``agent_thought_chunk`` ``Note: <message>``
``message_end`` of the first user msg   ``session_info_update`` with the title
``message_end`` of an assistant msg    ``usage_update`` (tiller.fronts.acp.sessions); a failed
                                       call's ``errorMessage`` as an ``agent_message_chunk`` first
``plan`` (a ``todo`` call)              ``plan``: every step, priority ``medium``
``tool_execution_end`` of a background  ``tool_call_update`` ``in_progress`` + the start's text:
command still running                  the call stays open while the process runs
``process_output``                     ``tool_call_update`` of its call: the start's text and
                                       the output since (its last ``ACP_OUTPUT_CHARS``), fenced
``process_exit``                       ``tool_call_update`` ``completed`` (exit code 0) or
                                       ``failed``, the output and how it ended; ``rawOutput``
                                       the process
=====================================  ======================================================

A background command (``bash`` with ``background: true``, tiller.tools.background) is thus one
ACP tool call from its start to its exit, though the model got its result at once: ACP has
nothing else a client would show a process with. Its output is not run in the client's
terminal (Tiller must read it), so it shows as text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_core import to_jsonable_python

from tiller.fronts.acp.diff import diff_contents
from tiller.fronts.acp.sessions import title_update, usage_update
from tiller.tools.base import Tool, ToolInfo, describe
from tiller.types import (
    AgentEvent,
    AssistantContent,
    AssistantMessage,
    CommandEntry,
    HookEnd,
    ImageContent,
    Message,
    MessageEnd,
    MessageUpdate,
    Notice,
    PlanChanged,
    PlanItem,
    ProcessExit,
    ProcessInfo,
    ProcessOutput,
    RetryScheduled,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolResultMessage,
    UserContent,
    UserMessage,
)

__all__ = [
    "ACP_OUTPUT_CHARS",
    "STOP_REASONS",
    "UpdateMapper",
    "acp_stop_reason",
    "available_commands",
    "failure_chunks",
    "plan_update",
    "prompt_message",
    "replay_blocks",
    "tool_call_fields",
    "user_content",
]

STOP_REASONS: dict[str, str] = {
    "stop": "end_turn",
    "toolUse": "end_turn",
    "length": "max_tokens",
    "maxTurns": "max_turn_requests",
    "maxTokens": "max_turn_requests",
    "aborted": "cancelled",
}
"""Tiller's run stop reasons as ACP stop reasons; ``error`` has none (tiller.fronts.acp answers the
prompt with a JSON-RPC error instead)."""

ACP_OUTPUT_CHARS = 16384
"""Characters of a background process's output its ACP tool call shows (the newest)."""


@dataclass
class _Shown:
    """A background process shown as its starting call: the call, its start's text, the
    output since (the newest ``ACP_OUTPUT_CHARS``)."""

    tool_call_id: str
    started: str
    output: str = ""

    def add(self, data: str) -> None:
        self.output += data
        if len(self.output) > ACP_OUTPUT_CHARS:
            cut = self.output[-ACP_OUTPUT_CHARS:]
            self.output = "…" + cut[cut.find("\n") + 1:] if "\n" in cut else "…" + cut

    def content(self, ending: str | None = None) -> list[dict[str, Any]]:
        text = self.started if not self.output else f"{self.started}\n\n{_fenced(self.output)}"
        if ending:
            text += f"\n\n{ending}"
        return [{"type": "content", "content": _text(text)}]


def _ended(process: ProcessInfo) -> str:
    """How a background process ended, in a line."""
    if process.state == "ended":
        return f"Process {process.id} ended with its session or the server."
    how = "was killed" if process.state == "killed" else "exited"
    end = f"signal {process.signal}" if process.signal else f"code {process.exit_code}"
    return f"Process {process.id} {how} ({end})."


def available_commands(commands: Sequence[CommandEntry]) -> dict[str, Any]:
    """The ``available_commands_update`` for ``commands`` (an ``input`` hint where one has an
    argument hint)."""
    listed = [{"name": c.name, "description": c.description,
               **({"input": {"hint": c.argument_hint}} if c.argument_hint else {})}
              for c in commands]
    return {"sessionUpdate": "available_commands_update", "availableCommands": listed}


def plan_update(items: Sequence[PlanItem]) -> dict[str, Any]:
    """ACP's ``plan`` update: the whole plan (Tiller's steps have no priority: ``medium``)."""
    entries = [{"content": item.content, "status": item.status, "priority": "medium"}
               for item in items]
    return {"sessionUpdate": "plan", "entries": entries}


def acp_stop_reason(stop_reason: str) -> str | None:
    """The ACP stop reason for a Tiller run stop reason; None for ``error``."""
    return STOP_REASONS.get(stop_reason)


def tool_call_fields(
    call_id: str, name: str, args: dict[str, Any], cwd: Path, info: ToolInfo
) -> dict[str, Any]:
    """The fields ACP's ``tool_call`` and the permission request's ``toolCall`` share
    (``info``: how the tool called ``name`` describes itself)."""
    fields: dict[str, Any] = {
        "toolCallId": call_id,
        "title": info.call_title(name, args),
        "kind": info.kind,
        "rawInput": args,
    }
    path = info.call_path(args, cwd)
    if path is not None:  # the client's follow-along
        fields["locations"] = [{"path": str(path)}]
    return fields


def _fenced(text: str) -> str:
    """``text`` as a Markdown code block (clients render tool text as Markdown)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text.rstrip(chr(10))}\n{fence}"


def _image(block: ImageContent) -> dict[str, Any]:
    return {"type": "image", "data": block.data, "mimeType": block.mime_type}


def _content_blocks(blocks: Sequence[UserContent], fence: bool) -> list[dict[str, Any]]:
    """Tiller text/image blocks as ACP tool-call ``content`` items."""
    items: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextContent) and block.text:
            text = _fenced(block.text) if fence else block.text
            items.append({"type": "content", "content": {"type": "text", "text": text}})
        elif isinstance(block, ImageContent):
            items.append({"type": "content", "content": _image(block)})
    return items


def _chunk(kind: str, block: dict[str, Any]) -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": block}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


@dataclass
class UpdateMapper:
    """One session's mapping; ``tools`` are the session's tools. ``snapshots`` holds, per tool
    call id, the text of the file a call that changes files (``write``/``edit``) is about to
    change (None: it did not exist), taken when the call was cleared to run; the call's end uses
    and drops it. ``titled``: the session has its title (a first user message); ``cost``: USD
    since it went live; ``context_window()``: the current model's window, if known."""

    cwd: Path
    tools: Sequence[Tool[Any]]
    snapshots: dict[str, str | None] = field(default_factory=dict)
    titled: bool = False
    terminals: dict[str, str] = field(default_factory=dict)
    """Tool call id -> the client's terminal the call runs in (tiller.fronts.acp.terminal)."""
    cost: float = 0.0
    context_window: Callable[[], int | None] = lambda: None
    open_processes: dict[int, _Shown] = field(default_factory=dict)
    """Background process id -> how its still open tool call shows it."""

    def on_event(self, event: AgentEvent) -> list[dict[str, Any]]:
        """The ``session/update`` payloads for one event."""
        if isinstance(event, MessageUpdate) and event.delta:
            if event.kind == "text":
                return [_chunk("agent_message_chunk", _text(event.delta))]
            if event.kind == "thinking":
                return [_chunk("agent_thought_chunk", _text(event.delta))]
        elif isinstance(event, ToolExecutionStart):
            fields = self._call_fields(event.tool_call_id, event.tool_name, event.args)
            return [{"sessionUpdate": "tool_call", **fields, "status": "pending"}]
        elif isinstance(event, ToolExecutionUpdate):
            partial = event.partial_result
            terminal = partial.get("terminalId") if isinstance(partial, dict) else None
            if isinstance(terminal, str):  # the client shows the terminal live: once is enough
                if event.tool_call_id in self.terminals:
                    return []
                self.terminals[event.tool_call_id] = terminal
                return [{"sessionUpdate": "tool_call_update", "toolCallId": event.tool_call_id,
                         "content": [{"type": "terminal", "terminalId": terminal}]}]
            if isinstance(partial, dict) and isinstance(partial.get("output"), str):
                content = _content_blocks([TextContent(text=partial["output"])], True)
                return [{"sessionUpdate": "tool_call_update", "toolCallId": event.tool_call_id,
                         "content": content}]
        elif isinstance(event, ToolExecutionEnd):
            call_id = event.tool_call_id
            have = call_id in self.snapshots
            snapshot = self.snapshots.pop(call_id, None)
            update = self.tool_result(event.result, snapshot, have_snapshot=have)
            started = _started_process(event.result)
            if started is not None:  # a background command: open until the process ends
                shown = self.open_processes[started] = _Shown(call_id, event.result.text)
                update.update(status="in_progress", content=shown.content())
            if call_id in self.terminals:  # the terminal, then its output as the model got it
                terminal = {"type": "terminal", "terminalId": self.terminals.pop(call_id)}
                update["content"] = [terminal, *update["content"]]
            return [update]
        elif isinstance(event, MessageEnd):
            message = event.message
            if isinstance(message, UserMessage) and not self.titled:
                self.titled = True
                return [title_update(message)]
            if isinstance(message, AssistantMessage):
                self.cost += message.usage.cost
                return [*failure_chunks(message),
                        *usage_update(message, self.cost, self.context_window())]
        elif isinstance(event, PlanChanged):
            return [plan_update(event.items)]
        elif isinstance(event, ProcessOutput) and event.process_id in self.open_processes:
            shown = self.open_processes[event.process_id]
            shown.add(f"\n…\n{event.data}" if event.skipped else event.data)
            return [{"sessionUpdate": "tool_call_update", "toolCallId": shown.tool_call_id,
                     "content": shown.content()}]
        elif isinstance(event, ProcessExit) and event.process.id in self.open_processes:
            shown = self.open_processes.pop(event.process.id)
            process = event.process
            ok = process.state == "exited" and process.exit_code == 0
            return [{"sessionUpdate": "tool_call_update", "toolCallId": shown.tool_call_id,
                     "status": "completed" if ok else "failed",
                     "content": shown.content(_ended(process)), "rawOutput": process.dump()}]
        elif isinstance(event, RetryScheduled):
            note = (f"Retrying the model call (attempt {event.attempt} of "
                    f"{event.max_attempts}): {event.error_message}\n")
            return [_chunk("agent_thought_chunk", _text(note))]
        elif isinstance(event, Notice):  # the model is deprecated, replaced...: ACP has no notice
            return [_chunk("agent_thought_chunk", _text(f"Note: {event.message}\n"))]
        elif isinstance(event, HookEnd) and event.outcome != "ok":  # ACP has no hooks
            note = (f"{event.hook_event} hook `{event.command}` {event.outcome}"
                    f"{f': {event.message}' if event.message else ''}\n")
            return [_chunk("agent_thought_chunk", _text(note))]
        return []

    def tool_result(
        self, result: ToolResultMessage, snapshot: str | None, *, have_snapshot: bool
    ) -> dict[str, Any]:
        """The final ``tool_call_update`` for a tool result message: status, the result's text
        and images (a command's output fenced), and for a successful file change (write/edit)
        the diff first."""
        failed = result.is_error
        info = describe(self.tools, result.tool_name)
        content: list[dict[str, Any]] = []
        details = to_jsonable_python(result.details)  # as it goes on the wire: rawOutput
        if not failed and info.changes_files and isinstance(details, dict):
            diff, path = details.get("diff"), details.get("path")
            if isinstance(diff, str) and isinstance(path, str):
                content += diff_contents(path, diff, snapshot, have_snapshot=have_snapshot)
        content += _content_blocks(result.content, info.command_arg is not None)
        update: dict[str, Any] = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": result.tool_call_id,
            "status": "failed" if failed else "completed",
            "content": content,
        }
        if details is not None:
            update["rawOutput"] = details
        return update

    def _call_fields(self, call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
        return tool_call_fields(call_id, name, args, self.cwd, describe(self.tools, name))

    def replay(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        """``session/load``'s history: each message as the updates a live client would have
        seen. Diffs are per hunk (no snapshot of the file survives a restart)."""
        updates: list[dict[str, Any]] = []
        for message in messages:
            if isinstance(message, UserMessage):
                updates += self._replay_user(message, after=updates[-1] if updates else None)
            elif isinstance(message, AssistantMessage):
                updates += self._replay_assistant(message.content)
                updates += failure_chunks(message)
            elif isinstance(message, ToolResultMessage):
                updates.append(self.tool_result(message, None, have_snapshot=False))
        return updates

    def _replay_user(
        self, message: UserMessage, after: dict[str, Any] | None
    ) -> list[dict[str, Any]]:
        """A user message as the blocks the client sent (``acp_content``; else its content as
        blocks), one ``user_message_chunk`` each. A text chunk right after another user text
        chunk (the next block, or the next message when nothing came between) is preceded by a
        blank-line chunk: clients join a message's chunks, and "answer slowly please" + "run
        the long task" would show as one word."""
        blocks = message.acp_content or replay_blocks(message.content)
        updates: list[dict[str, Any]] = []
        last = after
        for block in blocks:
            if block.get("type") == "text" and not block.get("text"):
                continue
            if block.get("type") == "text" and _is_user_text(last):
                updates.append(_chunk("user_message_chunk", _text("\n\n")))
            last = _chunk("user_message_chunk", block)
            updates.append(last)
        return updates

    def _replay_assistant(self, blocks: Sequence[AssistantContent]) -> list[dict[str, Any]]:
        updates: list[dict[str, Any]] = []
        for block in blocks:
            if isinstance(block, TextContent) and block.text:
                updates.append(_chunk("agent_message_chunk", _text(block.text)))
            elif isinstance(block, ThinkingContent) and block.thinking:
                updates.append(_chunk("agent_thought_chunk", _text(block.thinking)))
            elif isinstance(block, ToolCall):
                fields = self._call_fields(block.id, block.name, block.arguments)
                updates.append({"sessionUpdate": "tool_call", **fields, "status": "pending"})
        return updates


def _started_process(result: ToolResultMessage) -> int | None:
    """The id of the background process this call started, while it runs (None for any
    other result: a ``process_output`` result names a process too, not one it started)."""
    details = result.details
    process = details.get("process") if isinstance(details, dict) else None
    if result.is_error or not isinstance(process, dict) or process.get("state") != "running" \
            or process.get("toolCallId") != result.tool_call_id:
        return None
    process_id = process.get("id")
    return process_id if isinstance(process_id, int) else None


def _is_user_text(update: dict[str, Any] | None) -> bool:
    return (update is not None and update.get("sessionUpdate") == "user_message_chunk"
            and update["content"].get("type") == "text")


def replay_blocks(content: str | Sequence[UserContent]) -> list[dict[str, Any]]:
    """User content as the ACP blocks that replay it: text and image blocks."""
    if isinstance(content, str):
        return [_text(content)]
    return [_text(block.text) if isinstance(block, TextContent) else _image(block)
            for block in content]


def prompt_message(blocks: list[dict[str, Any]], content: str | list[UserContent]) -> UserMessage:
    """The user message of an ACP prompt: ``content`` is what the model reads (``blocks``
    through ``user_content``, a ``/name`` command expanded); the client's ``blocks`` are kept
    as ``acp_content`` when replaying ``content`` would not give them back (a ``resource`` or
    ``resource_link``, an expanded command, fields Tiller does not read), so ``session/load``
    replays what the client sent."""
    message = UserMessage(content=content)
    if replay_blocks(message.content) != blocks:
        message.acp_content = blocks
    return message


def failure_chunks(message: AssistantMessage) -> list[dict[str, Any]]:
    """For a model call that failed (``stopReason: "error"``), its ``errorMessage`` as an
    ``agent_message_chunk`` (``Error: …``, after a blank line when the call had streamed text),
    so every client shows why in the conversation; [] for any other message."""
    if message.stop_reason != "error":
        return []
    streamed = any(isinstance(block, TextContent) and block.text for block in message.content)
    reason = message.error_message or "the model call failed"
    text = ("\n\n" if streamed else "") + f"Error: {reason}"
    return [_chunk("agent_message_chunk", _text(text))]


def user_content(blocks: list[dict[str, Any]]) -> list[UserContent]:
    """An ACP prompt (content blocks) as Tiller user content.

    ``text`` and ``image`` map directly; a ``resource_link`` becomes a Markdown link the model can
    follow with its tools; an embedded ``resource`` becomes its text wrapped in a ``<resource
    uri=...>`` element (an image blob becomes an image, another blob a one-line note). Raises
    ValueError for ``audio`` (not advertised), unknown block types and a block without what
    the schema requires of it (``text``; ``data`` and ``mimeType``; ``uri``; ``resource`` with
    its ``uri``), each a string."""
    content: list[UserContent] = []
    for index, block in enumerate(blocks):
        kind = block.get("type")
        where = f"prompt[{index}]: the {kind} block"
        if kind == "text":
            content.append(TextContent(text=_string(block, "text", where)))
        elif kind == "image":
            content.append(ImageContent(data=_string(block, "data", where),
                                        mime_type=_string(block, "mimeType", where)))
        elif kind == "resource_link":
            uri = _string(block, "uri", where)
            name = block.get("title") or block.get("name") or uri
            content.append(TextContent(text=f"[{name}]({uri})"))
        elif kind == "resource":
            resource = block.get("resource")
            if not isinstance(resource, dict):
                raise ValueError(f"{where} needs 'resource', an object")
            _string(resource, "uri", f"{where}'s resource")
            content.append(_embedded(resource))
        else:
            raise ValueError(f"prompt[{index}]: content of type {kind!r} is not supported")
    return content


def _string(block: dict[str, Any], name: str, where: str) -> str:
    """``block[name]``, a string; else a ValueError saying ``where`` needs it."""
    value = block.get(name)
    if not isinstance(value, str):
        raise ValueError(f"{where} needs {name!r}, a string")
    return value


def _embedded(resource: dict[str, Any]) -> UserContent:
    uri, mime = str(resource.get("uri", "")), str(resource.get("mimeType") or "")
    if isinstance(resource.get("text"), str):
        return TextContent(text=f'<resource uri="{uri}">\n{resource["text"]}\n</resource>')
    blob = resource.get("blob")
    if isinstance(blob, str) and mime.startswith("image/"):
        return ImageContent(data=blob, mime_type=mime)
    return TextContent(text=f'<resource uri="{uri}" mimeType="{mime}">(binary content not '
                            "shown)</resource>")
