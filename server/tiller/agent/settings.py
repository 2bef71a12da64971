"""``AgentSettings``: the one immutable settings object an Agent's runs are made with.

A session builds it once (``tiller.session.registry``); whoever changes it replaces it as a whole
with ``dataclasses.replace``, never field by field, and a run keeps the object it started with. The
loop and tool execution read it as handed down. What changes between runs on request (the provider
and model, the thinking level) is the Agent's own state, not a setting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any, Protocol

from tiller.agent.run_hooks import RunHooks
from tiller.agent.tool_batch import AfterToolCall, BeforeToolCall
from tiller.config import CompactionSettings, RetryPolicy
from tiller.frozen import frozen
from tiller.tools.base import EditorFiles, Terminal, Tool
from tiller.types import UserMessage

__all__ = ["AgentSettings", "Notices"]


class Notices(Protocol):
    """What happened outside the run that the model must be told (a background process
    ended): polled with the steering queue. Neither method may raise."""

    def has_notices(self) -> bool:
        """Something waits to be told (peeks; takes nothing)."""
        ...

    def take_notices(self) -> list[UserMessage]:
        """What waits, as user messages, each told once ([] when nothing waits)."""
        ...


@frozen
class AgentSettings:
    """How an Agent runs. ``files`` routes file tools through the editor, ``terminal`` runs
    ``bash`` in the editor's terminals; the hooks must not
    raise (a raising ``before_tool_call`` blocks the call); ``tool_timeout`` (seconds) bounds
    each tool call; ``max_turns`` and ``max_run_tokens`` bound a run (None: unbounded);
    ``compaction`` None compacts only on overflow or request; ``cache_key`` names the
    conversation to the provider's prompt cache; ``run_hooks`` are awaited at the loop's fixed
    points (tiller.agent.run_hooks); ``notices`` are delivered with steering."""

    tools: Sequence[Tool[Any]] = ()
    system_prompt: str | None = None
    cwd: Path = field(default_factory=Path.cwd)
    files: EditorFiles | None = None
    terminal: Terminal | None = None
    before_tool_call: BeforeToolCall | None = None
    after_tool_call: AfterToolCall | None = None
    tool_timeout: float | None = None
    max_turns: int | None = 50
    max_run_tokens: int | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    compaction: CompactionSettings | None = None
    run_hooks: RunHooks | None = None
    cache_key: str | None = None
    """Sent with every model request for the provider's prompt cache: the session's id."""
    withheld_tools: Mapping[str, str] = field(default_factory=dict)
    """Tools that exist but are not this agent's (a subagent's allow-list), each with why: a
    call of one is an error result that says so."""
    notices: Notices | None = None
    delta_window: float = 0.0
    """Seconds a streamed delta may wait before the subscribers get it: the front's coalescing
    window (tiller.wire.coalesce). The model's stream is read at most once per window
    (``ModelRequest.delta_window``). 0: every chunk as it arrives."""
