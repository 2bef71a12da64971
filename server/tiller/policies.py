"""The plain settings types ``ServerConfig`` holds: ``CompactionSettings``, ``RetryPolicy`` and
``PermissionRule``.

They live here, apart from the machinery that applies them (``tiller.compaction``,
``tiller.retry``, ``tiller.permissions``, which re-export them), so that reading the
configuration to answer ``initialize`` imports none of that machinery.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tiller.permissions_command import Verdict

__all__ = ["CompactionSettings", "PermissionRule", "RetryPolicy"]


@dataclass(frozen=True)
class CompactionSettings:
    """``reserve_tokens`` of the window stay free for the reply; ``keep_recent_tokens`` of the
    newest messages are kept verbatim."""

    enabled: bool = True
    reserve_tokens: int = 16_384
    keep_recent_tokens: int = 20_000


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of one model call: exponential backoff with jitter, bounded in count and delay.

    ``delay(n)`` for retry n is ``base_delay * 2**(n-1)`` (±``jitter``), or the provider's
    ``Retry-After`` when it gave one; None when that exceeds ``max_delay`` (then give up).
    ``idle_timeout`` is how long a stream may stay silent before it counts as failed.
    """

    max_retries: int = 3
    base_delay: float = 1.0
    max_delay: float = 60.0
    jitter: float = 0.2
    idle_timeout: float = 120.0

    def delay(self, retry: int, retry_after: float | None = None) -> float | None:
        if retry_after is not None:
            return retry_after if retry_after <= self.max_delay else None
        backoff: float = self.base_delay * 2.0 ** (retry - 1)
        backoff *= 1 + random.uniform(-self.jitter, self.jitter)
        return min(backoff, self.max_delay)


@dataclass(frozen=True)
class PermissionRule:
    """A config-file rule; the first that matches decides. ``path`` is a glob against the
    resolved path (relative globs are taken from the workspace root); ``command`` the first words
    of a command tool's (``bash``'s) command (see tiller.permissions_command)."""

    action: Verdict
    tool: str | None = None
    path: str | None = None
    command: str | None = None
