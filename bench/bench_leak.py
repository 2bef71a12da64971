"""Leak benchmark: the server's RSS over 500 ``session/new`` -> ``agent/prompt`` ->
``session/close`` cycles.

Each cycle opens a session, runs one prompt against the loopback ``FakeOpenAI`` (tests/
fake_openai.py: no network, no API key) and closes the session. Two workloads, each in a fresh
``python -m tiller`` process with ``--no-session`` (no log files): a text reply, and a tool round
(the model calls ``bash`` with ``true``, then answers). After 20 warm-up cycles the server's
VmRSS is sampled every 50 cycles; the growth per cycle is the slope of a least-squares line
through those samples, so one-off allocations (imports, caches) weigh little. A server that
releases what a closed session held grows by a few KiB per cycle at most; before providers were
closed with their session it grew by about 65 KiB per cycle.

Run from the repository root (a few minutes: 500 cycles of each workload)::

    python bench/bench_leak.py [CYCLES]

It prints numbers from one run and asserts nothing about them.
"""

from __future__ import annotations

import platform
import sys
import tempfile
import time
from pathlib import Path

import anyio

BENCH = Path(__file__).resolve().parent
for _path in (BENCH, BENCH.parent / "tests", BENCH.parent / "server"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench_server import initialize, rss_kib, server_env  # noqa: E402

from support.fake_openai import FakeOpenAI, Reply, text_reply, tool_call_reply  # noqa: E402
from tiller import __version__ as tiller_version  # noqa: E402
from tiller.client import TillerClient  # noqa: E402

CYCLES = 500
WARM_UP = 20
SAMPLE_EVERY = 50


def replies(tool_round: bool) -> list[Reply]:
    """The scripted model replies of one cycle."""
    if not tool_round:
        return [text_reply("Done.")]
    return [tool_call_reply([("call_1", "bash", {"command": "true"})]), text_reply("Done.")]


async def cycle(client: TillerClient, fake: FakeOpenAI, tool_round: bool) -> None:
    fake.enqueue(*replies(tool_round))
    session_id = (await client.request("session/new"))["sessionId"]
    await client.request("agent/prompt", {"sessionId": session_id, "message": "go"})
    await client.request("session/close", {"sessionId": session_id})


def slope(samples: list[tuple[int, int]]) -> float:
    """Least-squares growth of the second coordinate per unit of the first."""
    count = len(samples)
    mean_x = sum(x for x, _ in samples) / count
    mean_y = sum(y for _, y in samples) / count
    spread = sum((x - mean_x) ** 2 for x, _ in samples)
    return sum((x - mean_x) * (y - mean_y) for x, y in samples) / spread if spread else 0.0


async def measure(cycles: int, tool_round: bool) -> None:
    label = "tool round" if tool_round else "text reply"
    print(f"\n{label}: {cycles} cycles of session/new -> agent/prompt -> session/close")
    print(f"{'cycle':>7} {'VmRSS KiB':>10} {'growth KiB':>11}")
    with FakeOpenAI() as fake, tempfile.TemporaryDirectory() as workspace:
        argv = ["--base-url", fake.url, "--cwd", workspace, "--no-session"]
        client = await TillerClient.spawn(argv, env=server_env(), cwd=workspace)
        async with client:
            pid = int(client.process.pid)
            await initialize(client)
            for _ in range(WARM_UP):
                await cycle(client, fake, tool_round)
            base = rss_kib(pid)
            samples = [(0, base)]
            print(f"{0:>7} {base:>10} {0:>11}")
            started = time.perf_counter()
            for number in range(1, cycles + 1):
                await cycle(client, fake, tool_round)
                if number % SAMPLE_EVERY == 0 or number == cycles:
                    rss = rss_kib(pid)
                    samples.append((number, rss))
                    print(f"{number:>7} {rss:>10} {rss - base:>11}")
            elapsed = time.perf_counter() - started
        fake.assert_script_complete()
    print(f"growth: {slope(samples):.1f} KiB per cycle (least squares); "
          f"{elapsed / cycles * 1000:.1f} ms per cycle")


async def main() -> None:
    cycles = int(sys.argv[1]) if len(sys.argv) > 1 else CYCLES
    print(f"tiller {tiller_version}, Python {platform.python_version()}, {platform.machine()}, "
          f"{platform.system()} {platform.release()}")
    for tool_round in (False, True):
        await measure(cycles, tool_round)


if __name__ == "__main__":
    anyio.run(main)
