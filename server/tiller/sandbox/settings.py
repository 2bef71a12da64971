"""A session's sandbox settings (``[sandbox]`` in the config file, ``--sandbox``,
``session/new``'s ``sandbox``): plain values, importable at start-up (no pydantic)."""

from __future__ import annotations

from tiller.frozen import frozen
from tiller.modes import SandboxMode

__all__ = ["DEFAULT_HIDDEN", "SandboxSettings"]

DEFAULT_HIDDEN: tuple[str, ...] = (
    "~/.ssh", "~/.gnupg", "~/.aws", "~/.azure", "~/.config/gcloud", "~/.config/gh",
    "~/.kube", "~/.docker", "~/.netrc", "~/.git-credentials", "~/.npmrc", "~/.pypirc",
    "~/.password-store", "~/.local/share/keyrings",
)
"""Secrets folders and files a sandboxed command does not see (``[sandbox] hidden``)."""


@frozen
class SandboxSettings:
    """How a session's commands are sandboxed.

    ``mode``: ``workspace-write`` (the default: writes only in the workspace roots, ``writable``
    and a private ``/tmp``), ``read-only`` (writes only in the private ``/tmp``), ``off``
    (unsandboxed), ``required`` (``workspace-write``, and a command that cannot run in it is
    refused instead of running unsandboxed). ``network``: sandboxed commands keep the network.
    ``auto_allow``: in ``ask`` and ``acceptEdits`` a command that runs sandboxed without
    network runs without a question. ``auto_escalate``: in ``auto`` a command that asks to
    leave the sandbox (``escalate``) runs; by default it is refused. ``hidden``: paths (``~``
    allowed) sandboxed commands do not see; ``writable``: more writable folders."""

    mode: SandboxMode = "workspace-write"
    network: bool = False
    auto_allow: bool = True
    auto_escalate: bool = False
    hidden: tuple[str, ...] = DEFAULT_HIDDEN
    writable: tuple[str, ...] = ()

    @property
    def on(self) -> bool:
        """Commands are meant to run sandboxed (every mode but ``off``)."""
        return self.mode != "off"
