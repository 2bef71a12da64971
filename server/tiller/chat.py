"""``tiller chat``: talk to the agent from a terminal.

It spawns a server (``python -m tiller`` with the pass-through options ``--provider``,
``--model``, ``--base-url`` and ``--cwd``) in a session of its own, so that a Ctrl-C typed in the
terminal reaches only this process, and drives it with ``TillerClient``. Three modes:

* interactive (stdin is a terminal, no ``-p``): ``> `` reads lines. A line typed while the agent
  runs steers it (agent/steer); a line starting with ``>>`` is queued for after it
  (agent/followUp); Ctrl-C aborts the run. At the prompt, Ctrl-C, Ctrl-D or ``/quit`` exits.
* one-shot (``-p PROMPT``, or a prompt piped on stdin): one run; the exit status says how it
  ended: 0 stop/toolUse/length, 1 error/aborted/maxTurns, 2 configuration error (no API key...).
* ``--json`` (one-shot only): each event's params as one JSON line, then ``{"type": "result"}``.

Layers: ``Renderer`` and ``JsonRenderer`` turn events into output and know nothing of input;
``Connection`` owns the server, the session and the task feeding events to a renderer;
``OneShot`` and ``Repl`` are the two ways of driving it; ``main`` parses the command line.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import shutil
import signal
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Any, TextIO

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream

from tiller import __version__
from tiller.client import RpcError, TillerClient
from tiller.errors import ProviderNotConfiguredError
from tiller.protocol import EVENT_METHOD
from tiller.transport import Framing

__all__ = ["Connection", "JsonRenderer", "Renderer", "ServerExited", "build_parser", "main"]

Event = dict[str, Any]
Lines = MemoryObjectReceiveStream[str | None]
EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_INTERRUPTED = 0, 1, 2, 130
OK_STOPS = frozenset({"stop", "toolUse", "length"})
STOP_LABELS = {"error": "error", "aborted": "aborted", "maxTurns": "stopped at the turn limit"}
CONFIG_ERROR_CODES = frozenset({ProviderNotConfiguredError.code})
QUIT_COMMANDS = frozenset({"/quit", "/exit"})
RESULT_LINES = 6  # lines of a tool's result shown under its ✓/✗ line
ARGS_CHARS = 200  # longest tool-argument JSON shown on a ⚙ line

# ---------------------------------------------------------------------------------------------
# Output


class Style:
    """ANSI styling for one stream: on only if it is a terminal and NO_COLOR is not set."""

    CODES = {"dim": "2", "bold": "1", "red": "31", "green": "32", "yellow": "33"}

    def __init__(self, stream: TextIO, env: Mapping[str, str]) -> None:
        self.enabled = stream.isatty() and not env.get("NO_COLOR")

    def __call__(self, text: str, *styles: str) -> str:
        if not self.enabled or not styles:
            return text
        return f"\x1b[{';'.join(self.CODES[s] for s in styles)}m{text}\x1b[0m"


class Renderer:
    """Renders events for a person. The transcript (text, thinking, tools) goes to ``out``;
    status (errors, aborts, usage) to ``err``, so ``-p ... > answer.txt`` keeps only the answer.
    On a terminal (``live``) a running tool's latest output line is shown on a status line."""

    def __init__(self, out: TextIO, err: TextIO, env: Mapping[str, str]) -> None:
        self.out, self.err = out, err
        self.style, self.err_style = Style(out, env), Style(err, env)
        self.live = out.isatty() and env.get("TERM") != "dumb"
        self.block: str | None = None  # "text" or "thinking" while one streams
        self.at_line_start = True
        self.status_shown = False
        self.prompt_open = False

    def handle(self, event: Event) -> None:
        handler = getattr(self, f"_on_{event.get('type')}", None)
        if handler is not None:
            handler(event)

    def result(self, fields: Mapping[str, Any]) -> None:
        """Nothing to add: ``agent_end`` was rendered already."""

    def prompt(self) -> None:
        self._end_line()
        self.out.write(self.style("> ", "bold"))
        self.out.flush()
        self.at_line_start = self.prompt_open = True

    def echo_prompt(self, text: str) -> None:
        self._line(self.style("> ", "bold") + text)

    def input_received(self) -> None:
        """The person pressed Enter: the terminal's cursor is at the start of a line."""
        self.at_line_start, self.prompt_open = True, False

    def notice(self, text: str) -> None:
        self._report(text, "dim")

    def error(self, message: str) -> None:
        self._report(f"✗ {message}", "red")

    def close(self) -> None:
        if self.prompt_open:
            self.out.write("\n")
        self._clear_status()
        self.out.flush()

    # ------------------------------------------------------------------ events

    def _on_message_update(self, event: Event) -> None:
        kind, delta = event.get("kind"), event.get("delta") or ""
        if kind not in ("text", "thinking") or not delta:
            return
        if self.block != kind:
            self._end_line()
            self.block = kind
        self._write(self.style(delta, "dim") if kind == "thinking" else delta, delta)

    def _on_message_end(self, event: Event) -> None:
        if event.get("message", {}).get("role") == "assistant":
            self._end_line()
            self.block = None

    def _on_tool_execution_start(self, event: Event) -> None:
        args = _clip(json.dumps(event.get("args") or {}, ensure_ascii=False), ARGS_CHARS)
        self._line(f"{self.style('⚙ ' + event['toolName'], 'bold')} {self.style(args, 'dim')}")

    def _on_tool_execution_update(self, event: Event) -> None:
        lines = _text_of(event.get("partialResult")).rstrip().splitlines()
        if not self.live or not lines:
            return
        self._clear_status()
        self._end_line()
        status = _clip(f"  … {lines[-1].strip()}", _columns() - 1)
        self.out.write(self.style(status, "dim"))
        self.out.flush()
        self.status_shown = True

    def _on_tool_execution_end(self, event: Event) -> None:
        failed = bool(event.get("isError"))
        mark = self.style("✗", "red") if failed else self.style("✓", "green")
        self._line(f"{mark} {event['toolName']}")
        lines = _text_of(event.get("result") or {}).rstrip().splitlines()
        width = _columns() - 1
        for line in lines[:RESULT_LINES]:
            self._line(self.style(_clip("  " + line, width), "dim"))
        if len(lines) > RESULT_LINES:
            self._line(self.style(f"  … {len(lines) - RESULT_LINES} more lines", "dim"))

    def _on_agent_end(self, event: Event) -> None:
        reason, message = str(event.get("stopReason")), event.get("errorMessage")
        if reason not in OK_STOPS:
            label = STOP_LABELS.get(reason, reason)
            self.error(f"{label}: {message}" if message else label)
        elif reason == "length":
            self._report("⚠ the reply was cut off at the output token limit", "yellow")
        usage = event.get("usage") or {}
        line = f"↳ {usage.get('inputTokens', 0):,} in · {usage.get('outputTokens', 0):,} out"
        if usage.get("cacheReadTokens"):
            line += f" · {usage['cacheReadTokens']:,} cached"
        self._report(line, "dim")

    # ------------------------------------------------------------------ writing

    def _write(self, styled: str, plain: str) -> None:
        self._clear_status()
        self.out.write(styled)
        self.out.flush()
        if plain:
            self.at_line_start = plain.endswith("\n")

    def _line(self, styled: str) -> None:
        self._end_line()
        self._write(styled + "\n", "\n")

    def _end_line(self) -> None:
        if not self.at_line_start:
            self._write("\n", "\n")

    def _clear_status(self) -> None:
        if self.status_shown:
            self.status_shown = False
            self.out.write("\r\x1b[2K")

    def _report(self, text: str, *styles: str) -> None:
        self._clear_status()
        self._end_line()
        self.err.write(self.err_style(text, *styles) + "\n")
        self.err.flush()


class JsonRenderer:
    """``--json``: each event's params as one JSON line, then one ``{"type": "result"}`` line."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def handle(self, event: Event) -> None:
        self._emit(event)

    def result(self, fields: Mapping[str, Any]) -> None:
        self._emit({"type": "result", **fields})

    def _emit(self, value: Mapping[str, Any]) -> None:
        self.out.write(json.dumps(value, ensure_ascii=False) + "\n")
        self.out.flush()


def _clip(text: str, width: int) -> str:
    width = max(width, 8)
    return text if len(text) <= width else text[: width - 1] + "…"


def _columns() -> int:
    return shutil.get_terminal_size((100, 24)).columns


def _text_of(result: Any) -> str:
    """The text of a tool result (``content`` blocks), or of a partial one (bash sends
    ``{"output": ...}``)."""
    if not isinstance(result, dict):
        return result if isinstance(result, str) else ""
    if isinstance(result.get("output"), str):
        return str(result["output"])
    blocks = result.get("content") or []
    return "".join(b.get("text", "") if b.get("type") == "text" else "[image]" for b in blocks)


# ---------------------------------------------------------------------------------------------
# The server


class ServerExited(Exception):
    """The server closed its output: it crashed, or refused its command line."""

    def __init__(self, code: int | None) -> None:
        super().__init__(f"the server exited (code {code})")
        self.code = code


class Connection:
    """A spawned server, its chat session, and the task that hands its events to ``on_event``."""

    def __init__(self, client: TillerClient, on_event: Callable[[Event], None]) -> None:
        self.client, self.on_event = client, on_event
        self.session_id: str | None = None
        self.handled = 0  # how many of client.received were handed on
        self.closed = anyio.Event()
        self._progress = anyio.Event()
        self._calls: set[anyio.CancelScope] = set()

    @classmethod
    @asynccontextmanager
    async def open(
        cls, server_args: Sequence[str], on_event: Callable[[Event], None]
    ) -> AsyncIterator[Connection]:
        argv = [sys.executable, "-m", "tiller", *server_args]
        process = await anyio.open_process(argv, stderr=None, start_new_session=True)
        async with TillerClient(process, Framing.NDJSON) as client, anyio.create_task_group() as tg:
            connection = cls(client, on_event)
            tg.start_soon(connection._pump)
            try:
                yield connection
            finally:
                tg.cancel_scope.cancel()

    async def start_session(self) -> None:
        """Initialize and create the session: a missing API key fails here (-32014)."""
        info = {"name": "tiller-chat", "version": __version__}
        await self.call("initialize", {"clientInfo": info})
        self.session_id = (await self.call("session/new", {}))["sessionId"]

    async def run(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """agent/prompt or agent/continue: the result, once every event of the run is handled."""
        result: dict[str, Any] = await self.call(method, params)
        target = len(self.client.received)
        while self.handled < target and not self.closed.is_set():
            await self._progress.wait()
        return result

    async def abort(self) -> None:
        """Abort the active run; no error if it has just ended, or the server has gone."""
        with suppress(RpcError, ServerExited):
            await self.call("agent/abort")

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """``request`` in this session with no timeout (a run takes as long as it takes), that
        raises ServerExited instead of waiting forever if the server goes away."""
        if self.session_id is not None:
            params = {"sessionId": self.session_id, **(params or {})}
        with anyio.CancelScope() as scope:
            self._calls.add(scope)
            try:
                if not self.closed.is_set():
                    return await self.client.request(method, params, timeout=math.inf)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass  # it exited before reading the request
            finally:
                self._calls.discard(scope)
        with anyio.move_on_after(5):
            await self.client.process.wait()
        raise ServerExited(self.client.process.returncode)

    async def _pump(self) -> None:
        """Hand each event on, in order; at the server's end of output, fail pending calls."""
        received = self.client.received
        try:
            while True:
                await self.client.wait_for(lambda _m: True, start=self.handled, timeout=math.inf)
                while self.handled < len(received):
                    message = received[self.handled]
                    self.handled += 1
                    if message.get("method") == EVENT_METHOD:
                        self.on_event(message["params"])
                self._advance()
        except EOFError:
            pass
        finally:
            self.closed.set()
            self._advance()
            for scope in self._calls:
                scope.cancel()

    def _advance(self) -> None:
        progress, self._progress = self._progress, anyio.Event()
        progress.set()


# ---------------------------------------------------------------------------------------------
# Driving it


class OneShot:
    """``-p``: one run; the exit status says how it ended. Ctrl-C aborts, a second one quits."""

    def __init__(self, connection: Connection, sink: Renderer | JsonRenderer) -> None:
        self.connection, self.sink = connection, sink
        self.aborting = False
        self.scope = anyio.CancelScope()

    async def run(self, text: str) -> int:
        with self.scope:
            result = await self.connection.run("agent/prompt", {"message": text})
            self.sink.result(result)
            return EXIT_OK if result["stopReason"] in OK_STOPS else EXIT_FAILED
        return EXIT_INTERRUPTED

    async def interrupt(self) -> None:
        if self.aborting:
            self.scope.cancel()
            return
        self.aborting = True
        await self.connection.abort()


class Repl:
    """The interactive loop over ``lines`` (None at end of input). A line starts a run when the
    agent is idle; while it runs, a line steers it and ``>>`` queues a follow-up. Lines queued
    too late for the run they were meant for are delivered by agent/continue."""

    def __init__(self, connection: Connection, renderer: Renderer, lines: Lines) -> None:
        self.connection, self.renderer, self.lines = connection, renderer, lines
        self.running: anyio.Event | None = None  # set when the active run ends
        self.aborting = False
        self.queue_lock = anyio.Lock()  # orders queueing against "is anything left over?"
        self.failure: Exception | None = None
        self.scope = anyio.CancelScope()

    async def run(self, first: str | None) -> int:
        with self.scope:
            async with anyio.create_task_group() as tg:
                if first:
                    self.renderer.echo_prompt(first)
                    self._start(tg, first)
                else:
                    self.renderer.prompt()
                await self._read(tg)
                tg.cancel_scope.cancel()
        self.renderer.close()
        if self.failure is not None:
            raise self.failure
        return EXIT_OK

    async def interrupt(self) -> None:
        """Ctrl-C: abort the run; at the prompt (or a second time) quit."""
        if self.running is None or self.aborting:
            self.scope.cancel()
            return
        self.aborting = True
        self.renderer.notice("✗ aborting (Ctrl-C again to quit)")
        await self.connection.abort()

    async def _read(self, tg: TaskGroup) -> None:
        """Handle lines until a quit; at end of input, let the active run finish first."""
        try:
            async for line in self.lines:
                if line is None:
                    if self.running is not None:
                        await self.running.wait()
                    return
                if not await self._handle(tg, line):
                    return
        except ServerExited as exc:
            self.failure = exc

    async def _handle(self, tg: TaskGroup, line: str) -> bool:
        """One typed line; False to quit."""
        self.renderer.input_received()
        text = line.strip()
        if text in QUIT_COMMANDS:
            if self.running is not None:
                await self.connection.abort()
            return False
        async with self.queue_lock:
            if self.running is None:
                self._start(tg, text.removeprefix(">>").strip())
            elif text:
                await self._queue(text)
        return True

    async def _queue(self, text: str) -> None:
        follow_up = text.startswith(">>")
        method, text = ("agent/followUp", text[2:].strip()) if follow_up else ("agent/steer", text)
        if not text:
            return
        try:
            await self.connection.call(method, {"message": text})
        except RpcError as exc:
            self.renderer.error(exc.message)
        else:
            self.renderer.notice("↪ follow-up queued" if follow_up else "↪ steering queued")

    def _start(self, tg: TaskGroup, text: str) -> None:
        if not text:
            self.renderer.prompt()
            return
        self.running = anyio.Event()
        self.aborting = False
        tg.start_soon(self._run, text)

    async def _run(self, text: str) -> None:
        try:
            await self.connection.run("agent/prompt", {"message": text})
            while await self._left_over():
                await self.connection.run("agent/continue")
        except RpcError as exc:
            self.renderer.error(exc.message)
        except ServerExited as exc:
            self.failure = exc
            self.scope.cancel()
        finally:
            if self.running is not None:
                self._finish_run()

    async def _left_over(self) -> bool:
        """True if messages were queued too late for the run; else the run is over."""
        async with self.queue_lock:
            state = await self.connection.call("agent/getState")
            if not self.aborting and (state["pendingSteering"] or state["pendingFollowUp"]):
                return True
            self._finish_run()
            return False

    def _finish_run(self) -> None:
        assert self.running is not None
        self.running.set()
        self.running = None
        if self.failure is None:
            self.renderer.prompt()


@asynccontextmanager
async def terminal_lines(fd: int = 0) -> AsyncIterator[Lines]:
    """Lines typed on ``fd``, then None at end of input. A daemon thread reads them, so a read
    still blocked when we exit holds nothing up."""
    send, receive = anyio.create_memory_object_stream[str | None](math.inf)
    token = anyio.lowlevel.current_token()

    def deliver(item: str | None) -> bool:
        try:
            anyio.from_thread.run_sync(send.send_nowait, item, token=token)
        except (RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False  # we are exiting
        return True

    def read_lines() -> None:
        pending = b""
        while True:
            try:
                data = os.read(fd, 4096)
            except OSError:
                data = b""
            if not data:
                if pending:
                    deliver(pending.decode(errors="replace"))
                deliver(None)
                return
            *lines, pending = (pending + data).split(b"\n")
            if not all(deliver(line.decode(errors="replace")) for line in lines):
                return

    threading.Thread(target=read_lines, name="tiller-chat-input", daemon=True).start()
    with receive:
        yield receive


async def _interruptible(
    mode: OneShot | Repl, signals: AsyncIterator[int], body: Awaitable[int]
) -> int:
    """Await ``body`` while each Ctrl-C goes to ``mode.interrupt``; what ``body`` raises comes
    out as itself, not wrapped in an exception group."""
    outcome: list[int] = []
    failure: list[Exception] = []

    async def watch() -> None:
        async for _ in signals:
            await mode.interrupt()

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        try:
            outcome.append(await body)
        except Exception as exc:
            failure.append(exc)
        tg.cancel_scope.cancel()
    if failure:
        raise failure[0]
    return outcome[0]


async def converse(options: argparse.Namespace, one_shot: str | None) -> int:
    """Spawn the server and run one mode: ``one_shot`` is the -p prompt, None for interactive."""
    sink: Renderer | JsonRenderer = (
        JsonRenderer(sys.stdout) if options.json else Renderer(sys.stdout, sys.stderr, os.environ)
    )
    with anyio.open_signal_receiver(signal.SIGINT) as signals:
        async with Connection.open(server_args(options), sink.handle) as connection:
            try:
                await connection.start_session()
                if one_shot is not None:
                    once = OneShot(connection, sink)
                    return await _interruptible(once, signals, once.run(one_shot))
                assert isinstance(sink, Renderer)
                async with terminal_lines() as lines:
                    repl = Repl(connection, sink, lines)
                    return await _interruptible(repl, signals, repl.run(options.prompt))
            except RpcError as exc:
                status = EXIT_CONFIG if exc.code in CONFIG_ERROR_CODES else EXIT_FAILED
                return _fail(sink, exc.message, status, exc.code)
            except ServerExited as exc:
                return _fail(sink, str(exc), EXIT_CONFIG if exc.code == 2 else EXIT_FAILED)


def _fail(sink: Renderer | JsonRenderer, message: str, status: int, code: int | None = None) -> int:
    """Report a failure outside any run: on stderr, and as the result line with --json."""
    sys.stdout.flush()
    print(f"tiller chat: {message}", file=sys.stderr)
    sink.result({"stopReason": "error", "errorMessage": message, "errorCode": code})
    return status


# ---------------------------------------------------------------------------------------------
# Command line

EPILOG = """\
interactive keys:
  a line while the agent works   steer it (delivered after the running tools)
  >> a line                      queue it as a follow-up, for when the agent would stop
  Ctrl-C                         abort the run; at the prompt, quit
  Ctrl-D or /quit                quit

exit status with -p: 0 stop/toolUse/length, 1 error/aborted/turn limit, 2 configuration error"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tiller chat",
        description="Chat with the Tiller agent in a terminal. With stdin not a terminal and no "
        "-p, stdin (after PROMPT, if given) is the prompt of one run.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("prompt", nargs="?", metavar="PROMPT", help="the first message")
    add("-p", "--print", dest="once", metavar="PROMPT", help="run PROMPT once, print, exit")
    add("--json", action="store_true", help="with -p or piped stdin: events as JSON lines")
    server = parser.add_argument_group("server options (passed to tiller)").add_argument
    server("--provider", help="model provider (default: openai)")
    server("--model", help="model name")
    server("--base-url", help="provider base URL, e.g. a local server's")
    server("--cwd", help="workspace root (default: the current directory)")
    return parser


def server_args(options: argparse.Namespace) -> list[str]:
    args = []
    for name in ("provider", "model", "base_url", "cwd"):
        value = getattr(options, name)
        if value is not None:
            args += ["--" + name.replace("_", "-"), value]
    return args


def one_shot_prompt(options: argparse.Namespace, stdin: TextIO) -> str | None:
    """The prompt of a one-shot run: -p, else (stdin not a terminal) PROMPT and stdin; None
    for interactive mode."""
    if options.once is not None:
        return str(options.once)
    if stdin.isatty():
        return None
    parts = [options.prompt or "", stdin.read()]
    return "\n\n".join(part.strip("\n") for part in parts if part.strip())


def main(argv: Sequence[str] | None = None) -> int:
    """``tiller chat``: returns the exit status."""
    parser = build_parser()
    options = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="replace")
    try:
        prompt = one_shot_prompt(options, sys.stdin)
        if prompt is None and options.json:
            parser.error("--json needs -p PROMPT or a prompt on stdin")
        if prompt is not None and not prompt.strip():
            parser.error("the prompt is empty")
        return anyio.run(converse, options, prompt)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
