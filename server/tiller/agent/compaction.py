"""Compaction: when the context outgrows the model's window, summarize the older part.

``compact`` asks the model for a summary of everything before a cut point and replaces those
messages, in place, with one user message carrying the summary, unless that message would be no
shorter than what it replaces: a compaction never makes the context bigger. The cut never
separates an assistant's tool calls from their results: the kept part starts at a user or
assistant message.
Token counts are estimates (~4 characters per token). ``with_compaction`` wraps a run's model
call: it compacts before a call once the context nears the window, and once more when the provider
says the context overflowed; ``run_compaction`` is one compaction between its two events.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from tiller.agent.abort import AbortSignal
from tiller.agent.model_call import Emit, ModelCall, StreamFn, model_context
from tiller.agent.run_hooks import RunHooks
from tiller.config import CompactionSettings
from tiller.modes import SUMMARY_PREFIX
from tiller.providers.base import CHARS_PER_TOKEN, ModelRequest, content_chars
from tiller.types import (
    AssistantMessage,
    CompactionEnd,
    CompactionReason,
    CompactionStart,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = [
    "CompactionOutcome",
    "compact",
    "estimate_tokens",
    "find_cut",
    "is_context_overflow",
    "run_compaction",
    "with_compaction",
]

SUMMARY_SYSTEM_PROMPT = (
    "You write handover notes for a coding agent whose conversation is being compacted. "
    "Summarize the conversation below so the agent can continue the work without it: the "
    "user's goals and constraints, decisions made, files read or changed (with paths), commands "
    "run and their outcomes, errors met, and what remains to do. Be specific and concise; use "
    "short sections and bullet points. Do not address the user."
)
_OVERFLOW = re.compile(
    r"context[^.]{0,40}(too long|length|exceed|window)|prompt is too long|maximum context",
    re.IGNORECASE,
)


@dataclass
class CompactionOutcome:
    summary: str
    removed: int
    tokens_before: int
    tokens_after: int


def is_context_overflow(message: AssistantMessage) -> bool:
    """Whether a failed model call says the context was too long for the model."""
    return message.stop_reason == "error" and bool(
        message.error_message and _OVERFLOW.search(message.error_message)
    )


def estimate_tokens(messages: Sequence[Message]) -> int:
    """The context's size in tokens, estimated at ~4 characters a token. (Reported usage is not
    used: after a compaction it still counts the messages that were summarized away.)"""
    return sum(content_chars(m.content) for m in messages) // CHARS_PER_TOKEN


def find_cut(messages: Sequence[Message], keep_recent_tokens: int) -> int | None:
    """The index of the first message to keep: at least ``keep_recent_tokens`` (estimated) are
    kept, and the kept part starts at a user or assistant message. None if nothing older than
    that can be summarized."""
    kept = 0
    for index in range(len(messages) - 1, 0, -1):
        kept += content_chars(messages[index].content) // CHARS_PER_TOKEN
        if kept >= keep_recent_tokens and not isinstance(messages[index], ToolResultMessage):
            return index
    return None


def _serialize(messages: Sequence[Message]) -> str:
    """The transcript as plain text for the summarizer; long tool outputs are shortened."""
    lines = []
    for message in messages:
        if isinstance(message, UserMessage):
            text = message.content if isinstance(message.content, str) else " ".join(
                b.text for b in message.content if isinstance(b, TextContent)
            )
            lines.append(f"[user]\n{text}")
        elif isinstance(message, AssistantMessage):
            for block in message.content:
                if isinstance(block, TextContent):
                    lines.append(f"[assistant]\n{block.text}")
                elif isinstance(block, ToolCall):
                    lines.append(f"[tool call {block.name}] {json.dumps(block.arguments)[:2000]}")
        else:
            status = "error" if message.is_error else "result"
            text = message.text
            if len(text) > 2000:
                text = text[:1000] + "\n[…]\n" + text[-1000:]
            lines.append(f"[tool {status} {message.tool_name}]\n{text}")
    return "\n\n".join(lines)


async def summarize(
    stream: StreamFn, older: Sequence[Message], instructions: str | None
) -> tuple[str | None, str | None]:
    """Ask the model for a summary of ``older``; returns (summary, None) or (None, error)."""
    prompt = "Conversation to summarize:\n\n" + _serialize(older)
    if instructions:
        prompt += f"\n\nAdditional instructions for the summary: {instructions}"
    request = ModelRequest(messages=[UserMessage(content=prompt)],
                           system_prompt=SUMMARY_SYSTEM_PROMPT)
    final: AssistantMessage | None = None
    async for item in stream(request):
        if isinstance(item, AssistantMessage):
            final = item
    if final is None or final.stop_reason in ("error", "aborted"):
        return None, (final.error_message if final else None) or "the summary call failed"
    summary = final.text.strip()
    return (summary, None) if summary else (None, "the model returned an empty summary")


async def compact(
    messages: list[Message],
    stream: StreamFn,
    settings: CompactionSettings,
    instructions: str | None = None,
) -> CompactionOutcome | str:
    """Summarize and replace the older part of ``messages`` in place.

    Returns the outcome, or a string saying why nothing was compacted (also when the summary
    would be no shorter than the messages it replaces)."""
    cut = find_cut(messages, settings.keep_recent_tokens)
    if cut is None:
        cut = next((i for i in range(len(messages) - 1, 0, -1)
                    if isinstance(messages[i], UserMessage)), None)
    if cut is None:
        return "nothing to compact: the conversation has no older part to summarize"
    before = estimate_tokens(messages)
    summary, error = await summarize(stream, messages[:cut], instructions)
    if summary is None:
        return f"compaction failed: {error}"
    replacement = UserMessage(content=SUMMARY_PREFIX + summary)
    replaced, kept = estimate_tokens(messages[:cut]), estimate_tokens([replacement])
    if kept >= replaced:
        return (f"nothing to compact: the summary ({kept:,} tokens) would be no shorter than "
                f"the {replaced:,} tokens of conversation it replaces")
    messages[:cut] = [replacement]
    return CompactionOutcome(summary, cut, before, estimate_tokens(messages))




async def run_compaction(
    context: list[Message],
    stream: StreamFn,
    settings: CompactionSettings,
    emit: Emit,
    reason: CompactionReason,
    abort: AbortSignal,
    instructions: str | None = None,
    hooks: RunHooks | None = None,
) -> bool:
    """Compact ``context`` in place between compaction_start and compaction_end, after the
    PreCompact hooks (``hooks``) ran; never raises. True if anything was compacted."""
    if hooks is not None:
        with abort.scope():
            await hooks.before_compact(reason, instructions)
    before = estimate_tokens(model_context(context))
    emit(CompactionStart(reason=reason, tokens_before=before))
    outcome: CompactionOutcome | str = "compaction aborted"
    with abort.scope():
        try:
            outcome = await compact(context, stream, settings, instructions)
        except Exception as exc:  # a provider bug: report it, keep the context as it was
            outcome = f"compaction failed: {type(exc).__name__}: {exc}"
    if isinstance(outcome, str):
        emit(CompactionEnd(reason=reason, tokens_before=before, error_message=outcome))
        return False
    emit(CompactionEnd(
        reason=reason,
        tokens_before=outcome.tokens_before,
        tokens_after=outcome.tokens_after,
        removed_count=outcome.removed,
        summary=outcome.summary,
    ))
    return True


def with_compaction(
    call: ModelCall,
    stream: StreamFn,
    settings: CompactionSettings | None,
    context_window: int | None,
    emit: Emit,
    abort: AbortSignal,
    hooks: RunHooks | None = None,
) -> ModelCall:
    """``call``, preceded by a compaction when the context nears the window (``context_window``
    minus ``reserve_tokens``, the reserve being at most a quarter of the window), and made once
    more after a compaction when it fails because the context overflowed. ``stream`` writes the
    summaries; ``hooks``' PreCompact hooks run before each. Never raises."""

    async def compacting(context: list[Message]) -> AssistantMessage:
        if settings is not None and settings.enabled and context_window is not None:
            reserve = min(settings.reserve_tokens, context_window // 4)  # small windows keep 3/4
            if estimate_tokens(model_context(context)) > context_window - reserve:
                await run_compaction(context, stream, settings, emit, "threshold", abort,
                                     hooks=hooks)
        final = await call(context)
        if is_context_overflow(final) and await run_compaction(
            context, stream, settings or CompactionSettings(), emit, "overflow", abort,
            hooks=hooks,
        ):
            final = await call(context)
        return final

    return compacting
