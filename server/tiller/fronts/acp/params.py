"""ACP's params and results as Tiller reads and answers them (pydantic, camelCase on the wire),
and ACP's own error codes. Only what Tiller uses is modelled; ACP's schema is the reference
(tests check every message against it)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from tiller.errors import RequestError, ResourceNotFoundError, UnknownSessionError
from tiller.modes import PermissionMode
from tiller.types import PathText, WireModel


def acp_error(error: RequestError) -> RequestError:
    """Tiller's errors in ACP's terms: an unknown session is ACP's resource-not-found."""
    if isinstance(error, UnknownSessionError):
        return ResourceNotFoundError(error.message, error.data)
    return error


class AcpInitializeParams(WireModel):
    protocol_version: int
    client_capabilities: dict[str, Any] = Field(default_factory=dict)
    client_info: dict[str, Any] | None = None


class AcpNewSessionParams(WireModel):
    cwd: PathText
    mcp_servers: list[Any] = Field(default_factory=list)
    additional_directories: list[PathText] = Field(default_factory=list)


class AcpLoadSessionParams(WireModel):
    session_id: str
    cwd: PathText | None = None
    mcp_servers: list[Any] = Field(default_factory=list)
    additional_directories: list[PathText] = Field(default_factory=list)


class AcpPromptParams(WireModel):
    session_id: str
    prompt: list[dict[str, Any]]


class AcpSessionParams(WireModel):
    session_id: str


class AcpSetModeParams(WireModel):
    session_id: str
    mode_id: PermissionMode


class AcpFollowUpParams(WireModel):
    session_id: str
    prompt: str | list[dict[str, Any]]


class AcpCancelRequestParams(WireModel):
    request_id: int | str | None = None


class AcpInitializeResult(WireModel):
    protocol_version: int
    agent_capabilities: dict[str, Any]
    agent_info: dict[str, Any]
    auth_methods: list[Any] = Field(default_factory=list)
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class AcpSessionResult(WireModel):
    session_id: str | None = None
    modes: dict[str, Any]
    config_options: list[dict[str, Any]] | None = None


class AcpPromptResult(WireModel):
    stop_reason: str
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class AcpAuthenticateParams(WireModel):
    method_id: str


class AcpListParams(WireModel):
    cwd: PathText | None = None
    cursor: str | None = None


class AcpResumeParams(AcpLoadSessionParams):
    """``session/resume`` takes what ``session/load`` takes."""


class AcpSetConfigParams(WireModel):
    session_id: str
    config_id: str
    value: str | bool
    type: str | None = None


class AcpListResult(WireModel):
    sessions: list[dict[str, Any]]
    next_cursor: str | None = None


class AcpConfigResult(WireModel):
    config_options: list[dict[str, Any]]


class AcpSteeringParams(WireModel):
    """``_session/steering`` (the Claude Code and Codex ACP adapters' extension)."""

    session_id: str
    prompt: list[dict[str, Any]]
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class AcpSteeringResult(WireModel):
    outcome: str
    reason: str | None = None
