"""Pricing: the model's per-token prices turned into each assistant message's ``usage.cost``.

``priced`` wraps a run's model call (``tiller.agent.model_call``), so the loop never sees prices.
"""

from __future__ import annotations

from tiller.agent.model_call import ModelCall
from tiller.providers.base import ModelCost
from tiller.types import AssistantMessage, Message

__all__ = ["priced", "with_cost"]


def with_cost(message: AssistantMessage, price: ModelCost) -> AssistantMessage:
    """A copy of ``message`` whose ``usage.cost`` is its usage at ``price``."""
    usage = message.usage.model_copy(update={"cost": price.cost_of(message.usage)})
    return message.model_copy(update={"usage": usage})


def priced(call: ModelCall, price: ModelCost | None) -> ModelCall:
    """``call`` with its final message priced at ``price``; ``call`` itself without prices."""
    if price is None:
        return call

    async def pricing(context: list[Message]) -> AssistantMessage:
        return with_cost(await call(context), price)

    return pricing
