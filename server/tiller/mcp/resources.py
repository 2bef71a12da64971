"""MCP servers' resources: two tools for the model, and ``@server:uri`` mentions in prompts.

``mcp_list_resources`` lists the resources and the resource templates of the ready servers that
offer resources (``server`` narrows it to one), one line each: ``server: uri  name (mime) -
description``; a template's line holds its RFC 6570 ``uriTemplate``, whose expansion
``mcp_read_resource`` reads like any URI. ``mcp_read_resource`` reads one (``server``, ``uri``):
text as text under a ``[resource URI]`` line (cut like ``read``'s output), an image blob as an
image, another blob as a one-line note. Both only read: the permission gate never asks about
them. They are in the session's tools while at least one ready server offers resources.

Mentions: in a prompt's text, ``@server:uri`` (at the start or after a space) where ``server``
is a ready server that offers resources is read and sent along after the message, each once,
as a text block ``<resource server="…" uri="…">…</resource>`` (like the editors' ``@path``
files). Trailing punctuation is not part of the URI. A mention that cannot be read fails the
prompt (``CommandFailedError``): nothing reaches the model.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, Field

from tiller.errors import CommandFailedError, ToolError
from tiller.tools.base import Tool, ToolContext, ToolInfo, ToolResult
from tiller.tools.truncate import format_size, head_with_note
from tiller.types import ImageContent, TextContent, UserContent

if TYPE_CHECKING:
    import mcp.types as mcp_types

__all__ = [
    "ListResourcesTool",
    "ReadResourceTool",
    "ResourceServer",
    "ResourceServers",
    "ResourceTool",
    "expand_mentions",
    "find_mentions",
    "resource_content",
]

MENTION = re.compile(r"(?:^|(?<=\s))@([A-Za-z0-9_-]+):(\S+)")
_TRAILING = ".,;:!?)]}'\""


class ResourceServer(Protocol):
    """A server connection as the resource tools need it (``tiller.mcp.client.McpServer``)."""

    @property
    def name(self) -> str: ...

    @property
    def offers_resources(self) -> bool:
        """Ready, and it declared the ``resources`` capability."""
        ...

    async def list_resources(self) -> list[mcp_types.Resource]: ...

    async def list_resource_templates(self) -> list[mcp_types.ResourceTemplate]: ...

    async def read_resource(self, uri: str) -> mcp_types.ReadResourceResult:
        """``resources/read``; raises ``ToolError`` naming the server when it cannot answer."""
        ...


class ResourceServers(Protocol):
    @property
    def servers(self) -> Sequence[ResourceServer]: ...


def _offering(servers: ResourceServers) -> list[ResourceServer]:
    return [server for server in servers.servers if server.offers_resources]


def _named(servers: ResourceServers, name: str) -> ResourceServer:
    for server in _offering(servers):
        if server.name == name:
            return server
    offering = ", ".join(server.name for server in _offering(servers)) or "none"
    raise ToolError(f"no ready MCP server {name!r} offers resources (those that do: {offering})")


def resource_content(result: mcp_types.ReadResourceResult) -> list[TextContent | ImageContent]:
    """A ``resources/read`` result as tool-result content (see the module docstring)."""
    import mcp.types as mcp_types

    content: list[TextContent | ImageContent] = []
    for item in result.contents:
        if isinstance(item, mcp_types.TextResourceContents):
            content.append(TextContent(text=head_with_note(f"[resource {item.uri}]\n{item.text}")))
            continue
        mime = item.mime_type or "application/octet-stream"
        blob = getattr(item, "blob", "")
        if mime.startswith("image/"):
            content.append(ImageContent(data=blob, mime_type=mime))
            continue
        size = len(base64.b64decode(blob, validate=False)) if blob else 0
        content.append(TextContent(text=f"[binary resource {item.uri}: {mime}, "
                                        f"{format_size(size)}, not shown]"))
    return content or [TextContent(text="(the resource is empty)")]


def _line(server: str, uri: str, name: str, mime: str | None, description: str | None) -> str:
    text = f"{server}: {uri}  {name}" + (f" ({mime})" if mime else "")
    if description:
        text += " - " + " ".join(description.split())
    return text


class ResourceTool(Tool[Any]):
    """Base of the resource tools: they hold the session's servers."""

    info = ToolInfo(kind="read", mutates=False)

    def __init__(self, servers: ResourceServers) -> None:
        self.servers = servers


class ListParams(BaseModel):
    server: str | None = Field(default=None, description="only this server's resources")


class ListResourcesTool(ResourceTool):
    name = "mcp_list_resources"
    description = (
        "List the resources (and resource templates) that the connected MCP servers offer: "
        "one line each, `server: uri  name (mime type) - description`. Read one with "
        "mcp_read_resource; a template's URI is read after filling in its {variables}.")
    Params = ListParams
    info = ToolInfo(kind="read", mutates=False, title="MCP resources {server}")

    async def execute(self, params: ListParams, ctx: ToolContext) -> ToolResult:
        servers = [_named(self.servers, params.server)] if params.server else \
            _offering(self.servers)
        lines: list[str] = []
        for server in servers:
            for resource in await server.list_resources():
                lines.append(_line(server.name, str(resource.uri), resource.name,
                                   resource.mime_type, resource.description))
            templates = await server.list_resource_templates()
            if templates:
                lines.append(f"{server.name}: resource templates")
                lines += ["  " + _line(server.name, t.uri_template, t.name, t.mime_type,
                                       t.description) for t in templates]
        text = "\n".join(lines) if lines else "No resources."
        return ToolResult(content=[TextContent(text=head_with_note(text))],
                          details={"servers": [server.name for server in servers]})


class ReadParams(BaseModel):
    server: str = Field(description="the MCP server's name")
    uri: str = Field(description="the resource's URI (a template's, filled in)")


class ReadResourceTool(ResourceTool):
    name = "mcp_read_resource"
    description = ("Read a resource of a connected MCP server by its URI (see "
                   "mcp_list_resources).")
    Params = ReadParams
    info = ToolInfo(kind="read", mutates=False, title="{server}: {uri}")

    async def execute(self, params: ReadParams, ctx: ToolContext) -> ToolResult:
        server = _named(self.servers, params.server)
        result = await server.read_resource(params.uri)
        return ToolResult(content=resource_content(result),
                          details={"server": server.name, "uri": params.uri})


def find_mentions(text: str, names: set[str]) -> list[tuple[str, str]]:
    """The ``(server, uri)`` pairs ``text`` mentions as ``@server:uri``, once each, in order,
    for the server ``names`` given."""
    found: list[tuple[str, str]] = []
    for match in MENTION.finditer(text):
        server, uri = match.group(1), match.group(2).rstrip(_TRAILING)
        if server in names and uri and (server, uri) not in found:
            found.append((server, uri))
    return found


def _text_of(message: str | Sequence[UserContent]) -> str:
    if isinstance(message, str):
        return message
    return "\n".join(block.text for block in message if isinstance(block, TextContent))


async def expand_mentions(
    message: str | Sequence[UserContent], servers: ResourceServers
) -> str | list[UserContent]:
    """``message`` with the resources it mentions sent along (see the module docstring);
    ``message`` itself when it mentions none. CommandFailedError for one that cannot be
    read."""
    offering = {server.name: server for server in _offering(servers)}
    mentions = find_mentions(_text_of(message), set(offering))
    if not mentions:
        return message if isinstance(message, str) else list(message)
    blocks: list[UserContent] = (
        [TextContent(text=message)] if isinstance(message, str) else list(message))
    for name, uri in mentions:
        try:
            result = await offering[name].read_resource(uri)
        except ToolError as exc:
            raise CommandFailedError(f"@{name}:{uri}: {exc}") from None
        for block in resource_content(result):
            if isinstance(block, ImageContent):
                blocks.append(block)
            else:
                body = block.text.split("\n", 1)[1] if block.text.startswith("[resource ") \
                    else block.text
                blocks.append(TextContent(
                    text=f'\n\n<resource server="{name}" uri="{uri}">\n{body}\n</resource>'))
    return blocks
