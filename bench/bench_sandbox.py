"""Sandbox benchmark: the latency bubblewrap adds to one ``bash`` command (issue 27's target:
at most 15 ms median).

In this process, ``tiller.tools.bash.BashTool`` runs the same commands without a sandbox and
in the ``workspace-write`` sandbox (``tiller.sandbox.command.CommandSandbox``, with the gate's
protected paths and the default hidden folders), alternating, in a workspace that is a git
repository with a few hundred files: ``true`` (the fixed cost: bwrap's namespaces and mounts,
plus working out the mounts from the disk), ``git status`` and a ``python -c pass``. Each
command runs ROUNDS times each way after a few warm-up runs; the medians and their difference
are printed. The server's own overhead (the permission gate, events) is the same either way
and not measured here: bench_server.py covers it.

Run from the repository root (about 20 seconds on 2 idle cores)::

    python bench/bench_sandbox.py [ROUNDS]

It prints numbers from one run and asserts nothing about them. Without a usable bwrap it says
why and exits 1.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

BENCH = Path(__file__).resolve().parent
for _path in (BENCH.parent / "server",):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from tiller.gate.protected import ProtectedPaths  # noqa: E402
from tiller.sandbox.command import CommandSandbox  # noqa: E402
from tiller.sandbox.probe import availability  # noqa: E402
from tiller.sandbox.settings import SandboxSettings  # noqa: E402
from tiller.tools.base import ToolContext  # noqa: E402
from tiller.tools.bash import BashParams, BashTool  # noqa: E402

COMMANDS = {"true": "true", "git status": "git status --short >/dev/null",
            "python -c pass": f"{sys.executable} -c pass"}
WARMUP = 3


def make_workspace(root: Path) -> Path:
    """A git repository with 300 small committed files."""
    for n in range(300):
        folder = root / f"pkg{n % 10}"
        folder.mkdir(exist_ok=True)
        (folder / f"mod{n}.py").write_text(f"VALUE = {n}\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    for argv in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "init"]):
        subprocess.run(argv, cwd=root, env=env, check=True)
    return root


async def timed(tool: BashTool, command: str, cwd: Path) -> float:
    """Seconds one call of ``command`` takes, start to result."""
    start = time.perf_counter()
    await tool.execute(BashParams(command=command), ToolContext(cwd=cwd, tool_call_id="b"))
    return time.perf_counter() - start


async def main(rounds: int) -> int:
    found = availability()
    if not found.ok:
        print(f"no sandbox here: {found.reason}")
        return 1
    with tempfile.TemporaryDirectory(prefix="tiller-bench-sandbox-", dir="/var/tmp") as tmp:
        workspace = make_workspace(Path(tmp))
        protected = ProtectedPaths()
        sandbox = CommandSandbox(
            SandboxSettings(), roots=lambda: [workspace],
            protected=lambda path: protected.why(path, [workspace]) is not None)
        plain, boxed = BashTool(), BashTool(sandbox=sandbox)
        load = os.getloadavg()[0]
        print(f"bash command latency, {rounds} rounds each (load average {load:.2f}, "
              f"{os.cpu_count()} cores)")
        print(f"{'command':<16}{'unsandboxed':>14}{'sandboxed':>12}{'added':>10}")
        for name, command in COMMANDS.items():
            times: dict[str, list[float]] = {"plain": [], "boxed": []}
            for n in range(WARMUP + rounds):
                for key, tool in (("plain", plain), ("boxed", boxed)):
                    took = await timed(tool, command, workspace)
                    if n >= WARMUP:
                        times[key].append(took)
            a, b = statistics.median(times["plain"]), statistics.median(times["boxed"])
            print(f"{name:<16}{a * 1000:>12.1f}ms{b * 1000:>10.1f}ms{(b - a) * 1000:>8.1f}ms")
        start = time.perf_counter()
        for _ in range(rounds):
            sandbox.mounts(sandbox.plan())
        per = (time.perf_counter() - start) / rounds
        print(f"of which working out the mounts from the disk: {per * 1000:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 50))
