"""The server-to-client requests of the protocol (protocol.md, "Requests (server → client)"):
``client/requestPermission``, the editor's files, an MCP server's questions (``client/elicit``),
a URL to open (``client/openUrl``) and the editor's diagnostics (``client/getDiagnostics``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from tiller.protocol.sandbox import SandboxUseModel
from tiller.types import WireModel

__all__ = [
    "CommandPreview",
    "DiagnosticItem",
    "DiagnosticSeverity",
    "DiffPreview",
    "ElicitAction",
    "ElicitParams",
    "ElicitResult",
    "FileDiagnostics",
    "GetDiagnosticsParams",
    "GetDiagnosticsResult",
    "HooksPreview",
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


class HooksPreview(WireModel):
    """A workspace's hook file to trust (protocol.md, "Hooks")."""

    kind: Literal["hooks"] = "hooks"
    file: str = Field(description="the settings file, relative to the workspace")
    commands: list[str] = Field(description="each hook: its event, matcher and command")


PermissionPreview = Annotated[
    DiffPreview | CommandPreview | PathPreview | NoPreview | HooksPreview,
    Field(discriminator="kind"),
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


DiagnosticSeverity = Literal["error", "warning", "information", "hint"]


class GetDiagnosticsParams(WireModel):
    """The editor's diagnostics of ``paths``, once its language servers have caught up with
    each file's text (at most ``timeoutMs``)."""

    session_id: str
    tool_call_id: str | None = Field(default=None, description="the tool call that changes "
                                     "(or changed) the files")
    paths: list[str] = Field(description="absolute paths")
    timeout_ms: int = Field(description="answer within this many milliseconds, with what "
                            "the editor has by then")


class DiagnosticItem(WireModel):
    """One problem the editor reports in a file (1-based line and column)."""

    line: int = Field(ge=1)
    column: int | None = Field(default=None, ge=1)
    end_line: int | None = Field(default=None, ge=1)
    end_column: int | None = Field(default=None, ge=1)
    severity: DiagnosticSeverity
    message: str
    source: str | None = Field(default=None, description="who reports it: a language "
                               "server, a linter (\"Pylance\", \"ts\", \"ruff\")")
    code: str | int | None = None


class FileDiagnostics(WireModel):
    path: str
    diagnostics: list[DiagnosticItem]


class GetDiagnosticsResult(WireModel):
    files: list[FileDiagnostics] = Field(description="one entry per path asked for; a path "
                                         "left out has no diagnostics")
