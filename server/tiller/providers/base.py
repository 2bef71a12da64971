"""The provider boundary: one ABC with one streaming method.

A provider turns a ``ModelRequest`` into a stream of ``MessageUpdate`` deltas followed by exactly
one final ``AssistantMessage``. It never raises for model or network failures: those end the
stream with an ``AssistantMessage`` whose ``stop_reason`` is ``"error"`` and whose
``error_message`` a user can act on. Cancellation (an abort) propagates as the async library's
cancellation; the loop turns it into ``"aborted"``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from tiller.types import AssistantMessage, Message, MessageUpdate

__all__ = ["ModelRequest", "Provider", "StreamItem", "ToolSpec"]


@dataclass(frozen=True)
class ToolSpec:
    """What the model is told about a tool."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ModelRequest:
    """One model call: the context as the loop wants it sent."""

    messages: list[Message]
    system_prompt: str | None = None
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int | None = None


StreamItem = MessageUpdate | AssistantMessage


class Provider(ABC):
    """A model backend. ``name`` and ``model`` end up on every message it produces."""

    name: str
    model: str

    @abstractmethod
    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Yield deltas, then exactly one final AssistantMessage; never raise for failures."""

    async def aclose(self) -> None:
        """Release connections. Default: nothing to release."""
        return None
