"""The closed word lists a session is configured with (and the tools' kinds), as plain
``Literal``s and tuples, and the timestamp unit and the compaction summary's prefix.

Each is spelled once, here, with its values in documentation order; ``tiller.types`` re-exports
them. This module imports nothing of ours, so start-up (``tiller.config``, answering
``initialize``) and the session log (``tiller.store.log``) use them without loading pydantic or the
models.
"""

from __future__ import annotations

import time
from typing import Literal, get_args

__all__ = [
    "ESCALATIONS",
    "HOOK_EVENTS",
    "PERMISSION_MODES",
    "QUEUE_MODES",
    "SANDBOX_MODES",
    "SUMMARY_PREFIX",
    "THINKING_LEVELS",
    "Escalation",
    "HookEventName",
    "HookOutcome",
    "PermissionMode",
    "QueueMode",
    "SandboxMode",
    "ThinkingLevel",
    "ToolKind",
    "Verdict",
    "now_ms",
]

ThinkingLevel = Literal["off", "low", "medium", "high", "xhigh", "max"]
"""How hard a reasoning model should think, weakest first; each provider maps it to its own
knob, and a level the model lacks to its nearest (``tiller.providers.levels``)."""
THINKING_LEVELS: tuple[ThinkingLevel, ...] = get_args(ThinkingLevel)

PermissionMode = Literal["ask", "acceptEdits", "auto", "readonly"]
"""A session's permission policy (protocol.md, "Permissions"; ``tiller.gate.permissions``)."""
PERMISSION_MODES: tuple[PermissionMode, ...] = get_args(PermissionMode)

HookEventName = Literal["PreToolUse", "PostToolUse", "PostToolBatch", "UserPromptSubmit", "Stop",
                        "SessionStart", "PreCompact"]
"""The hook events Tiller runs, by Claude Code's names (protocol.md, "Hooks"; tiller.hooks)."""
HOOK_EVENTS: tuple[HookEventName, ...] = get_args(HookEventName)
HookOutcome = Literal["ok", "blocked", "error", "timeout"]
"""How a hook command ended (``hook_end``'s ``outcome``)."""

SandboxMode = Literal["workspace-write", "read-only", "off", "required"]
"""Where a session's commands run (protocol.md, "Sandbox"; ``tiller.sandbox``): writes in the
workspace only, no writes at all, unsandboxed, or the workspace-write sandbox or nothing."""
SANDBOX_MODES: tuple[SandboxMode, ...] = get_args(SandboxMode)

Escalation = Literal["network", "unsandboxed"]
"""What a command asks for beyond its session's sandbox (``bash``'s ``escalate``)."""
ESCALATIONS: tuple[Escalation, ...] = get_args(Escalation)

QueueMode = Literal["one-at-a-time", "all"]
"""How a steering or follow-up queue is polled: one message per poll, or drained."""
QUEUE_MODES: tuple[QueueMode, ...] = get_args(QueueMode)

Verdict = Literal["allow", "deny", "ask"]
"""What the permission gate decides for one tool call (``tiller.gate.permissions``)."""

ToolKind = Literal["read", "edit", "execute", "search", "think", "other"]
"""What a tool does, in ACP's words (a subset of ACP's ``ToolKind``; ``tiller.tools.base``)."""

SUMMARY_PREFIX = "[Summary of the earlier conversation, which was compacted]\n\n"
"""How a compaction's summary starts the user message that replaces what it summarized (the
agent writes it, the log's replay rebuilds it)."""


def now_ms() -> int:
    """Milliseconds since the epoch, the timestamp unit of every message and log entry."""
    return int(time.time() * 1000)
