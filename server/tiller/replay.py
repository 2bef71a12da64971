"""A saved session's state as models: ``tiller.store``'s outline with its messages validated.

``tiller.session_files.open_saved`` reads a log without the models; a session goes live from
``validated(file, outline)``. ``replay`` does both for one branch of a file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import TypeAdapter

from tiller.store import Outline, SessionFile, corrupt, outline
from tiller.types import Message, Usage, UserMessage

__all__ = ["Replay", "replay", "validated"]

_MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)


@dataclass
class Replay:
    """What a log says about its session, as models: the transcript and each message's entry,
    the undelivered queued messages (each with its ``queue_id``), the last model settings, and
    ``usage``: the sum of every assistant message's on the branch (compacted ones included)."""

    messages: list[Message] = field(default_factory=list)
    entry_ids: list[str] = field(default_factory=list)
    steering: list[UserMessage] = field(default_factory=list)
    follow_ups: list[UserMessage] = field(default_factory=list)
    provider: str | None = None
    model: str | None = None
    thinking: str | None = None
    title: str | None = None
    usage: Usage = field(default_factory=Usage)


def replay(file: SessionFile, leaf_id: str | None = None) -> Replay:
    """The state of the branch ending at ``leaf_id`` (default: the last entry); raises
    SessionLogError naming the first malformed entry."""
    return validated(file, outline(file, leaf_id))


def validated(file: SessionFile, found: Outline) -> Replay:
    """``found`` (an outline of ``file``) with its messages validated; raises SessionLogError
    naming the entry of the first message that is not a valid one."""
    entries = {entry.id: entry for entry in file.entries}
    state = Replay(entry_ids=found.entry_ids, provider=found.provider, model=found.model,
                   thinking=found.thinking, title=found.title)
    for entry_id, message in zip(found.entry_ids, found.messages, strict=True):
        try:
            state.messages.append(_MESSAGE.validate_python(message))
        except ValueError as exc:  # pydantic's ValidationError
            raise corrupt(file, entries[entry_id], exc) from None
    for queue_id, queue, message in found.queued:
        try:
            waiting = UserMessage.model_validate(message)
        except ValueError as exc:
            raise corrupt(file, entries[queue_id], exc) from None
        waiting.queue_id = queue_id
        (state.steering if queue == "steering" else state.follow_ups).append(waiting)
    for entry_id, usage in found.spent:
        try:
            state.usage = state.usage.add(Usage.model_validate(usage))
        except ValueError as exc:
            raise corrupt(file, entries[entry_id], exc) from None
    return state
