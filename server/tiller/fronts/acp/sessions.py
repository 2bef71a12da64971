"""What ACP shows of sessions beyond the transcript: ``session/list`` entries, the
``session_info_update`` a session sends when it gets its title, and ``usage_update``.

* ``session/list`` pages hold ``LIST_PAGE`` sessions, most recently updated first; the cursor is
  opaque to the client (an offset). ``updatedAt`` is the session's last log entry, ISO 8601 UTC.
* A session's title is its first user message (``tiller.store.log.title_of``), as Tiller's own
  ``session/list`` shows it.
* ``usage_update`` follows each model call when the model's context window is known (ACP
  requires ``size``) and the call reported its tokens (a cancelled or failed one may not):
  ``used`` is the tokens of the context that call saw plus its answer, ``cost`` the session's
  cost in USD (its transcript's model calls), from the catalog's prices.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tiller.store.log import title_of
from tiller.store.saved import SessionSummary
from tiller.types import AssistantMessage, UserMessage

__all__ = ["LIST_PAGE", "iso_time", "session_info", "title_update", "usage_update"]

LIST_PAGE = 50


def iso_time(ms: int) -> str:
    """Milliseconds since the epoch as ISO 8601 UTC (``2026-12-01T07:30:00.123Z``)."""
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def session_info(summary: SessionSummary) -> dict[str, Any]:
    """One ``session/list`` entry."""
    info: dict[str, Any] = {"sessionId": summary.session_id, "cwd": summary.cwd,
                            "updatedAt": iso_time(summary.updated)}
    if summary.title:
        info["title"] = summary.title
    info["_meta"] = {"tiller": {"messageCount": summary.message_count, "live": summary.live}}
    return info


def title_update(message: UserMessage) -> dict[str, Any]:
    """The ``session_info_update`` for a session whose first user message is ``message``."""
    return {"sessionUpdate": "session_info_update", "title": title_of(message.dump()),
            "updatedAt": iso_time(message.timestamp)}


def usage_update(message: AssistantMessage, cost: float, window: int | None) -> list[
    dict[str, Any]
]:
    """The ``usage_update`` after the model call that produced ``message`` ([] when the
    context window is unknown, or when the call reported no tokens: a cancelled or failed call
    says nothing of the context, and a gauge must not drop to zero); ``cost`` is the session's
    total so far."""
    usage = message.usage
    if not window or not usage.total_tokens:
        return []
    return [{"sessionUpdate": "usage_update", "used": usage.total_tokens, "size": window,
             "cost": {"amount": round(cost, 6), "currency": "USD"},
             "_meta": {"tiller": {"usage": usage.dump()}}}]
