"""Anthropic's prompt-cache accounting, as the Messages API documents and bills it, for the fake.

``CacheLedger.account(body, minimum)`` reads one request body and returns its ``CacheUsage``:
the prompt is the ordered blocks ``tools`` -> ``system`` -> ``messages`` (each content block,
a string content as one text block); a block with ``cache_control`` is a breakpoint. The cache
key of a prefix is the hash of everything up to and including its last block (``cache_control``
itself left out, so moving a breakpoint does not change a prefix; the model is part of every
key; the thinking parameters are part of the keys of prefixes that reach into the messages, as
changing them invalidates message caches but not tools or system).

* Read: for each breakpoint the entry of the longest cached prefix ending at it or at one of
  the 20 blocks before it (the API's lookback); the longest hit over all breakpoints is read
  (``cache_read_input_tokens``) and its entry's life starts again.
* Write: each breakpoint after the read one whose prefix holds at least ``minimum`` tokens
  is written, with its ``ttl`` (``5m`` or ``1h``); the tokens between the previous written or
  read point and it count as ``cache_creation_input_tokens`` of that TTL.
* The rest is ``input_tokens``. An entry lives ``ttl`` from its last write or read.

Tokens are estimated as ceil(characters of the block's compact JSON / 4); ``clock`` (seconds,
default ``time.monotonic``) can be replaced to let entries expire in a test.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["LOOKBACK", "TTL_SECONDS", "CacheLedger", "CacheUsage", "cache_control_count",
           "estimate_tokens"]

LOOKBACK = 20
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


@dataclass(frozen=True)
class CacheUsage:
    input_tokens: int
    cache_read: int
    cache_write_5m: int
    cache_write_1h: int

    @property
    def cache_write(self) -> int:
        return self.cache_write_5m + self.cache_write_1h

    def usage(self, output_tokens: int) -> dict[str, Any]:
        """The ``usage`` object of ``message_start`` as the API sends it."""
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_write,
            "cache_read_input_tokens": self.cache_read,
            "cache_creation": {"ephemeral_5m_input_tokens": self.cache_write_5m,
                               "ephemeral_1h_input_tokens": self.cache_write_1h},
            "output_tokens": output_tokens,
            "service_tier": "standard",
        }


def estimate_tokens(block: Any) -> int:
    return max(1, math.ceil(len(json.dumps(block, separators=(",", ":"))) / 4))


def _blocks(body: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(where, block) in cache order: tools, system, then each message's content blocks."""
    blocks: list[tuple[str, dict[str, Any]]] = [("tools", dict(t)) for t in body.get("tools") or []]
    system = body.get("system")
    if isinstance(system, str) and system:
        blocks.append(("system", {"type": "text", "text": system}))
    elif isinstance(system, list):
        blocks += [("system", dict(b)) for b in system]
    for index, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        items = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        blocks += [(f"{index}:{message.get('role')}", dict(b)) for b in items]
    return blocks


def cache_control_count(body: Mapping[str, Any]) -> int:
    """How many blocks of ``body`` carry ``cache_control``."""
    return sum(1 for _, block in _blocks(body) if "cache_control" in block)


class CacheLedger:
    """The cache of one fake server (see the module docstring). Thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._entries: dict[str, tuple[float, str]] = {}  # key -> (expires at, ttl)
        self._lock = threading.Lock()

    def account(self, body: Mapping[str, Any], minimum: int) -> CacheUsage:
        blocks = _blocks(body)
        thinking = json.dumps([body.get("thinking"), body.get("output_config")], sort_keys=True)
        digest = hashlib.sha256(str(body.get("model")).encode())
        keys, totals, breakpoints, ttls = [], [], [], {}
        total = 0
        for position, (where, block) in enumerate(blocks):
            if where not in ("tools", "system") and (position == 0 or blocks[position - 1][0]
                                                      in ("tools", "system")):
                digest.update(thinking.encode())
            control = block.pop("cache_control", None)
            digest.update(json.dumps([where.split(":")[-1], block], sort_keys=True).encode())
            keys.append(digest.copy().hexdigest())
            total += estimate_tokens(block)
            totals.append(total)
            if control is not None:
                breakpoints.append(position)
                ttls[position] = (control or {}).get("ttl", "5m")
        with self._lock:
            now = self.clock()
            self._entries = {k: v for k, v in self._entries.items() if v[0] > now}
            read_at = -1
            for point in breakpoints:
                for back in range(point, max(point - LOOKBACK, 0) - 1, -1):
                    if keys[back] in self._entries:
                        read_at = max(read_at, back)
                        break
            if read_at >= 0:
                ttl = self._entries[keys[read_at]][1]
                self._entries[keys[read_at]] = (now + TTL_SECONDS[ttl], ttl)
            written = {"5m": 0, "1h": 0}
            done = read_at
            for point in breakpoints:
                if point <= read_at or totals[point] < minimum:
                    continue
                ttl = ttls[point]
                self._entries[keys[point]] = (now + TTL_SECONDS[ttl], ttl)
                written[ttl] += totals[point] - (totals[done] if done >= 0 else 0)
                done = point
        read = totals[read_at] if read_at >= 0 else 0
        return CacheUsage(total - read - written["5m"] - written["1h"], read, written["5m"],
                          written["1h"])
