"""Where Tiller's server spends its CPU while it streams a long reply: py-spy's samples, summed.

Starts Tiller (its own front, or ``--acp``) on bench_providers.py's recording Chat Completions
fake (or ``--provider anthropic``: the Anthropic fake), warms it up with one short prompt, then
attaches ``py-spy record`` (PyPI ``py-spy``, a dev dependency; it reads the process's memory
with ptrace, so it needs root or ``kernel.yama.ptrace_scope`` 0) and streams a reply of
``--tokens`` tokens (4 characters each, one per SSE event) at ``--rate`` tokens/s (0: as fast as
the fake can), stops py-spy when the turn ends and prints:

- the server's CPU seconds per 1,000 tokens in that span (/proc, as bench_peer.py counts it);
- the functions with the most self time (samples whose innermost frame is the function) and the
  most total time (samples with the function anywhere on the stack), as sampled seconds and
  shares of all samples; ``--lines`` ranks source lines instead of functions.

Only the samples of the thread holding the GIL count (``py-spy record --gil``): Python work.
(py-spy's own idle detection counted threads waiting in ``epoll`` or on a condition as busy on
this VM, so without ``--gil`` two thirds of the samples were waits; ``--all-threads`` shows them.)
Time in C code that released the GIL (the socket and pipe syscalls) is left out, and a thread
holding the GIL but preempted still counts on a loaded machine, so read the shares, not the
seconds, and the /proc CPU line for the total. The speedscope file stays (``--out``, default in
the system temporary folder) for https://www.speedscope.app or any viewer::

    python bench/profile_stream.py                      # 3,000 tokens at 100 tokens/s
    python bench/profile_stream.py --acp --rate 0       # the ACP front, full speed
    python bench/profile_stream.py --top 40 --lines
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

BENCH = Path(__file__).resolve().parent
for _path in (BENCH, BENCH.parent / "tests", BENCH.parent / "server"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench_peer import FIRST_REPLY, TOKEN, Fakes, prompt  # noqa: E402
from bench_server import server_env  # noqa: E402
from peer_agents import (  # noqa: E402
    AcpDialect,
    PeerSpec,
    TillerDialect,
    running,
    setup_peer,
    tree_cpu_seconds,
)

ROOT = BENCH.parent


def py_spy() -> str:
    """The py-spy next to this Python (the venv's), else the one on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if found is None:
        raise SystemExit("py-spy is not installed: `make install` (it is a dev dependency) "
                         "or `pip install py-spy`")
    return found


@dataclass(frozen=True)
class Ranked:
    name: str
    self_seconds: float
    total_seconds: float


def rank(speedscope: dict[str, Any], lines: bool) -> tuple[list[Ranked], float]:
    """Self and total seconds per function (``lines``: per source line) over every thread's
    samples of a py-spy speedscope file, and the seconds sampled in all."""
    frames = speedscope["shared"]["frames"]

    def label(index: int) -> str:
        frame = frames[index]
        where = short_path(str(frame.get("file", "?")))
        if lines:
            return f"{frame['name']} ({where}:{frame.get('line')})"
        return f"{frame['name']} ({where})"

    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    sampled = 0.0
    for profile in speedscope["profiles"]:
        for stack, weight in zip(profile["samples"], profile["weights"], strict=True):
            sampled += weight
            if not stack:
                continue
            names = [label(index) for index in stack]
            own[names[-1]] += weight
            for name in set(names):
                total[name] += weight
    ranked = [Ranked(name, own[name], total[name]) for name in total]
    return ranked, sampled


def short_path(path: str) -> str:
    """A frame's file relative to server/, site-packages or the standard library."""
    return re.sub(rf"^.*?({re.escape(str(ROOT / 'server'))}|site-packages|lib/python3\.\d+)/",
                  "", path)


def render(ranked: list[Ranked], sampled: float, top: int) -> str:
    def table(title: str, key: str) -> list[str]:
        rows = sorted(ranked, key=lambda r: getattr(r, key), reverse=True)[:top]
        out = [f"| {title} | self s | self % | total s | total % |", "|---|---|---|---|---|"]
        for r in rows:
            out.append(f"| `{r.name}` | {r.self_seconds:.3f} | "
                       f"{100 * r.self_seconds / sampled:.1f} | {r.total_seconds:.3f} | "
                       f"{100 * r.total_seconds / sampled:.1f} |")
        return out

    return "\n".join([*table(f"top {top} by self time", "self_seconds"), "",
                      *table(f"top {top} by total time", "total_seconds")])


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--acp", action="store_true", help="profile the ACP front (--acp)")
    parser.add_argument("--provider", choices=("openai", "anthropic"), default="openai")
    parser.add_argument("--tokens", type=int, default=3_000)
    parser.add_argument("--rate", type=float, default=100.0,
                        help="tokens per second the fake streams (0: full speed)")
    parser.add_argument("--sample-rate", type=int, default=1000, help="py-spy samples/s")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--lines", action="store_true", help="rank source lines, not functions")
    parser.add_argument("--all-threads", action="store_true",
                        help="every thread's samples, not only the GIL holder's")
    parser.add_argument("--spy-args", nargs="*", default=[], help="more py-spy record options")
    parser.add_argument("--out", type=Path, default=None, help="the speedscope file to keep")
    return parser.parse_args(argv)


def tiller_spec(args: argparse.Namespace, fakes: Fakes, root: Path) -> PeerSpec:
    key = "tiller-acp" if args.acp else "tiller"
    spec = setup_peer(key, fakes.urls, root / "home", root / "tiller.log")
    if args.provider == "anthropic":
        argv = [sys.executable, "-m", "tiller", "--provider", "anthropic", "--model",
                "claude-sonnet-5", "--no-session", *(["--acp"] if args.acp else [])]
        env = server_env()
        env.update(ANTHROPIC_API_KEY="bench", ANTHROPIC_BASE_URL=fakes.urls["anthropic"])
        spec = PeerSpec(key, spec.name, "anthropic",
                        AcpDialect() if args.acp else TillerDialect(), argv, env, spec.version,
                        spec.log)
    return spec


async def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    out = args.out or Path(tempfile.gettempdir()) / (
        f"tiller-{'acp' if args.acp else 'front'}-{args.provider}-{args.tokens}-"
        f"{args.rate:g}.speedscope.json")
    spy = py_spy()
    with tempfile.TemporaryDirectory(prefix="tiller-profile-") as tmp, Fakes() as fakes:
        root = Path(tmp)
        cwd = root / "work"
        cwd.mkdir()
        spec = tiller_spec(args, fakes, root)
        async with running(spec, cwd) as peer:
            await spec.dialect.ready(peer)
            fakes.script(spec.wire, FIRST_REPLY, None)
            await prompt(spec, peer, "warm up", FIRST_REPLY)
            recorder = await anyio.open_process(
                [spy, "record", "--pid", str(peer.pid), "--rate", str(args.sample_rate),
                 "--format", "speedscope", "--output", str(out),
                 *([] if args.all_threads else ["--gil"]), *args.spy_args],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            reply = TOKEN * args.tokens
            fakes.script(spec.wire, reply, args.rate or None)
            cpu, start = tree_cpu_seconds(peer.pid), time.perf_counter()
            await prompt(spec, peer, "talk a lot", reply)
            cpu, wall = tree_cpu_seconds(peer.pid) - cpu, time.perf_counter() - start
            recorder.send_signal(signal.SIGINT)  # py-spy writes the profile and exits
            assert recorder.stdout is not None
            with anyio.fail_after(60):
                report = b"".join([chunk async for chunk in recorder.stdout]).decode()
                await recorder.wait()
        if spec.log.exists() and spec.log.stat().st_size:
            print(f"server stderr: {spec.log.read_text(errors='replace')[-2000:]}")
    if not out.exists():
        raise SystemExit(f"py-spy wrote no profile (exit {recorder.returncode}): {report}")
    ranked, sampled = rank(json.loads(out.read_text()), args.lines)
    front = "ACP front (--acp)" if args.acp else "Tiller front"
    pace = f"{args.rate:g} tokens/s" if args.rate else "full speed"
    print(f"{front}, {args.provider} provider, {args.tokens:,} tokens at {pace}: "
          f"{wall:.2f} s, server CPU {cpu:.2f} s = {cpu / args.tokens * 1000:.3f} s per 1k "
          f"tokens")
    print(f"py-spy: {sampled:.2f} s of samples ({'all threads' if args.all_threads else 'GIL held'}"
          f") at {args.sample_rate}/s (profile: {out})")
    print()
    print(render(ranked, sampled, args.top))


if __name__ == "__main__":
    anyio.run(main)
