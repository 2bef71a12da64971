"""Tiller side by side with its peer, pi 1.6.0, on the same scripted OpenAI-compatible server.

pi (npm ``@earendil-works/pi-coding-agent@1.6.0``) needs Node >= 22.19; both come from the npm
registry (the ``node@22`` package ships the binary) and are installed once into a cache folder,
``~/.cache/tiller/peer`` (``TILLER_PEER_CACHE`` overrides it). pi runs as ``pi --mode rpc
--no-session`` with a custom provider in ``$PI_CODING_AGENT_DIR/models.json`` pointing at the
loopback fake of bench_providers.py (``RecordingOpenAI``: tests/support/fake_openai.py's server,
paced when asked); Tiller as ``python -m tiller --no-session --base-url``. Both speak NDJSON on
stdio and are driven by the same minimal client here, which counts every byte they write.

Measured, for each:

1. spawn -> first response (Tiller: ``initialize``; pi: ``get_state``), median of 15 spawns;
   and, as the floor under Tiller, a bare ``python -c "import pygls.server"``. The spawns go in
   rounds (floor, Tiller, pi), since this VM's speed drifts within seconds, and Tiller's distance
   to the floor is the median of the paired differences (each with the floor sample just before);
2. idle RSS (VmRSS a second after that response);
3. a 3,000-token reply (one ``"tok "`` per SSE chunk), prompt -> end (Tiller: the
   ``agent/prompt`` response; pi: ``agent_settled``), after one warm-up prompt, and the bytes each
   wrote to stdout in that span per token;
4. the server's CPU time while the provider streams 100 tokens/s (300 tokens), as % of one core;
5. Tiller alone: server CPU per token of a 3,000-token reply in one session (the mean over 5
   fresh sessions, one after another) against 50 fresh sessions streaming it at once in the
   same process;
6. Tiller alone: ``session/load`` of bench_sessions.py's 10,000-entry session in a fresh
   process, request -> the response's last byte (and until an ``agent/getState`` sent right
   after the answer is answered: the session is live), then again after ``session/close``;
7. the billed input of the same scripted 20-call Anthropic session (bench_cache.py) on
   tests/support/fake_anthropic.py with Anthropic's real prompt-cache accounting, and the share
   of the input read from the cache (pi as a custom ``anthropic-messages`` provider).

Run from the repository root (about a minute on 2 idle cores, plus the npm install once)::

    python bench/bench_peer.py      # or: make bench-peer

It prints one run's numbers and asserts nothing.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

BENCH = Path(__file__).resolve().parent
for _path in (BENCH, BENCH.parent / "tests", BENCH.parent / "server"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench_cache import MODEL as CACHE_MODEL  # noqa: E402
from bench_cache import PROMPT as CACHE_PROMPT  # noqa: E402
from bench_cache import Billed, billed, pi_models_json, script_session  # noqa: E402
from bench_cache import render as render_cache  # noqa: E402
from bench_providers import RecordingOpenAI  # noqa: E402
from bench_server import (  # noqa: E402
    cpu_seconds,
    header,
    python_runs,
    rss_kib,
    server_env,
)
from bench_sessions import ENTRIES, Load, build_entries, load_in_server, write_log  # noqa: E402

from support.fake_anthropic import FakeAnthropic  # noqa: E402
from support.fake_openai import text_reply  # noqa: E402
from tiller.store.saved import workspace_dir_name  # noqa: E402

PI_PACKAGE = "@earendil-works/pi-coding-agent"
PI_VERSION = "1.6.0"
NODE_PACKAGE = "node@22"
CACHE = Path(os.environ.get("TILLER_PEER_CACHE", Path.home() / ".cache" / "tiller" / "peer"))
SPAWNS = 15
TOKENS = 3_000
TOKEN = "tok "
PACED_RATE = 100.0  # tokens/s
PACED_TOKENS = 300
MANY = 50  # sessions streaming at once
SINGLE = 5  # sessions streaming one after another, for the single-session figure
MANY_TOKENS = TOKENS  # each: the same reply as the single session's
MODEL = "fake-model"


# ---------------------------------------------------------------------------------------------
# Installing the peer


def ensure_peer() -> tuple[Path, Path, str]:
    """(node binary, pi's cli.js, node's version), installed into CACHE with npm if not yet."""
    node = CACHE / "node_modules" / ".bin" / "node"
    package = CACHE / "node_modules" / PI_PACKAGE
    manifest = package / "package.json"
    installed = manifest.exists() and json.loads(manifest.read_text())["version"] == PI_VERSION
    if not (installed and node.exists()):
        CACHE.mkdir(parents=True, exist_ok=True)
        print(f"installing {PI_PACKAGE}@{PI_VERSION} and {NODE_PACKAGE} into {CACHE} ...",
              flush=True)
        subprocess.run(
            ["npm", "install", "--prefix", str(CACHE), "--no-audit", "--no-fund",
             "--loglevel=error", f"{PI_PACKAGE}@{PI_VERSION}", NODE_PACKAGE],
            check=True,
        )
    cli = package / json.loads(manifest.read_text())["bin"]["pi"]
    return node, cli, subprocess.check_output([str(node), "--version"], text=True).strip()


# ---------------------------------------------------------------------------------------------
# One NDJSON client for both


@dataclass
class Line:
    at: float
    size: int  # bytes, newline included
    message: dict[str, Any]


@dataclass
class Agent:
    """How to start one agent and speak to it."""

    name: str
    argv: list[str]
    env: dict[str, str]
    first_request: dict[str, Any]
    prompt: Callable[[str, int], dict[str, Any]]
    is_end: Callable[[dict[str, Any], int], bool]


class Peer:
    """A spawned NDJSON process; every line it writes is kept with its size and arrival time."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.lines: list[Line] = []
        self._arrived = anyio.Event()
        self._ids = 0

    @property
    def pid(self) -> int:
        return int(self.process.pid)

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    async def read_loop(self) -> None:
        assert self.process.stdout is not None
        buffer = b""
        async for data in self.process.stdout:
            buffer += data
            *complete, buffer = buffer.split(b"\n")
            now = time.perf_counter()
            for raw in complete:
                if raw.strip():
                    self.lines.append(Line(now, len(raw) + 1, json.loads(raw)))
            if complete:
                self._arrived.set()
                self._arrived = anyio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps(message).encode() + b"\n")

    async def wait(self, match: Callable[[dict[str, Any]], bool], start: int = 0) -> int:
        """Index of the first line from ``start`` on that matches, waiting for it."""
        with anyio.fail_after(120):
            while True:
                for index in range(start, len(self.lines)):
                    if match(self.lines[index].message):
                        return index
                start = len(self.lines)
                await self._arrived.wait()


@asynccontextmanager
async def running(agent: Agent, cwd: Path) -> AsyncIterator[Peer]:
    process = await anyio.open_process(agent.argv, env=agent.env, cwd=cwd, stderr=sys.stderr)
    peer = Peer(process)
    async with anyio.create_task_group() as group:
        group.start_soon(peer.read_loop)
        try:
            yield peer
        finally:
            assert process.stdin is not None
            await process.stdin.aclose()
            with anyio.move_on_after(10) as scope:
                await process.wait()
            if scope.cancelled_caught:
                process.kill()
            group.cancel_scope.cancel()


def tiller_agent(url: str) -> Agent:
    return Agent(
        name="Tiller",
        argv=[sys.executable, "-m", "tiller", "--base-url", url, "--model", MODEL,
              "--no-session"],
        env=server_env(),
        first_request={"jsonrpc": "2.0", "method": "initialize", "params": {
            "clientInfo": {"name": "bench", "version": "0"}, "capabilities": {}}},
        prompt=lambda text, i: {"jsonrpc": "2.0", "id": i, "method": "agent/prompt",
                                "params": {"message": text}},
        is_end=lambda message, i: message.get("id") == i and "method" not in message,
    )


def pi_agent(url: str, node: Path, cli: Path, home: Path) -> Agent:
    (home / "models.json").write_text(json.dumps({"providers": {"bench": {
        "baseUrl": url, "api": "openai-completions", "apiKey": "bench",
        "models": [{"id": MODEL}]}}}))
    env = server_env()
    env.update(PI_CODING_AGENT_DIR=str(home), PI_OFFLINE="1", PI_SKIP_VERSION_CHECK="1",
               PI_TELEMETRY="0")
    return Agent(
        name=f"pi {PI_VERSION}",
        argv=[str(node), str(cli), "--mode", "rpc", "--no-session", "--provider", "bench",
              "--model", MODEL],
        env=env,
        first_request={"type": "get_state"},
        prompt=lambda text, i: {"id": str(i), "type": "prompt", "message": text},
        is_end=lambda message, i: message.get("type") == "agent_settled",
    )


# ---------------------------------------------------------------------------------------------
# Measurements


@dataclass
class Numbers:
    startup: list[float] = field(default_factory=list)
    floor: list[float] = field(default_factory=list)
    idle_rss_kib: int = 0
    reply_wall: float = 0.0
    reply_bytes: int = 0
    reply_updates: int = 0
    paced_cpu: float = 0.0
    paced_wall: float = 0.0


def first_request(agent: Agent, peer: Peer) -> dict[str, Any]:
    """The agent's first request with a fresh id (an int for JSON-RPC, a string for pi)."""
    request_id = peer.next_id()
    return dict(agent.first_request, id=request_id if "jsonrpc" in agent.first_request
                else str(request_id))


async def answer_first(agent: Agent, peer: Peer) -> None:
    request = first_request(agent, peer)
    await peer.send(request)
    await peer.wait(lambda m: m.get("id") == request["id"] and "method" not in m
                    and m.get("type", "response") == "response")


async def measure_startups(agents: Sequence[Agent], cwd: Path,
                           numbers: Sequence[Numbers]) -> None:
    """Spawn -> first response, in SPAWNS rounds: each round samples the floor, then spawns each
    agent once, so all three see the same machine (this VM's speed drifts by a third within
    seconds). The floor samples go into the first agent's numbers."""
    for _ in range(SPAWNS):
        numbers[0].floor += await anyio.to_thread.run_sync(python_runs, FLOOR_CODE, 1)
        for agent, into in zip(agents, numbers, strict=True):
            start = time.perf_counter()
            async with running(agent, cwd) as peer:
                await answer_first(agent, peer)
                into.startup.append(time.perf_counter() - start)


async def prompt_until_end(peer: Peer, agent: Agent, text: str) -> tuple[int, int]:
    """Send a prompt and wait for its end: (index of the first line after the prompt, end)."""
    request_id = peer.next_id()
    mark = len(peer.lines)
    await peer.send(agent.prompt(text, request_id))
    end = await peer.wait(lambda m: agent.is_end(m, request_id), mark)
    return mark, end


async def measure_streams(
    agent: Agent, fake: RecordingOpenAI, cwd: Path, numbers: Numbers
) -> None:
    """Idle RSS, the full-speed 3,000-token reply, then the paced one, in one process."""
    fake.enqueue(text_reply("warm-up"), text_reply(TOKEN * TOKENS, chunk_size=len(TOKEN)),
                 text_reply(TOKEN * PACED_TOKENS, chunk_size=len(TOKEN)))
    async with running(agent, cwd) as peer:
        await answer_first(agent, peer)
        await anyio.sleep(1.0)  # let start-up work that runs after the answer finish
        numbers.idle_rss_kib = rss_kib(peer.pid)
        await prompt_until_end(peer, agent, "warm up")
        fake.rate = None
        start = time.perf_counter()
        mark, end = await prompt_until_end(peer, agent, "talk a lot")
        numbers.reply_wall = peer.lines[end].at - start
        span = peer.lines[mark : end + 1]
        numbers.reply_bytes = sum(line.size for line in span)
        numbers.reply_updates = sum(
            1 for line in span if is_update(line.message)
        )
        fake.rate = PACED_RATE
        cpu, start = cpu_seconds(peer.pid), time.perf_counter()
        await prompt_until_end(peer, agent, "talk slowly")
        numbers.paced_cpu = cpu_seconds(peer.pid) - cpu
        numbers.paced_wall = time.perf_counter() - start
        fake.rate = None


async def measure_many_sessions(fake: RecordingOpenAI, cwd: Path) -> tuple[float, float]:
    """Tiller's server CPU per streamed token: SINGLE fresh sessions one after another, then
    MANY fresh sessions at once (MANY_TOKENS each), in one warmed-up process. (single, many) in
    seconds per token. Several single replies, since /proc counts CPU in 10 ms ticks and one
    3,000-token reply takes only ~0.15 s."""
    agent = tiller_agent(fake.url)
    fake.rate = None
    fake.enqueue(text_reply("warm-up"),
                 *(text_reply(TOKEN * MANY_TOKENS, chunk_size=len(TOKEN))
                   for _ in range(SINGLE + MANY)))
    async with running(agent, cwd) as peer:
        await answer_first(agent, peer)
        await prompt_until_end(peer, agent, "warm up")

        async def new_sessions(count: int) -> list[str]:
            sessions = []
            for _ in range(count):
                request_id = peer.next_id()
                await peer.send({"jsonrpc": "2.0", "id": request_id, "method": "session/new",
                                 "params": {}})
                index = await peer.wait(lambda m, i=request_id: m.get("id") == i)
                sessions.append(peer.lines[index].message["result"]["sessionId"])
            return sessions

        async def talk(sessions: list[str]) -> float:
            """CPU seconds per token while ``sessions`` each stream one reply, all at once."""
            cpu = cpu_seconds(peer.pid)
            ids = []
            for session_id in sessions:
                ids.append(peer.next_id())
                await peer.send({"jsonrpc": "2.0", "id": ids[-1], "method": "agent/prompt",
                                 "params": {"sessionId": session_id, "message": "talk"}})
            for request_id in ids:
                await peer.wait(lambda m, i=request_id: m.get("id") == i and "method" not in m)
            return (cpu_seconds(peer.pid) - cpu) / (len(sessions) * MANY_TOKENS)

        singles = [await talk([session]) for session in await new_sessions(SINGLE)]
        many = await talk(await new_sessions(MANY))
    return statistics.mean(singles), many


async def measure_session_load(root: Path) -> Load:
    """Step 6: bench_sessions.py's session written under ``root``, loaded by a fresh server."""
    cwd = (root / "load-workspace").resolve()
    cwd.mkdir()
    session_dir, session_id = root / "sessions", uuid.uuid4().hex
    path = session_dir / workspace_dir_name(cwd) / f"{session_id}.jsonl"
    write_log(path, session_id, cwd, build_entries(ENTRIES), durable=False)
    return await load_in_server(session_dir, cwd, session_id, acp=False)


PI_TOOLS = "read,bash,edit,write,grep,find,ls"
"""pi's tools for step 7: Tiller's (but ``todo``, which pi does not have), so both declare
about the same tools; pi's default is only the first four."""


async def measure_cache(node: Path, cli: Path) -> tuple[Billed, Billed]:
    """Step 7: (Tiller, pi) billed for the same 20-call session, each on a fresh fake."""
    results = []
    for who in ("tiller", "pi"):
        with tempfile.TemporaryDirectory(prefix=f"tiller-cache-{who}-") as tmp, \
                FakeAnthropic() as fake:
            root = Path(tmp)
            cwd, home = root / "work", root / "pi-home"
            cwd.mkdir()
            home.mkdir()
            script_session(fake)
            if who == "tiller":
                env = server_env()
                env.update(ANTHROPIC_API_KEY="bench", ANTHROPIC_BASE_URL=fake.url,
                           XDG_DATA_HOME=str(root / "data"))
                agent = Agent(
                    name="Tiller",
                    argv=[sys.executable, "-m", "tiller", "--provider", "anthropic", "--model",
                          CACHE_MODEL, "--no-session", "--permission-mode", "auto"],
                    env=env, first_request=tiller_agent(fake.url).first_request,
                    prompt=tiller_agent(fake.url).prompt, is_end=tiller_agent(fake.url).is_end)
            else:
                agent = pi_agent(fake.url, node, cli, home)
                (home / "models.json").write_text(json.dumps(pi_models_json(fake.url)))
                agent.argv = [str(node), str(cli), "--mode", "rpc", "--no-session", "--provider",
                              "bench-anthropic", "--model", CACHE_MODEL, "--tools", PI_TOOLS]
            async with running(agent, cwd) as peer:
                await answer_first(agent, peer)
                await prompt_until_end(peer, agent, CACHE_PROMPT)
            problems = fake.failures + (
                [f"{len(fake.unused_replies)} replies unused"] if fake.unused_replies else [])
            if problems:
                print(f"{agent.name} on the Anthropic fake: {'; '.join(problems)}", flush=True)
            results.append(billed(fake))
    return results[0], results[1]


def is_update(message: dict[str, Any]) -> bool:
    if message.get("type") == "message_update":
        return True
    params = message.get("params")
    return isinstance(params, dict) and params.get("type") == "message_update"


FLOOR_CODE = "import pygls.server"


# ---------------------------------------------------------------------------------------------
# Report


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def render(tiller: Numbers, pi: Numbers, floor: Sequence[float],
           many: tuple[float, float], load: Load) -> str:
    def row(name: str, ours: float, theirs: float, show: Callable[[float], str],
            target: str) -> str:
        ratio = ours / theirs if theirs else float("nan")
        return f"| {name} | {show(ours)} | {show(theirs)} | {ratio:.2f} | {target} |"

    def percent(cpu: float, wall: float) -> float:
        return 100 * cpu / wall if wall else float("nan")

    paired = [ours - base for ours, base in zip(tiller.startup, floor, strict=True)]
    apart = statistics.median(tiller.startup) - statistics.median(floor)

    lines = [
        f"| measure | Tiller | pi {PI_VERSION} | Tiller/pi | target |",
        "|---|---|---|---|---|",
        row(f"spawn -> first response (median of {SPAWNS})", statistics.median(tiller.startup),
            statistics.median(pi.startup), ms, "<= 1.0"),
        row("idle RSS", tiller.idle_rss_kib / 1024, pi.idle_rss_kib / 1024,
            lambda v: f"{v:.0f} MB", "<= 0.5"),
        row(f"{TOKENS:,}-token reply, prompt -> end", tiller.reply_wall, pi.reply_wall,
            lambda v: f"{v:.2f} s", "<= 1.0"),
        row("bytes on the wire per token", tiller.reply_bytes / TOKENS, pi.reply_bytes / TOKENS,
            lambda v: f"{v:.0f}", "<= 0.35"),
        row(f"CPU while streaming {PACED_RATE:.0f} tokens/s (% of one core)",
            percent(tiller.paced_cpu, tiller.paced_wall), percent(pi.paced_cpu, pi.paced_wall),
            lambda v: f"{v:.1f}%", "Tiller <= 10%"),
        "",
        f"floor: `python -c 'import pygls.server'`, median of {SPAWNS} (each run just before one "
        f"of Tiller's spawns): {ms(statistics.median(floor))}; Tiller start-up minus floor: "
        f"{ms(statistics.median(paired))} (target <= 60 ms; the median of the {SPAWNS} paired "
        f"differences; the difference of the medians: {ms(apart)})",
        f"message_update lines in the {TOKENS:,}-token reply: Tiller {tiller.reply_updates:,},"
        f" pi {pi.reply_updates:,}",
        f"Tiller server CPU per token: 1 session {many[0] * 1e6:.0f} us (mean of {SINGLE});"
        f" {MANY} sessions at once ({MANY_TOKENS} tokens each) {many[1] * 1e6:.0f} us;"
        f" ratio {many[1] / many[0]:.2f}"
        " (target <= 1.5)",
        f"session/load of a {ENTRIES:,}-entry session ({load.messages:,} messages, "
        f"{load.response_bytes / 2**20:.1f} MiB): first of a process {ms(load.first)}, "
        f"again after session/close {ms(load.second)} (target <= 250 ms; to the response's "
        f"last byte); the first session live (agent/getState answered) after {ms(load.live)}",
        "start-up samples: Tiller " + ", ".join(ms(s) for s in tiller.startup)
        + "; pi " + ", ".join(ms(s) for s in pi.startup)
        + "; floor " + ", ".join(ms(s) for s in floor),
    ]
    return "\n".join(lines)


async def main() -> None:
    node, cli, node_version = ensure_peer()
    print(header().replace("server benchmark", "vs pi benchmark"), flush=True)
    print(f"peer: pi {PI_VERSION} on node {node_version} ({CACHE})", flush=True)
    with tempfile.TemporaryDirectory(prefix="tiller-peer-") as tmp, RecordingOpenAI() as fake:
        root = Path(tmp)
        cwd, home = root / "work", root / "pi-home"
        cwd.mkdir()
        home.mkdir()
        agents = [tiller_agent(fake.url), pi_agent(fake.url, node, cli, home)]
        results = [Numbers() for _ in agents]
        await measure_startups(agents, cwd, results)
        print("start-up: done", flush=True)
        for agent, numbers in zip(agents, results, strict=True):
            await measure_streams(agent, fake, cwd, numbers)
            print(f"{agent.name}: done", flush=True)
        many = await measure_many_sessions(fake, cwd)
        fake.assert_script_complete()
        load = await measure_session_load(root)
    cache = await measure_cache(node, cli)
    print(render(results[0], results[1], results[0].floor, many, load))
    print()
    print(render_cache(*cache))


if __name__ == "__main__":
    anyio.run(main)
