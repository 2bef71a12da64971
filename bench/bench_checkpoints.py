"""Checkpoint benchmark: the shadow git repository on a generated 10,000-file, 100 MB workspace.

What it measures:

1. In this process, ``tiller.checkpoints.shadow.ShadowRepo`` alone: the first snapshot (an empty
   shadow index: every file is hashed), a snapshot after one file changed (the per-turn cost; the
   target is <= 150 ms on a 2-core machine), and one after nothing changed.
2. Through a real ``python -m tiller`` driven by the loopback fake OpenAI server: 100 runs, each
   one turn whose ``bash`` call appends a line to a different file (so each run takes the
   before and after snapshots); the median ``agent/prompt`` round trip, then ``session/changes``
   of the whole session, ``session/revert`` of one file, and the shadow repository's size on
   disk after the 100 turns (next to the workspace's size).

Run from the repository root (a minute or two on 2 idle cores; the workspace goes in the system
temporary directory, so set TMPDIR to measure another disk)::

    python bench/bench_checkpoints.py

It prints numbers from one run and asserts nothing about them.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

BENCH = Path(__file__).resolve().parent
for _path in (BENCH, BENCH.parent / "tests", BENCH.parent / "server"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench_server import TappedClient, initialize, server_env  # noqa: E402

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply  # noqa: E402
from tiller.checkpoints.shadow import ShadowRepo  # noqa: E402

FILES = 10_000
FILE_BYTES = 10_000  # 10,000 x 10 kB = 100 MB
TURNS = 100


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms"


def mib(size: int) -> str:
    return f"{size / 1024 / 1024:,.1f} MiB"


def generate(workspace: Path) -> None:
    """FILES text files of FILE_BYTES each, 100 per folder, with incompressible-ish content."""
    for index in range(FILES):
        folder = workspace / f"pkg{index // 100:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = (f"# {os.urandom(FILE_BYTES // 40).hex()}" for _ in range(20))
        (folder / f"mod{index % 100:02d}.py").write_text(
            "\n".join(lines)[:FILE_BYTES - 1] + "\n")


def tree_size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def timed(action: object) -> float:
    start = time.perf_counter()
    action()  # type: ignore[operator]
    return time.perf_counter() - start


def measure_shadow(workspace: Path, scratch: Path) -> None:
    repo = ShadowRepo(scratch / "alone.git", workspace)
    first = timed(repo.snapshot)
    target = workspace / "pkg000" / "mod00.py"
    target.write_text(target.read_text() + "# one more line\n")
    one = timed(repo.snapshot)
    none = timed(repo.snapshot)
    print("1. ShadowRepo.snapshot in this process")
    print(f"   first snapshot (empty index, {FILES:,} files)     {ms(first)}")
    print(f"   after one file changed                          {ms(one)}   (target <= 150 ms)")
    print(f"   after nothing changed                           {ms(none)}")


async def measure_server(workspace: Path, data: Path) -> None:
    fake = FakeOpenAI().start()
    try:
        for turn in range(TURNS):
            path = f"pkg{turn % 100:03d}/mod{turn // 100 % 100:02d}.py"
            fake.enqueue(
                tool_call_reply([(f"c{turn}", "bash",
                                  {"command": f"echo '# turn {turn}' >> {path}"})]),
                text_reply("ok"),
            )
        argv = ["--base-url", fake.url, "--cwd", str(workspace), "--session-dir", str(data),
                "--permission-mode", "auto"]
        client = await TappedClient.spawn(argv, framing="ndjson", env=server_env(),
                                          cwd=workspace)
        async with client:
            await initialize(client)
            sid = (await client.request("session/new"))["sessionId"]
            rounds = []
            for turn in range(TURNS):
                start = time.perf_counter()
                await client.request("agent/prompt", {"sessionId": sid, "message": f"t{turn}"})
                rounds.append(time.perf_counter() - start)
            start = time.perf_counter()
            changes = await client.request("session/changes", {"sessionId": sid}, timeout=600)
            changes_time = time.perf_counter() - start
            entry = changes["checkpoints"][0]["entryId"]
            start = time.perf_counter()
            reverted = await client.request("session/revert", {
                "sessionId": sid, "entryId": entry, "paths": ["pkg000/mod00.py"]}, timeout=600)
            revert_time = time.perf_counter() - start
    finally:
        fake.close()
    print(f"2. a real server, {TURNS} runs of one bash turn each")
    print(f"   first agent/prompt (first snapshot inside)      {ms(rounds[0])}")
    print(f"   median agent/prompt after it                    {ms(statistics.median(rounds[1:]))}")
    print(f"   session/changes ({len(changes['files'])} files, {TURNS} turns)         "
          f"{ms(changes_time)}")
    print(f"   session/revert of one file ({reverted['restored']})  {ms(revert_time)}")


def report_size(workspace: Path, data: Path) -> None:
    shadow = next(data.rglob("checkpoints.git"))
    print(f"   shadow repository after {TURNS} turns              {mib(tree_size(shadow))}"
          f"   (workspace {mib(tree_size(workspace))})")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tiller-bench-checkpoints-") as tmp:
        root = Path(tmp)
        workspace = root / "ws"
        start = time.perf_counter()
        generate(workspace)
        print(f"generated {FILES:,} files, {mib(tree_size(workspace))} in "
              f"{ms(time.perf_counter() - start)}; load average {os.getloadavg()[0]:.2f}")
        measure_shadow(workspace, root)
        anyio.run(measure_server, workspace, root / "data")
        report_size(workspace, root / "data")


if __name__ == "__main__":
    main()
