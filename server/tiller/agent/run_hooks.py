"""``RunHooks``: what the loop awaits at its fixed points for the user's hooks (tiller.hooks).

The loop knows nothing of commands or settings: a Session hands it an object with these three
methods (``AgentSettings.run_hooks``). They change the loop's course only as docs/loop.md says:
``after_batch``'s messages are delivered like steering, before the next model call;
``before_stop``'s reason sends the agent on (at most ``MAX_STOP_CONTINUATIONS`` times a run,
and never past the turn limit); ``before_compact`` only runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tiller.types import AssistantMessage, CompactionReason, Message, ToolResultMessage

__all__ = ["MAX_STOP_CONTINUATIONS", "RunHooks"]

MAX_STOP_CONTINUATIONS = 3
"""How many times a run's Stop hooks can send the agent on."""


class RunHooks(Protocol):
    """Awaited by the loop under the run's abort scope; none of them may raise."""

    async def after_batch(
        self, message: AssistantMessage, results: Sequence[ToolResultMessage]
    ) -> list[Message]:
        """After ``message``'s tool batch ran and the loop goes on: messages for the model,
        delivered with the steering (none: ``[]``)."""
        ...

    async def before_stop(self, message: AssistantMessage, continued: int) -> str | None:
        """The run would end after ``message``: a reason to go on (delivered as a user
        message), or None. ``continued``: how often this run went on so already."""
        ...

    async def before_compact(self, reason: CompactionReason, instructions: str | None) -> None:
        """A compaction is about to start."""
        ...
