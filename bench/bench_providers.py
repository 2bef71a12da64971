"""Per-token latency of the ``tiller`` server between a streaming provider and its client.

For a 5,000-token streamed reply (one 4-character token per chunk, as in bench_server.py), from
an OpenAI-style stream (``FakeOpenAI``, ``--base-url``) and an Anthropic-style stream
(``FakeAnthropic``, ``--provider anthropic`` with ``ANTHROPIC_BASE_URL``/``ANTHROPIC_API_KEY`` in
the server's environment), each once at full speed and once paced at 200 tokens/s:

- provider's first body byte -> the client's first ``message_update``;
- overhead per streamed token: the client's receive time of the update that completes the k-th
  text chunk minus the provider's send time of that chunk, median, p95 and max over the stream;
- ``message_update`` events/s at the client, and bytes per token on both wires (the provider's
  SSE body, the server's stdout);
- request -> response wall time and the server's CPU time per token, next to the CPU per token
  of another process reading the same kind of stream through the provider's SDK alone (no
  tiller), the floor under it.

Both ends live in this process, so they share one clock (``time.perf_counter``): the fake
provider runs in a thread, its handler subclassed here to pre-render the stream, timestamp each
write and (optionally) pace the text chunks; the client is ``bench_server.TappedClient``, which
timestamps every read of the server's stdout. The fake's sockets get ``TCP_NODELAY`` (as real
provider front ends do) so Nagle's algorithm does not hold back the small writes.

At full speed the provider outruns the pipeline, so "overhead" there is mostly queueing (the
backlog in the socket and pipe buffers), not latency; at 200 tokens/s, about what a fast hosted
model produces, the per-token overhead is the number that matters.

Run from the repository root (about 90 s on 2 idle cores: the paced runs take 25 s each)::

    python bench/bench_providers.py

It prints numbers from one run and asserts nothing about them.
"""

from __future__ import annotations

import bisect
import json
import os
import platform
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

BENCH = Path(__file__).resolve().parent
for _path in (BENCH, BENCH.parent / "tests", BENCH.parent / "server"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench_server import (  # noqa: E402
    Frame,
    TappedClient,
    initialize,
    server_env,
)

from support import fake_anthropic, fake_openai, fake_openai_responses  # noqa: E402
from tiller import __version__ as tiller_version  # noqa: E402

TOKENS = 5_000
TOKEN = "tok "  # one "token" per text chunk
PACED_RATE = 200.0  # tokens/s
SDK_ALONE_PACED_TOKENS = 600  # the SDK-alone floor, paced: 3 s is plenty


# ---------------------------------------------------------------------------------------------
# Fake providers that timestamp (and may pace) what they send


@dataclass
class Sent:
    """One SSE frame the fake wrote: when (just before the write), its size, its text chars."""

    at: float
    size: int
    chars: int


@dataclass
class Wire:
    """What the fake sent for one request, on this process's ``perf_counter`` clock."""

    request_at: float
    frames: list[Sent] = field(default_factory=list)

    @property
    def body_bytes(self) -> int:
        return sum(f.size for f in self.frames)

    @property
    def text_frames(self) -> list[Sent]:
        return [f for f in self.frames if f.chars]


class _Recording:
    """Mixed into a fake's handler: stream pre-rendered frames, timestamped, maybe paced."""

    server: Any
    wfile: Any
    connection: socket.socket

    def setup(self) -> None:
        super().setup()  # type: ignore[misc]
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _stream(
        self, arrived: float, frames: list[tuple[bytes, int]], headers: Sequence[tuple[str, str]]
    ) -> None:
        fake = self.server.fake
        wire = Wire(request_at=arrived)
        self.send_response(200)  # type: ignore[attr-defined]
        for name, value in headers:
            self.send_header(name, value)  # type: ignore[attr-defined]
        self.end_headers()  # type: ignore[attr-defined]
        interval = 1.0 / fake.rate if fake.rate else 0.0
        write, clock, sent = self.wfile.write, time.perf_counter, wire.frames
        first_text: float | None = None
        texts = 0
        for data, chars in frames:
            if chars and interval:
                if first_text is None:
                    first_text = clock()
                else:
                    delay = first_text + texts * interval - clock()
                    if delay > 0:
                        time.sleep(delay)
            sent.append(Sent(clock(), len(data), chars))
            write(data)
            if chars:
                texts += 1
        fake.wires.append(wire)


def _openai_chars(payload: str) -> int:
    if payload == "[DONE]":
        return 0
    choices = json.loads(payload)["choices"]
    return len(choices[0]["delta"].get("content") or "") if choices else 0


def _anthropic_chars(frame: str) -> int:
    name, data = frame.split("\n", 1)
    if name != "event: content_block_delta":
        return 0
    delta = json.loads(data.removeprefix("data: "))["delta"]
    return len(delta["text"]) if delta["type"] == "text_delta" else 0


def _responses_chars(name: str, data: str) -> int:
    if name != "response.output_text.delta":
        return 0
    return len(json.loads(data)["delta"])


class _OpenAIHandler(_Recording, fake_openai._Handler):
    def _send_reply(self, reply: fake_openai.Reply, request: Any) -> None:
        arrived = time.perf_counter()
        frames = [
            (f"data: {payload}\n\n".encode(), _openai_chars(payload))
            for payload in fake_openai._render(reply, request)
        ]
        headers = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"),
                   ("Connection", "close")]
        self._stream(arrived, frames, headers)


class _AnthropicHandler(_Recording, fake_anthropic._Handler):
    def _send_reply(self, reply: fake_anthropic.Reply, request: Any) -> None:
        arrived = time.perf_counter()
        frames = [(frame, _anthropic_chars(frame.decode()))
                  for frame in self._frames(reply, request)]  # the fake's usage accounting
        headers = [("Content-Type", "text/event-stream; charset=utf-8"),
                   ("Cache-Control", "no-cache"), ("Connection", "close"),
                   ("request-id", "req_fakebench")]
        self._stream(arrived, frames, headers)


class _ResponsesHandler(_Recording, fake_openai_responses._Handler):
    def _send_reply(self, reply: fake_openai_responses.Reply, request: Any) -> None:
        arrived = time.perf_counter()
        frames = []
        for name, data in self._fake.render(reply, request):
            head = f"event: {name}\n" if name else ""
            frames.append((f"{head}data: {data}\n\n".encode(), _responses_chars(name, data)))
        self._stream(arrived, frames, self._stream_headers())


class RecordingOpenAI(fake_openai.FakeOpenAI):
    def __init__(self) -> None:
        super().__init__()
        self.rate: float | None = None
        self.wires: list[Wire] = []

    def start(self) -> RecordingOpenAI:
        super().start()
        assert self._httpd is not None
        self._httpd.RequestHandlerClass = _OpenAIHandler  # before any request arrives
        return self


class RecordingAnthropic(fake_anthropic.FakeAnthropic):
    def __init__(self) -> None:
        super().__init__()
        self.rate: float | None = None
        self.wires: list[Wire] = []

    def start(self) -> RecordingAnthropic:
        super().start()
        assert self._httpd is not None
        self._httpd.RequestHandlerClass = _AnthropicHandler
        return self


class RecordingResponses(fake_openai_responses.FakeResponses):
    """The Responses API fake (tests/support/fake_openai_responses.py), timestamped and paced
    like the others: ``rate`` text deltas per second (None: as fast as it can)."""

    def __init__(self) -> None:
        super().__init__()
        self.rate: float | None = None
        self.wires: list[Wire] = []

    def start(self) -> RecordingResponses:
        super().start()
        assert self._httpd is not None
        self._httpd.RequestHandlerClass = _ResponsesHandler
        return self


Fake = RecordingOpenAI | RecordingAnthropic


# ---------------------------------------------------------------------------------------------
# One measured stream


@dataclass
class Run:
    label: str
    wall: float = 0.0
    cpu: tuple[float, float] = (0.0, 0.0)  # user, system
    request_to_provider: float = 0.0
    provider_render: float = 0.0
    first_byte_to_update: float = 0.0
    first_text_to_update: float = 0.0
    overheads: list[float] = field(default_factory=list)
    text_chunks: int = 0
    updates: int = 0
    update_rate: float = 0.0
    provider_span: float = 0.0
    provider_bytes: int = 0
    server_bytes: int = 0
    update_bytes: int = 0
    sdk_cpu_per_token: float = 0.0


def cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds the process has used so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def spawn_args(fake: Fake, workdir: Path) -> tuple[list[str], dict[str, str]]:
    env = server_env()
    argv = ["--cwd", str(workdir), "--no-session", "--framing", "ndjson"]
    if isinstance(fake, RecordingOpenAI):
        return ["--provider", "openai", "--base-url", fake.url, *argv], env
    env.update(ANTHROPIC_API_KEY="dummy", ANTHROPIC_BASE_URL=fake.url)
    return ["--provider", "anthropic", *argv], env


async def stream_once(fake: Fake, workdir: Path, rate: float | None, label: str) -> Run:
    module = fake_openai if isinstance(fake, RecordingOpenAI) else fake_anthropic
    fake.enqueue(
        module.text_reply("warm-up"),
        module.text_reply(TOKEN * TOKENS, chunk_size=len(TOKEN)),
    )
    run = Run(label)
    argv, env = spawn_args(fake, workdir)
    client = await TappedClient.spawn(argv, framing="ndjson", env=env, cwd=workdir)
    async with client:
        await initialize(client)
        fake.rate = None
        await client.request("agent/prompt", {"message": "warm up"})
        fake.rate = rate
        mark = client.mark()
        cpu_before = cpu_times(client.pid)
        start = time.perf_counter()
        await client.request("agent/prompt", {"message": "talk a lot"}, timeout=120)
        run.wall = time.perf_counter() - start
        cpu_after = cpu_times(client.pid)
        run.cpu = (cpu_after[0] - cpu_before[0], cpu_after[1] - cpu_before[1])
        frames = client.frames_since(mark)
    wire = fake.wires[-1]
    response_at = next(i for i, f in enumerate(frames) if "result" in f.message)
    frames = frames[: response_at + 1]
    analyse(run, start, wire, frames)
    return run


def analyse(run: Run, start: float, wire: Wire, frames: list[Frame]) -> None:
    updates = [f for f in frames if f.event_type == "message_update"]
    texts = [f for f in updates if f.message["params"].get("kind") == "text"]
    # Where the client's text reaches each provider chunk's end: robust to coalescing.
    received: list[int] = []
    total = 0
    for update in texts:
        total += len(update.message["params"].get("delta") or "")
        received.append(total)
    sent = wire.text_frames
    total = 0
    for chunk in sent:
        total += chunk.chars
        index = bisect.bisect_left(received, total)
        if index < len(texts):
            run.overheads.append(texts[index].at - chunk.at)
    run.request_to_provider = wire.request_at - start
    run.provider_render = wire.frames[0].at - wire.request_at
    run.first_byte_to_update = updates[0].at - wire.frames[0].at
    run.first_text_to_update = texts[0].at - sent[0].at
    run.text_chunks = len(sent)
    run.updates = len(updates)
    span = updates[-1].at - updates[0].at
    run.update_rate = (len(updates) - 1) / span if span > 0 else float("nan")
    run.provider_span = sent[-1].at - sent[0].at
    run.provider_bytes = wire.body_bytes
    run.server_bytes = sum(f.size for f in frames)
    run.update_bytes = sum(f.size for f in updates)


SDK_READER = """
import asyncio, sys, time

kind, url = sys.argv[1], sys.argv[2]

async def main():
    if kind == "openai":
        import openai
        client = openai.AsyncOpenAI(base_url=url, api_key="bench", max_retries=0)
        create = client.chat.completions.create
        extra = {"stream_options": {"include_usage": True}}
    else:
        import anthropic
        client = anthropic.AsyncAnthropic(base_url=url, api_key="bench", max_retries=0)
        create = client.messages.create
        extra = {"max_tokens": 8192}
    messages = [{"role": "user", "content": "talk a lot"}]
    cpu = time.process_time()
    async for _ in await create(model="bench", messages=messages, stream=True, **extra):
        pass
    print(time.process_time() - cpu)

asyncio.run(main())
"""


async def sdk_alone(fake: Fake, rate: float | None, tokens: int) -> float:
    """CPU seconds per token for another process to read the same kind of stream through the
    provider's SDK alone (imported before the clock starts): the floor under tiller's cost."""
    module = fake_openai if isinstance(fake, RecordingOpenAI) else fake_anthropic
    fake.enqueue(module.text_reply(TOKEN * tokens, chunk_size=len(TOKEN)))
    fake.rate = rate
    kind = "openai" if isinstance(fake, RecordingOpenAI) else "anthropic"
    argv = [sys.executable, "-c", SDK_READER, kind, fake.url]
    result = await anyio.run_process(argv, env=server_env())
    return float(result.stdout.decode()) / tokens


# ---------------------------------------------------------------------------------------------
# Report


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


ROWS: list[tuple[str, Callable[[Run], str]]] = [
    ("request -> response (wall)", lambda r: ms(r.wall)),
    ("provider: first -> last text chunk sent", lambda r: ms(r.provider_span)),
    ("server CPU per streamed token (user+sys)", lambda r: f"{sum(r.cpu) / TOKENS * 1e6:.0f} us"),
    ("  of which system (kernel)", lambda r: f"{r.cpu[1] / TOKENS * 1e6:.0f} us"),
    ("  = share of one core while streaming", lambda r: f"{sum(r.cpu) / r.wall * 100:.0f}%"),
    ("for scale: the SDK alone, CPU per token", lambda r: f"{r.sdk_cpu_per_token * 1e6:.0f} us"),
    ("client request -> provider has it", lambda r: ms(r.request_to_provider)),
    ("provider: request -> 1st body byte (renders)", lambda r: ms(r.provider_render)),
    ("provider 1st body byte -> 1st message_update", lambda r: ms(r.first_byte_to_update)),
    ("provider 1st text chunk -> its message_update", lambda r: ms(r.first_text_to_update)),
    ("overhead per token: median", lambda r: ms(statistics.median(r.overheads))),
    ("overhead per token: p95", lambda r: ms(percentile(r.overheads, 0.95))),
    ("overhead per token: max", lambda r: ms(max(r.overheads))),
    ("text chunks sent / message_update received",
     lambda r: f"{r.text_chunks:,} / {r.updates:,}"),
    ("message_update events/s at the client", lambda r: f"{r.update_rate:,.0f}/s"),
    ("provider SSE body bytes per token", lambda r: f"{r.provider_bytes / TOKENS:.1f} B"),
    ("server stdout bytes per token", lambda r: f"{r.server_bytes / TOKENS:.1f} B"),
    ("  per message_update frame", lambda r: f"{r.update_bytes / max(r.updates, 1):.1f} B"),
]


def render(runs: list[Run]) -> str:
    width = max(len(name) for name, _ in ROWS) + 2
    col = max(18, *(len(r.label) + 2 for r in runs))
    lines = [f"  {'':<{width}}" + "".join(f"{r.label:<{col}}" for r in runs)]
    for name, show in ROWS:
        lines.append((f"  {name:<{width}}" + "".join(f"{show(r):<{col}}" for r in runs)).rstrip())
    return "\n".join(lines)


def header() -> str:
    versions = []
    for module in ("openai", "anthropic"):
        try:
            versions.append(f"{module} SDK {__import__(module).__version__}")
        except ImportError:
            versions.append(f"{module} SDK not installed")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return "\n".join(
        [
            f"tiller {tiller_version} provider streaming benchmark  "
            f"({time.strftime('%Y-%m-%d %H:%M:%S')})",
            f"machine: {platform.machine()}, {cpus} CPUs usable, {platform.platform()}",
            f"python {platform.python_version()}, {', '.join(versions)}",
            f"load average at start: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}",
            f"{TOKENS:,}-token reply, {len(TOKEN)} chars per text chunk; "
            f"paced runs send one text chunk every {1000 / PACED_RATE:g} ms",
            "numbers are from a single run; expect run-to-run noise of 10-20%",
        ]
    )


async def main() -> None:
    print(header(), flush=True)
    runs: list[Run] = []
    with (
        tempfile.TemporaryDirectory(prefix="tiller-bench-") as tmp,
        RecordingOpenAI() as openai_fake,
        RecordingAnthropic() as anthropic_fake,
    ):
        workdir = Path(tmp)
        fakes: list[tuple[str, Fake]] = [("openai", openai_fake), ("anthropic", anthropic_fake)]
        for rate, pace in ((None, "full"), (PACED_RATE, f"{PACED_RATE:g}/s")):
            for name, fake in fakes:
                print(f"  streaming: {name}, {pace} ...", flush=True)
                run = await stream_once(fake, workdir, rate, f"{name} {pace}")
                tokens = SDK_ALONE_PACED_TOKENS if rate else TOKENS
                run.sdk_cpu_per_token = await sdk_alone(fake, rate, tokens)
                runs.append(run)
        openai_fake.assert_script_complete()
        anthropic_fake.assert_script_complete()
    print()
    print(render(runs))
    print()
    print("overhead per token = client receives the update completing text chunk k - provider")
    print("starts writing chunk k; at full speed it is mostly queueing behind earlier chunks.")
    print(f"the SDK-alone row reads {TOKENS:,} tokens at full speed, {SDK_ALONE_PACED_TOKENS:,}"
          " when paced, in a separate process, and discards them.")


if __name__ == "__main__":
    anyio.run(main)
