"""One MCP tool as a Tiller ``Tool`` (``mcp_tool``), and its results as tool-result content.

The model sees ``mcp__<server>__<tool>`` with the server's own input schema; arguments pass
through unchanged (the server validates them). How a call is judged (``ToolInfo``): kind
``other``, no path, no command; it ``mutates`` unless the server is configured ``read_only``
or the tool declares the ``readOnlyHint`` annotation. A hint from the server can only make the
gate milder for a tool that says it only reads; ``read_only = true`` is the user's own word.

Result mapping: text as text; an image as an image; an embedded resource as its text (a blob
as a one-line note with its MIME type and size); a resource link as a line naming its URI;
audio as a note; structured content (when the server sends no text) as JSON text. Text is cut
like ``read``'s output (``tiller.tools.truncate``). An ``isError`` result is an error result.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from tiller.tools.base import Tool, ToolContext, ToolInfo, ToolResult
from tiller.tools.truncate import format_size, head_with_note
from tiller.types import ImageContent, TextContent

if TYPE_CHECKING:
    import mcp.types as mcp_types

__all__ = [
    "McpCaller", "McpTool", "map_block", "map_result", "mcp_tool", "tool_name", "unique_names",
]

MAX_NAME = 64
"""The longest tool name the model APIs take."""


class McpCaller(Protocol):
    """A live server connection as a tool needs it."""

    name: str

    async def call(self, tool: str, arguments: dict[str, Any],
                   call_id: str | None = None) -> mcp_types.CallToolResult:
        """Call ``tool`` for the tool call ``call_id``; raises ``ToolError`` naming the server
        when the call cannot finish (timeout, the server gone)."""
        ...


class McpArguments(BaseModel):
    """Any JSON object: the server checks its own arguments."""

    model_config = ConfigDict(extra="allow")


def tool_name(server: str, tool: str) -> str:
    """The name the model sees: ``mcp__<server>__<tool>``, with any character the model APIs
    do not allow in a name replaced by ``_``, at most 64 characters."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"mcp__{server}__{tool}")[:MAX_NAME]


def unique_names(names: list[str]) -> list[str]:
    """``names`` with every repeat made unique: the first of a name keeps it, each later one
    gets the first free suffix ``_2``, ``_3``... (cut to fit ``MAX_NAME``), never a name that
    another of ``names`` has."""
    taken = set(names)
    kept: set[str] = set()
    unique: list[str] = []
    for name in names:
        if name in kept:
            number = 2
            while (candidate := f"{name[:MAX_NAME - len(str(number)) - 1]}_{number}") in taken:
                number += 1
            name = candidate
            taken.add(name)
        kept.add(name)
        unique.append(name)
    return unique


_COMBINATORS = ("allOf", "anyOf", "oneOf")


def object_schema(schema: Any) -> dict[str, Any]:
    """An MCP tool's input schema as the model APIs take it: one object schema. They refuse
    any other, and with it every request that declares the tool: a root without ``"type":
    "object"`` (OpenAI: ``schema must be a JSON Schema of 'type: "object"'``), a ``oneOf``,
    ``anyOf`` or ``allOf`` at the root (Anthropic). Such a root is merged into one object:
    every alternative's properties, required what each alternative requires (``allOf``: what
    any part requires); a root of another type becomes an object without properties. The
    tool's server still checks the arguments."""
    root = schema if isinstance(schema, dict) else {}
    merged = {key: value for key, value in root.items() if key not in _COMBINATORS}
    if merged.get("type", "object") != "object":
        merged = {}
    properties = dict(merged.get("properties") or {})
    required = [name for name in merged.get("required") or [] if isinstance(name, str)]
    for key in _COMBINATORS:
        parts = [part for part in root.get(key) or [] if isinstance(part, dict)]
        if not parts:
            continue
        for part in parts:
            for name, value in (part.get("properties") or {}).items():
                properties.setdefault(name, value)
        wanted = [[name for name in part.get("required") or [] if isinstance(name, str)]
                  for part in parts]
        if key == "allOf":
            required += [name for names in wanted for name in names]
        else:
            required += [name for name in wanted[0] if all(name in names for names in wanted)]
    merged.pop("required", None)
    return {"type": "object", **{key: value for key, value in merged.items() if key != "type"},
            "properties": properties, **({"required": list(dict.fromkeys(required))}
                                         if required else {})}


class McpTool(Tool[McpArguments]):
    """Base of the per-tool subclasses ``mcp_tool`` builds."""

    Params = McpArguments
    caller: ClassVar[McpCaller]
    remote_name: ClassVar[str]
    """The server's own name for the tool."""
    natural_name: ClassVar[str]
    """``tool_name`` of it; ``name`` is this unless another tool of the session had it first
    (``unique_names``)."""
    input_schema: ClassVar[dict[str, Any]]

    def parameters_schema(self) -> dict[str, Any]:
        return dict(self.input_schema)

    async def execute(self, params: McpArguments, ctx: ToolContext) -> ToolResult:
        result = await self.caller.call(self.remote_name, params.model_dump(), ctx.tool_call_id)
        return map_result(self.caller.name, result)


def mcp_tool(caller: McpCaller, tool: mcp_types.Tool, *, read_only: bool) -> McpTool:
    """A Tool for the server's ``tool`` (a subclass of ``McpTool`` of its own)."""
    hint = tool.annotations.read_only_hint if tool.annotations else None
    schema = object_schema(tool.input_schema)
    attributes = {
        "name": tool_name(caller.name, tool.name),
        "natural_name": tool_name(caller.name, tool.name),
        "description": tool.description or f"{tool.name} (MCP server {caller.name})",
        "info": ToolInfo(kind="other", mutates=not (read_only or hint is True),
                         title=f"{caller.name}: {tool.name}"),
        "caller": caller,
        "remote_name": tool.name,
        "input_schema": schema,
    }
    cls = type(f"McpTool_{caller.name}_{tool.name}", (McpTool,), attributes)
    built: McpTool = cls()
    return built


def map_block(block: Any) -> TextContent | ImageContent | None:
    """One MCP content block as Tiller content (see the module docstring); None for a kind
    this version does not know."""
    import mcp.types as mcp_types

    if isinstance(block, mcp_types.TextContent):
        return TextContent(text=block.text)
    if isinstance(block, mcp_types.ImageContent):
        return ImageContent(data=block.data, mime_type=block.mime_type)
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return TextContent(text=f"[resource {resource.uri}]\n{resource.text}")
        mime = resource.mime_type or "application/octet-stream"
        size = len(getattr(resource, "blob", "")) * 3 // 4
        return TextContent(text=f"[binary resource {resource.uri}: {mime}, "
                                f"about {format_size(size)}, not shown]")
    if isinstance(block, mcp_types.ResourceLink):
        return TextContent(text=f"[resource link {block.uri}: {block.name}]")
    if isinstance(block, mcp_types.AudioContent):
        return TextContent(text=f"[audio: {block.mime_type}, not shown]")
    return None


def map_result(server: str, result: mcp_types.CallToolResult) -> ToolResult:
    """The tool result for an MCP ``CallToolResult`` (see the module docstring)."""
    content: list[TextContent | ImageContent] = []
    for block in result.content:
        mapped = map_block(block)
        if mapped is None:
            continue
        if isinstance(mapped, TextContent):
            mapped = TextContent(text=head_with_note(mapped.text))
        content.append(mapped)
    has_text = any(isinstance(block, TextContent) for block in content)
    if result.structured_content is not None and not has_text:
        structured = json.dumps(result.structured_content, indent=2)
        content.append(TextContent(text=head_with_note(structured)))
    if not content:
        content.append(TextContent(text="(no output)"))
    if result.is_error:
        first = content[0]
        if isinstance(first, TextContent):
            content[0] = TextContent(text=f"MCP server {server} reported an error: {first.text}")
    details = {"server": server}
    return ToolResult(content=content, details=details, is_error=result.is_error)
