"""The agents bench_peer.py measures: how each is installed, started and spoken to over stdio.

Every peer comes from the npm registry at a pinned version and is installed once into a cache
folder, ``~/.cache/tiller/peer`` (``TILLER_PEER_CACHE`` overrides it), each package under its own
npm prefix (pi and Node together at the top, as before). Node 22 (npm ``node``) runs pi and is
first on PATH while the others install (Claude Code's postinstall runs ``node``). Codex,
codex-acp and Claude Code ship native binaries in their npm packages; the bench starts those
binaries directly, as editors do, not the packages' Node launchers.

Each peer gets a home folder of its own (``HOME`` and its config folder), created once per run and
kept across the run's spawns (a user's agent starts with its state from the last start), and is
pointed at a loopback fake model server (bench_providers.py's recording fakes of
tests/support/): no network, no login, telemetry and update checks off where the agent has a
switch for them. What "ready for a prompt" means differs per protocol; ``Dialect.ready`` says it
for each.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import anyio
import anyio.abc

BENCH = Path(__file__).resolve().parent
for _path in (BENCH, BENCH.parent / "tests", BENCH.parent / "server"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench_server import server_env  # noqa: E402

CACHE = Path(os.environ.get("TILLER_PEER_CACHE", Path.home() / ".cache" / "tiller" / "peer"))
Wire = Literal["chat", "responses", "anthropic"]
"""The provider API a peer streams from: OpenAI Chat Completions, OpenAI Responses, Anthropic
Messages (each a fake of tests/support/)."""

CHAT_MODEL = "fake-model"
RESPONSES_MODEL = "gpt-5.5"  # in Codex's model catalog and in the Responses fake's table
ANTHROPIC_MODEL = "claude-sonnet-5"


# ---------------------------------------------------------------------------------------------
# Installing


@dataclass(frozen=True)
class NpmPackage:
    name: str
    version: str
    folder: str  # its npm prefix under CACHE ("": CACHE itself)

    @property
    def prefix(self) -> Path:
        return CACHE / self.folder if self.folder else CACHE

    @property
    def root(self) -> Path:
        return self.prefix / "node_modules" / self.name

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.version}"

    def installed(self) -> bool:
        manifest = self.root / "package.json"
        try:
            return bool(json.loads(manifest.read_text())["version"] == self.version)
        except (OSError, ValueError, KeyError):
            return False


# Pinned: the versions `npm view <name> version` gave on 2026-12-03.
NODE = NpmPackage("node", "22.23.3", "")
PI = NpmPackage("@earendil-works/pi-coding-agent", "1.6.0", "")
CODEX = NpmPackage("@openai/codex", "0.171.0", "codex")
CODEX_ACP = NpmPackage("@zed-industries/codex-acp", "0.16.0", "codex-acp")
CLAUDE_CODE = NpmPackage("@anthropic-ai/claude-code", "2.1.332", "claude-code")


class Unavailable(Exception):
    """A peer that cannot be installed or started; the message says why."""


def node_bin() -> Path:
    return NODE.prefix / "node_modules" / ".bin" / "node"


def npm_install(*packages: NpmPackage) -> None:
    """Install what is missing of ``packages`` (one npm run per prefix); Unavailable if npm
    fails."""
    missing = [package for package in packages if not package.installed()]
    for prefix in dict.fromkeys(package.prefix for package in missing):
        specs = [package.spec for package in missing if package.prefix == prefix]
        prefix.mkdir(parents=True, exist_ok=True)
        print(f"installing {' '.join(specs)} into {prefix} ...", flush=True)
        env = dict(os.environ)
        if node_bin().exists():  # Node 22 first on PATH for install scripts
            env["PATH"] = f"{node_bin().parent}{os.pathsep}{env.get('PATH', '')}"
        done = subprocess.run(
            ["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
             "--loglevel=error", *specs],
            env=env, capture_output=True, text=True, check=False,
        )
        if done.returncode != 0:
            raise Unavailable(f"npm install {' '.join(specs)} failed: {tail(done.stderr)}")
        still = [p.spec for p in missing if p.prefix == prefix and not p.installed()]
        if still:
            raise Unavailable(f"npm install left {' '.join(still)} uninstalled")


def tail(text: str, lines: int = 4) -> str:
    kept = [line.strip() for line in text.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(kept) or "(no output)"


def native_binary(package: NpmPackage, pattern: str) -> Path:
    """The executable a package's platform dependency ships (``pattern`` under its prefix's
    node_modules)."""
    for path in sorted((package.prefix / "node_modules").glob(pattern)):
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise Unavailable(f"{package.spec} is installed but has no {pattern} for this platform")


def version_of(argv: list[str], env: dict[str, str] | None = None) -> str:
    """The first line ``argv`` prints (a ``--version``); Unavailable if it does not run."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise Unavailable(f"{argv[0]} does not run: {error}") from error
    if done.returncode != 0:
        raise Unavailable(f"{' '.join(argv)} exited {done.returncode}: "
                          f"{tail(done.stderr or done.stdout)}")
    return done.stdout.strip().splitlines()[0] if done.stdout.strip() else "?"


# ---------------------------------------------------------------------------------------------
# A running peer


@dataclass
class Line:
    at: float
    size: int  # bytes, newline included
    message: dict[str, Any]


class PeerFailed(Exception):
    """The peer did something the bench cannot measure (an error answer, a failed turn)."""


class Peer:
    """A spawned NDJSON process; every line it writes is kept with its size and arrival time.
    JSON-RPC requests it sends (``jsonrpc_client``) are answered "method not found"."""

    def __init__(self, process: anyio.abc.Process, jsonrpc_client: bool) -> None:
        self.process = process
        self.lines: list[Line] = []
        self.state: dict[str, Any] = {}  # what the dialect keeps: session or thread ids
        self._jsonrpc_client = jsonrpc_client
        self.eof = False
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
                if not raw.strip():
                    continue
                try:
                    message = json.loads(raw)
                except ValueError:
                    message = {"unparsed": raw[:200].decode("utf-8", "replace")}
                if not isinstance(message, dict):
                    message = {"unparsed": message}
                self.lines.append(Line(now, len(raw) + 1, message))
                if self._jsonrpc_client and "method" in message and "id" in message:
                    await self.send({"jsonrpc": "2.0", "id": message["id"], "error": {
                        "code": -32601, "message": "the bench client serves no requests"}})
            if complete:
                self._arrived.set()
                self._arrived = anyio.Event()
        self.eof = True
        self._arrived.set()

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps(message).encode() + b"\n")

    async def wait(self, match: Callable[[dict[str, Any]], bool], start: int = 0,
                   timeout: float = 120) -> int:
        """Index of the first line from ``start`` on that matches, waiting for it; PeerFailed
        if the process closes its stdout first, TimeoutError after ``timeout`` seconds."""
        with anyio.fail_after(timeout):
            while True:
                for index in range(start, len(self.lines)):
                    if match(self.lines[index].message):
                        return index
                start = len(self.lines)
                if self.eof:
                    raise PeerFailed("closed its stdout before answering")
                await self._arrived.wait()

    async def request(self, method: str, params: Any, timeout: float = 60) -> Any:
        """A JSON-RPC request's result; PeerFailed on an error answer."""
        request_id = self.next_id()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        index = await self.wait(lambda m: m.get("id") == request_id and "method" not in m,
                                timeout=timeout)
        answer = self.lines[index].message
        if "error" in answer:
            raise PeerFailed(f"{method} answered {json.dumps(answer['error'])[:300]}")
        return answer.get("result")


def descendants(pid: int) -> list[int]:
    """``pid``'s live descendants (scanning /proc for parent ids)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` and its descendants so far, reaped children included."""
    total = 0.0
    for member in [pid, *descendants(pid)]:
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(value) for value in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


def tree_rss_kib(pid: int) -> int:
    """VmRSS of ``pid`` and its descendants, summed."""
    total = 0
    for member in [pid, *descendants(pid)]:
        try:
            status = Path(f"/proc/{member}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


# ---------------------------------------------------------------------------------------------
# How to speak to each kind of agent


class Dialect:
    """One agent protocol over NDJSON stdio: the handshake up to "ready for a prompt", a
    prompt and its end, and which lines carry reply text."""

    jsonrpc_client: ClassVar[bool] = True
    ready_means: ClassVar[str] = ""

    async def ready(self, peer: Peer) -> None:
        raise NotImplementedError

    async def send_prompt(self, peer: Peer, text: str) -> Callable[[dict[str, Any]], bool]:
        """Send a prompt; return what its last line looks like."""
        raise NotImplementedError

    def failure(self, end: dict[str, Any]) -> str | None:
        """Why the turn that ended with ``end`` failed, or None."""
        return None

    def text(self, message: dict[str, Any]) -> str | None:
        """The reply text this line carries (None: not a reply-text line)."""
        raise NotImplementedError


def _response_to(request_id: int) -> Callable[[dict[str, Any]], bool]:
    return lambda m: m.get("id") == request_id and "method" not in m


def _rpc_failure(end: dict[str, Any]) -> str | None:
    return json.dumps(end["error"])[:300] if "error" in end else None


class TillerDialect(Dialect):
    """Tiller's own front. ``editor``: started as its editors start it (the VS Code extension
    and the Neovim plugin send ``session/new``, or ``session/load``, before the user can type)
    and prompted in that session; else as a script may: ``initialize`` only, prompts to the
    default session."""

    def __init__(self, editor: bool = True) -> None:
        self.editor = editor
        self.ready_means = ("`initialize` and `session/new` answered" if editor
                            else "`initialize` answered (prompts go to the default session)")

    async def ready(self, peer: Peer) -> None:
        await peer.request("initialize", {"clientInfo": {"name": "bench", "version": "0"},
                                          "capabilities": {}})
        if self.editor:
            result = await peer.request("session/new", {"cwd": str(peer.state["cwd"])})
            peer.state["sessionId"] = result["sessionId"]

    async def send_prompt(self, peer: Peer, text: str) -> Callable[[dict[str, Any]], bool]:
        request_id = peer.next_id()
        params = {"message": text}
        if "sessionId" in peer.state:
            params["sessionId"] = peer.state["sessionId"]
        await peer.send({"jsonrpc": "2.0", "id": request_id, "method": "agent/prompt",
                         "params": params})
        return _response_to(request_id)

    def failure(self, end: dict[str, Any]) -> str | None:
        return _rpc_failure(end)

    def text(self, message: dict[str, Any]) -> str | None:
        params = message.get("params")
        if message.get("method") != "agent/event" or not isinstance(params, dict):
            return None
        if params.get("type") != "message_update" or params.get("kind", "text") != "text":
            return None
        return str(params.get("delta") or "")


class AcpDialect(Dialect):
    ready_means = "`initialize` and `session/new` answered"

    async def ready(self, peer: Peer) -> None:
        await peer.request("initialize", {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False},
                                   "terminal": False},
            "clientInfo": {"name": "bench", "version": "0"}})
        cwd = peer.state["cwd"]
        result = await peer.request("session/new", {"cwd": str(cwd), "mcpServers": []})
        peer.state["sessionId"] = result["sessionId"]

    async def send_prompt(self, peer: Peer, text: str) -> Callable[[dict[str, Any]], bool]:
        request_id = peer.next_id()
        await peer.send({"jsonrpc": "2.0", "id": request_id, "method": "session/prompt",
                         "params": {"sessionId": peer.state["sessionId"],
                                    "prompt": [{"type": "text", "text": text}]}})
        return _response_to(request_id)

    def failure(self, end: dict[str, Any]) -> str | None:
        return _rpc_failure(end)

    def text(self, message: dict[str, Any]) -> str | None:
        params = message.get("params")
        if message.get("method") != "session/update" or not isinstance(params, dict):
            return None
        update = params.get("update") or {}
        if update.get("sessionUpdate") != "agent_message_chunk":
            return None
        content = update.get("content") or {}
        return str(content.get("text") or "")


class CodexDialect(Dialect):
    """Codex's app-server protocol (v2): ``initialize``, the ``initialized`` notification,
    ``thread/start``; ``turn/start`` then ``item/agentMessage/delta`` notifications and
    ``turn/completed``."""

    ready_means = "`initialize` and `thread/start` (ephemeral) answered"

    async def ready(self, peer: Peer) -> None:
        await peer.request("initialize", {
            "clientInfo": {"name": "bench", "title": None, "version": "0"},
            "capabilities": None})
        await peer.send({"jsonrpc": "2.0", "method": "initialized"})
        result = await peer.request("thread/start", {"cwd": str(peer.state["cwd"]),
                                                     "ephemeral": True})
        peer.state["threadId"] = result["thread"]["id"]

    async def send_prompt(self, peer: Peer, text: str) -> Callable[[dict[str, Any]], bool]:
        request_id = peer.next_id()
        thread = peer.state["threadId"]
        await peer.send({"jsonrpc": "2.0", "id": request_id, "method": "turn/start", "params": {
            "threadId": thread,
            "input": [{"type": "text", "text": text, "text_elements": []}]}})
        return lambda m: (m.get("method") == "turn/completed"
                          and m.get("params", {}).get("threadId") == thread)

    def failure(self, end: dict[str, Any]) -> str | None:
        turn = end.get("params", {}).get("turn", {})
        if turn.get("status") == "completed":
            return None
        return f"turn {turn.get('status')}: {json.dumps(turn.get('error'))[:300]}"

    def text(self, message: dict[str, Any]) -> str | None:
        if message.get("method") != "item/agentMessage/delta":
            return None
        return str(message.get("params", {}).get("delta") or "")


class PiDialect(Dialect):
    """pi's RPC mode: one JSON object per line with a ``type``."""

    jsonrpc_client = False
    ready_means = "`get_state` answered"

    async def ready(self, peer: Peer) -> None:
        request_id = str(peer.next_id())
        await peer.send({"id": request_id, "type": "get_state"})
        await peer.wait(lambda m: m.get("id") == request_id and m.get("type") == "response",
                        timeout=60)

    async def send_prompt(self, peer: Peer, text: str) -> Callable[[dict[str, Any]], bool]:
        await peer.send({"id": str(peer.next_id()), "type": "prompt", "message": text})
        return lambda m: m.get("type") == "agent_settled"

    def text(self, message: dict[str, Any]) -> str | None:
        if message.get("type") != "message_update":
            return None
        event = message.get("assistantMessageEvent") or {}
        if event.get("type") != "text_delta":
            return None
        return str(event.get("delta") or "")


class ClaudeDialect(Dialect):
    """Claude Code's stream-json mode (``-p --input-format stream-json --output-format
    stream-json``), as the Agent SDK drives it: an ``initialize`` control request first, then
    ``user`` messages; replies as ``stream_event`` lines (``--include-partial-messages``) and a
    ``result`` line per turn."""

    jsonrpc_client = False
    ready_means = "the control response to the Agent SDK's `initialize` control request"

    async def ready(self, peer: Peer) -> None:
        request_id = f"bench-{peer.next_id()}"
        await peer.send({"type": "control_request", "request_id": request_id,
                         "request": {"subtype": "initialize"}})
        index = await peer.wait(
            lambda m: m.get("type") == "control_response"
            and (m.get("response") or {}).get("request_id") == request_id, timeout=60)
        response = peer.lines[index].message["response"]
        if response.get("subtype") != "success":
            raise PeerFailed(f"initialize: {json.dumps(response)[:300]}")

    async def send_prompt(self, peer: Peer, text: str) -> Callable[[dict[str, Any]], bool]:
        await peer.send({"type": "user", "session_id": "", "parent_tool_use_id": None,
                         "message": {"role": "user",
                                     "content": [{"type": "text", "text": text}]}})
        return lambda m: m.get("type") == "result"

    def failure(self, end: dict[str, Any]) -> str | None:
        if end.get("is_error") or end.get("subtype") != "success":
            return f"result {end.get('subtype')}: {str(end.get('result'))[:300]}"
        return None

    def text(self, message: dict[str, Any]) -> str | None:
        if message.get("type") != "stream_event":
            return None
        event = message.get("event") or {}
        delta = event.get("delta") or {}
        if event.get("type") != "content_block_delta" or delta.get("type") != "text_delta":
            return None
        return str(delta.get("text") or "")


# ---------------------------------------------------------------------------------------------
# The peers


@dataclass
class PeerSpec:
    """One agent as the bench starts it."""

    key: str  # what --peers names
    name: str  # its row in the table
    wire: Wire
    dialect: Dialect
    argv: list[str]
    env: dict[str, str]
    version: str
    log: Path  # its stderr, appended over the run
    notes: list[str] = field(default_factory=list)


PEER_KEYS = ("tiller", "tiller-script", "tiller-acp", "codex", "codex-acp", "pi", "claude")


def peer_env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without agent and provider settings, with ``home`` as HOME
    (a fresh user's) and the XDG folders under it."""
    prefixes = ("OPENAI_", "ANTHROPIC_", "TILLER_", "CODEX_", "CLAUDE_", "PI_")
    env = {key: value for key, value in os.environ.items() if not key.startswith(prefixes)}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
               XDG_DATA_HOME=str(home / ".local" / "share"),
               XDG_CACHE_HOME=str(home / ".cache"))
    env.update(extra)
    return env


def setup_peer(key: str, urls: dict[Wire, str], home: Path, log: Path) -> PeerSpec:
    """Install (once) and configure the peer ``key``; Unavailable says why it cannot run."""
    home.mkdir(parents=True, exist_ok=True)
    if key in ("tiller", "tiller-script", "tiller-acp"):
        from tiller import __version__

        argv = [sys.executable, "-m", "tiller", "--base-url", urls["chat"], "--model",
                CHAT_MODEL, "--no-session"]
        if key == "tiller-acp":
            return PeerSpec(key, "Tiller `--acp`", "chat", AcpDialect(), [*argv, "--acp"],
                            server_env(), __version__, log)
        editor = key == "tiller"
        return PeerSpec(key, "Tiller" if editor else "Tiller, scripted", "chat",
                        TillerDialect(editor), argv, server_env(), __version__, log)
    if key == "pi":
        npm_install(NODE, PI)
        cli = PI.root / json.loads((PI.root / "package.json").read_text())["bin"]["pi"]
        node = version_of([str(node_bin()), "--version"])
        (home / "agent").mkdir(exist_ok=True)
        (home / "agent" / "models.json").write_text(json.dumps({"providers": {"bench": {
            "baseUrl": urls["chat"], "api": "openai-completions", "apiKey": "bench",
            "models": [{"id": CHAT_MODEL}]}}}))
        env = peer_env(home, PI_CODING_AGENT_DIR=str(home / "agent"), PI_OFFLINE="1",
                       PI_SKIP_VERSION_CHECK="1", PI_TELEMETRY="0")
        return PeerSpec("pi", f"pi {PI.version}", "chat", PiDialect(),
                        [str(node_bin()), str(cli), "--mode", "rpc", "--no-session",
                         "--provider", "bench", "--model", CHAT_MODEL],
                        env, f"{PI.version} on node {node}", log)
    if key in ("codex", "codex-acp"):
        package = CODEX if key == "codex" else CODEX_ACP
        npm_install(package)
        binary = (native_binary(CODEX, "@openai/codex-*/vendor/*/bin/codex") if key == "codex"
                  else native_binary(CODEX_ACP, "@zed-industries/codex-acp-*/bin/codex-acp"))
        codex_home = home / ".codex"
        codex_home.mkdir(exist_ok=True)
        (codex_home / "config.toml").write_text(codex_config(urls["responses"]))
        env = peer_env(home, CODEX_HOME=str(codex_home), BENCH_API_KEY="bench")
        if key == "codex":
            version = version_of([str(binary), "--version"], env)
            return PeerSpec(key, "Codex app-server", "responses", CodexDialect(),
                            [str(binary), "app-server"], env, version, log)
        return PeerSpec(key, "codex-acp", "responses", AcpDialect(), [str(binary)], env,
                        package.version, log)
    if key == "claude":
        npm_install(NODE)
        npm_install(CLAUDE_CODE)
        binary = CLAUDE_CODE.root / "bin" / "claude.exe"
        env = peer_env(home, ANTHROPIC_API_KEY="bench", ANTHROPIC_BASE_URL=urls["anthropic"],
                       CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_TELEMETRY="1",
                       DISABLE_AUTOUPDATER="1", DISABLE_ERROR_REPORTING="1")
        version = version_of([str(binary), "--version"], env)
        return PeerSpec(key, "Claude Code", "anthropic", ClaudeDialect(),
                        [str(binary), "-p", "--input-format", "stream-json", "--output-format",
                         "stream-json", "--verbose", "--include-partial-messages",
                         "--no-session-persistence", "--model", ANTHROPIC_MODEL],
                        env, version, log)
    raise ValueError(f"unknown peer {key!r}; known: {', '.join(PEER_KEYS)}")


def codex_config(url: str) -> str:
    """Codex's config.toml: a custom model provider on the Responses API at the fake."""
    return "\n".join([
        f'model = "{RESPONSES_MODEL}"',
        'model_provider = "bench"',
        "",
        "[model_providers.bench]",
        'name = "bench"',
        f'base_url = "{url}"',
        'env_key = "BENCH_API_KEY"',
        'wire_api = "responses"',
        "",
    ])


@asynccontextmanager
async def running(spec: PeerSpec, cwd: Path) -> AsyncIterator[Peer]:
    """The peer spawned in ``cwd`` (its own process group, stderr appended to its log); on
    exit its stdin is closed, and whatever of its group is left after 5 s is killed."""
    with spec.log.open("ab") as log:
        process = await anyio.open_process(spec.argv, env=spec.env, cwd=cwd, stderr=log,
                                           start_new_session=True)
    peer = Peer(process, spec.dialect.jsonrpc_client)
    peer.state["cwd"] = cwd
    async with anyio.create_task_group() as group:
        group.start_soon(peer.read_loop)
        try:
            yield peer
        finally:
            with anyio.CancelScope(shield=True):
                assert process.stdin is not None
                try:
                    await process.stdin.aclose()
                except OSError:
                    pass
                with anyio.move_on_after(5):
                    await process.wait()
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                await process.wait()
            group.cancel_scope.cancel()
