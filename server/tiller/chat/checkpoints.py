"""``tiller chat``'s ``/changes`` and ``/undo``: what the agent changed in the workspace this
session (``session/changes``), and putting back what its last run changed (``session/revert``
to the last prompt), once the person confirms."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tiller.chat.connection import Connection
from tiller.chat.render import Renderer
from tiller.client import RpcError

__all__ = ["CONFIRM_UNDO", "CheckpointCommands"]

CONFIRM_UNDO = "Undo these changes? [y/N] "
"""The question ``/undo`` asks before it reverts anything."""


class CheckpointCommands:
    """The two commands of one chat. ``handle`` takes a typed line when it is a command or the
    answer to the confirmation ``/undo`` asked; then the line is not a message."""

    COMMANDS = frozenset({"/changes", "/undo"})

    def __init__(self, connection: Connection, renderer: Renderer) -> None:
        self.connection, self.renderer = connection, renderer
        self.pending: str | None = None
        """The entry ``/undo`` reverts to once confirmed."""

    async def handle(self, text: str, running: bool) -> bool:
        """Run the command (or answer the question) in ``text``; False if it is neither.
        Returns with the prompt shown again, unless the confirmation question is."""
        if self.pending is not None:
            entry, self.pending = self.pending, None
            if text.lower() in ("y", "yes"):
                await self._revert(entry)
            else:
                self.renderer.notice("kept the changes")
            self.renderer.prompt()
            return True
        if text not in self.COMMANDS:
            return False
        if running:
            self.renderer.error(f"{text}: wait for the run to end (or Ctrl-C to abort it)")
            return True
        try:
            asked = await (self._changes() if text == "/changes" else self._undo())
        except RpcError as exc:
            self.renderer.error(exc.message)
            asked = False
        if asked:
            self.renderer.ask(CONFIRM_UNDO)
        else:
            self.renderer.prompt()
        return True

    async def _changes(self) -> bool:
        changes = await self.connection.call("session/changes", {})
        self._show(changes, "no file changed by the agent in this session")
        return False

    async def _undo(self) -> bool:
        loaded = await self.connection.call("session/load", {})
        prompts = [entry for entry, message in zip(loaded["entryIds"], loaded["messages"],
                                                   strict=False)
                   if message.get("role") == "user" and entry]
        if not prompts:
            self.renderer.notice("nothing to undo: no run yet")
            return False
        changes = await self.connection.call("session/changes", {"from": prompts[-1]})
        if not changes["files"]:
            self.renderer.notice("nothing to undo: the last run changed no files")
            return False
        self._show(changes, "")
        self.pending = prompts[-1]
        return True

    async def _revert(self, entry: str) -> None:
        try:
            result = await self.connection.call("session/revert", {"entryId": entry})
        except RpcError as exc:
            self.renderer.error(exc.message)
            return
        restored: Sequence[str] = result["restored"]
        self.renderer.notice(f"↺ restored {', '.join(restored)}" if restored
                             else "↺ nothing was restored")
        for path in result["conflicts"]:
            self.renderer.error(f"{path}: changed since the agent's last change; kept as it is")
        for skipped in result["skipped"]:
            self.renderer.notice(f"  {skipped['path']}: {skipped['reason']}")

    def _show(self, changes: Mapping[str, Any], empty: str) -> None:
        files = changes["files"]
        if not files:
            self.renderer.notice(empty)
        for change in files:
            self.renderer.notice(f"  {change['status']:<8} {change['path']} "
                                 f"(+{change['additions']} -{change['deletions']})")
        if changes.get("notCovered"):
            self.renderer.notice(f"  not covered: {', '.join(changes['notCovered'])}")
