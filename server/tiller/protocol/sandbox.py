"""The sandbox part of the protocol (protocol.md, "Sandbox"): ``session/new``'s ``sandbox``,
``agent/getState``'s, and how one command runs (in the permission question's preview, the
``bash`` tool's updates and result details)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from tiller.modes import Escalation, SandboxMode
from tiller.types import WireModel

__all__ = ["SandboxParams", "SandboxState", "SandboxUseModel", "describe_use"]


class SandboxParams(WireModel):
    """A session's sandbox, as ``session/new`` asks for it (each field: the server's default
    when absent)."""

    mode: SandboxMode | None = None
    network: bool | None = Field(default=None,
                                 description="sandboxed commands keep the network")


class SandboxUseModel(WireModel):
    """How one command runs: ``mode`` ``off`` is unsandboxed."""

    mode: Literal["workspace-write", "read-only", "off"]
    network: bool
    escalated: Escalation | None = Field(
        default=None, description="what the command asked for beyond the session's sandbox")
    reason: str | None = Field(
        default=None, description="the model's reason for the escalation, or why there is "
        "no sandbox")


class SandboxState(WireModel):
    """A session's sandbox settings, whether this machine has the sandbox, and how a command
    (without ``escalate``) runs now."""

    mode: SandboxMode
    network: bool
    auto_allow: bool = Field(description="in ask and acceptEdits, a command that runs "
                             "sandboxed without network runs without a question")
    available: bool
    kind: str = Field(description="the sandbox used: bubblewrap")
    reason: str | None = Field(default=None, description="why the sandbox is unavailable")
    commands: SandboxUseModel


def describe_use(sandbox: Mapping[str, Any]) -> str:
    """How a command runs, from protocol.md's ``SandboxUse``: ``sandboxed (workspace-write, no
    network)``, ``unsandboxed: <reason>``; an escalation says what it asks for and why."""
    mode, reason = sandbox.get("mode"), sandbox.get("reason")
    if mode == "off":
        asked = "asks to run outside the sandbox" if sandbox.get("escalated") else "unsandboxed"
        return f"{asked}: {reason}" if reason else asked
    network = "network" if sandbox.get("network") else "no network"
    asked = f"; asks for network: {reason}" if sandbox.get("escalated") else ""
    return f"sandboxed ({mode}, {network}{asked})"
