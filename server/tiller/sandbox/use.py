"""How one command runs (``SandboxUse``): sandboxed or not, with or without network, and why;
what the permission question, the tool's updates and its result say about it."""

from __future__ import annotations

import re
from typing import Any, Literal

from tiller.frozen import frozen
from tiller.modes import Escalation

__all__ = ["RunsIn", "SandboxUse", "failure_note"]

RunsIn = Literal["workspace-write", "read-only", "off"]
"""The sandbox a command runs in; ``off``: none."""


@frozen
class SandboxUse:
    """How one command runs. ``runs_in``: the sandbox (``off``: unsandboxed); ``network``: it
    has the network (always, unsandboxed); ``escalated``: what the command asked for beyond
    the session's sandbox (``bash``'s ``escalate``), None when it asked for nothing or nothing
    more was needed; ``reason``: why it runs this way when it is not the session's plain
    sandbox (the model's reason for an escalation, or why there is no sandbox); ``refused``:
    set when the command must not run at all (the sandbox is required and cannot be had),
    saying why."""

    runs_in: RunsIn
    network: bool
    escalated: Escalation | None = None
    reason: str | None = None
    refused: str | None = None

    @property
    def sandboxed(self) -> bool:
        return self.runs_in != "off"

    @property
    def level(self) -> int:
        """How much the command may do: 0 sandboxed without network, 1 sandboxed with network,
        2 unsandboxed. A remembered "always" at one level covers the levels below it."""
        if not self.sandboxed:
            return 2
        return 1 if self.network else 0

    def wire(self) -> dict[str, Any]:
        """protocol.md's ``SandboxUse``: ``{mode, network, escalated?, reason?}``."""
        found: dict[str, Any] = {"mode": self.runs_in, "network": self.network}
        if self.escalated is not None:
            found["escalated"] = self.escalated
        if self.reason:
            found["reason"] = self.reason
        return found

    def describe(self) -> str:
        """One line for people: ``sandboxed (workspace-write, no network)``, ``unsandboxed:
        <why>``."""
        if self.sandboxed:
            network = "network" if self.network else "no network"
            asked = f"; asked for network: {self.reason}" if self.escalated else ""
            return f"sandboxed ({self.runs_in}, {network}{asked})"
        asked = "asked to run outside the sandbox" if self.escalated else "unsandboxed"
        return f"{asked}: {self.reason}" if self.reason else asked


_READ_ONLY = re.compile(r"read-only file system|EROFS", re.IGNORECASE)
_NO_NETWORK = re.compile(
    r"network is unreachable|temporary failure in name resolution|could not resolve host|"
    r"name or service not known|no address associated with hostname|getaddrinfo|"
    r"failed to establish a new connection|ENETUNREACH|EAI_AGAIN|connection refused|"
    r"could not connect to server|couldn't connect to server|nodename nor servname",
    re.IGNORECASE)


def failure_note(output: str, use: SandboxUse, may_escalate: bool) -> str | None:
    """What to tell the model after a sandboxed command failed, when its output shows the
    sandbox stopped it (a read-only file system, no network); None otherwise.
    ``may_escalate``: asking to escalate can succeed in this session (else it is refused)."""
    if not use.sandboxed:
        return None
    found = []
    if _READ_ONLY.search(output):
        where = "in the workspace and /tmp" if use.runs_in == "workspace-write" else "in /tmp"
        found.append(f"read-only file system: the sandbox allows writes only {where}")
    if not use.network and _NO_NETWORK.search(output):
        found.append("no network: the sandbox has none (nor the machine's local services)")
    if not found:
        return None
    if may_escalate:
        wanted = ('escalate: "network"' if len(found) == 1 and found[0].startswith("no network")
                  else 'escalate: "unsandboxed"')
        advice = (f"if this is needed, run it again with {wanted} and a reason (the user may "
                  "be asked to allow it)")
    else:
        advice = ("this session does not let commands leave the sandbox: do it another way, "
                  "or tell the user what is needed")
    return f"[Sandbox: {'; '.join(found)}; {advice}.]"
