"""MCP results as tool results (``tiller.mcp.tool.map_result``) and MCP tools as Tools (the
name, the schema, how a call is judged), for the shapes the real servers in test_e2e_mcp.py do
not produce on demand."""

from __future__ import annotations

import json
from typing import Any

import mcp.types as mcp_types

from tiller.mcp.tool import map_result, mcp_tool
from tiller.types import ImageContent, TextContent


class Caller:
    name = "srv"

    async def call(self, tool: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        raise AssertionError("not called here")


def texts(result: Any) -> list[str]:
    return [block.text for block in result.content if isinstance(block, TextContent)]


def test_structured_content_without_text_becomes_json_text() -> None:
    result = map_result("srv", mcp_types.CallToolResult(
        content=[], structured_content={"temperature": 21.5, "ok": True}))
    [text] = texts(result)
    assert json.loads(text) == {"temperature": 21.5, "ok": True}
    assert result.details == {"server": "srv"} and not result.is_error


def test_text_wins_over_structured_content_and_resources_are_shown() -> None:
    result = map_result("srv", mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(text="summary"),
            mcp_types.EmbeddedResource(resource=mcp_types.TextResourceContents(
                uri="file:///a.txt", text="inside", mime_type="text/plain")),
            mcp_types.ImageContent(data="aGk=", mime_type="image/gif"),
        ],
        structured_content={"hidden": 1},
    ))
    assert texts(result) == ["summary", "[resource file:///a.txt]\ninside"]
    [image] = [b for b in result.content if isinstance(b, ImageContent)]
    assert image.mime_type == "image/gif" and image.data == "aGk="


def test_is_error_names_the_server_and_huge_text_is_truncated() -> None:
    failed = map_result("srv", mcp_types.CallToolResult(
        content=[mcp_types.TextContent(text="bad input")], is_error=True))
    assert failed.is_error and texts(failed) == ["MCP server srv reported an error: bad input"]
    huge = "\n".join("y" * 100 for _ in range(10_000))
    [cut] = texts(map_result("srv", mcp_types.CallToolResult(
        content=[mcp_types.TextContent(text=huge)])))
    assert len(cut.encode()) < 52 * 1024 and "[Output truncated: " in cut


def test_a_tool_is_named_described_and_judged_from_the_server() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    plain = mcp_tool(Caller(), mcp_types.Tool(name="search", input_schema=schema),
                     read_only=False)
    hinted = mcp_tool(Caller(), mcp_types.Tool(
        name="look", input_schema=schema,
        annotations=mcp_types.ToolAnnotations(read_only_hint=True)), read_only=False)
    trusted = mcp_tool(Caller(), mcp_types.Tool(name="push", input_schema=schema),
                       read_only=True)
    assert plain.name == "mcp__srv__search" and plain.parameters_schema() == schema
    assert plain.info.kind == "other" and plain.info.mutates
    assert not hinted.info.mutates and not trusted.info.mutates
    assert type(plain) is not type(hinted)  # one Tool subclass per MCP tool


def test_a_schema_the_model_apis_would_refuse_is_sent_as_one_object() -> None:
    """OpenAI refuses a root without ``"type": "object"``, Anthropic a root ``oneOf``/``anyOf``/
    ``allOf``, each failing every request that declares the tool: the tool's schema is one
    object, with every alternative's properties and what all of them require."""
    union = {"oneOf": [
        {"type": "object", "properties": {"id": {"type": "string"}, "force": {"type": "boolean"}},
         "required": ["id", "force"]},
        {"type": "object", "properties": {"name": {"type": "string"}, "force": {"type": "boolean"}},
         "required": ["name", "force"]}]}
    parts = {"properties": {"a": {"type": "string"}}, "$defs": {"x": {"type": "integer"}},
             "allOf": [{"properties": {"b": {"$ref": "#/$defs/x"}}, "required": ["b"]},
                       {"required": ["a"]}]}

    def sent(schema: dict[str, Any]) -> dict[str, Any]:
        return mcp_tool(Caller(), mcp_types.Tool(name="t", input_schema=schema),
                        read_only=False).parameters_schema()

    assert sent(union) == {"type": "object", "properties": {
        "id": {"type": "string"}, "force": {"type": "boolean"}, "name": {"type": "string"}},
        "required": ["force"]}
    assert sent(parts) == {"type": "object", "$defs": {"x": {"type": "integer"}}, "properties": {
        "a": {"type": "string"}, "b": {"$ref": "#/$defs/x"}}, "required": ["b", "a"]}
    assert sent({"properties": {"q": {"type": "string"}}}) == {
        "type": "object", "properties": {"q": {"type": "string"}}}
    assert sent({"type": "string"}) == sent({}) == {"type": "object", "properties": {}}


def test_names_the_model_apis_would_refuse_are_made_safe() -> None:
    tool = mcp_tool(Caller(), mcp_types.Tool(name="files.read/all " + "x" * 80,
                                             input_schema={"type": "object"}), read_only=False)
    assert tool.name.startswith("mcp__srv__files_read_all_x") and len(tool.name) == 64
    assert tool.remote_name.startswith("files.read/all ")
