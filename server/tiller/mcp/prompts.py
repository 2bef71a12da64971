"""MCP servers' prompts as slash commands (``McpPromptSource``, a ``CommandSource``).

Each prompt of a ready server is the command ``mcp__<server>__<prompt>`` (named like the
server's tools, ``tiller.mcp.tool.tool_name``), ``source`` ``mcp``, described by the prompt's
description (else its title, else its name), its ``argumentHint`` built from the declared
arguments: ``<required> [optional]``.

Arguments: the text typed after the command is split into shell-style words, given to the
declared arguments in order; the last declared argument takes all the words left (joined by
spaces). Arguments with no word are left out (the server says if one was required). A prompt
that declares no arguments gets the typed text appended on a paragraph of its own.

Rendering calls ``prompts/get`` and joins the messages' content with blank lines: text as is,
an embedded text resource as its text, anything else as a one-line note. A server that refuses
or is not running makes the prompt fail with ``CommandFailedError``: nothing reaches the model.
"""

from __future__ import annotations

import shlex
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Protocol

from tiller.context.commands import Command
from tiller.errors import CommandFailedError, ToolError
from tiller.mcp.tool import map_block, tool_name
from tiller.types import TextContent

if TYPE_CHECKING:
    import mcp.types as mcp_types

__all__ = ["McpPromptSource", "PromptServer", "PromptServers", "argument_hint", "map_arguments"]


class PromptServer(Protocol):
    """A server connection as the prompt source needs it (``tiller.mcp.client.McpServer``)."""

    @property
    def name(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def prompts(self) -> Sequence[mcp_types.Prompt]: ...

    async def get_prompt(self, prompt: str, arguments: dict[str, str]) -> mcp_types.GetPromptResult:
        """``prompts/get``; raises ``ToolError`` naming the server when it cannot answer."""
        ...


class PromptServers(Protocol):
    """The session's servers (``tiller.mcp.client.McpServers``)."""

    @property
    def servers(self) -> Sequence[PromptServer]: ...


def argument_hint(arguments: Sequence[mcp_types.PromptArgument] | None) -> str | None:
    """``<city> [state]`` for a required ``city`` and an optional ``state``; None for none."""
    if not arguments:
        return None
    return " ".join(f"<{a.name}>" if a.required else f"[{a.name}]" for a in arguments)


def map_arguments(
    declared: Sequence[mcp_types.PromptArgument] | None, typed: str
) -> dict[str, str]:
    """The ``prompts/get`` arguments for the text ``typed`` (see the module docstring)."""
    try:
        words = shlex.split(typed)
    except ValueError:  # an unclosed quote: plain words
        words = typed.split()
    names = [argument.name for argument in declared or []]
    mapped: dict[str, str] = {}
    for index, name in enumerate(names):
        if index >= len(words):
            break
        last = index == len(names) - 1
        mapped[name] = " ".join(words[index:]) if last else words[index]
    return mapped


def _note(block: object) -> str:
    mapped = map_block(block)
    if isinstance(mapped, TextContent):
        return mapped.text
    kind = getattr(block, "type", "content")
    mime = getattr(block, "mime_type", None)
    return f"[{kind}{': ' + mime if mime else ''}, not shown]"


class McpPromptSource:
    """The prompts of ``servers``' ready servers, in server order."""

    def __init__(self, servers: PromptServers) -> None:
        self.servers = servers
        self._prompts: dict[str, tuple[PromptServer, mcp_types.Prompt]] = {}

    def fingerprint(self) -> Hashable:
        return tuple(
            (server.name, server.status, tuple(p.model_dump_json() for p in server.prompts))
            for server in self.servers.servers
        )

    def load(self) -> list[Command]:
        commands: list[Command] = []
        prompts: dict[str, tuple[PromptServer, mcp_types.Prompt]] = {}
        for server in self.servers.servers:
            if server.status != "ready":
                continue
            for prompt in server.prompts:
                name = tool_name(server.name, prompt.name)
                if name in prompts:
                    continue
                prompts[name] = (server, prompt)
                description = prompt.description or prompt.title or prompt.name
                commands.append(Command(name, description, "mcp", argument_hint(prompt.arguments)))
        self._prompts = prompts
        return commands

    async def render(self, command: Command, arguments: str) -> str:
        server, prompt = self._prompts[command.name]
        try:
            mapped = map_arguments(prompt.arguments, arguments)
            result = await server.get_prompt(prompt.name, mapped)
        except ToolError as exc:
            raise CommandFailedError(f"/{command.name}: {exc}") from None
        text = "\n\n".join(_note(message.content) for message in result.messages)
        if not prompt.arguments and arguments:
            text = f"{text.rstrip()}\n\n{arguments}"
        return text
