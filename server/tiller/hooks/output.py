"""What a hook command said, by Claude Code's rules: its exit code, then its JSON or text.

- Exit code 2 blocks: its stderr is the reason (PreToolUse: the call is not run, the model reads
  the reason; UserPromptSubmit: the prompt is refused; Stop: the agent goes on with it;
  PostToolUse and PostToolBatch: the model reads it). SessionStart and PreCompact cannot block:
  there it is an error.
- Exit code 0 with a JSON object on stdout: ``decision: "block"`` and ``reason``;
  ``hookSpecificOutput.permissionDecision`` (``allow``, ``deny``, ``ask``) with
  ``permissionDecisionReason``; ``hookSpecificOutput.additionalContext`` (or, for
  UserPromptSubmit and SessionStart, plain text on stdout) for the model; ``continue: false``
  with ``stopReason``; ``systemMessage`` for the user.
- Any other exit code is an error that blocks nothing: its stderr is reported.
"""

from __future__ import annotations

from typing import Any, Literal

from tiller import jsontext
from tiller.frozen import frozen
from tiller.modes import HookEventName, HookOutcome
from tiller.procs import CommandOutcome

__all__ = ["MESSAGE_LIMIT", "HookReply", "interpret"]

MESSAGE_LIMIT = 500
"""Characters of a reason or an error output shown in ``hook_end``."""
_CAN_BLOCK = frozenset({"PreToolUse", "UserPromptSubmit", "Stop", "PostToolUse",
                        "PostToolBatch"})
_TEXT_IS_CONTEXT = frozenset({"UserPromptSubmit", "SessionStart"})
Decision = Literal["block", "allow", "ask"]


@frozen
class HookReply:
    """One command's verdict: ``decision`` (``block`` covers ``deny``) with ``reason``;
    ``context`` for the model; ``stop`` the reason of a ``continue: false``; ``message`` what
    ``hook_end`` shows."""

    outcome: HookOutcome
    exit_code: int | None = None
    decision: Decision | None = None
    reason: str | None = None
    context: str | None = None
    stop: str | None = None
    message: str | None = None


def _short(text: str | None) -> str | None:
    text = (text or "").strip()
    if not text:
        return None
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT - 1] + "…"


def _string(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def interpret(event: HookEventName, outcome: CommandOutcome, timeout: float) -> HookReply:
    """The reply of a command that ran for ``event`` with ``timeout`` seconds."""
    if outcome.timed_out:
        return HookReply("timeout", message=f"timed out after {timeout:g} seconds; it was killed")
    if outcome.error is not None or outcome.exit_code is None:
        return HookReply("error", message=outcome.error or "it did not finish")
    code = outcome.exit_code
    if code == 2:
        reason = outcome.stderr.strip() or "a hook blocked it (exit code 2, no reason given)"
        if event not in _CAN_BLOCK:
            return HookReply("error", code, message=_short(reason))
        return HookReply("blocked", code, decision="block", reason=reason, message=_short(reason))
    if code != 0:
        return HookReply("error", code, message=_short(outcome.stderr) or f"exit code {code}")
    stdout = outcome.stdout.strip()
    if stdout.startswith("{"):
        try:
            data = jsontext.loads(stdout)
        except ValueError:
            data = None
        if isinstance(data, dict):
            return _from_json(event, data)
    if event in _TEXT_IS_CONTEXT and stdout:
        return HookReply("ok", 0, context=stdout, message=_short(stdout))
    return HookReply("ok", 0)


def _from_json(event: HookEventName, data: dict[str, Any]) -> HookReply:
    specific = data.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    decision: Decision | None = None
    reason = _string(data.get("reason"))
    if data.get("decision") == "block":
        decision = "block"
    elif data.get("decision") == "approve" and event == "PreToolUse":  # the older spelling
        decision = "allow"
    permission = specific.get("permissionDecision")
    if event == "PreToolUse" and permission in ("allow", "deny", "ask"):
        decision = "block" if permission == "deny" else permission
        reason = _string(specific.get("permissionDecisionReason")) or reason
    stop = None
    if data.get("continue") is False:
        stop = _string(data.get("stopReason")) or "a hook asked to stop"
    if decision == "block" and event not in _CAN_BLOCK:
        decision = None
    if decision == "block" and reason is None:
        reason = "a hook blocked it (no reason given)"
    context = _string(specific.get("additionalContext"))
    shown = reason if decision else None
    message = _short(_string(data.get("systemMessage")) or stop or shown or context)
    outcome: HookOutcome = "blocked" if decision == "block" else "ok"
    return HookReply(outcome, 0, decision, reason, context, stop, message)
