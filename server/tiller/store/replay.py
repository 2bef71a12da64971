"""A saved session's state as models: ``tiller.store.log``'s outline with its messages validated.

``tiller.store.saved.open_saved`` reads a log without the models; a session goes live from
``validated(file, outline)``. ``replay`` does both for one branch of a file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter

from tiller.errors import SessionLogError
from tiller.store.log import Outline, SessionFile, corrupt, outline
from tiller.types import Message, Usage, UserMessage

__all__ = ["Replay", "replay", "validated"]

_MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)


@dataclass
class Replay:
    """What a session goes live with, as models: the transcript and each message's entry, the
    undelivered queued messages (each with its ``queue_id``), the thinking level,
    ``usage``: the sum of every assistant message's on the branch (compacted ones included),
    and how its tool calls were shown (``Outline.shown``). The rest of what the log says is in
    its ``Outline``."""

    messages: list[Message] = field(default_factory=list)
    entry_ids: list[str] = field(default_factory=list)
    steering: list[UserMessage] = field(default_factory=list)
    follow_ups: list[UserMessage] = field(default_factory=list)
    thinking: str | None = None
    usage: Usage = field(default_factory=Usage)
    shown: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    processes: list[dict[str, Any]] = field(default_factory=list)
    """The background processes the log recorded (``ProcessInfo`` as saved), oldest first."""


def replay(file: SessionFile, leaf_id: str | None = None) -> Replay:
    """The state of the branch ending at ``leaf_id`` (default: the last entry); raises
    SessionLogError naming the first malformed entry."""
    return validated(file, outline(file, leaf_id))


def validated(file: SessionFile, found: Outline) -> Replay:
    """``found`` (an outline of ``file``) with its messages validated; raises SessionLogError
    naming the entry of the first message that is not a valid one."""

    def refused(entry_id: str, exc: ValueError) -> SessionLogError:
        return corrupt(file, next(e for e in file.entries if e.id == entry_id), exc)

    state = Replay(entry_ids=found.entry_ids, thinking=found.thinking, shown=found.shown,
                   processes=[found.processes[key] for key in sorted(found.processes)])
    for entry_id, message in zip(found.entry_ids, found.messages, strict=True):
        try:
            state.messages.append(_MESSAGE.validate_python(message))
        except ValueError as exc:  # pydantic's ValidationError
            raise refused(entry_id, exc) from None
    for queue_id, queue, message in found.queued:
        try:
            waiting = UserMessage.model_validate(message)
        except ValueError as exc:
            raise refused(queue_id, exc) from None
        waiting.queue_id = queue_id
        (state.steering if queue == "steering" else state.follow_ups).append(waiting)
    for entry_id, usage in found.spent:
        try:
            state.usage = state.usage.add(Usage.model_validate(usage))
        except ValueError as exc:
            raise refused(entry_id, exc) from None
    return state
