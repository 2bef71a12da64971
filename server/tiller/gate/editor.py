"""The editor as a resource: file access and permission questions over server-to-client requests.

``ClientRequest`` sends one request to the client and awaits its answer (raising on an error
response, a timeout, or cancellation after telling the client with ``$/cancelRequest``). The
classes here adapt it to the interfaces the tools and the permission gate expect.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tiller.errors import ToolError
from tiller.gate.permissions import OPTIONS, Outcome, PermissionRequest

__all__ = ["ClientFiles", "ClientPermissions", "ClientRequest", "describe_error"]

ClientRequest = Callable[[str, dict[str, Any], float], Awaitable[Any]]
"""``await request(method, params, timeout)``: the client's result; raises on failure."""


@dataclass
class ClientFiles:
    """``EditorFiles`` through ``client/readTextFile`` and ``client/writeTextFile``."""

    request: ClientRequest
    session_id: str
    can_read: bool
    can_write: bool
    timeout: float = 30.0
    keeps_unsaved: bool = False

    async def read_text(
        self, path: Path, line: int | None = None, limit: int | None = None
    ) -> str:
        params: dict[str, Any] = {"sessionId": self.session_id, "path": str(path)}
        if line is not None:
            params["line"] = line
        if limit is not None:
            params["limit"] = limit
        try:
            result = await self.request("client/readTextFile", params, self.timeout)
        except Exception as exc:
            raise ToolError(f"the editor could not read {path}: {describe_error(exc)}") from exc
        content = result.get("content") if isinstance(result, dict) else None
        if not isinstance(content, str):
            raise ToolError(f"the editor answered client/readTextFile for {path} without content")
        return content

    async def write_text(self, path: Path, content: str) -> None:
        params = {"sessionId": self.session_id, "path": str(path), "content": content}
        try:
            await self.request("client/writeTextFile", params, self.timeout)
        except Exception as exc:
            raise ToolError(f"the editor could not write {path}: {describe_error(exc)}") from exc


@dataclass
class ClientPermissions:
    """Asks the user through ``client/requestPermission``; ``timeout`` seconds without an
    answer, or an error answer, raise ToolError (the gate treats it as a rejection)."""

    request: ClientRequest
    session_id: str
    timeout: float = 300.0
    extra: dict[str, str] = field(default_factory=dict)
    """More fields of every question: a child session's ``parentSessionId`` and
    ``parentToolCallId``."""

    async def __call__(self, question: PermissionRequest) -> tuple[Outcome, str | None]:
        params = {
            "sessionId": self.session_id,
            **self.extra,
            "toolCallId": question.tool_call_id,
            "toolName": question.tool_name,
            "args": question.args,
            "preview": question.preview,
            "reason": question.reason,
            "options": list(OPTIONS),
        }
        try:
            result = await self.request("client/requestPermission", params, self.timeout)
        except TimeoutError as exc:
            raise ToolError(f"no answer from the user within {self.timeout:g} seconds") from exc
        except Exception as exc:
            raise ToolError(f"the editor failed to ask: {describe_error(exc)}") from exc
        outcome = result.get("outcome") if isinstance(result, dict) else None
        if outcome not in OPTIONS:
            raise ToolError(f"the editor answered with an unknown outcome {outcome!r}")
        reason = result.get("reason")
        return outcome, reason if isinstance(reason, str) and reason else None


DETAIL_LIMIT = 500
"""Characters of an error answer's ``data`` kept in the message (the model reads it)."""


def describe_error(exc: BaseException) -> str:
    """What the client said when it failed a request: its error's message, and the detail
    its ``data`` carries (a string, an object's ``details``/``message``/``reason`` string, else
    the object as JSON, at most ``DETAIL_LIMIT`` characters), e.g. ``Internal error:
    Permission denied for fs/write_text_file``. A timeout is "no answer in time"."""
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    data = getattr(exc, "data", None)
    detail: str | None = None
    if isinstance(data, str):
        detail = data
    elif isinstance(data, dict):
        found = (data.get(key) for key in ("details", "message", "reason"))
        detail = next((value for value in found if isinstance(value, str) and value), None)
        if detail is None and data:
            detail = json.dumps(data, default=str, ensure_ascii=False)
    elif data is not None:
        detail = json.dumps(data, default=str, ensure_ascii=False)
    detail = (detail or "").strip()
    if not detail or detail in message:
        return message
    if len(detail) > DETAIL_LIMIT:
        detail = detail[: DETAIL_LIMIT - 1] + "…"
    return f"{message}: {detail}"


