"""``tiller chat``'s status: what the person should know at a glance, kept from events.

``Status`` follows the chat session's events (``observe``) and state (``set_state``, an
``agent/getState`` result) and says, as plain text: ``line()``, the status line shown above the
prompt (model, permission mode, session, tokens and cost, context use); ``activity(now)``, what
a running agent is doing with a spinner and the seconds it has been at it, a retry countdown,
or compaction; ``notice(event)``, the one-line report of a retry or a compaction to print. It
never writes anything itself: ``tiller.chat.render.Renderer`` shows what it says.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["SPINNER", "InputArea", "Status", "hook_line", "money", "remembered", "text_of",
           "tool_line"]

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class Status:
    """The chat session's status, from its events and ``agent/getState`` results."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.state: dict[str, Any] = {}
        self.windows: dict[tuple[str, str], int] = {}  # (provider, model) -> context window
        self.context_tokens = 0  # the input of the latest model call
        self.run_started: float | None = None
        self.retry_at: float | None = None  # when the scheduled retry starts
        self.retry: Mapping[str, Any] = {}
        self.compacting = False

    def set_models(self, models: Iterable[Mapping[str, Any]]) -> None:
        """Take the context windows of a ``models/list`` result's ``models``."""
        for model in models:
            if model.get("contextWindow"):
                self.windows[(str(model["provider"]), str(model["id"]))] = model["contextWindow"]

    def set_state(self, state: Mapping[str, Any]) -> None:
        self.state = dict(state)

    def switched(self, messages: Iterable[Mapping[str, Any]] = ()) -> None:
        """The chat moved to another session (new: no ``messages``; loaded: its messages): the
        context use is that session's, from its last assistant message's usage."""
        self.context_tokens = 0
        for message in messages:
            usage = message.get("usage") or {}
            if message.get("role") == "assistant" and usage.get("inputTokens"):
                self.context_tokens = int(usage["inputTokens"]) + int(
                    usage.get("cacheReadTokens", 0))

    def observe(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        now = self.clock()
        if kind == "agent_start":
            self.run_started = now
        elif kind == "agent_end":
            self.run_started = self.retry_at = None
            self.compacting = False
        elif kind == "retry_scheduled":
            self.retry = event
            self.retry_at = now + float(event.get("delayMs", 0)) / 1000
        elif kind in ("retry_end", "message_start"):
            self.retry_at = None
        elif kind == "compaction_start":
            self.compacting = True
        elif kind == "compaction_end":
            self.compacting = False
            if event.get("tokensAfter") is not None:
                self.context_tokens = int(event["tokensAfter"])
        elif kind == "message_end":
            message = event.get("message") or {}
            usage = message.get("usage") or {}
            if message.get("role") == "assistant" and usage.get("inputTokens"):
                self.context_tokens = int(usage["inputTokens"]) + int(
                    usage.get("cacheReadTokens", 0)
                )

    def line(self) -> str:
        """``model · mode · session · tokens · $cost · context %`` (what is known of it)."""
        state = self.state
        if not state:
            return ""
        parts = [f"{state.get('provider')}/{state.get('model')}"]
        if state.get("permissionMode"):
            parts.append(str(state["permissionMode"]))
        if state.get("sessionId"):
            parts.append(f"session {str(state['sessionId'])[:8]}")
        usage = state.get("usage") or {}
        tokens = int(usage.get("inputTokens", 0)) + int(usage.get("outputTokens", 0))
        parts.append(f"{tokens:,} tokens")
        parts.append(f"${float(usage.get('cost', 0.0)):.4f}")
        window = self.windows.get((str(state.get("provider")), str(state.get("model"))))
        if window and self.context_tokens:
            parts.append(f"context {100 * self.context_tokens / window:.0f}% of {window:,}")
        return " · ".join(parts)

    def activity(self, now: float | None = None) -> str:
        """What a running agent is doing: a retry countdown, compaction, or a spinner with the
        seconds so far; "" when no run is active."""
        if self.run_started is None:
            return ""
        now = self.clock() if now is None else now
        spin = SPINNER[int(now * 10) % len(SPINNER)]
        if self.retry_at is not None:
            left = max(0.0, self.retry_at - now)
            attempt, most = self.retry.get("attempt"), self.retry.get("maxAttempts")
            return f"{spin} retry {attempt}/{most} in {left:.0f}s"
        if self.compacting:
            return f"{spin} compacting the context…"
        return f"{spin} working · {now - self.run_started:.0f}s"

    @staticmethod
    def notice(event: Mapping[str, Any]) -> str | None:
        """The line to print for a retry, compaction or notice event; None for the others."""
        kind = event.get("type")
        if kind == "notice":
            return f"{'⚠' if event.get('level') == 'warning' else 'ℹ'} {event.get('message')}"
        if kind == "retry_scheduled":
            delay = float(event.get("delayMs", 0)) / 1000
            return (f"⟳ {event.get('errorMessage')}: retry {event.get('attempt')} of "
                    f"{event.get('maxAttempts')} in {delay:.0f}s")
        if kind == "retry_end":
            return "⟳ the retry worked" if event.get("success") else "⟳ retries exhausted"
        if kind == "hook_end":
            return hook_line(event)
        if kind == "compaction_start":
            return (f"⟳ compacting the context ({event.get('reason')}, "
                    f"{int(event.get('tokensBefore', 0)):,} tokens)…")
        if kind == "compaction_end":
            error = event.get("errorMessage")
            if error:
                return f"⟳ {error}" if error.startswith("nothing to compact") else (
                    f"⟳ compaction failed: {error}")
            return (f"⟳ compacted: {int(event.get('tokensBefore', 0)):,} → "
                    f"{int(event.get('tokensAfter') or 0):,} tokens, "
                    f"{event.get('removedCount', 0)} messages summarized")
        return None


_HOOK_OUTCOMES = {"ok": "ran", "blocked": "blocked", "error": "failed", "timeout": "timed out"}


def hook_line(event: Mapping[str, Any]) -> str | None:
    """The line for a ``hook_end``: what the hook did; None for one that ran quietly (ok, with
    nothing to say)."""
    outcome, message = event.get("outcome"), event.get("message")
    if outcome == "ok" and not message:
        return None
    said = f": {message}" if message else ""
    return (f"{'↪' if outcome == 'ok' else '⚠'} {event.get('hookEvent')} hook "
            f"{_HOOK_OUTCOMES.get(str(outcome), outcome)} ({event.get('command')}){said}")


def money(usd: float) -> str:
    """USD for a person: cents for real money, more digits for a fraction of a cent."""
    return f"${usd:.4f}" if usd >= 0.001 else f"${usd:.6f}"


def remembered(params: Mapping[str, Any]) -> str:
    """What ``always`` and ``never`` cover (protocol.md, Permissions): a command, word for word
    (each of its simple commands); a file tool, that tool on that path; for this session."""
    preview = params.get("preview") or {}
    tool = params.get("toolName")
    if preview.get("kind") == "command":
        what = "this exact command (each simple command in it, word for word; a command with " \
               "$VAR, $(…), redirections or the like is allowed once only)"
    elif preview.get("path"):
        what = f"{tool} on {preview['path']}"
    else:
        what = f"every {tool} call"
    return f"  always / never: {what}, for the rest of this session"


def tool_line(name: str, args: Mapping[str, Any]) -> str:
    """One readable line for a tool call, not its JSON: ``bash: git status``, ``read:
    src/app.py``, ``grep: TODO in src``, ``edit: app.py (2 edits)``, else ``name: key=value``."""
    command, path, pattern = args.get("command"), args.get("path"), args.get("pattern")
    if isinstance(command, str):
        first, *more = command.strip().splitlines() or [""]
        return f"{name}: {first}" + (" …" if more else "")
    if isinstance(pattern, str):
        return f"{name}: {pattern} in {path or '.'}"
    if isinstance(path, str):
        detail = ""
        if isinstance(args.get("edits"), list):
            count = len(args["edits"])
            detail = f" ({count} edit{'s' if count != 1 else ''})"
        elif isinstance(args.get("content"), str):
            detail = f" ({len(args['content'].splitlines())} lines)"
        elif args.get("offset") or args.get("limit"):
            detail = f" (from line {args.get('offset') or 1}" + (
                f", {args['limit']} lines)" if args.get("limit") else ")")
        return f"{name}: {path}{detail}"
    if not args:
        return name
    pairs = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}"
                      for key, value in args.items())
    return f"{name}: {pairs}"


def text_of(result: Any) -> str:
    """The text of a tool result (``content`` blocks), or of a partial one (bash sends
    ``{"output": ...}``); a message's ``content`` string is its text."""
    if not isinstance(result, dict):
        return result if isinstance(result, str) else ""
    if isinstance(result.get("output"), str):
        return str(result["output"])
    blocks = result.get("content") or []
    if isinstance(blocks, str):
        return blocks
    return "".join(b.get("text", "") if b.get("type") == "text" else "[image]" for b in blocks)


class InputArea:
    """What is drawn with the input line (tiller.chat.input), above it: the streamed text not
    finished yet (``partial``: a line, or a Markdown block), the activity line (``activity``)
    and, while the chat waits for a prompt, the status line (``status``: drawn, never printed
    into the transcript); then ``prompt`` (``> ``, ``… `` or a question). Changes show at the
    next ``invalidate()``."""

    def __init__(self, invalidate: Callable[[], None] = lambda: None) -> None:
        self.partial = self.activity = self.status = ""
        self.prompt = "> "
        self.invalidate = invalidate

    def lines(self) -> list[str]:
        """What is drawn above the prompt, top to bottom."""
        return [line for line in (self.partial, self.activity, self.status) if line]
