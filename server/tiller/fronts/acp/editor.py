"""The ACP client as Tiller's editor: ``client/*`` requests translated to ACP's.

Tiller's sessions talk to "the editor" through one ``ClientRequest`` callable (tiller.gate.editor):
``client/readTextFile``, ``client/writeTextFile`` and ``client/requestPermission``. In ACP mode
that callable is ``AcpEditorBridge``: the file requests become ``fs/read_text_file`` and
``fs/write_text_file`` (same params, same results), and a permission question becomes
``session/request_permission`` with the call as an ACP ``toolCall`` and four options:

=================  =================  =========================================
ACP option id      ACP kind           Tiller outcome
=================  =================  =========================================
``allow_once``     ``allow_once``     ``allowOnce``
``allow_always``   ``allow_always``   ``allowAlways`` (remembered, see below)
``reject_once``    ``reject_once``    ``rejectOnce``
``reject_always``  ``reject_always``  ``rejectAlways``
=================  =================  =========================================

An MCP server's question (``client/elicit``) becomes ACP's ``elicitation/create``, scoped to the
session and the tool call it came during, the server's name in ``_meta.tiller.server``; a
URL-mode one without the server's id gets one of Tiller's (ACP requires it). The answer (accept
with content, decline, cancel) is the same shape in both. ``client/openUrl`` has no ACP
counterpart: the front does not declare it, so a sign-in URL goes out as a URL-mode elicitation.

The ``cancelled`` outcome (the client's answer to ``session/cancel``) is a rejection. Answers
"always" are remembered by Tiller's PermissionGate per session: for file tools per tool and
path, for a command tool (``bash``) per exact simple command (tiller.gate.shell); the
option names say so, reading the call's command or path as its tool describes them
(``tiller.tools.base.ToolInfo``).

``read_snapshot`` gives a file's current text the way the tools see it (the editor's buffer when
it can read files, else the disk), for the diffs of tiller.fronts.acp.diff.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from tiller.errors import ToolError
from tiller.fronts.acp.diff import diff_contents
from tiller.fronts.acp.updates import tool_call_fields
from tiller.frozen import frozen
from tiller.protocol.sandbox import describe_use
from tiller.tools.base import EditorFiles, Tool, ToolInfo, describe

__all__ = [
    "AcpEditorBridge",
    "BridgedSession",
    "acp_elicitation",
    "permission_options",
    "read_snapshot",
    "tiller_outcome",
]

Send = Callable[[str, dict[str, Any], float], Awaitable[Any]]
"""``await send(acp_method, params, timeout)``: one request to the ACP client."""

FILE_METHODS = {
    "client/readTextFile": "fs/read_text_file",
    "client/writeTextFile": "fs/write_text_file",
}
OUTCOMES = {
    "allow_once": "allowOnce",
    "allow_always": "allowAlways",
    "reject_once": "rejectOnce",
    "reject_always": "rejectAlways",
}


def permission_options(tool: str, args: dict[str, Any], info: ToolInfo) -> list[dict[str, Any]]:
    """ACP's four permission options; the "always" names say what will be remembered: the
    command of a command tool, else the tool on the call's file (``info``: how the tool
    describes itself)."""
    command = info.command(args)
    if command is not None and command.strip():
        shown = " ".join(command.split())
        scope = f"`{shown if len(shown) <= 60 else shown[:59] + '…'}`"
    else:
        path = args.get(info.path_arg) if info.path_arg is not None else None
        scope = f"{tool} on {Path(path).name}" if isinstance(path, str) and path else tool
    names = {
        "allow_once": "Allow once",
        "allow_always": f"Always allow {scope}",
        "reject_once": "Reject",
        "reject_always": f"Always reject {scope}",
    }
    return [{"optionId": key, "name": name, "kind": key} for key, name in names.items()]


def tiller_outcome(answer: Any) -> dict[str, Any]:
    """The ``client/requestPermission`` result for an ACP ``session/request_permission`` answer.
    A ``cancelled`` outcome is a rejection; a malformed answer yields ``outcome: None``, which
    Tiller's ClientPermissions reports as an unknown outcome (also a rejection)."""
    outcome = answer.get("outcome") if isinstance(answer, dict) else None
    if not isinstance(outcome, dict):
        return {"outcome": None}
    if outcome.get("outcome") == "cancelled":
        return {"outcome": "rejectOnce", "reason": "the permission request was cancelled"}
    if outcome.get("outcome") == "selected":
        return {"outcome": OUTCOMES.get(str(outcome.get("optionId")))}
    return {"outcome": None}


def acp_elicitation(params: dict[str, Any]) -> dict[str, Any]:
    """ACP's ``elicitation/create`` params for Tiller's ``client/elicit`` ones."""
    asked: dict[str, Any] = {"sessionId": params.get("sessionId"), "mode": params.get("mode"),
                             "message": params.get("message", "")}
    if params.get("toolCallId"):
        asked["toolCallId"] = params["toolCallId"]
    if params.get("mode") == "form":
        asked["requestedSchema"] = params.get("requestedSchema") or {"type": "object",
                                                                     "properties": {}}
    else:
        asked["url"] = params.get("url", "")
        asked["elicitationId"] = params.get("elicitationId") or f"tiller-{uuid.uuid4().hex}"
    asked["_meta"] = {"tiller": {"server": params.get("server")}}
    return asked


async def read_snapshot(files: EditorFiles | None, path: Path) -> tuple[bool, str | None]:
    """``(taken, text)``: the file's text now (None if it does not exist), through the editor
    when it can read files (falling back to the disk when it fails, e.g. for a new file);
    ``taken`` is False when it could not be read at all. Never raises."""
    if files is not None and files.can_read:
        try:
            return True, await files.read_text(path)
        except ToolError:
            pass
    try:
        target = anyio.Path(path)
        if not await target.is_file():
            return (False, None) if await target.exists() else (True, None)
        return True, await target.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False, None


@frozen
class BridgedSession:
    """What the bridge needs of a session: its cwd, its EditorFiles (for snapshots) and its
    tools (whose descriptions title the calls it asks about)."""

    cwd: Path
    files: EditorFiles | None
    tools: Sequence[Tool[Any]]


@dataclass
class AcpEditorBridge:
    """A ``ClientRequest`` (tiller.gate.editor) that speaks ACP. ``send`` reaches the client;
    ``session_info(session_id)`` gives the session as the bridge needs it."""

    send: Send
    session_info: Callable[[str], BridgedSession]

    async def __call__(self, method: str, params: dict[str, Any], timeout: float) -> Any:
        """Forward one Tiller ``client/*`` request as its ACP counterpart; the answer (or the
        failure) comes back as tiller.gate.editor expects it."""
        if method == "client/requestPermission":
            return await self._request_permission(params, timeout)
        if method == "client/elicit":
            return await self.send("elicitation/create", acp_elicitation(params), timeout)
        acp_method = FILE_METHODS.get(method)
        if acp_method is None:
            raise ToolError(f"{method} has no ACP counterpart")
        return await self.send(acp_method, params, timeout)

    async def _request_permission(self, params: dict[str, Any], timeout: float) -> Any:
        session_id = str(params.get("sessionId", ""))
        name, args = str(params.get("toolName", "")), params.get("args") or {}
        session = self.session_info(session_id)
        info = describe(session.tools, name)
        call_id = str(params.get("toolCallId", ""))
        content = await self._preview_content(params, session.files)
        parent, task_call = params.get("parentSessionId"), params.get("parentToolCallId")
        if isinstance(parent, str) and isinstance(task_call, str):
            # A subagent's call: the client knows only the parent's task call. Asked about as
            # that call, its title and kind kept; the content says what the subagent would do.
            asks = {"type": "content", "content": {
                "type": "text", "text": f"A subagent asks to run: {info.call_title(name, args)}"}}
            session_id, tool_call = parent, {"toolCallId": task_call,
                                             "content": [asks, *content]}
        else:
            tool_call = {**tool_call_fields(call_id, name, args, session.cwd, info),
                         "status": "pending"}
            if content:
                tool_call["content"] = content
        question = {"sessionId": session_id, "toolCall": tool_call,
                    "options": permission_options(name, args, info)}
        return tiller_outcome(await self.send("session/request_permission", question, timeout))

    async def _preview_content(
        self, params: dict[str, Any], files: EditorFiles | None
    ) -> list[dict[str, Any]]:
        """What the user should see: the file change as a diff, the full command, the hooks to
        trust with the reason, or else the gate's reason for asking (e.g. a path outside the
        workspace)."""
        preview = params.get("preview") or {}
        kind = preview.get("kind")
        if kind == "diff" and isinstance(preview.get("diff"), str):
            path = str(preview.get("path", ""))
            taken, snapshot = await read_snapshot(files, Path(path))
            return diff_contents(path, preview["diff"], snapshot, have_snapshot=taken)
        if kind == "command":
            command = str(preview.get("command", ""))
            text = f"```sh\n{command}\n```\nin {preview.get('cwd', '')}"
            if isinstance(sandbox := preview.get("sandbox"), Mapping):
                text += f"\n{describe_use(sandbox)}"
            return [{"type": "content", "content": {"type": "text", "text": text}}]
        reason = params.get("reason")
        reason = reason if isinstance(reason, str) and reason else ""
        if kind == "hooks" and isinstance(commands := preview.get("commands"), list):
            listed = "\n".join(str(command) for command in commands)
            text = f"{reason}\n```sh\n{listed}\n```".strip()
            return [{"type": "content", "content": {"type": "text", "text": text}}]
        if reason:
            return [{"type": "content", "content": {"type": "text", "text": reason}}]
        return []
