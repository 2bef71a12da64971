"""The billed cost of one scripted 20-call Anthropic session, for Tiller and for pi 1.6, on
tests/support/fake_anthropic.py's server with Anthropic's real prompt-cache accounting
(tests/support/anthropic_cache.py: a prefix is cached at each ``cache_control`` breakpoint and
read back by a later request that shares it; nothing is cached without breakpoints).

The session: one prompt, then 19 ``bash`` calls (each prints the same ~7 KB, so the context
grows to ~30k tokens) and a final answer: 20 model calls. Both agents run ``claude-sonnet-5``
with thinking off and get the same replies. Billed input is priced at Tiller's catalog prices
for that model (USD per million tokens: input, 5-minute cache write, cache read); the
cache-read share is read / (uncached input + cache writes + cache reads). Called by
bench_peer.py (``make bench-peer``); ``python bench/bench_cache.py`` runs it alone.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
for _path in (BENCH, BENCH.parent / "tests", BENCH.parent / "server"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from support.anthropic_cache import estimate_tokens  # noqa: E402
from support.fake_anthropic import FakeAnthropic, text_reply, tool_use_reply  # noqa: E402
from tiller.providers.anthropic_models import ANTHROPIC_MODELS  # noqa: E402

__all__ = ["CALLS", "MODEL", "Billed", "billed", "pi_models_json", "script_session"]

MODEL = "claude-sonnet-5"
CALLS = 20
COMMAND = "seq 100000 101000"  # ~7 KB of output, the same for both agents
PROMPT = f"Run `{COMMAND}` {CALLS - 1} times, one call at a time, then say done."


@dataclass(frozen=True)
class Billed:
    calls: int
    input_tokens: int
    cache_read: int
    cache_write: int
    cost: float  # USD, input side only
    tools: tuple[str, ...] = ()
    prefix_tokens: int = 0  # the tools and the system prompt, in tokens

    @property
    def read_share(self) -> float:
        total = self.input_tokens + self.cache_read + self.cache_write
        return self.cache_read / total if total else 0.0


def script_session(fake: FakeAnthropic) -> None:
    """The replies of the session, in order (usage left to the fake's accounting)."""
    calls = [tool_use_reply([(f"toolu_{n:02d}", "bash", {"command": COMMAND})])
             for n in range(CALLS - 1)]
    fake.enqueue(*calls, text_reply("done"))


def billed(fake: FakeAnthropic) -> Billed:
    """What the fake's accounting billed for the input of every message request it answered."""
    [info] = [m for m in ANTHROPIC_MODELS if m.id == MODEL]
    assert info.cost is not None
    price = info.cost
    usages = fake.usages
    fresh = sum(u.input_tokens for u in usages)
    read = sum(u.cache_read for u in usages)
    write5, write1 = sum(u.cache_write_5m for u in usages), sum(u.cache_write_1h for u in usages)
    cost = (fresh * price.input + read * price.cache_read + write5 * price.cache_write
            + write1 * (price.cache_write_1h or price.cache_write)) / 1_000_000
    first = fake.requests[0] if fake.requests else {}
    tools = tuple(str(tool.get("name")) for tool in first.get("tools") or [])
    prefix = sum(estimate_tokens(t) for t in first.get("tools") or []) + (
        estimate_tokens(first["system"]) if first.get("system") else 0)
    return Billed(len(usages), fresh, read, write5 + write1, cost, tools, prefix)


def pi_models_json(url: str) -> dict[str, Any]:
    """pi's models.json: the fake as an Anthropic Messages provider serving ``MODEL``."""
    [info] = [m for m in ANTHROPIC_MODELS if m.id == MODEL]
    assert info.cost is not None
    cost = {"input": info.cost.input, "output": info.cost.output,
            "cacheRead": info.cost.cache_read, "cacheWrite": info.cost.cache_write}
    return {"providers": {"bench-anthropic": {
        "baseUrl": url, "api": "anthropic-messages", "apiKey": "bench",
        "models": [{"id": MODEL, "reasoning": False, "contextWindow": info.context_window,
                    "maxTokens": 8192, "cost": cost}]}}}


def render(tiller: Billed, pi: Billed) -> str:
    ratio = tiller.cost / pi.cost if pi.cost else float("nan")
    rows = [
        f"| 20-call Anthropic session ({MODEL}, fake with real cache accounting) | Tiller | pi "
        "1.6.0 | Tiller/pi | target |",
        "|---|---|---|---|---|",
        f"| billed input | ${tiller.cost:.4f} | ${pi.cost:.4f} | {ratio:.2f} | <= 1.0 |",
        f"| input read from the cache | {tiller.read_share:.0%} | {pi.read_share:.0%} | | |",
        f"| tokens: uncached / cache write / cache read | {tiller.input_tokens:,} / "
        f"{tiller.cache_write:,} / {tiller.cache_read:,} | {pi.input_tokens:,} / "
        f"{pi.cache_write:,} / {pi.cache_read:,} | | |",
        f"| model calls | {tiller.calls} | {pi.calls} | | |",
        f"| tools and system prompt (tokens, read by every call) | {tiller.prefix_tokens:,} | "
        f"{pi.prefix_tokens:,} | | |",
        "",
        f"tools declared: Tiller {', '.join(tiller.tools)}; pi {', '.join(pi.tools)}",
    ]
    return "\n".join(rows)


if __name__ == "__main__":
    import anyio
    from bench_peer import measure_cache

    print(render(*anyio.run(measure_cache)))
