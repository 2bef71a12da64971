"""Session-log benchmark: writing, reading and replaying a 10,000-entry session, and loading it.

What it measures (``tiller.store.log`` in this process, and a real ``python -m tiller``):

1. Append throughput of ``SessionLog.append`` (entries/s), with ``durable=True`` (an fsync per
   entry, the server's setting) and ``durable=False`` (flush only). The entries are a realistic
   mix built beforehand, so only ``append`` is timed: runs of ``run_start``, a user message, tool
   turns (an assistant message with text and a tool call, ``tool_start``, ``tool_end``, the tool
   result message), a final assistant message and ``run_end``; a few hundred bytes of text each.
2. ``read_session_file`` + ``replay`` of that file: time (each part, median of 5), tracemalloc
   peak and what stays allocated, and, in a fresh process, the VmRSS growth and VmHWM.
3. ``session/load`` of that session in a spawned server (``--session-dir``, the file at
   ``<dir>/<workspace_dir_name(cwd)>/<id>.jsonl``): request -> response (its last byte read;
   then also parsed by the bench's client, which the server does not wait for), spawn -> loaded, the
   response size, the server's CPU; the answer comes from the log as saved and the session goes
   live after it, so then the time until an ``agent/getState`` sent right after the answer is
   answered (it waits for the session), the server's CPU and RSS by then; then
   ``session/close`` and a second load in the same process. For comparison, the ACP
   ``session/load`` (``--acp``), which answers after replaying the transcript as
   ``session/update`` notifications.

Run from the repository root (about 40 s on 2 idle cores, most of it the fsyncs; the log goes
in the system temporary directory, so set TMPDIR to measure another disk)::

    python bench/bench_sessions.py

It prints numbers from one run and asserts nothing about them.
"""

from __future__ import annotations

import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

BENCH = Path(__file__).resolve().parent
for _path in (BENCH, BENCH.parent / "tests", BENCH.parent / "server"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench_server import TappedClient, cpu_seconds, initialize, rss_kib, server_env  # noqa: E402

from tiller import __version__ as tiller_version  # noqa: E402
from tiller.store.log import SessionLog, read_session_file  # noqa: E402
from tiller.store.replay import replay  # noqa: E402
from tiller.store.saved import workspace_dir_name  # noqa: E402
from tiller.types import (  # noqa: E402
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

ENTRIES = 10_000
READS = 5
SEED = 20_240_601

WORDS = (
    "the a file function test config server session error value return import module class "
    "change update line path read write check result call tool model stream token message "
    "request response client handler parse build run fix add remove rename refactor debug "
    "because then which so it this that we should will can not now also first next"
).split()


# ---------------------------------------------------------------------------------------------
# A realistic session


def prose(rng: random.Random, low: int, high: int) -> str:
    """Word salad of ``low`` to ``high`` characters."""
    target = rng.randint(low, high)
    words: list[str] = []
    size = 0
    while size < target:
        word = rng.choice(WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words).capitalize() + "."


def tool_call(rng: random.Random, number: int) -> tuple[ToolCall, str]:
    """A tool call and a plausible result text for it."""
    path = f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}_{number % 97}.py"
    name = rng.choice(("read", "read", "bash", "grep", "edit", "ls"))
    args: dict[str, Any]
    if name == "read":
        args = {"path": path}
        output = "\n".join(f"{i + 1}\t{prose(rng, 20, 70)}" for i in range(rng.randint(4, 12)))
    elif name == "bash":
        args = {"command": f"python -m pytest tests/test_{rng.choice(WORDS)}.py -q"}
        output = prose(rng, 150, 500) + f"\n{rng.randint(1, 60)} passed in 0.{number % 90}s"
    elif name == "grep":
        args = {"pattern": rng.choice(WORDS), "path": "src"}
        output = "\n".join(f"{path}:{rng.randint(1, 400)}: {prose(rng, 20, 60)}"
                           for _ in range(rng.randint(3, 8)))
    elif name == "edit":
        old, new = prose(rng, 30, 120), prose(rng, 30, 120)
        args = {"path": path, "edits": [{"oldText": old, "newText": new}]}
        output = f"Edited {path}: 1 replacement"
    else:
        args = {"path": "src"}
        output = "\n".join(f"{rng.choice(WORDS)}_{i}.py" for i in range(rng.randint(5, 20)))
    return ToolCall(id=f"call_{uuid.UUID(int=rng.getrandbits(128)).hex[:24]}", name=name,
                    arguments=args), output


def assistant(rng: random.Random, content: list[Any], stop: str) -> dict[str, Any]:
    usage = Usage(input_tokens=rng.randint(2_000, 60_000), output_tokens=rng.randint(20, 600),
                  cache_read_tokens=rng.randint(0, 50_000), cost=rng.random() / 100)
    message = AssistantMessage(content=content, provider="openai", model="gpt-4o-mini",
                               usage=usage, stop_reason=stop)  # type: ignore[arg-type]
    return message.dump()


def build_entries(count: int, seed: int = SEED) -> list[tuple[str, dict[str, Any]]]:
    """``count`` entries (type, fields) as the server writes them, whole runs only (the last few
    slots, if a run does not fit, are ``label`` entries)."""
    rng = random.Random(seed)
    entries: list[tuple[str, dict[str, Any]]] = []
    number = 0
    while count - len(entries) >= 4:
        room = (count - len(entries) - 4) // 4
        entries.append(("run_start", {}))
        user = UserMessage(content=prose(rng, 80, 400))
        entries.append(("message", {"message": user.dump()}))
        for _ in range(min(rng.randint(2, 9), room)):
            number += 1
            call, output = tool_call(rng, number)
            text = TextContent(text=prose(rng, 60, 300))
            entries.append(("message", {"message": assistant(rng, [text, call], "toolUse")}))
            entries.append(("tool_start", {"toolCallId": call.id, "toolName": call.name,
                                           "args": call.arguments}))
            entries.append(("tool_end", {"toolCallId": call.id, "isError": False}))
            result = ToolResultMessage(tool_call_id=call.id, tool_name=call.name,
                                       content=[TextContent(text=output)])
            entries.append(("message", {"message": result.dump()}))
        final = [TextContent(text=prose(rng, 200, 800))]
        entries.append(("message", {"message": assistant(rng, final, "stop")}))
        entries.append(("run_end", {"stopReason": "stop"}))
    while len(entries) < count:
        entries.append(("label", {"label": prose(rng, 10, 30)}))
    return entries


def header(session_id: str, cwd: Path) -> dict[str, Any]:
    return {"id": session_id, "cwd": str(cwd), "provider": "openai", "model": "gpt-4o-mini",
            "systemPrompt": "You are Tiller, a coding agent. " + "Be careful. " * 40}


# ---------------------------------------------------------------------------------------------
# Measurements


@dataclass
class Row:
    section: str
    metric: str
    value: str


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms"


def mib(size: float) -> str:
    if size < 2**20:
        return f"{size / 1024:,.1f} KiB"
    return f"{size / 2**20:,.1f} MiB"


def write_log(path: Path, session_id: str, cwd: Path, entries: list[tuple[str, dict[str, Any]]],
              durable: bool) -> float:
    """Seconds to append every entry (the header is written before the clock starts)."""
    log = SessionLog.create(path, header(session_id, cwd), durable=durable)
    append = log.append
    start = time.perf_counter()
    for entry_type, data in entries:
        append(entry_type, **data)
    elapsed = time.perf_counter() - start
    log.close()
    return elapsed


def measure_appends(rows: list[Row], log_path: Path, cwd: Path, session_id: str,
                    entries: list[tuple[str, dict[str, Any]]]) -> None:
    section = f"1. SessionLog.append, {len(entries):,} entries"
    for durable in (False, True):
        path = log_path if durable else log_path.with_suffix(".nondurable")
        elapsed = write_log(path, session_id, cwd, entries, durable)
        label = "durable=True (fsync each)" if durable else "durable=False (flush only)"
        rows.append(Row(section, f"{label}: entries/s",
                        f"{len(entries) / elapsed:,.0f}/s  ({elapsed / len(entries) * 1e6:,.0f} us"
                        f" per entry, {elapsed:.2f} s total)"))
        if not durable:
            path.unlink()
    size = log_path.stat().st_size
    rows.append(Row(section, "file size", f"{mib(size)}  ({size / len(entries):,.0f} B per line)"))


def read_and_replay(path: Path) -> tuple[float, float, Any]:
    start = time.perf_counter()
    loaded = read_session_file(path)
    middle = time.perf_counter()
    state = replay(loaded)
    return middle - start, time.perf_counter() - middle, (loaded, state)


RSS_SCRIPT = """
import sys
from pathlib import Path
from tiller.store.replay import replay
from tiller.store.log import read_session_file

def kib(name):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1])

before = kib("VmRSS")
loaded = read_session_file(Path(sys.argv[1]))
state = replay(loaded)
print(before, kib("VmRSS"), kib("VmHWM"), len(state.messages))
"""


def measure_replay(rows: list[Row], path: Path) -> None:
    section = "2. read_session_file + replay, in process"
    read_and_replay(path)  # warm: page cache, pydantic's first validations
    reads, replays = [], []
    for _ in range(READS):
        read, rebuild, _ = read_and_replay(path)
        reads.append(read)
        replays.append(rebuild)
    totals = [a + b for a, b in zip(reads, replays, strict=True)]
    rows.append(Row(section, f"read_session_file (median of {READS})",
                    ms(statistics.median(reads))))
    rows.append(Row(section, f"replay (median of {READS})", ms(statistics.median(replays))))
    rows.append(Row(section, "  together", f"{ms(statistics.median(totals))}  (min "
                    f"{ms(min(totals))}, max {ms(max(totals))})"))
    _, _, (loaded, state) = read_and_replay(path)
    rows.append(Row(section, "entries / messages rebuilt",
                    f"{len(loaded.entries):,} / {len(state.messages):,}"))
    del loaded, state
    tracemalloc.start()
    loaded = read_session_file(path)
    file_only = tracemalloc.get_traced_memory()[0]
    state = replay(loaded)
    current, peak = tracemalloc.get_traced_memory()
    del loaded
    replay_only = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del state
    size = path.stat().st_size
    rows.append(Row(section, "tracemalloc peak during read + replay",
                    f"{mib(peak)}  ({peak / size:.1f}x the file)"))
    rows.append(Row(section, "  still allocated after (file + replay kept)", mib(current)))
    rows.append(Row(section, "  of which the SessionFile (its entries)", mib(file_only)))
    rows.append(Row(section, "  the replay alone, the file dropped", mib(replay_only)))
    env = server_env()
    result = subprocess.run([sys.executable, "-c", RSS_SCRIPT, str(path)], env=env,
                            capture_output=True, text=True, check=True)
    before, after, hwm, _ = (int(v) for v in result.stdout.split())
    rows.append(Row(section, "fresh process: VmRSS growth (results kept)",
                    f"{mib((after - before) * 1024)}  (VmHWM {mib(hwm * 1024)}, "
                    f"{mib(before * 1024)} before)"))


def file_size(path: Path) -> int:
    return path.stat().st_size


@dataclass
class Load:
    spawn_to_loaded: float = 0.0
    first: float = 0.0
    first_parsed: float = 0.0
    second: float = 0.0
    second_parsed: float = 0.0
    second_cpu: float = 0.0
    response_bytes: int = 0
    notifications: int = 0
    notification_bytes: int = 0
    cpu: float = 0.0
    live: float = 0.0
    live_cpu: float = 0.0
    rss_before: int = 0
    rss_after: int = 0
    hwm: int = 0
    messages: int = 0


async def load_in_server(session_dir: Path, cwd: Path, session_id: str, acp: bool) -> Load:
    """Spawn a server on ``session_dir``, initialize, ``session/load``; close and load again."""
    argv = ["--cwd", str(cwd), "--session-dir", str(session_dir), "--framing", "ndjson",
            "--base-url", "http://127.0.0.1:9/v1"]  # never contacted: no prompt is sent
    if acp:
        argv.append("--acp")
    params: dict[str, Any] = {"sessionId": session_id}
    if acp:
        params.update(cwd=str(cwd), mcpServers=[])
    result = Load()
    spawned = time.perf_counter()
    client = await TappedClient.spawn(argv, framing="ndjson", env=server_env(), cwd=cwd)
    async with client:
        if acp:
            await client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        else:
            await initialize(client)
        result.rss_before = rss_kib(client.pid)
        cpu = cpu_seconds(client.pid)
        mark = client.mark()
        start = time.perf_counter()
        answer = await client.request("session/load", params, timeout=120)
        result.first_parsed = time.perf_counter() - start
        result.spawn_to_loaded = time.perf_counter() - spawned
        result.cpu = cpu_seconds(client.pid) - cpu
        if not acp:  # the session goes live after the answer; a request for it waits for that
            await client.request("agent/getState", {"sessionId": session_id}, timeout=120)
            result.live = time.perf_counter() - start
            result.live_cpu = cpu_seconds(client.pid) - cpu
        result.rss_after = rss_kib(client.pid)
        result.hwm = rss_kib(client.pid, "VmHWM")
        frames = client.frames_since(mark)
        answered = next(i for i, f in enumerate(frames) if "result" in f.message)
        result.first = frames[answered].at - start
        result.response_bytes = frames[answered].size
        updates = [f for f in frames[:answered] if f.message.get("method")]
        result.notifications = len(updates)
        result.notification_bytes = sum(f.size for f in updates)
        result.messages = len(answer.get("messages", [])) if isinstance(answer, dict) else 0
        if not acp:  # ACP has no session/close: the second load would return the live session
            await client.request("session/close", {"sessionId": session_id})
            cpu, mark = cpu_seconds(client.pid), client.mark()
            start = time.perf_counter()
            await client.request("session/load", params, timeout=120)
            result.second_parsed = time.perf_counter() - start
            answered_at = next(f.at for f in client.frames_since(mark) if "result" in f.message)
            result.second = answered_at - start
            result.second_cpu = cpu_seconds(client.pid) - cpu
    return result


async def measure_loads(rows: list[Row], session_dir: Path, cwd: Path, session_id: str,
                        log_path: Path) -> None:
    size_before = file_size(log_path)
    native = await load_in_server(session_dir, cwd, session_id, acp=False)
    acp = await load_in_server(session_dir, cwd, session_id, acp=True)
    grown = file_size(log_path) - size_before
    section = "3. session/load in a spawned server"
    show: list[tuple[str, Callable[[Load], str]]] = [
        ("request -> response, first load", lambda r: ms(r.first)),
        ("  and parsed by the bench's client", lambda r: ms(r.first_parsed)),
        ("spawn -> initialize -> loaded", lambda r: ms(r.spawn_to_loaded)),
        ("server CPU during the first load", lambda r: ms(r.cpu)),
        ("request -> session live (agent/getState answered)",
         lambda r: ms(r.live) if r.live else "n/a"),
        ("  server CPU until then", lambda r: ms(r.live_cpu) if r.live else "n/a"),
        ("response frame size", lambda r: mib(r.response_bytes)),
        ("notifications before the response", lambda r: f"{r.notifications:,}"),
        ("  their bytes", lambda r: mib(r.notification_bytes)),
        ("messages in the response", lambda r: f"{r.messages:,}" if r.messages else "n/a"),
        ("server VmRSS before -> after", lambda r: f"{mib(r.rss_before * 1024)} -> "
                                                     f"{mib(r.rss_after * 1024)}"),
        ("server VmHWM (peak) after", lambda r: mib(r.hwm * 1024)),
        ("session/close, then load again", lambda r: ms(r.second) if r.second else "n/a"),
        ("  and parsed by the bench's client",
         lambda r: ms(r.second_parsed) if r.second else "n/a"),
        ("  server CPU during it", lambda r: ms(r.second_cpu) if r.second else "n/a"),
    ]
    for metric, value in show:
        rows.append(Row(section, metric, f"{value(native):<26}{value(acp)}"))
    rows.append(Row(section, "log bytes appended by the loads", f"{grown:,}"))


# ---------------------------------------------------------------------------------------------
# Report


def describe(entries: list[tuple[str, dict[str, Any]]]) -> str:
    kinds = Counter(kind if kind != "message" else f"message:{data['message']['role']}"
                    for kind, data in entries)
    return ", ".join(f"{kind} {n:,}" for kind, n in kinds.most_common())


def filesystem(path: Path) -> str:
    best, fs = "", "?"
    for line in Path("/proc/mounts").read_text().splitlines():
        _, mount, kind, *_ = line.split()
        if str(path).startswith(mount) and len(mount) > len(best):
            best, fs = mount, kind
    return f"{fs} on {best}"


def banner(root: Path) -> str:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return "\n".join([
        f"tiller {tiller_version} session log benchmark  ({time.strftime('%Y-%m-%d %H:%M:%S')})",
        f"machine: {platform.machine()}, {cpus} CPUs usable, {platform.platform()}",
        f"python {platform.python_version()}",
        f"load average at start: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}",
        f"session log in {root} ({filesystem(root)})",
        "numbers are from a single run; expect run-to-run noise of 10-20% (fsync: more)",
    ])


def render(rows: list[Row]) -> str:
    width = max(len(row.metric) for row in rows) + 2
    lines: list[str] = []
    section = None
    for row in rows:
        if row.section != section:
            section = row.section
            lines += ["", section]
            if section.startswith("3."):
                lines.append(f"  {'':<{width}}{'tiller protocol':<26}ACP (--acp)")
        lines.append(f"  {row.metric:<{width}}{row.value}".rstrip())
    return "\n".join(lines)


async def main() -> None:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="tiller-bench-") as tmp:
        root = Path(tmp)
        cwd = (root / "workspace").resolve()
        cwd.mkdir()
        session_dir = root / "sessions"
        session_id = uuid.uuid4().hex
        log_path = session_dir / workspace_dir_name(cwd) / f"{session_id}.jsonl"
        print(banner(root), flush=True)
        entries = build_entries(ENTRIES)
        text = sum(len(json.dumps(data)) for _, data in entries)
        print(f"entries: {describe(entries)}; {text / len(entries):,.0f} B of fields on average",
              flush=True)
        measure_appends(rows, log_path, cwd, session_id, entries)
        measure_replay(rows, log_path)
        await measure_loads(rows, session_dir, cwd, session_id, log_path)
    print(render(rows))


if __name__ == "__main__":
    anyio.run(main)
