"""ACP turns: one running turn per session, and every ``session/prompt`` waiting on it.

``session/prompt`` on an idle session runs ``Session.prompt``; one that arrives while the
session's turn runs is queued as steering and answered when that turn ends, with the same
outcome. ``cancel`` aborts the run, and every prompt of the turn is answered ``cancelled``. A
run that ends in ``error`` is answered with JSON-RPC error -32020 (RunFailedError), after its
``errorMessage`` went out as an ``agent_message_chunk``
(``tiller.fronts.acp.updates.failure_chunks``): clients that hide or mangle error answers still
show why in the conversation. ``data.details`` repeats the message for clients that read it
there (Toad).

``_session/steering`` (``steering``) queues its message into the running turn (``injected``);
on an idle session it either starts a turn nobody's ``session/prompt`` waits for
(``startedNewTurn``, the adapters' default) or, when the client asks for it, consumes nothing
(``promptRequired``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio

from tiller.errors import PromptBlockedError, RunFailedError
from tiller.fronts.acp.params import AcpPromptResult
from tiller.fronts.acp.updates import acp_stop_reason
from tiller.session.session import Session
from tiller.types import RunResult, UserContent, UserMessage

__all__ = ["IDLE_BEHAVIORS", "Turn", "Turns"]

log = logging.getLogger(__name__)

Prompt = str | list[UserContent] | UserMessage
"""A message for a turn: text, content, or a user message (with the client's blocks)."""

IDLE_BEHAVIORS = ("startNewTurn", "promptRequired")
"""What ``_session/steering`` does when no turn runs (``_meta.steering.idleBehavior``)."""


@dataclass
class Turn:
    """One session's running turn: what every session/prompt waiting on it is answered with."""

    done: anyio.Event = field(default_factory=anyio.Event)
    result: RunResult | None = None
    error: Exception | None = None
    cancelled: bool = False


class Turns:
    """The running turn of each session, by session id."""

    def __init__(self) -> None:
        self.running: dict[str, Turn] = {}
        self._preparing: dict[str, list[Turn]] = {}
        self._detached: set[asyncio.Task[Any]] = set()

    @contextmanager
    def preparing(self, session: Session) -> Iterator[Turn]:
        """While a ``session/prompt`` gets ready (MCP servers, its slash command), a ``cancel``
        of the session marks the yielded token ``cancelled``: that prompt must not run. The
        token is ``done`` when the block is left (the prompt then queues or starts at once)."""
        token = Turn()
        waiting = self._preparing.setdefault(session.id, [])
        waiting.append(token)
        try:
            yield token
        finally:
            token.done.set()
            waiting[:] = [other for other in waiting if other is not token]
            if not waiting:
                del self._preparing[session.id]

    async def in_order(self, session: Session, token: Turn | None = None) -> None:
        """Wait until the prompts of ``session`` getting ready ahead of ``token`` (all of them
        for None) have queued or started: a session takes its messages in the order they
        came, whatever each waited for on the way."""
        ahead = list(self._preparing.get(session.id, ()))
        if token is not None:
            ahead = ahead[: next(i for i, other in enumerate(ahead) if other is token)]
        for earlier in ahead:
            await earlier.done.wait()

    def cancel(self, session: Session) -> None:
        """Abort the session's run (if a turn runs) and stop the prompts still getting ready;
        they are all answered ``cancelled``."""
        for token in self._preparing.get(session.id, ()):
            token.cancelled = True
        turn = self.running.get(session.id)
        if turn is None:
            return
        turn.cancelled = True
        if session.is_running:
            session.abort()

    def steer(self, session: Session, message: Prompt) -> Turn | None:
        """Queue ``message`` as steering of the running turn (None: no turn runs)."""
        turn = self.running.get(session.id)
        if turn is not None:
            session.steer(message)
        return turn

    def steering(self, session: Session, message: Prompt,
                 idle_behavior: str) -> tuple[str, str | None]:
        """``_session/steering``'s ``(outcome, reason)``: steer the running turn, else start
        a detached one or (``promptRequired``) leave ``message`` to a ``session/prompt``."""
        if self.steer(session, message) is not None:
            return "injected", None
        if idle_behavior == "promptRequired":
            return "promptRequired", "noRunningTurn"
        task = asyncio.ensure_future(self._detached_turn(session, message))
        self._detached.add(task)
        task.add_done_callback(self._detached.discard)
        return "startedNewTurn", None

    async def _detached_turn(self, session: Session, message: Prompt) -> None:
        """A turn started by steering: its updates go out as usual; its end is only logged."""
        try:
            result = await self.prompt(session, message)
            log.info("a turn started by _session/steering ended: %s", result.stop_reason)
        except Exception as exc:
            log.warning("a turn started by _session/steering failed: %s", exc)

    async def prompt(self, session: Session, message: Prompt) -> AcpPromptResult:
        """Run a turn, or join the running one as steering; answer when it ends."""
        turn = self.steer(session, message)
        if turn is not None:
            await turn.done.wait()
        else:
            turn = self.running[session.id] = Turn()
            try:
                turn.result = await session.prompt(message)
            except Exception as exc:
                turn.error = exc
            finally:
                del self.running[session.id]
                turn.done.set()
        return self._answer(turn)

    def _answer(self, turn: Turn) -> AcpPromptResult:
        """The session/prompt result for a finished turn (raises for a failed one)."""
        if turn.cancelled:
            return AcpPromptResult(stop_reason="cancelled")
        if isinstance(turn.error, PromptBlockedError):  # the client drops the prompt: so did we
            return AcpPromptResult(stop_reason="refusal",
                                   _meta={"tiller": {"errorMessage": turn.error.message}})
        if turn.error is not None:
            raise turn.error
        result = turn.result
        assert result is not None
        usage = result.usage.dump()
        stop = acp_stop_reason(result.stop_reason)
        if stop is None:
            message = result.error_message or "the run failed"
            raise RunFailedError(message, {"stopReason": result.stop_reason,
                                           "errorMessage": message, "details": message,
                                           "usage": usage})
        meta: dict[str, Any] = {"stopReason": result.stop_reason, "usage": usage}
        if result.error_message:
            meta["errorMessage"] = result.error_message
        return AcpPromptResult(stop_reason=stop, _meta={"tiller": meta})
