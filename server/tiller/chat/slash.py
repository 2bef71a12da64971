"""``tiller chat``'s own slash commands: ``/help``, ``/model``, ``/mode``, ``/thinking``,
``/compact``, ``/new``, ``/sessions``, ``/continue``, ``/login``, ``/logout``, ``/ps`` and
``/kill``, each one or two requests to the server.

``SlashCommands.handle`` takes a typed line when it is one of them (the server's own commands,
``/name`` templates and skills, are sent as prompts by the chat, and ``/changes``, ``/undo`` are
``tiller.chat.checkpoints``'); ``unknown`` reports a ``/name`` that is none of these, which is
then not sent. ``/continue`` with no argument asks the chat to run
``agent/continue`` through ``start_continue``: the chat owns runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from tiller.chat.complete import CommandNames
from tiller.chat.connection import Connection
from tiller.chat.render import Renderer
from tiller.client import RpcError
from tiller.modes import PERMISSION_MODES, THINKING_LEVELS

__all__ = ["LOCAL_COMMANDS", "SlashCommands", "process_state"]

LOCAL_COMMANDS: Mapping[str, str] = {
    "help": "this list",
    "model": "[PROVIDER] [MODEL]: show the models, or switch (from the next run)",
    "mode": f"[{'|'.join(PERMISSION_MODES)}]: show or set the permission mode",
    "thinking": f"[{'|'.join(THINKING_LEVELS)}]: show or set the reasoning effort",
    "compact": "[INSTRUCTIONS]: summarize the older conversation now",
    "new": "start a new session",
    "sessions": "the saved sessions of this workspace",
    "continue": "[ID]: go on after an error or abort; with ID, switch to that saved session",
    "login": "SERVER: sign in to an OAuth MCP server (open the URL it prints)",
    "logout": "SERVER: sign out of an OAuth MCP server (its tokens are revoked)",
    "ps": "the session's background processes (also while the agent works)",
    "kill": "N: stop background process N (SIGTERM, then SIGKILL); the agent is told",
    "changes": "the files the agent changed in this session",
    "undo": "put back what the last run changed (asks first)",
    "quit": "leave (Ctrl-D too)",
}
"""The chat's own commands and what they do, as ``/help`` lists them."""
COMMAND_WORD = re.compile(r"/(?P<name>[A-Za-z][\w.:-]*)(?:\s|$)")
"""A line that starts with a command's name (not a path: no second ``/``)."""
HANDLED_HERE = frozenset(
    {"help", "model", "mode", "thinking", "compact", "new", "sessions", "continue", "login",
     "logout", "ps", "kill"}
)
WHILE_RUNNING = frozenset({"help", "ps", "kill"})
"""The commands that work while the agent works: they change nothing of the run."""


def process_state(process: Mapping[str, Any]) -> str:
    """A background process's state in a few words: "running", "exited with code 1",
    "killed (SIGTERM)", "ended with the server"."""
    state = process["state"]
    if state == "running":
        return "running"
    if state == "ended":
        return "ended with the server"
    how = "killed" if state == "killed" else "exited"
    if process.get("signal"):
        return f"{how} ({process['signal']})"
    return f"{how} with code {process.get('exitCode')}"


class SlashCommands:
    """The commands of one chat; ``handle`` returns with the prompt shown again."""

    def __init__(self, connection: Connection, renderer: Renderer, names: CommandNames,
                 cwd: str) -> None:
        self.connection, self.renderer, self.names, self.cwd = connection, renderer, names, cwd

    async def handle(self, text: str, running: bool, start_continue: Callable[[], None]) -> bool:
        """Run the command in ``text``; False if it is not one of these."""
        name, _, argument = text.removeprefix("/").partition(" ")
        if not text.startswith("/") or name not in HANDLED_HERE:
            return False
        if running and name not in WHILE_RUNNING:
            self.renderer.error(f"/{name}: wait for the run to end (or Ctrl-C to abort it)")
            return True
        if name == "continue" and not argument.strip():
            start_continue()
            return True
        try:
            await getattr(self, f"_{name}")(argument.strip())
            self.renderer.status.set_state(await self.connection.call("agent/getState"))
        except RpcError as exc:
            self.renderer.error(exc.message)
        if not running:
            self.renderer.prompt()
        return True

    async def unknown(self, text: str) -> bool:
        """Report ``text`` if it is a ``/name`` that names no command (the chat's or the
        session's, asked afresh: a template may have just been added), with the closest
        known ones; True if so: it is not sent. A path (``/usr/bin/env ...``) is no name."""
        match = COMMAND_WORD.match(text)
        if match is None or self.names.known(match["name"]):
            return False
        self.names.set_from((await self.connection.call("commands/list"))["commands"])
        name = match["name"]
        if self.names.known(name):
            return False
        closest = self.names.closest(name)
        hint = f"; did you mean {' or '.join('/' + n for n in closest)}?" if closest else ""
        self.renderer.error(f"unknown command /{name}{hint} (not sent; /help lists the "
                            "commands)")
        return True

    async def _help(self, _argument: str) -> None:
        for name, what in LOCAL_COMMANDS.items():
            self.renderer.notice(f"  /{name:<9} {what}")
        theirs = [n for n in self.names.names if n not in LOCAL_COMMANDS]
        if theirs:
            self.renderer.notice("  the session's commands: " + " ".join(f"/{n}" for n in theirs))
        self.renderer.notice("  a line while the agent works steers it; >> LINE queues a "
                             "follow-up; Ctrl-C aborts")

    async def _model(self, argument: str) -> None:
        listed = await self.connection.call("models/list")
        providers = {p["name"]: p for p in listed["providers"]}
        words = argument.split()
        if not words:
            state = self.renderer.status.state
            self.renderer.notice(f"  now: {state.get('provider')}/{state.get('model')}")
            for model in listed["models"]:
                ready = providers.get(model["provider"], {}).get("configured")
                mark = "" if ready else "  (not configured)"
                if model.get("lifecycle") == "deprecated":
                    mark += f"  (deprecated, retires {model.get('retiresAt') or 'soon'})"
                self.renderer.notice(f"  {model['provider']} {model['id']}{mark}")
            return
        params: dict[str, Any] = {}
        if words[0] in providers:
            params["provider"] = words[0]
            if len(words) > 1:
                params["model"] = words[1]
        else:
            params = {"provider": self.renderer.status.state.get("provider"), "model": words[0]}
        switched = await self.connection.call("agent/setModel", params)
        self.renderer.notice(f"model: {switched['provider']}/{switched['model']}")
        if switched.get("notice"):
            self.renderer.notice(f"⚠ {switched['notice']}")
        chat_only = (await self.connection.call("agent/getState")).get("notice")
        if chat_only:  # the embedded model (agent/getState's notice)
            self.renderer.notice(f"ⓘ {chat_only}")

    async def _mode(self, argument: str) -> None:
        if not argument:
            now = self.renderer.status.state.get("permissionMode")
            self.renderer.notice(f"  permission mode: {now} (one of {', '.join(PERMISSION_MODES)})")
            return
        result = await self.connection.call("agent/setPermissionMode", {"mode": argument})
        self.renderer.notice(f"permission mode: {result['mode']}")

    async def _thinking(self, argument: str) -> None:
        if not argument:
            state = self.renderer.status.state
            now, runs = state.get("thinkingLevel"), state.get("effectiveThinkingLevel")
            at = f", the model runs at {runs}" if runs and runs != now else ""
            self.renderer.notice(f"  thinking: {now}{at} (one of {', '.join(THINKING_LEVELS)})")
            return
        result = await self.connection.call("agent/setThinkingLevel", {"level": argument})
        self.renderer.notice(f"thinking: {result['level']}")
        if result.get("note"):  # the model lacks the level, or does not think at all
            self.renderer.notice(f"ℹ {result['note']}")

    async def _compact(self, argument: str) -> None:
        params = {"instructions": argument} if argument else {}
        await self.connection.call("agent/compact", params)
        await self.connection.caught_up(len(self.connection.client.received))  # its events
        # (compaction_start and _end, tiller.chat.status) have said how it went

    async def _login(self, argument: str) -> None:
        """The sign-in URL comes as an ``mcp_status`` event (the renderer prints it)."""
        result = await self.connection.call("mcp/login", {"server": argument})
        self._report_server(result["server"])

    async def _logout(self, argument: str) -> None:
        result = await self.connection.call("mcp/logout", {"server": argument})
        self._report_server(result["server"])

    def _report_server(self, server: Mapping[str, Any]) -> None:
        why = f" ({server['error']})" if server.get("error") else ""
        self.renderer.notice(f"MCP server {server['name']}: {server['status']}{why}")

    async def _ps(self, _argument: str) -> None:
        processes = (await self.connection.call("process/list"))["processes"]
        if not processes:
            self.renderer.notice("no background processes in this session")
        for process in processes:
            pid = f"pid {process['pid']}" if process.get("pid") else ""
            self.renderer.notice(f"  {process['id']:>3}  {process_state(process):<22} "
                                 f"{pid:<11} {process['command']}")

    async def _kill(self, argument: str) -> None:
        if not argument.isdigit():
            self.renderer.error("/kill N: N is a process's number (see /ps)")
            return
        was = next((p for p in (await self.connection.call("process/list"))["processes"]
                    if p["id"] == int(argument)), None)
        process = (await self.connection.call("process/kill",
                                              {"processId": int(argument)}))["process"]
        if was is not None and was["state"] != "running":
            self.renderer.notice(f"process {argument} had ended: {process_state(process)}")
        else:
            self.renderer.notice(f"process {argument} {process_state(process)}")

    async def _new(self, _argument: str) -> None:
        created = await self._switch("session/new", {"cwd": self.cwd})
        self.renderer.status.switched()
        self.renderer.notice(f"new session {created['sessionId']}")

    async def _switch(self, method: str, params: dict[str, Any]) -> Any:
        """session/new or session/load (with no sessionId of ours), then chat in that one."""
        current, self.connection.session_id = self.connection.session_id, None
        try:
            result = await self.connection.call(method, params)
        finally:
            self.connection.session_id = current
        self.connection.session_id = result["sessionId"]
        return result

    async def _sessions(self, _argument: str) -> None:
        listed = await self.connection.call("session/list", {"cwd": self.cwd, "limit": 10})
        if not listed["sessions"]:
            self.renderer.notice("no saved session in this workspace")
        for info in listed["sessions"]:
            mark = "*" if info["sessionId"] == self.connection.session_id else " "
            title = info.get("title") or ""
            self.renderer.notice(f" {mark}{info['sessionId']}  {info['messageCount']:>3} "
                                 f"messages  {title[:60]}")

    async def _continue(self, argument: str) -> None:
        listed = await self.connection.call("session/list", {"cwd": self.cwd})
        found = [s["sessionId"] for s in listed["sessions"]
                 if str(s["sessionId"]).startswith(argument)]
        if len(found) != 1:
            self.renderer.error(f"/continue {argument}: " + (
                "no such saved session (see /sessions)" if not found else "ambiguous"))
            return
        loaded = await self._switch("session/load", {"sessionId": found[0]})
        self.renderer.status.switched(loaded.get("messages") or [])
        self.renderer.resumed(loaded)
