"""The terminal side of ``tiller chat``: what it shows.

``Renderer`` is for a person: the transcript (text, thinking, tools, questions) goes to ``out``,
status (errors, aborts, usage) to ``err``, styled only on a terminal without NO_COLOR.
``JsonRenderer`` is ``--json``: each event as one JSON line. ``PermissionPrompt`` asks
permission questions with a Renderer and takes their answers from the typed ``Lines``
(``tiller.chat.complete`` reads them). None of them speaks JSON-RPC: ``tiller.chat.app`` does,
and decides what to show.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TextIO

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from tiller.chat.markdown import MarkdownBlocks, diff_style, screen_rows
from tiller.chat.status import InputArea, Status, money, remembered, text_of, tool_line
from tiller.protocol.sandbox import describe_use

__all__ = [
    "COMPLETE_STOPS", "OK_STOPS", "Event", "JsonRenderer", "Lines", "PermissionPrompt", "Renderer",
    "Style",
]

Event = dict[str, Any]
Lines = MemoryObjectReceiveStream[str | None]
OK_STOPS = frozenset({"stop", "toolUse", "length"})
"""Runs shown as no failure (a cut reply gets a warning instead)."""
COMPLETE_STOPS = frozenset({"stop", "toolUse"})
"""Runs whose reply is complete: a one-shot run exits 0 for these only."""
STOP_LABELS = {"error": "error", "aborted": "aborted", "maxTurns": "stopped at the turn limit",
               "maxTokens": "stopped at the per-run token limit"}
RESULT_LINES = 6  # lines of a tool's result shown under its ✓/✗ line
ARGS_CHARS = 200  # longest tool-argument JSON shown on a ⚙ line
DIFF_LINES = 80  # lines of a permission question's diff shown before "… N more lines"
HISTORY_LINES = 3  # lines of each resumed message shown
ASK_PROMPT = "Allow? [y]es / [a]lways / [n]o / ne[v]er "
ANSWERS = {
    "y": "allowOnce", "yes": "allowOnce", "a": "allowAlways", "always": "allowAlways",
    "n": "rejectOnce", "no": "rejectOnce", "v": "rejectAlways", "never": "rejectAlways",
}


class Style:
    """ANSI styling for one stream: on only if it is a terminal and NO_COLOR is not set."""

    CODES = {"dim": "2", "bold": "1", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}

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
        self.markdown = MarkdownBlocks(_columns() - 1) if self.style.enabled else None
        self.preview = ""  # the unfinished Markdown block as shown raw below the transcript
        self.preview_raw = False  # that block stays as shown (raw): its rendering is skipped
        self.block: str | None = None  # "text" or "thinking" while one streams
        self.at_line_start, self.status_shown = True, False
        self.prompt_open = False  # "> " or a question waits for a typed line
        self.status = Status()
        self.printed_status = ""  # the status line last printed (without an input line)
        self.prompt_unseen = False  # the run's first user message is the typed prompt
        self.area: InputArea | None = None  # the input line (tiller.chat.input) while it reads

    def handle(self, event: Event) -> None:
        if event.get("parentToolCallId") is not None:  # a subagent's: its calls, indented
            self._subagent(event)
            return
        self.status.observe(event)
        if (notice := Status.notice(event)) is not None:
            self.notice(notice)
        handler = getattr(self, f"_on_{event.get('type')}", None)
        if handler is not None:
            handler(event)

    def tick(self) -> None:
        """Redraw the activity line (spinner, retry countdown, compaction) on a terminal, when
        no streamed line or typed answer would be overwritten."""
        activity = self.status.activity()
        if self.live and activity and self.at_line_start and not self.prompt_open:
            self._show_status(activity)
        elif self.area is not None and self.area.activity and not activity:
            self._clear_status()

    def result(self, fields: Mapping[str, Any]) -> None:
        """Nothing to add: ``agent_end`` was rendered already."""

    def prompt(self) -> None:
        """The status line, then ``> `` waiting for a typed line. With an input line the
        status line is drawn above it; else it is printed when it changed since last time."""
        line = self.status.line()
        if self.area is not None:
            self.area.status = self.err_style(line, "dim") if line else ""
        elif line and line != self.printed_status:
            self._report(line, "dim")
            self.printed_status = line
        self._ask(self.style("> ", "bold"))

    def continuation(self) -> None:
        """``… ``: the typed message goes on (its line ended with a backslash)."""
        self._ask(self.style("… ", "bold"))

    def echo_prompt(self, text: str) -> None:
        self._line(self.style("> ", "bold") + text)

    def input_received(self) -> None:
        """The person pressed Enter: the terminal's cursor is at the start of a line."""
        self.at_line_start, self.prompt_open = True, False
        if self.area is not None:
            self.area.status = ""
        self._ask(self.style("> ", "bold"), typed=False)

    def notice(self, text: str) -> None:
        self._report(text, "dim")

    def error(self, message: str) -> None:
        self._report(f"✗ {message}", "red")

    def close(self) -> None:
        if self.prompt_open and self.area is None:
            self.out.write("\n")
        self._clear_status()
        self.out.flush()

    # ------------------------------------------------------------------ questions, history

    def permission(self, params: Mapping[str, Any]) -> None:
        """The body of a ``client/requestPermission`` question: its reason, then its preview
        (a diff coloured +/-, a command and its cwd, or a path)."""
        reason = params.get("reason") or f"{params.get('toolName')} needs permission"
        self._line(self.style(f"? {reason}", "bold", "yellow"))
        for line in self._preview(params.get("preview") or {}, params.get("args")):
            self._line(line)
        self._line(self.style(remembered(params), "dim"))

    def ask(self, question: str) -> None:
        """Show ``question`` with the cursor after it, waiting for a typed line."""
        self._clear_status()
        self._ask(self.style(question, "bold"))

    def _ask(self, prompt: str, typed: bool = True) -> None:
        """Wait for a typed line after ``prompt``: on the input line's prompt if there is one
        (``typed`` False: a line is no longer awaited), else written with the cursor after it."""
        if self.area is not None:
            self.area.prompt = prompt
            self.area.invalidate()
            self.prompt_open = typed
            return
        if not typed:
            return
        self._end_line()
        self.out.write(prompt)
        self.out.flush()
        self.at_line_start = self.prompt_open = True

    def question_dropped(self) -> None:
        """The question on screen will get no typed answer: the next output starts a line."""
        self.prompt_open = False
        self._ask(self.style("> ", "bold"), typed=False)

    def resumed(self, loaded: Mapping[str, Any]) -> None:
        """A resumed session (a session/load result): its history, then a summary line."""
        self.history(loaded.get("messages") or [])
        queued = loaded.get("pendingSteering", 0) + loaded.get("pendingFollowUp", 0)
        waiting = f" · {queued} queued for the next run" if queued else ""
        count = len(loaded.get("messages") or [])
        self.notice(f"↻ resumed session {loaded.get('sessionId')} · {count} messages{waiting}")

    def history(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """A conversation, compactly: each message's first lines, a line per tool call and per
        result."""
        width = _columns() - 1
        for message in messages:
            role, content = message.get("role"), message.get("content")
            if role == "user":
                lines = text_of({"content": content}).strip().splitlines() or [""]
                self._line(self.style("> ", "bold") + _clip(lines[0], width - 2))
                self._more(lines, 1, width)
            elif role == "assistant":
                self._history_reply(content if isinstance(content, list) else [], width)
            elif role == "toolResult":
                failed = bool(message.get("isError"))
                mark = self.style("✗", "red") if failed else self.style("✓", "green")
                self._line(f"{mark} {message.get('toolName')}")

    def _history_reply(self, blocks: Sequence[Mapping[str, Any]], width: int) -> None:
        for block in blocks:
            if block.get("type") == "text":
                lines = str(block.get("text", "")).strip().splitlines()
                for line in lines[:HISTORY_LINES]:
                    self._line(_clip(line, width))
                self._more(lines, HISTORY_LINES, width)
            elif block.get("type") == "toolCall":
                self._line(self._tool_call(str(block.get("name")), block.get("arguments") or {}))

    def _more(self, lines: Sequence[str], shown: int, width: int) -> None:
        if len(lines) > shown:
            self._line(self.style(_clip(f"  … {len(lines) - shown} more lines", width), "dim"))

    def _preview(self, preview: Mapping[str, Any], args: Any) -> Iterator[str]:
        kind = preview.get("kind")
        if kind == "diff":
            lines = str(preview.get("diff", "")).rstrip("\n").splitlines()
            for line in lines[:DIFF_LINES]:
                yield "  " + self.style(line, *diff_style(line))
            if len(lines) > DIFF_LINES:
                yield self.style(f"  … {len(lines) - DIFF_LINES} more lines", "dim")
        elif kind == "command":
            yield "  " + self.style(f"$ {preview.get('command', '')}", "bold")
            yield self.style(f"  in {preview.get('cwd', '')}", "dim")
            if isinstance(sandbox := preview.get("sandbox"), Mapping):
                yield self.style(f"  {describe_use(sandbox)}", "dim")
        elif kind == "path":
            yield f"  {preview.get('path', '')}"
        elif kind == "hooks":
            yield self.style(f"  run the hooks in {preview.get('file', '')}:", "bold")
            for command in preview.get("commands") or []:
                yield f"  $ {command}"
        else:
            yield self.style("  " + json.dumps(args or {}, ensure_ascii=False), "dim")

    # ------------------------------------------------------------------ events

    def _on_message_update(self, event: Event) -> None:
        kind, delta = event.get("kind"), event.get("delta") or ""
        if kind not in ("text", "thinking") or not delta:
            return
        if self.block != kind:
            self._end_block()
            self.block = kind
        if kind == "text" and self.markdown is not None:
            self._stream_markdown(self.markdown, delta)
            return
        self._write(self.style(delta, "dim") if kind == "thinking" else delta, delta)

    # ------------------------------------------------------------------ Markdown, streamed

    def _stream_markdown(self, markdown: MarkdownBlocks, delta: str) -> None:
        """Show text as it arrives, raw, and each Markdown block rendered once it is finished:
        the raw block is then replaced by its rendering (on the input area, or erased on the
        terminal). A raw block too tall to erase, or one other output had to follow, stays as
        shown (``preview_raw``)."""
        if self.preview_raw:
            self._write(delta, delta)
            if markdown.feed(delta):  # the raw block (and any after it in this delta) ended
                self.preview_raw = False
                self.preview = markdown.pending  # on screen already, from a line's start
            return
        blocks = markdown.feed(delta)
        if blocks:
            self._drop_preview()
            for block in blocks:
                self._write(block, block)
        self._show_preview(markdown.pending)

    def _show_preview(self, pending: str) -> None:
        if self.area is not None:  # drawn with the input line, never in the transcript
            lines = pending.split("\n")
            self.area.partial = "\n".join(lines[-max(_rows() - 8, 3):])
            self.area.invalidate()
            self.preview = pending
            return
        shown, self.preview = self.preview, pending
        self._write(pending[len(shown):] if pending.startswith(shown) else pending, pending)
        if screen_rows(pending, _columns()) > _rows() - 2:  # could not be erased: keep it
            self.preview_raw, self.preview = True, ""

    def _drop_preview(self) -> None:
        """Take the raw block off the screen, before its rendering is written."""
        preview, self.preview = self.preview, ""
        if self.area is not None:
            self.area.partial = ""
            self.area.invalidate()
            return
        if preview:
            self._clear_status()
            up = screen_rows(preview, _columns()) - 1
            self.out.write("\r" + (f"\x1b[{up}A" if up else "") + "\x1b[J")
            self.at_line_start = True

    def _keep_preview(self) -> None:
        """Other output must follow the raw block on the terminal: it stays as shown."""
        if self.preview and self.area is None:
            self.preview_raw, self.preview = True, ""

    def _end_block(self) -> None:
        if self.markdown is not None:
            blocks = self.markdown.flush()
            if self.preview_raw:
                self.preview_raw, blocks = False, []
            self._drop_preview()
            for block in blocks:
                self._write(block, block)
        self._end_line()

    def run_starting(self, prompt: bool) -> None:
        """A run is about to start: with ``prompt`` its first user message is the typed prompt
        (shown already); every other user message of it is one queued before (steering, a
        follow-up), which ``message_end`` marks as delivered."""
        self.prompt_unseen = prompt

    def _on_message_end(self, event: Event) -> None:
        message = event.get("message") or {}
        if message.get("role") == "assistant":
            self._end_block()
            self.block = None
        elif message.get("role") == "user":
            if self.prompt_unseen:
                self.prompt_unseen = False
                return
            lines = text_of({"content": message.get("content")}).strip().splitlines() or [""]
            more = " …" if len(lines) > 1 else ""
            self._line(self.style("↪ delivered: ", "dim") +
                       _clip(lines[0], _columns() - 16) + more)

    def _subagent(self, event: Event) -> None:
        """A subagent's event (its task call's): each tool call it starts, and each that
        fails, on an indented line; the rest is its own (its report is the task's result)."""
        if event.get("type") == "tool_execution_start":
            self._line("  ↳ " + self._tool_call(str(event["toolName"]), event.get("args") or {}))
        elif event.get("type") == "tool_execution_end" and event.get("isError"):
            self._line(f"  ↳ {self.style('✗', 'red')} {event['toolName']}")

    def _on_tool_execution_start(self, event: Event) -> None:
        self._line(self._tool_call(str(event["toolName"]), event.get("args") or {}))

    def _tool_call(self, name: str, args: Mapping[str, Any]) -> str:
        """``⚙ name: what it does`` on one line (tiller.chat.status.tool_line)."""
        head, _, rest = _clip(tool_line(name, args), ARGS_CHARS).partition(": ")
        return self.style("⚙ " + head, "bold") + (": " + rest if rest else "")

    def _on_tool_execution_update(self, event: Event) -> None:
        lines = text_of(event.get("partialResult")).rstrip().splitlines()
        if not self.live or not lines or (self.prompt_open and self.area is None):
            return  # (a status line would land in the middle of the answer being typed)
        self._end_line()
        self._show_status(f"  … {lines[-1].strip()}")

    def _on_tool_execution_end(self, event: Event) -> None:
        failed = bool(event.get("isError"))
        mark = self.style("✗", "red") if failed else self.style("✓", "green")
        self._line(f"{mark} {event['toolName']}")
        lines = text_of(event.get("result") or {}).rstrip().splitlines()
        diff = ((event.get("result") or {}).get("details") or {}).get("diff")
        diff = diff if self.style.enabled and isinstance(diff, str) and not failed else ""
        lines, width = diff.rstrip("\n").splitlines() or lines, _columns() - 1  # edits: a diff
        for line in lines[:RESULT_LINES]:
            styles = diff_style(line) if diff else ("dim",)
            self._line(self.style(_clip("  " + line, width), *styles))
        if len(lines) > RESULT_LINES:
            self._line(self.style(f"  … {len(lines) - RESULT_LINES} more lines", "dim"))

    def _on_mcp_status(self, event: Event) -> None:
        server = event["server"]
        if server["status"] == "ready":
            self.notice(f"MCP server {server['name']}: ready, {len(server['tools'])} tools")
        elif server["status"] == "failed":
            self.error(f"MCP server {server['name']} failed: {server.get('error', '')}")
        elif server["status"] == "needsAuth" and server.get("authUrl"):
            self.notice(f"MCP server {server['name']}: open this URL to sign in: "
                        f"{server['authUrl']}")
        elif server["status"] == "needsAuth":
            self.notice(f"MCP server {server['name']} needs a sign-in: /login {server['name']}")

    def _on_process_exit(self, event: Event) -> None:
        process = event["process"]
        if process["state"] == "ended":
            return  # the session or the chat is closing: nothing to tell
        how = "was killed" if process["state"] == "killed" else "exited"
        end = f"signal {process['signal']}" if process.get("signal") else (
            f"code {process.get('exitCode')}")
        style = "dim" if process["state"] == "exited" and process.get("exitCode") == 0 else (
            "yellow")
        self._report(f"● background process {process['id']} {how} ({end}): "
                     f"{_clip(process['command'], 60)}", style)

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
        if usage.get("cost"):
            line += f" · {money(usage['cost'])}"
        if usage.get("estimated"):
            line += (" (estimated: the reply was cut short)" if reason == "aborted"
                     else " (estimated: the server reported no usage)")
        self._report(line, "dim")

    # ------------------------------------------------------------------ writing

    def _write(self, styled: str, plain: str) -> None:
        """Write to ``out``; with an input line, what follows the last newline is drawn with
        it until its line is finished."""
        self._clear_status()
        if self.area is not None:
            done, newline, self.area.partial = (self.area.partial + styled).rpartition("\n")
            if newline:
                self.out.write(done + newline)
            self.area.invalidate()
        else:
            self.out.write(styled)
        self.out.flush()
        if plain:
            self.at_line_start = plain.endswith("\n")

    def _line(self, styled: str) -> None:
        self._keep_preview()
        self._end_line()
        self._write(styled + "\n", "\n")

    def _end_line(self) -> None:
        if not self.at_line_start:
            self._write("\n", "\n")

    def _show_status(self, text: str) -> None:
        """The one-line status (activity, a running tool's output) below the transcript."""
        self._clear_status()
        line = self.style(_clip(text, _columns() - 1), "dim")
        if self.area is not None:
            self.area.activity = line
            self.area.invalidate()
            return
        self.out.write(line)
        self.out.flush()
        self.status_shown = True

    def _clear_status(self) -> None:
        if self.area is not None and self.area.activity:
            self.area.activity = ""
            self.area.invalidate()
        if self.status_shown:
            self.status_shown = False
            self.out.write("\r\x1b[2K")

    def _report(self, text: str, *styles: str) -> None:
        self._clear_status()
        self._keep_preview()
        self._end_line()
        self.err.write(self.err_style(text, *styles) + "\n")
        self.err.flush()


class JsonRenderer:
    """``--json``: each event's params as one JSON line, then one ``{"type": "result"}`` line."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def handle(self, event: Event) -> None:
        self._emit(event)

    def run_starting(self, prompt: bool) -> None:
        """Nothing to do: every event is printed as it is."""

    def result(self, fields: Mapping[str, Any]) -> None:
        self._emit({"type": "result", **fields})

    def _emit(self, value: Mapping[str, Any]) -> None:
        self.out.write(json.dumps(value, ensure_ascii=False) + "\n")
        self.out.flush()


class PermissionPrompt:
    """Permission questions at the terminal, one at a time. ``ask`` shows a
    ``client/requestPermission``'s reason and preview, then takes the next line the chat reads
    (handed over with ``take``) as the answer: y/a/n/v for allowOnce/allowAlways/rejectOnce/
    rejectAlways, and for a rejection an optional reason. Ctrl-C (``interrupt``) and the end of
    input reject. Cancelling ``ask`` (the server stopped waiting) drops the question, saying so.
    """

    def __init__(self, renderer: Renderer) -> None:
        self.renderer = renderer
        self.turn = anyio.Lock()  # one question on screen at a time
        self.end_of_input = False
        self._typed: anyio.Event | None = None  # set when the question on screen has its line
        self._line: str | None = None  # that line; None for Ctrl-C or the end of input

    def take(self, line: str | None) -> bool:
        """Give a line read from the terminal to the question waiting for one: True if it was
        taken, False if it is the chat's. The end of input (None) rejects what waits and what
        comes, and is the chat's too."""
        if line is None:
            self.end_of_input = True
            self._give(None)
            return False
        if self._typed is not None:
            self.renderer.input_received()
        return self._give(line)

    def interrupt(self) -> bool:
        """Ctrl-C: reject the question waiting for a line; False if none waits."""
        return self._give(None)

    async def ask(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The answer to one question, ``{outcome, reason?}``, once its turn has come."""
        async with self.turn:
            try:
                return await self._ask(params)
            except anyio.get_cancelled_exc_class():
                self.renderer.notice("✗ the server stopped waiting for an answer "
                                     "(it timed out, or the run was aborted)")
                raise

    async def _ask(self, params: Mapping[str, Any]) -> dict[str, Any]:
        self.renderer.permission(params)
        while True:
            line = await self._read_line(ASK_PROMPT)
            if line is None:
                if self.end_of_input:
                    self.renderer.notice("✗ rejected: no more input")
                return {"outcome": "rejectOnce"}
            outcome = ANSWERS.get(line.strip().lower())
            if outcome is not None:
                break
            self.renderer.notice("answer y (allow once), a (always), n (reject once) or "
                                 "v (never); Ctrl-C rejects and aborts the run")
        answer: dict[str, Any] = {"outcome": outcome}
        if outcome.startswith("reject"):
            reason = (await self._read_line("reason (optional): ") or "").strip()
            if reason:
                answer["reason"] = reason
        return answer

    async def _read_line(self, question: str) -> str | None:
        """Ask ``question`` and wait for the chat to hand over the next line."""
        if self.end_of_input:
            return None
        self._typed = typed = anyio.Event()
        self.renderer.ask(question)
        try:
            await typed.wait()
        finally:
            if self._typed is typed:  # dropped unanswered
                self._typed = None
                self.renderer.question_dropped()
        return self._line

    def _give(self, line: str | None) -> bool:
        typed, self._typed = self._typed, None
        if typed is None:
            return False
        self._line = line
        typed.set()
        return True


def _clip(text: str, width: int) -> str:
    width = max(width, 8)
    return text if len(text) <= width else text[: width - 1] + "…"


def _columns() -> int:
    return shutil.get_terminal_size((100, 24)).columns


def _rows() -> int:
    return shutil.get_terminal_size((100, 24)).lines
