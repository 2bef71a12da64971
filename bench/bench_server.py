"""Micro-benchmarks of the ``tiller`` stdio server, measured end to end through its pipes.

What it measures (each against a real ``python -m tiller`` subprocess and the loopback
``FakeOpenAI`` server from tests/support/fake_openai.py, so no network and no API key):

1. Start-up: spawn -> ``initialize`` response, over 10 fresh processes (NDJSON framing), next to
   a bare ``python -c pass`` and ``python -c "import tiller.fronts.tiller.front"`` for scale.
2. Memory: VmRSS of the server after ``initialize``, after one prompt (which imports the
   provider's HTTP library lazily) and after the 5,000-token stream (with its VmHWM peak).
3. The first ``agent/prompt`` round trip on a fresh server (session creation, HTTP library
   import, HTTP client) against a second, warm one.
4. Streaming: a 5,000-chunk reply (one short word per chunk): wall time from request to response,
   time to the first ``message_update``, ``message_update`` events/s as the client receives them,
   and the bytes the server wrote to stdout per streamed token against the SSE bytes the fake
   provider sent per token. Both framings (NDJSON and LSP ``Content-Length``). For scale, another
   process reads the same stream as raw HTTP bytes and through the ``openai`` SDK alone.
5. Inbound requests: ``agent/getState`` sequential round-trip latency, and 2,000 requests
   pipelined in one write (requests/s), both framings.

The server's output is tapped below ``TillerClient``'s reader: every chunk read from the
server's stdout is kept with its arrival time, and afterwards split into frames, so byte counts
are exact and per-message arrival times cost nothing while streaming.

Run from the repository root (about half a minute on 2 idle cores)::

    python bench/bench_server.py

It prints numbers from one run and asserts nothing about them.
"""

from __future__ import annotations

import bisect
import compileall
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT / "tests", ROOT / "server"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from support.fake_openai import FakeOpenAI, Reply, _render, text_reply  # noqa: E402
from support.helpers import clean_env  # noqa: E402
from tiller import __version__ as tiller_version  # noqa: E402
from tiller.client import TillerClient  # noqa: E402
from tiller.wire.framing import Framing, frame  # noqa: E402

SPAWNS = 10
TOKENS = 5_000
TOKEN = "tok "  # one "token" per content chunk: chunk_size=len(TOKEN)
PIPELINED = 2_000
SEQUENTIAL = 200
FRAMINGS = ("ndjson", "lsp")


# ---------------------------------------------------------------------------------------------
# A client whose server stdout is tapped


@dataclass
class Chunk:
    at: float
    data: bytes


class _Tap(anyio.abc.ByteReceiveStream):
    """The server's stdout, recording every chunk read with its arrival time."""

    def __init__(self, inner: anyio.abc.ByteReceiveStream) -> None:
        self.inner = inner
        self.chunks: list[Chunk] = []

    async def receive(self, max_bytes: int = 65536) -> bytes:
        data = await self.inner.receive(max_bytes)
        self.chunks.append(Chunk(time.perf_counter(), data))
        return data

    async def aclose(self) -> None:
        await self.inner.aclose()


class _TappedProcess:
    """A process proxy whose ``stdout`` is the tap; everything else is the real process."""

    def __init__(self, process: anyio.abc.Process, tap: _Tap) -> None:
        self._process = process
        self.stdout = tap

    def __getattr__(self, name: str) -> Any:
        return getattr(self._process, name)


class TappedClient(TillerClient):
    """``TillerClient`` that keeps the raw bytes the server wrote, with arrival times."""

    def __init__(self, process: anyio.abc.Process, framing: Framing) -> None:
        assert process.stdout is not None
        self.tap = _Tap(process.stdout)
        super().__init__(_TappedProcess(process, self.tap), framing)  # type: ignore[arg-type]

    @property
    def pid(self) -> int:
        return int(self.process.pid)

    def mark(self) -> int:
        """A position in the tapped output: frames after it belong to what follows."""
        return len(self.tap.chunks)

    def frames_since(self, mark: int) -> list[Frame]:
        """The frames the server wrote after ``mark``, each with its size and arrival time."""
        chunks = self.tap.chunks[mark:]
        data = b"".join(c.data for c in chunks)
        ends = list(_running_total(len(c.data) for c in chunks))
        frames = []
        for end, size, body in split_frames(data, self.framing):
            at = chunks[bisect.bisect_left(ends, end)].at
            frames.append(Frame(at=at, size=size, message=json.loads(body)))
        return frames


@dataclass
class Frame:
    at: float
    size: int  # bytes on the wire, framing included
    message: dict[str, Any] = field(repr=False)

    @property
    def event_type(self) -> str | None:
        if self.message.get("method") != "agent/event":
            return None
        return str(self.message["params"].get("type"))


def _running_total(values: Iterable[int]) -> Iterator[int]:
    total = 0
    for value in values:
        total += value
        yield total


def split_frames(data: bytes, framing: Framing) -> Iterator[tuple[int, int, bytes]]:
    """``(end offset, framed size, body)`` of each complete frame in well-formed output."""
    pos = 0
    while pos < len(data):
        if framing is Framing.NDJSON:
            end = data.find(b"\n", pos)
            if end < 0:
                return
            body, start, pos = data[pos:end], pos, end + 1
        else:
            header_end = data.find(b"\r\n\r\n", pos)
            if header_end < 0:
                return
            headers = data[pos:header_end].decode("ascii").split("\r\n")
            length = next(
                int(line.split(":", 1)[1])
                for line in headers
                if line.lower().startswith("content-length:")
            )
            body_start = header_end + 4
            if body_start + length > len(data):
                return
            body, start, pos = data[body_start : body_start + length], pos, body_start + length
        if body.strip():
            yield pos, pos - start, body


@asynccontextmanager
async def tiller(
    fake: FakeOpenAI | None, workdir: Path, framing: str = "ndjson"
) -> AsyncIterator[TappedClient]:
    """A spawned, tapped server (provider: ``fake``), closed on exit."""
    argv = ["--cwd", str(workdir)]
    if fake is not None:
        argv = ["--base-url", fake.url, *argv]
    client = await TappedClient.spawn(argv, framing=framing, env=server_env(), cwd=workdir)
    async with client:
        yield client


@functools.cache
def _compile_server() -> None:
    """Compile server/ to bytecode once per bench process, as an installed package is (under
    PYTHONDONTWRITEBYTECODE every spawn would compile Tiller's modules again, which no user's
    start-up pays)."""
    compileall.compile_dir(ROOT / "server", quiet=1)


def server_env() -> dict[str, str]:
    """The environment of this process minus provider settings, with server/ importable (and
    compiled: ``_compile_server``)."""
    _compile_server()
    env = clean_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "server"), env.get("PYTHONPATH")]))
    return env


async def initialize(client: TillerClient) -> Any:
    return await client.request(
        "initialize", {"clientInfo": {"name": "bench", "version": "0"}, "capabilities": {}}
    )


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int, field_name: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    raise LookupError(f"{field_name} not in /proc/{pid}/status")


# ---------------------------------------------------------------------------------------------
# Measurements


@dataclass
class Results:
    rows: list[tuple[str, str, list[str]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, section: str, metric: str, *values: str) -> None:
        self.rows.append((section, metric, list(values)))


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def mib(kib: int) -> str:
    return f"{kib / 1024:.1f} MiB"


def spread(samples: Sequence[float]) -> str:
    return (
        f"median {ms(statistics.median(samples))} (min {ms(min(samples))}, max {ms(max(samples))})"
    )


def python_runs(code: str, count: int = SPAWNS) -> list[float]:
    """Wall times of ``python -c CODE``, ``count`` times."""
    samples, env = [], server_env()
    for _ in range(count):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, env=env)
        samples.append(time.perf_counter() - start)
    return samples


async def measure_startup(results: Results, workdir: Path) -> None:
    """1. spawn -> initialize response, fresh processes, NDJSON."""
    samples = []
    for _ in range(SPAWNS):
        start = time.perf_counter()
        async with tiller(None, workdir) as client:
            await initialize(client)
            samples.append(time.perf_counter() - start)
    bare = await anyio.to_thread.run_sync(python_runs, "pass")
    imports = await anyio.to_thread.run_sync(python_runs, "import tiller.fronts.tiller.front")
    section = "1. start-up (ndjson)"
    results.add(section, f"spawn -> initialize response, {SPAWNS} spawns", spread(samples))
    results.add(section, "for scale: `python -c pass`", spread(bare))
    results.add(section, "for scale: `python -c 'import tiller.fronts.tiller.front'`",
                spread(imports))


async def measure_first_prompt(results: Results, fake: FakeOpenAI, workdir: Path) -> None:
    """2 and 3. RSS idle and after a prompt; first (cold) vs second (warm) prompt."""
    fake.enqueue(text_reply("Hello there!"), text_reply("Hello again!"))
    async with tiller(fake, workdir) as client:
        await initialize(client)
        idle = rss_kib(client.pid)
        times = []
        for message in ("hi", "hi again"):
            start = time.perf_counter()
            await client.request("agent/prompt", {"message": message})
            times.append(time.perf_counter() - start)
        after_one = rss_kib(client.pid)
    results.add("2. memory (server VmRSS)", "idle, after initialize", mib(idle))
    results.add(
        "2. memory (server VmRSS)", "after two short prompts (HTTP library loaded)", mib(after_one)
    )
    section = "3. agent/prompt round trip (short reply)"
    results.add(section, "first prompt, fresh server (lazy SDK import)", ms(times[0]))
    results.add(section, "second prompt, same server", ms(times[1]))


@dataclass
class StreamRun:
    wall: float = 0.0
    cpu: float = 0.0
    first_update: float = 0.0
    updates: int = 0
    update_rate: float = 0.0
    server_bytes: int = 0
    update_bytes: int = 0
    provider_bytes: int = 0
    rss: int = 0
    hwm: int = 0
    sample: str = ""


def streamed_reply() -> Reply:
    return text_reply(TOKEN * TOKENS, chunk_size=len(TOKEN))


def sse_bytes(reply: Reply, request: dict[str, Any]) -> int:
    """Bytes of the SSE body the fake sent for ``reply`` (HTTP headers excluded)."""
    return sum(len(f"data: {payload}\n\n".encode()) for payload in _render(reply, request))


async def stream_once(fake: FakeOpenAI, workdir: Path, framing: str) -> StreamRun:
    """4. one 5,000-token reply through a warmed-up server in ``framing``."""
    reply = streamed_reply()
    fake.enqueue(text_reply("warm-up"), reply)
    run = StreamRun()
    async with tiller(fake, workdir, framing) as client:
        await initialize(client)
        await client.request("agent/prompt", {"message": "warm up"})
        mark = client.mark()
        cpu_before = cpu_seconds(client.pid)
        start = time.perf_counter()
        await client.request("agent/prompt", {"message": "talk a lot"}, timeout=120)
        run.wall = time.perf_counter() - start
        run.cpu = cpu_seconds(client.pid) - cpu_before
        run.rss, run.hwm = rss_kib(client.pid), rss_kib(client.pid, "VmHWM")
        frames = client.frames_since(mark)
    response_at = next(i for i, f in enumerate(frames) if "result" in f.message)
    frames = frames[: response_at + 1]  # what the client waited for (agent_settled may follow)
    updates = [f for f in frames if f.event_type == "message_update"]
    run.updates = len(updates)
    run.first_update = updates[0].at - start
    span = updates[-1].at - updates[0].at
    run.update_rate = (len(updates) - 1) / span if span > 0 else float("nan")
    run.server_bytes = sum(f.size for f in frames)
    run.update_bytes = sum(f.size for f in updates)
    run.sample = json.dumps(updates[len(updates) // 2].message)
    run.provider_bytes = sse_bytes(reply, fake.requests[-1])
    return run


READER_SCRIPT = """
import asyncio, http.client, json, sys, time
from urllib.parse import urlsplit

mode, url = sys.argv[1], sys.argv[2]
body = {"model": "gpt-4o-mini", "stream": True, "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "talk a lot"}]}

def raw():
    parts = urlsplit(url)
    start, cpu = time.perf_counter(), time.process_time()
    conn = http.client.HTTPConnection(parts.hostname, parts.port)
    conn.request("POST", parts.path + "/chat/completions", json.dumps(body),
                 {"Content-Type": "application/json"})
    response = conn.getresponse()
    while response.read(65536):
        pass
    return time.perf_counter() - start, time.process_time() - cpu

async def sdk():
    import openai
    client = openai.AsyncOpenAI(base_url=url, api_key="bench", max_retries=0)
    start, cpu = time.perf_counter(), time.process_time()
    async for _ in await client.chat.completions.create(**body):
        pass
    return time.perf_counter() - start, time.process_time() - cpu

print(*(raw() if mode == "raw" else asyncio.run(sdk())))
"""


async def provider_alone(fake: FakeOpenAI, mode: str) -> tuple[float, float]:
    """(wall, CPU) seconds for a separate process to read the same stream: ``raw`` bytes over
    HTTP, or through the ``openai`` SDK (imported before the clock starts). Floors for step 4."""
    fake.enqueue(streamed_reply())
    argv = [sys.executable, "-c", READER_SCRIPT, mode, fake.url]
    result = await anyio.run_process(argv, env=server_env())
    wall, cpu = result.stdout.decode().split()
    return float(wall), float(cpu)


async def measure_streaming(results: Results, fake: FakeOpenAI, workdir: Path) -> None:
    runs = [await stream_once(fake, workdir, framing) for framing in FRAMINGS]
    raw = await provider_alone(fake, "raw")
    sdk = await provider_alone(fake, "sdk")
    section = f"4. {TOKENS:,}-token streamed reply"
    columns: list[tuple[str, Callable[[StreamRun], str]]] = [
        ("request -> response (wall)", lambda r: ms(r.wall)),
        ("server CPU time (user+sys) in that span", lambda r: ms(r.cpu)),
        ("  per streamed token", lambda r: f"{r.cpu / TOKENS * 1e6:.0f} us"),
        ("request -> first message_update", lambda r: ms(r.first_update)),
        ("message_update events received", lambda r: f"{r.updates:,}"),
        ("message_update events/s at the client", lambda r: f"{r.update_rate:,.0f}/s"),
        ("server stdout bytes, request -> response", lambda r: f"{r.server_bytes:,} B"),
        ("  per streamed token", lambda r: f"{r.server_bytes / TOKENS:.1f} B"),
        ("  per message_update frame", lambda r: f"{r.update_bytes / max(r.updates, 1):.1f} B"),
        ("provider SSE bytes (body)", lambda r: f"{r.provider_bytes:,} B"),
        ("  per streamed token", lambda r: f"{r.provider_bytes / TOKENS:.1f} B"),
        ("ratio server / provider bytes", lambda r: f"{r.server_bytes / r.provider_bytes:.2f}"),
        ("server VmRSS after the stream", lambda r: mib(r.rss)),
        ("server VmHWM (peak RSS)", lambda r: mib(r.hwm)),
    ]
    for name, show in columns:
        results.add(section, name, *(show(run) for run in runs))
    results.add(section, "for scale, another process reads the same stream:", "wall", "CPU")
    results.add(section, "  raw HTTP bytes (the fake's own pace)", ms(raw[0]), ms(raw[1]))
    results.add(section, "  through the openai SDK, no tiller", ms(sdk[0]), ms(sdk[1]))
    results.notes.append(f"a message_update frame as sent (ndjson): {runs[0].sample}")


async def getstate_once(workdir: Path, framing: str) -> tuple[list[float], float]:
    """5. sequential round trips, then PIPELINED requests in one write: (RTTs, requests/s)."""
    async with tiller(None, workdir, framing) as client:
        await initialize(client)
        await client.request("agent/getState")  # creates the default session
        rtts = []
        for _ in range(SEQUENTIAL):
            start = time.perf_counter()
            await client.request("agent/getState")
            rtts.append(time.perf_counter() - start)
        ids = [client.next_id() for _ in range(PIPELINED)]
        blob = pipelined_requests(client.framing, ids)
        before = len(client.received)
        mark = client.mark()
        start = time.perf_counter()
        await client.send_raw(blob)
        # only the last one: wait_for rescans received[start:] on every message
        await client.wait_for(lambda _: True, start=before + PIPELINED - 1, timeout=60)
        frames = client.frames_since(mark)
        wanted = set(ids)
        last = max(f.at for f in frames if f.message.get("id") in wanted)
        errors = sum(1 for f in frames if "error" in f.message)
    if errors:
        print(f"warning: {errors} getState requests failed ({framing})", file=sys.stderr)
    return rtts, PIPELINED / (last - start)


def pipelined_requests(framing: Framing, ids: Sequence[int]) -> bytes:
    """One blob of framed ``agent/getState`` requests with these ids."""
    return b"".join(
        frame(json.dumps({"jsonrpc": "2.0", "id": i, "method": "agent/getState"}).encode(), framing)
        for i in ids
    )


async def measure_requests(results: Results, workdir: Path) -> None:
    runs = [await getstate_once(workdir, framing) for framing in FRAMINGS]
    section = "5. inbound requests (agent/getState)"
    results.add(
        section,
        f"sequential round trip, {SEQUENTIAL} requests",
        *(f"median {ms(statistics.median(rtts))}" for rtts, _ in runs),
    )
    results.add(
        section,
        f"{PIPELINED:,} pipelined in one write",
        *(f"{rate:,.0f} req/s" for _, rate in runs),
    )


# ---------------------------------------------------------------------------------------------
# Report


def header() -> str:
    try:
        import openai

        sdk = openai.__version__
    except ImportError:
        sdk = "not installed"
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return "\n".join(
        [
            f"tiller {tiller_version} server benchmark  ({time.strftime('%Y-%m-%d %H:%M:%S')})",
            f"machine: {platform.machine()}, {cpus} CPUs usable (nproc), {platform.platform()}",
            f"python {platform.python_version()} ({sys.executable}), openai SDK {sdk}",
            f"load average at start: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}",
            "numbers are from a single run; expect run-to-run noise of 10-20%",
        ]
    )


def render(results: Results) -> str:
    width = max(len(metric) for _, metric, _ in results.rows) + 2
    lines: list[str] = []
    section_now = None
    for section, metric, values in results.rows:
        if section != section_now:
            section_now = section
            lines.append("")
            lines.append(section)
            if len(values) > 1:
                lines.append(f"  {'':<{width}}{'ndjson':<24}lsp")
        cells = "".join(f"{value:<24}" for value in values)
        lines.append(f"  {metric:<{width}}{cells}".rstrip())
    lines.append("")
    lines.extend(results.notes)
    return "\n".join(lines)


async def main() -> None:
    print(header(), flush=True)
    results = Results()
    with tempfile.TemporaryDirectory(prefix="tiller-bench-") as tmp, FakeOpenAI() as fake:
        workdir = Path(tmp)
        await measure_startup(results, workdir)
        await measure_first_prompt(results, fake, workdir)
        await measure_streaming(results, fake, workdir)
        await measure_requests(results, workdir)
        fake.assert_script_complete()
    print(render(results))


if __name__ == "__main__":
    anyio.run(main)
