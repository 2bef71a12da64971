"""The server-to-client requests of the protocol (protocol.md, "Requests (server → client)"):
``client/requestPermission``, the editor's files, an MCP server's questions (``client/elicit``)
and a URL to open (``client/openUrl``); re-exported by tiller.protocol.models."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from tiller.protocol.sandbox import SandboxUseModel
from tiller.types import WireModel

__all__ = [
    "CommandPreview",
    "DiffPreview",
    "ElicitAction",
    "ElicitParams",
    "ElicitResult",
    "NoPreview",
    "OpenUrlParams",
    "PathPreview",
    "PermissionOutcome",
    "PermissionPreview",
    "ReadTextFileParams",
    "ReadTextFileResult",
    "RequestPermissionParams",
    "RequestPermissionResult",
    "WriteTextFileParams",
]


PermissionOutcome = Literal["allowOnce", "allowAlways", "rejectOnce", "rejectAlways"]


class DiffPreview(WireModel):
    kind: Literal["diff"] = "diff"
    path: str
    diff: str = Field(description="a unified diff of the file change")


class CommandPreview(WireModel):
    kind: Literal["command"] = "command"
    command: str
    cwd: str
    sandbox: SandboxUseModel | None = Field(
        default=None, description="how the command runs if allowed (absent: no sandbox "
        "in this server)")


class PathPreview(WireModel):
    kind: Literal["path"] = "path"
    path: str


class NoPreview(WireModel):
    kind: Literal["none"] = "none"


PermissionPreview = Annotated[
    DiffPreview | CommandPreview | PathPreview | NoPreview, Field(discriminator="kind")
]


class RequestPermissionParams(WireModel):
    session_id: str
    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    preview: PermissionPreview
    reason: str
    options: list[PermissionOutcome]
    parent_session_id: str | None = Field(
        default=None, description="a subagent's session: the session whose task call started it")
    parent_tool_call_id: str | None = Field(
        default=None, description="a subagent's session: the parent's task call")


class RequestPermissionResult(WireModel):
    outcome: PermissionOutcome
    reason: str | None = None


class ReadTextFileParams(WireModel):
    session_id: str
    path: str
    line: int | None = Field(default=None, description="1-based first line")
    limit: int | None = Field(default=None, description="how many lines")


class ReadTextFileResult(WireModel):
    content: str


class WriteTextFileParams(WireModel):
    session_id: str
    path: str
    content: str


ElicitAction = Literal["accept", "decline", "cancel"]


class ElicitParams(WireModel):
    """An MCP server's ``elicitation/create``: in ``form`` mode ``requestedSchema`` says the
    fields to fill, in ``url`` mode ``url`` the page to open."""

    session_id: str
    server: str = Field(description="the MCP server that asks")
    tool_call_id: str | None = Field(default=None, description="the tool call it asks during")
    mode: Literal["form", "url"]
    message: str
    requested_schema: dict[str, Any] | None = Field(
        default=None,
        description="form mode: a flat JSON Schema object of the fields (MCP's subset)")
    url: str | None = Field(default=None, description="url mode: the page to open")
    elicitation_id: str | None = Field(default=None, description="url mode: the server's id")


class ElicitResult(WireModel):
    action: ElicitAction
    content: dict[str, str | int | float | bool | list[str]] | None = Field(
        default=None, description="the form's values (accept, form mode only)")


class OpenUrlParams(WireModel):
    session_id: str
    server: str = Field(description="the MCP server the URL signs in to")
    url: str
    reason: str = Field(description="what opening it is for, to show the user")
