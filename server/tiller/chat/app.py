"""``tiller chat``: talk to the agent from a terminal.

It spawns a server (``python -m tiller`` with the pass-through options: ``--provider``,
``--model``, ``--base-url``, ``--cwd``, ``--config``, ``--thinking``, ``--permission-mode``,
``--max-turns``, ``--session-dir``, ``--no-session``) in a session of its own, so that a Ctrl-C
typed in the terminal reaches only this process, and drives it with ``TillerClient``. The
server's logs and stderr go to ``--log-file`` (default ``$XDG_DATA_HOME/tiller/chat.log``), never
the screen. ``tiller run`` is the one-shot mode alone, for scripts. Modes:

* interactive (stdin is a terminal, no ``-p``): ``> `` reads lines. A line typed while the agent
  runs steers it (agent/steer); a line starting with ``>>`` is queued for after it
  (agent/followUp); Ctrl-C aborts the run. At the prompt, Ctrl-C clears the line and says how
  to quit: a second Ctrl-C in a row, Ctrl-D or ``/quit``. A mistyped ``/name`` is reported
  with the closest commands, not sent.
  It declares the ``permissions`` capability, so the server's default mode is ``ask``: a tool
  call that needs permission shows its preview and waits for the next typed line (y/a/n/v).
  ``--resume [ID]`` loads a saved session (the workspace's latest) and shows its history first.
  On a terminal, lines are typed on an input line kept below the transcript, with history,
  editing and ``/`` + Tab completing the session's slash commands (``tiller.chat.input``);
  else they are read as they come (``tiller.chat.complete.terminal_lines``).
  ``/changes`` lists the files the agent changed; ``/undo`` puts back what its last run changed,
  after a y/N confirmation (tiller.chat.checkpoints); ``/help``, ``/model``, ``/mode``... are
  ``tiller.chat.slash``'s. The status line and activity line are ``tiller.chat.status``'s.
* one-shot (``-p PROMPT``, or a prompt piped on stdin): one run; the exit status says how it
  ended: 0 stop/toolUse, 1 error/aborted/maxTurns/maxTokens/length (a reply cut at the output
  limit is incomplete), 2 configuration error (no API key...).
  Nobody can be asked, so the server's default mode is ``auto``.
* ``--json`` (one-shot only): each event's params as one JSON line, then ``{"type": "result"}``.

Layers: ``Renderer`` and ``JsonRenderer`` (``tiller.chat.render``) turn events into output and
know nothing of input; ``Connection`` (``tiller.chat.connection``) owns the server, the session
and the task feeding events to a renderer; ``OneShot`` and ``Repl`` are the two ways of driving
it; ``PermissionPrompt`` (``tiller.chat.render`` too) answers the server's questions from the
Repl's input; ``main`` parses the command line (``tiller.chat.cli``).
"""

from __future__ import annotations

import argparse
import io
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from typing import Any

import anyio
from anyio.abc import TaskGroup

from tiller.chat.checkpoints import CheckpointCommands
from tiller.chat.cli import (
    build_parser,
    history_file,
    log_file,
    one_shot_prompt,
    server_args,
    workspace,
)
from tiller.chat.complete import CommandNames, terminal_lines
from tiller.chat.connection import Connection, ServerExited
from tiller.chat.input import input_lines
from tiller.chat.render import (
    COMPLETE_STOPS,
    JsonRenderer,
    Lines,
    PermissionPrompt,
    Renderer,
)
from tiller.chat.slash import LOCAL_COMMANDS, SlashCommands
from tiller.client import RpcError
from tiller.errors import ProviderNotConfiguredError

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_INTERRUPTED = 0, 1, 2, 130
CONFIG_ERROR_CODES = frozenset({ProviderNotConfiguredError.code})
QUIT_COMMANDS = frozenset({"/quit", "/exit"})

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
            self.sink.run_starting(prompt=True)
            result = await self.connection.run("agent/prompt", {"message": text})
            self.sink.result(result)
            return EXIT_OK if result["stopReason"] in COMPLETE_STOPS else EXIT_FAILED
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
    too late for the run they were meant for are delivered by agent/continue. While a
    permission question waits, the next line is its answer instead."""

    def __init__(
        self,
        connection: Connection,
        renderer: Renderer,
        lines: Lines,
        permissions: PermissionPrompt,
    ) -> None:
        self.connection, self.renderer, self.lines = connection, renderer, lines
        self.permissions = permissions
        self.checkpoints = CheckpointCommands(connection, renderer)  # /changes, /undo
        self.slash: SlashCommands | None = None  # /help, /model, /mode... (tiller.chat.slash)
        self.running: anyio.Event | None = None  # set when the active run ends
        self.aborting = False
        self.queue_lock = anyio.Lock()  # orders queueing against "is anything left over?"
        self.failure: Exception | None = None
        self.scope = anyio.CancelScope()
        self.quit_armed = False  # a Ctrl-C at the prompt: the next one in a row quits
        self.resumable = True  # sessions are saved: --resume can pick this one up

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
        """Ctrl-C: abort the run (rejecting the question asked, if any), and a second one
        quits; at the prompt the first clears the line and says how to quit, the second in a
        row quits."""
        if self.aborting or (self.running is None and self.quit_armed):
            self.scope.cancel()
            return
        if self.running is None:
            self.quit_armed = True
            resume = "; `tiller chat --resume` picks this session up again" if self.resumable \
                else ""
            self.renderer.notice(f"(Ctrl-C again, Ctrl-D or /quit to quit{resume})")
            self.renderer.prompt()
            return
        self.aborting = True
        rejected = "rejected; " if self.permissions.interrupt() else ""
        self.renderer.notice(f"✗ {rejected}aborting (Ctrl-C again to quit)")
        await self.connection.abort()

    async def _read(self, tg: TaskGroup) -> None:
        """Handle lines until a quit; at end of input, let the active run finish first."""
        pending: list[str] = []  # lines ended by a backslash: one message with the next
        try:
            async for line in self.lines:
                if self.permissions.take(line):
                    continue
                if line is not None and line.endswith("\\"):
                    pending.append(line[:-1])
                    self.renderer.continuation()
                    continue
                if pending:
                    line, pending = "\n".join([*pending, line or ""]), []
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
        self.quit_armed = False
        text = line.strip()
        if text in QUIT_COMMANDS:
            if self.running is not None:
                await self.connection.abort()
            return False
        if await self.checkpoints.handle(text, running=self.running is not None):
            return True
        if self.slash is not None and await self.slash.handle(
            text, self.running is not None, lambda: self._start(tg, "", "agent/continue")
        ):
            return True
        if self.slash is not None and await self.slash.unknown(text):
            if self.running is None:
                self.renderer.prompt()
            return True
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

    def _start(self, tg: TaskGroup, text: str, method: str = "agent/prompt") -> None:
        """Run ``text`` (``agent/prompt``), or with ``method`` agent/continue no text."""
        if not text and method == "agent/prompt":
            self.renderer.prompt()
            return
        self.running = anyio.Event()
        self.aborting = False
        tg.start_soon(self._run, text, method)

    async def _run(self, text: str, method: str) -> None:
        try:
            self.renderer.run_starting(prompt=method == "agent/prompt")
            await self.connection.run(method, {"message": text} if text else None)
            while await self._left_over():
                self.renderer.run_starting(prompt=False)
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
            self.renderer.status.set_state(state)
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
    names = CommandNames(local=LOCAL_COMMANDS)

    def on_event(event: dict[str, Any]) -> None:
        names.observe(event)
        sink.handle(event)

    with anyio.open_signal_receiver(signal.SIGINT) as signals:
        log = log_file(options, os.environ)
        async with Connection.open(server_args(options), on_event, log) as connection:
            try:
                if one_shot is None:
                    assert isinstance(sink, Renderer)
                    return await _interactive(connection, sink, signals, options, names)
                await connection.start_session(resume=options.resume, cwd=workspace(options))
                if isinstance(sink, Renderer):  # on stderr: the answer alone goes to stdout
                    notice = (await connection.call("agent/getState")).get("notice")
                    if notice:
                        sink.notice(f"ⓘ {notice}")
                once = OneShot(connection, sink)
                return await _interruptible(once, signals, once.run(one_shot))
            except RpcError as exc:
                status = EXIT_CONFIG if exc.code in CONFIG_ERROR_CODES else EXIT_FAILED
                return _fail(sink, exc.message, status, exc.code)
            except ServerExited as exc:
                return _fail(sink, str(exc), EXIT_CONFIG if exc.code == 2 else EXIT_FAILED)


async def _interactive(
    connection: Connection,
    renderer: Renderer,
    signals: AsyncIterator[int],
    options: argparse.Namespace,
    names: CommandNames,
) -> int:
    """The Repl, answering permission questions; a resumed session's history is shown first;
    ``/`` + Tab completes the session's commands (``names``)."""
    permissions = PermissionPrompt(renderer)
    connection.answer_requests("client/requestPermission", permissions.ask)
    loaded = await connection.start_session(
        ask=True, resume=options.resume, cwd=workspace(options)
    )
    if loaded is not None:
        renderer.status.switched(loaded.get("messages") or [])
        renderer.resumed(loaded)
    if notice := sandbox_notice(connection.initialized):
        renderer.notice(notice)
    await connection.call("mcp/list")  # starts the MCP servers: their mcp_status is shown
    names.set_from((await connection.call("commands/list"))["commands"])
    renderer.status.set_models((await connection.call("models/list"))["models"])
    state = await connection.call("agent/getState")
    renderer.status.set_state(state)
    if state.get("notice"):  # the embedded model: chat only
        renderer.notice(f"ⓘ {state['notice']}")
    history = history_file(options, os.environ)
    reader = (
        input_lines(names, renderer, history) if sys.stdin.isatty() and sys.stdout.isatty()
        else terminal_lines()
    )
    async with reader as lines, anyio.create_task_group() as tg:
        if renderer.live:
            tg.start_soon(_tick, renderer)
        repl = Repl(connection, renderer, lines, permissions)
        repl.resumable = not options.no_session
        repl.slash = SlashCommands(connection, renderer, names, workspace(options))
        try:
            status = await _interruptible(repl, signals, repl.run(options.prompt))
        finally:
            tg.cancel_scope.cancel()
    return status


async def _tick(renderer: Renderer) -> None:
    """Redraw the spinner, the retry countdown or the compaction notice ten times a second."""
    while True:
        await anyio.sleep(0.1)
        renderer.tick()


def _fail(sink: Renderer | JsonRenderer, message: str, status: int, code: int | None = None) -> int:
    """Report a failure outside any run: on stderr, and as the result line with --json."""
    sys.stdout.flush()
    print(f"tiller chat: {message}", file=sys.stderr)
    sink.result({"stopReason": "error", "errorMessage": message, "errorCode": code})
    return status


def main(argv: Sequence[str] | None = None, *, run: bool = False) -> int:
    """``tiller chat`` (``tiller run`` with ``run``: one-shot only): returns the exit status."""
    parser = build_parser(run)
    options = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="replace")
    try:
        prompt = one_shot_prompt(options, sys.stdin, run)
        if prompt is None and run:
            parser.error("give the prompt: PROMPT, -p PROMPT, or on stdin")
        if prompt is None and options.json:
            parser.error("--json needs -p PROMPT or a prompt on stdin")
        if prompt is not None and not prompt.strip():
            parser.error("the prompt is empty")
        return anyio.run(converse, options, prompt)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def sandbox_notice(initialized: Mapping[str, Any]) -> str | None:
    """The start line saying commands cannot be sandboxed here (None when they can, or the
    sandbox is off)."""
    sandbox = (initialized.get("capabilities") or {}).get("sandbox") or {}
    if sandbox.get("available", True) or sandbox.get("mode") == "off":
        return None
    if sandbox.get("mode") == "required":
        return f"Commands are refused: the sandbox is required, and {sandbox.get('reason')}"
    return f"Commands run unsandboxed: {sandbox.get('reason')}"
