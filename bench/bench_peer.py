"""Tiller side by side with its peers, each on a scripted loopback model server, in rounds.

The peers (bench/peer_agents.py installs and starts them; npm versions pinned there):

- Tiller's own front (NDJSON) twice: started as its editors start it (``initialize`` then
  ``session/new``), and as a script may (``initialize`` only, prompts to the default session:
  "Tiller, scripted"); and its ACP front (``--acp``); all ``--no-session``, on the Chat
  Completions fake (``--base-url``);
- Codex's ``app-server`` (npm ``@openai/codex``, its Rust binary; JSON-RPC v2 over stdio) and
  Zed's ``codex-acp`` (npm ``@zed-industries/codex-acp``), both with a ``CODEX_HOME`` whose
  config.toml names a custom model provider on the Responses API fake;
- pi 1.6.0 (``pi --mode rpc --no-session`` on Node 22, a custom provider on the Chat
  Completions fake);
- Claude Code in stream-json mode (npm ``@anthropic-ai/claude-code``, ``claude -p
  --input-format stream-json --output-format stream-json --include-partial-messages``) with
  ``ANTHROPIC_BASE_URL`` at the Anthropic fake.

Each fake (bench_providers.py's recording subclasses of tests/support/fake_*.py) streams one
4-character token per SSE event, at full speed or paced. A round measures every peer once, in a
rotated order (this VM's speed drifts within seconds, so the peers share the machine's moods):

1. spawn -> ready for a prompt (what "ready" means per peer: ``Dialect.ready_means``), then the
   first prompt at once: prompt -> its first reply text on stdout ("1st token, at once"), and
   spawn -> that text;
2. a second spawn: ready, 2 s idle, the tree's RSS ("idle RSS": the process and its children),
   the first prompt -> first reply text ("1st token, 2 s after ready"); then a 3,000-token reply
   at full speed, prompt -> the turn's end, and the stdout bytes in that span per token; then
   300 tokens paced at 100 tokens/s, the process tree's CPU seconds per 1,000 tokens.

One untimed spawn per peer comes first (a warm-up that also finds a peer that cannot start).
The table shows medians over the rounds, the ratios of Tiller's two fronts to pi and to the best
peer in each column, and the issue's targets. A peer that cannot be installed or started, or
fails mid-run, is reported with the reason and left out. Then Tiller alone: server CPU per token
of one session against 50 sessions streaming at once, ``session/load`` of bench_sessions.py's
10,000-entry session, and bench_cache.py's billed Anthropic session, Tiller against pi.

Run from the repository root (about 8 minutes on 2 cores, plus the npm installs once)::

    python bench/bench_peer.py                    # or: make bench-peer
    python bench/bench_peer.py --quick            # 2 rounds: for iterating
    python bench/bench_peer.py --peers tiller,tiller-script,tiller-acp,pi --rounds 3 --no-extras

It prints one run's numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

BENCH = Path(__file__).resolve().parent
for _path in (BENCH, BENCH.parent / "tests", BENCH.parent / "server"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench_cache import MODEL as CACHE_MODEL  # noqa: E402
from bench_cache import PROMPT as CACHE_PROMPT  # noqa: E402
from bench_cache import Billed, billed, pi_models_json, script_session  # noqa: E402
from bench_cache import render as render_cache  # noqa: E402
from bench_providers import (  # noqa: E402
    RecordingAnthropic,
    RecordingOpenAI,
    RecordingResponses,
)
from bench_server import cpu_seconds, header, python_runs, server_env  # noqa: E402
from bench_sessions import ENTRIES, Load, build_entries, load_in_server, write_log  # noqa: E402
from peer_agents import (  # noqa: E402
    CACHE,
    PEER_KEYS,
    Line,
    Peer,
    PeerFailed,
    PeerSpec,
    TillerDialect,
    Unavailable,
    Wire,
    running,
    setup_peer,
    tail,
    tree_cpu_seconds,
    tree_rss_kib,
)

from support import fake_anthropic, fake_openai, fake_openai_responses  # noqa: E402
from support.fake_anthropic import FakeAnthropic  # noqa: E402
from tiller.store.saved import workspace_dir_name  # noqa: E402

ROUNDS = 7
QUICK_ROUNDS = 2
IDLE = 2.0  # seconds between ready and the first prompt, in the second spawn of a round
TOKENS = 3_000
TOKEN = "tok "
PACED_RATE = 100.0  # tokens/s
PACED_TOKENS = 300
FIRST_REPLY = "Hello! The first reply of this process."
MANY = 50  # sessions streaming at once
SINGLE = 5  # sessions streaming one after another, for the single-session figure
MANY_TOKENS = TOKENS  # each: the same reply as the single session's
FLOOR_CODE = "import asyncio"
"""The floor under Tiller's start-up: the interpreter with the event loop it runs on."""


# ---------------------------------------------------------------------------------------------
# The fakes


Fake = RecordingOpenAI | RecordingResponses | RecordingAnthropic


class Fakes:
    """One recording fake per wire, each serving replies enqueued just before each prompt."""

    def __init__(self) -> None:
        self.by_wire: dict[Wire, Fake] = {"chat": RecordingOpenAI(),
                                          "responses": RecordingResponses(),
                                          "anthropic": RecordingAnthropic()}

    def __enter__(self) -> Fakes:
        for fake in self.by_wire.values():
            fake.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for fake in self.by_wire.values():
            fake.close()

    @property
    def urls(self) -> dict[Wire, str]:
        return {wire: fake.url for wire, fake in self.by_wire.items()}

    def script(self, wire: Wire, text: str, rate: float | None) -> Fake:
        """Enqueue one reply of ``text`` (a token per event) at ``rate`` tokens/s."""
        fake = self.by_wire[wire]
        size = len(TOKEN)
        if isinstance(fake, RecordingOpenAI):
            fake.enqueue(fake_openai.text_reply(text, chunk_size=size))
        elif isinstance(fake, RecordingResponses):
            fake.enqueue(fake_openai_responses.response_reply(
                fake_openai_responses.message(text), chunk_size=size))
        else:
            fake.enqueue(fake_anthropic.text_reply(text, chunk_size=size))
        fake.rate = rate
        return fake

    def problems(self, wire: Wire) -> list[str]:
        """What went wrong on ``wire``'s fake since the last call (unscripted or refused
        requests, replies nobody asked for), which is then forgotten."""
        fake = self.by_wire[wire]
        with fake._condition:
            found = list(fake._failures) + [
                f"refused request {number}: {status} {message}"
                for number, status, message in fake._refusals]
            if fake._script:
                found.append(f"{len(fake._script)} scripted replies not requested")
            fake._failures.clear()
            fake._refusals.clear()
            fake._script.clear()
        return found


# ---------------------------------------------------------------------------------------------
# Measurements


@dataclass
class Samples:
    startup: list[float] = field(default_factory=list)
    first_at_once: list[float] = field(default_factory=list)
    spawn_to_token: list[float] = field(default_factory=list)  # first spawns: to 1st token
    first_after_idle: list[float] = field(default_factory=list)
    idle_rss_kib: list[int] = field(default_factory=list)
    reply_wall: list[float] = field(default_factory=list)
    reply_bytes: list[int] = field(default_factory=list)
    reply_text_lines: list[int] = field(default_factory=list)
    paced_cpu: list[float] = field(default_factory=list)  # seconds per 1,000 tokens
    floor: list[float] = field(default_factory=list)  # Tiller's row only
    failure: str | None = None


@dataclass
class Turn:
    sent: float
    first_text: Line
    end: Line
    lines: list[Line]  # from the first line after the prompt to the end, included
    text_lines: int


async def prompt(spec: PeerSpec, peer: Peer, text: str, expected: str) -> Turn:
    """Send a prompt, wait for its end; PeerFailed unless the reply text is ``expected``."""
    mark = len(peer.lines)
    sent = time.perf_counter()
    is_end = await spec.dialect.send_prompt(peer, text)
    end = await peer.wait(is_end, mark)
    reason = spec.dialect.failure(peer.lines[end].message)
    if reason is not None:
        raise PeerFailed(reason)
    span = peer.lines[mark : end + 1]
    texts = [(line, spec.dialect.text(line.message)) for line in span]
    carrying = [(line, piece) for line, piece in texts if piece]
    got = "".join(piece for _, piece in carrying)
    if got != expected:
        raise PeerFailed(f"reply text {len(got)} chars ({got[:40]!r}...), expected "
                         f"{len(expected)}")
    return Turn(sent, carrying[0][0], span[-1], span, len(carrying))


async def first_spawn(spec: PeerSpec, fakes: Fakes, cwd: Path, into: Samples | None) -> None:
    """Spawn -> ready, then the first prompt at once."""
    start = time.perf_counter()
    async with running(spec, cwd) as peer:
        await spec.dialect.ready(peer)
        ready = time.perf_counter()
        fakes.script(spec.wire, FIRST_REPLY, None)
        turn = await prompt(spec, peer, "hello", FIRST_REPLY)
    if into is not None:
        into.startup.append(ready - start)
        into.first_at_once.append(turn.first_text.at - turn.sent)
        into.spawn_to_token.append(turn.first_text.at - start)


async def second_spawn(spec: PeerSpec, fakes: Fakes, cwd: Path, into: Samples) -> None:
    """Spawn -> ready, idle, idle RSS, the first prompt, the full-speed reply, the paced one."""
    start = time.perf_counter()
    async with running(spec, cwd) as peer:
        await spec.dialect.ready(peer)
        into.startup.append(time.perf_counter() - start)
        await anyio.sleep(IDLE)
        into.idle_rss_kib.append(tree_rss_kib(peer.pid))
        fakes.script(spec.wire, FIRST_REPLY, None)
        turn = await prompt(spec, peer, "hello", FIRST_REPLY)
        into.first_after_idle.append(turn.first_text.at - turn.sent)

        long_reply = TOKEN * TOKENS
        fakes.script(spec.wire, long_reply, None)
        turn = await prompt(spec, peer, "talk a lot", long_reply)
        into.reply_wall.append(turn.end.at - turn.sent)
        into.reply_bytes.append(sum(line.size for line in turn.lines))
        into.reply_text_lines.append(turn.text_lines)

        paced = TOKEN * PACED_TOKENS
        fakes.script(spec.wire, paced, PACED_RATE)
        cpu = tree_cpu_seconds(peer.pid)
        await prompt(spec, peer, "talk slowly", paced)
        into.paced_cpu.append((tree_cpu_seconds(peer.pid) - cpu) / PACED_TOKENS * 1000)


async def guarded(spec: PeerSpec, samples: Samples, fakes: Fakes, step: str,
                  work: Callable[[], Any]) -> None:
    """Run one step of a peer; a failure leaves the peer out of the rest of the run, with the
    reason, the fake's complaints and the tail of its stderr."""
    try:
        await work()
    except Exception as error:  # any failure of a peer is reported, not raised
        while isinstance(error, ExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        reason = str(error) or type(error).__name__
        if not isinstance(error, (PeerFailed, Unavailable, TimeoutError, OSError)):
            reason = "".join(traceback.format_exception_only(error)).strip()
        problems = fakes.problems(spec.wire)
        if problems:
            reason += f"; its model server: {'; '.join(problems[:3])}"
        stderr = spec.log.read_text(errors="replace") if spec.log.exists() else ""
        samples.failure = f"{step}: {reason}; stderr: {tail(stderr, 3)}"
        print(f"{spec.name}: FAILED {samples.failure}", flush=True)
        return
    problems = fakes.problems(spec.wire)
    if problems:
        print(f"{spec.name}: its model server: {'; '.join(problems)}", flush=True)


async def measure_rounds(specs: Sequence[PeerSpec], fakes: Fakes, root: Path, rounds: int,
                         results: dict[str, Samples]) -> None:
    """The warm-up spawns, then ``rounds`` rounds; each peer works in a folder of its own
    under ``root`` (what one writes there is not in another's workspace)."""
    places = {spec.key: root / spec.key for spec in specs}
    for place in places.values():
        place.mkdir(exist_ok=True)
    for spec in specs:  # warm-up, untimed
        await guarded(spec, results[spec.key], fakes, "warm-up",
                      lambda spec=spec: first_spawn(spec, fakes, places[spec.key], None))
    for number in range(rounds):
        live = [spec for spec in specs if results[spec.key].failure is None]
        shift = number % max(len(live), 1)
        for spec in live[shift:] + live[:shift]:
            into = results[spec.key]
            if spec.key == "tiller-script":
                into.floor += await anyio.to_thread.run_sync(python_runs, FLOOR_CODE, 1)
            await guarded(spec, into, fakes, f"round {number + 1}",
                          lambda spec=spec, into=into: first_spawn(
                              spec, fakes, places[spec.key], into))
            if into.failure is None:
                await guarded(spec, into, fakes, f"round {number + 1}",
                              lambda spec=spec, into=into: second_spawn(
                                  spec, fakes, places[spec.key], into))
        print(f"round {number + 1}/{rounds} done ({loadavg()})", flush=True)


async def measure_many_sessions(spec: PeerSpec, fakes: Fakes, cwd: Path) -> tuple[float, float]:
    """Tiller's server CPU per streamed token: SINGLE fresh sessions one after another, then
    MANY fresh sessions at once (MANY_TOKENS each), in one warmed-up process. (single, many) in
    seconds per token. Several single replies, since /proc counts CPU in 10 ms ticks and one
    3,000-token reply takes only ~0.15 s."""
    async with running(spec, cwd) as peer:
        await spec.dialect.ready(peer)
        fakes.script("chat", FIRST_REPLY, None)
        await prompt(spec, peer, "warm up", FIRST_REPLY)
        fake = fakes.by_wire["chat"]
        fake.enqueue(*(fake_openai.text_reply(TOKEN * MANY_TOKENS, chunk_size=len(TOKEN))
                       for _ in range(SINGLE + MANY)))

        async def new_sessions(count: int) -> list[str]:
            return [(await peer.request("session/new", {}))["sessionId"] for _ in range(count)]

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
    problems = fakes.problems("chat")
    if problems:
        print(f"50 sessions: the model server: {'; '.join(problems)}", flush=True)
    return statistics.mean(singles), many


async def measure_session_load(root: Path) -> Load:
    """bench_sessions.py's session written under ``root``, loaded by a fresh server."""
    cwd = (root / "load-workspace").resolve()
    cwd.mkdir()
    session_dir, session_id = root / "sessions", uuid.uuid4().hex
    path = session_dir / workspace_dir_name(cwd) / f"{session_id}.jsonl"
    write_log(path, session_id, cwd, build_entries(ENTRIES), durable=False)
    return await load_in_server(session_dir, cwd, session_id, acp=False)


PI_TOOLS = "read,bash,edit,write,grep,find,ls"
"""pi's tools for the cache session: Tiller's (but ``todo``, which pi does not have), so both
declare about the same tools; pi's default is only the first four."""


async def measure_cache(pi: PeerSpec | None = None) -> tuple[Billed, Billed]:
    """(Tiller, pi) billed for bench_cache.py's 20-call session, each on a fresh fake."""
    results = []
    with tempfile.TemporaryDirectory(prefix="tiller-cache-") as tmp:
        root = Path(tmp)
        if pi is None:
            pi = setup_peer("pi", {"chat": "http://127.0.0.1:9/v1"}, root / "pi-home",
                            root / "pi.log")
        for who in ("tiller", "pi"):
            with FakeAnthropic() as fake:
                cwd = root / f"work-{who}"
                cwd.mkdir()
                script_session(fake)
                if who == "tiller":
                    env = server_env()
                    env.update(ANTHROPIC_API_KEY="bench", ANTHROPIC_BASE_URL=fake.url,
                               XDG_DATA_HOME=str(root / "data"))
                    spec = PeerSpec(
                        "tiller", "Tiller", "anthropic", TillerDialect(),
                        [sys.executable, "-m", "tiller", "--provider", "anthropic", "--model",
                         CACHE_MODEL, "--no-session", "--permission-mode", "auto"],
                        env, "", root / "tiller.log")
                else:
                    home = Path(pi.env["PI_CODING_AGENT_DIR"]).parent / "cache-agent"
                    home.mkdir(exist_ok=True)
                    (home / "models.json").write_text(json.dumps(pi_models_json(fake.url)))
                    node, cli = pi.argv[:2]
                    spec = PeerSpec(
                        "pi", pi.name, "anthropic", pi.dialect,
                        [node, cli, "--mode", "rpc", "--no-session", "--provider",
                         "bench-anthropic", "--model", CACHE_MODEL, "--tools", PI_TOOLS],
                        dict(pi.env, PI_CODING_AGENT_DIR=str(home)), pi.version, pi.log)
                async with running(spec, cwd) as peer:
                    await spec.dialect.ready(peer)
                    end = await spec.dialect.send_prompt(peer, CACHE_PROMPT)
                    await peer.wait(end, timeout=300)
                problems = fake.failures + (
                    [f"{len(fake.unused_replies)} replies unused"] if fake.unused_replies
                    else [])
                if problems:
                    print(f"{spec.name} on the Anthropic fake: {'; '.join(problems)}",
                          flush=True)
                results.append(billed(fake))
    return results[0], results[1]


# ---------------------------------------------------------------------------------------------
# Report


def loadavg() -> str:
    return "load average " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms"


@dataclass(frozen=True)
class Column:
    title: str
    value: Callable[[Samples], float]
    show: Callable[[float], str]


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def ratio(ours: float, theirs: float) -> float:
    return ours / theirs if theirs else float("nan")


COLUMNS = [
    Column("spawn → ready", lambda s: _median(s.startup), ms),
    Column(f"1st prompt → 1st token, sent {IDLE:g} s after ready",
           lambda s: _median(s.first_after_idle), ms),
    Column("1st prompt → 1st token, sent at once", lambda s: _median(s.first_at_once), ms),
    Column("spawn → 1st token, prompt sent at once", lambda s: _median(s.spawn_to_token), ms),
    Column("idle RSS", lambda s: _median(s.idle_rss_kib) / 1024, lambda v: f"{v:.0f} MB"),
    Column(f"{TOKENS:,}-token reply", lambda s: _median(s.reply_wall),
           lambda v: f"{v:.2f} s"),
    Column("stdout B/token", lambda s: _median(s.reply_bytes) / TOKENS, lambda v: f"{v:.0f}"),
    Column(f"CPU s per 1k tokens at {PACED_RATE:.0f} tok/s", lambda s: _median(s.paced_cpu),
           lambda v: f"{v:.2f}"),
]
SPAWN, FIRST_IDLE, FIRST_AT_ONCE, SPAWN_TO_TOKEN, RSS, REPLY, BYTES, CPU = COLUMNS


@dataclass(frozen=True)
class Target:
    who: str  # a peer key
    column: Column
    against: str  # a peer key, or "best": the best of the peers that are not Tiller
    at_most: float  # the ratio it must not exceed


TARGETS = [
    *(target for front in ("tiller", "tiller-acp") for target in (
        Target(front, SPAWN, "pi", 1.0),
        Target(front, FIRST_IDLE, "pi", 1.0),
        Target(front, FIRST_AT_ONCE, "pi", 1.5),
        Target(front, RSS, "pi", 0.5),
        Target(front, CPU, "best", 1.0),
    )),
    Target("tiller-acp", REPLY, "tiller", 1.2),
    Target("tiller-acp", BYTES, "pi", 0.5),
    Target("tiller", REPLY, "pi", 1.0),
    Target("tiller", BYTES, "pi", 0.35),
]
# "Tiller, scripted" (``initialize`` answered before the imports, then a prompt to the default
# session) has no targets of its own: its spawn -> 1st token is in the tables (README, Performance)
TILLER_KEYS = ("tiller", "tiller-script", "tiller-acp")


def best_peer(column: Column, specs: Sequence[PeerSpec],
              results: dict[str, Samples]) -> tuple[str, float] | None:
    """(name, value) of the lowest value in ``column`` among the measured non-Tiller peers."""
    values = [(spec.name, column.value(results[spec.key])) for spec in specs
              if spec.key not in TILLER_KEYS and results[spec.key].failure is None]
    values = [(name, value) for name, value in values if value == value]  # not NaN
    return min(values, key=lambda item: item[1]) if values else None


def render(specs: Sequence[PeerSpec], results: dict[str, Samples], rounds: int) -> str:
    measured = [spec for spec in specs if results[spec.key].failure is None
                and results[spec.key].startup]
    by_key = {spec.key: spec for spec in measured}
    lines = [
        "| peer | " + " | ".join(column.title for column in COLUMNS) + " |",
        "|---" * (len(COLUMNS) + 1) + "|",
    ]
    for spec in measured:
        cells = [column.show(column.value(results[spec.key])) for column in COLUMNS]
        lines.append(f"| {spec.name} | " + " | ".join(cells) + " |")

    lines += ["", "| ratio | " + " | ".join(column.title for column in COLUMNS) + " |",
              "|---" * (len(COLUMNS) + 1) + "|"]
    for key in TILLER_KEYS:
        if key not in by_key:
            continue
        ours = results[key]
        if "pi" in by_key:
            cells = [f"{ratio(column.value(ours), column.value(results['pi'])):.2f}"
                     for column in COLUMNS]
            lines.append(f"| {by_key[key].name} / pi | " + " | ".join(cells) + " |")
        cells = []
        for column in COLUMNS:
            best = best_peer(column, measured, results)
            cells.append(f"{ratio(column.value(ours), best[1]):.2f} ({best[0]})" if best
                         else "n/a")
        lines.append(f"| {by_key[key].name} / best peer | " + " | ".join(cells) + " |")

    lines += ["", "| target | measured | reference | ratio | holds |", "|---|---|---|---|---|"]
    for target in TARGETS:
        if target.who not in by_key:
            continue
        ours = target.column.value(results[target.who])
        if target.against == "best":
            best = best_peer(target.column, measured, results)
            reference = (f"best peer ({best[0]})", best[1]) if best else None
        elif target.against in by_key:
            reference = (by_key[target.against].name, target.column.value(
                results[target.against]))
        else:
            reference = None
        against = ("the best peer" if target.against == "best" else
                   by_key[target.against].name if target.against in by_key else target.against)
        what = (f"{by_key[target.who].name}: {target.column.title} ≤ "
                f"{'' if target.at_most == 1 else f'{target.at_most:g}× '}{against}'s")
        if reference is None:
            lines.append(f"| {what} | {target.column.show(ours)} | not measured | | |")
            continue
        share = ratio(ours, reference[1])
        lines.append(f"| {what} | {target.column.show(ours)} | {reference[0]}: "
                     f"{target.column.show(reference[1])} | {share:.2f} | "
                     f"{'yes' if share <= target.at_most else '**no**'} |")

    lines += ["", f"medians over {rounds} rounds (spawn → ready: {2 * rounds} spawns); "
              "ready means:"]
    lines += [f"- {spec.name} ({spec.version}; {WIRE_NAMES[spec.wire]}): "
              f"{spec.dialect.ready_means}" for spec in measured]
    lines.append(f"reply text lines in the {TOKENS:,}-token reply: " + ", ".join(
        f"{spec.name} {_median(results[spec.key].reply_text_lines):,.0f}" for spec in measured))
    for spec in measured:
        lines.append(f"spawn → ready samples, {spec.name}: "
                     + ", ".join(ms(s) for s in results[spec.key].startup))
    if "tiller-script" in by_key:
        tiller = results["tiller-script"]
        firsts = tiller.startup[0::2] if len(tiller.startup) == 2 * len(tiller.floor) else []
        if firsts:
            paired = [ours - base for ours, base in zip(firsts, tiller.floor, strict=True)]
            lines.append(
                f"floor: `python -c '{FLOOR_CODE}'`, median of {len(tiller.floor)} (each run "
                f"just before one of scripted Tiller's spawns): {ms(_median(tiller.floor))}; "
                f"scripted Tiller's spawn → ready minus floor: {ms(_median(paired))} (target "
                "≤ 60 ms; median of the paired differences)")
    for spec in specs:
        failure = results[spec.key].failure
        if failure is not None:
            lines.append(f"left out: {spec.name}: {failure}")
    return "\n".join(lines)


WIRE_NAMES: dict[Wire, str] = {"chat": "Chat Completions fake",
                               "responses": "Responses API fake",
                               "anthropic": "Anthropic Messages fake"}


def render_tiller_extras(many: tuple[float, float], load: Load) -> str:
    return "\n".join([
        f"Tiller server CPU per token: 1 session {many[0] * 1e6:.0f} us (mean of {SINGLE});"
        f" {MANY} sessions at once ({MANY_TOKENS} tokens each) {many[1] * 1e6:.0f} us;"
        f" ratio {many[1] / many[0]:.2f} (target ≤ 1.5)",
        f"session/load of a {ENTRIES:,}-entry session ({load.messages:,} messages, "
        f"{load.response_bytes / 2**20:.1f} MiB): first of a process {ms(load.first)}, "
        f"again after session/close {ms(load.second)} (target ≤ 250 ms; to the response's "
        f"last byte); the first session live (agent/getState answered) after {ms(load.live)}",
    ])


# ---------------------------------------------------------------------------------------------
# Main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", default=",".join(PEER_KEYS),
                        help=f"comma-separated subset of {','.join(PEER_KEYS)} (default: all)")
    parser.add_argument("--rounds", type=int, default=None,
                        help=f"interleaved rounds (default {ROUNDS}; --quick: {QUICK_ROUNDS})")
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_ROUNDS} rounds, for iterating")
    parser.add_argument("--no-extras", action="store_true",
                        help="skip Tiller's 50 sessions, session/load and the cache session")
    args = parser.parse_args(argv)
    args.keys = [key.strip() for key in args.peers.split(",") if key.strip()]
    unknown = [key for key in args.keys if key not in PEER_KEYS]
    if unknown:
        parser.error(f"unknown peers {', '.join(unknown)}; known: {', '.join(PEER_KEYS)}")
    if args.rounds is None:
        args.rounds = QUICK_ROUNDS if args.quick else ROUNDS
    return args


async def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    print(header().replace("server benchmark", "vs peers benchmark"), flush=True)
    print(f"peers installed under {CACHE}", flush=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tiller-peer-") as tmp, \
            tempfile.TemporaryDirectory(prefix="homes-", dir=CACHE) as homes, Fakes() as fakes:
        root, cwd = Path(tmp), Path(tmp) / "work"
        cwd.mkdir()
        specs: list[PeerSpec] = []
        results: dict[str, Samples] = {}
        for key in args.keys:
            samples = results.setdefault(key, Samples())
            try:
                spec = await anyio.to_thread.run_sync(
                    setup_peer, key, fakes.urls, Path(homes) / key, root / f"{key}.log")
            except (Unavailable, OSError) as error:
                samples.failure = f"not installed: {error}"
                print(f"{key}: {samples.failure}", flush=True)
                specs.append(PeerSpec(key, key, "chat", TillerDialect(), [], {}, "",
                                      root / f"{key}.log"))
                continue
            print(f"{spec.name}: {spec.version}", flush=True)
            specs.append(spec)
        runnable = [spec for spec in specs if results[spec.key].failure is None]
        await measure_rounds(runnable, fakes, cwd, args.rounds, results)
        print()
        print(render(specs, results, args.rounds))
        by_key = {spec.key: spec for spec in runnable if results[spec.key].failure is None}
        if not args.no_extras and "tiller" in by_key:
            print()
            try:
                many = await measure_many_sessions(by_key["tiller"], fakes, cwd / "tiller")
                load = await measure_session_load(root)
                print(render_tiller_extras(many, load))
                if "pi" in by_key:
                    print()
                    print(render_cache(*await measure_cache(by_key["pi"])))
            except Exception as error:  # reported, not raised: the table above stands
                print(f"Tiller alone: FAILED: {''.join(traceback.format_exception(error))}")
    print()
    print(f"{loadavg()} at the end ({time.strftime('%Y-%m-%d %H:%M:%S')})")


if __name__ == "__main__":
    anyio.run(main)
