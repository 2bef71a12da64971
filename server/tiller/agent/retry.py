"""Retrying a model call on transient failures: ``RetryPolicy`` and the ``with_retry`` wrapper.

An attempt that failed with a ``retryable`` error (429, 5xx, a cut or stalled stream) is
announced by ``retry_scheduled`` (its partial message is discarded, never appended), waited out
under the run's abort, and made again. Once a call that was retried is over, ``retry_end`` says
whether a retry got through.
"""

from __future__ import annotations

import anyio

from tiller.agent.abort import AbortSignal
from tiller.agent.model_call import Emit, ModelCall, aborted_message
from tiller.config import RetryPolicy
from tiller.types import AssistantMessage, Message, MessageStart, RetryEnd, RetryScheduled

__all__ = ["with_retry"]


def with_retry(
    call: ModelCall, policy: RetryPolicy, emit: Emit, abort: AbortSignal
) -> ModelCall:
    """``call``, made again per ``policy`` while it fails with a retryable error and the run is
    not aborted. An abort during the wait ends the call ``aborted``. Never raises."""

    async def retrying(context: list[Message]) -> AssistantMessage:
        attempt = 0
        while True:
            final = await call(context)
            if final.stop_reason == "error" and final.retryable and not abort.aborted:
                delay = policy.delay(attempt + 1, final.retry_after)
                if attempt < policy.max_retries and delay is not None:
                    attempt += 1
                    emit(RetryScheduled(
                        attempt=attempt,
                        max_attempts=policy.max_retries,
                        delay_ms=int(delay * 1000),
                        error_message=final.error_message or "transient provider error",
                    ))
                    with abort.scope():
                        await anyio.sleep(delay)
                    if not abort.aborted:
                        continue
                    final = aborted_message(final.provider, final.model)
                    emit(MessageStart(message=final))
            if attempt:
                success = final.stop_reason not in ("error", "aborted")
                emit(RetryEnd(success=success, attempt=attempt))
            return final

    return retrying
