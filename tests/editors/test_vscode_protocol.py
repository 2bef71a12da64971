"""The VS Code extension's protocol types (editors/vscode/src/protocol.ts) agree with the schema.

editors/vscode/test/protocolShapes.cjs reads protocol.ts with the TypeScript compiler and prints
each exported type's fields (name, optional or not, string literals). For every type mapped
below, the field names, their optionality (optional in TypeScript = not ``required`` in the
schema) and their literal values must be the schema's; a union (``Message``, ``AgentEvent``)
has one member per tag, as the schema has. An exported type that is neither mapped nor listed
in ``FREE_FORM`` fails, so a new type cannot go unchecked. Skipped only when ``node``/``npm``
are missing (as test_vscode.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest

from support.paths import EDITORS
from support.schema_check import SCHEMA

EXTENSION = EDITORS / "vscode"
NODE, NPM = shutil.which("node"), shutil.which("npm")

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(NODE is None or NPM is None, reason="node and npm are needed"),
]

OBJECTS = {
    "TextContent": "$defs/TextContent",
    "ImageContent": "$defs/ImageContent",
    "ThinkingContent": "$defs/ThinkingContent",
    "ToolCallContent": "$defs/ToolCall",
    "Usage": "$defs/Usage",
    "UserMessage": "$defs/UserMessage",
    "AssistantMessage": "$defs/AssistantMessage",
    "ToolResultMessage": "$defs/ToolResultMessage",
    "InitializeParams": "x-methods/initialize/params",
    "InitializeResult": "x-methods/initialize/result",
    "SessionNewParams": "x-methods/session~1new/params",
    "SessionNewResult": "x-methods/session~1new/result",
    "SessionParams": "x-methods/agent~1continue/params",
    "SessionInfo": "$defs/SessionInfo",
    "SessionListResult": "$defs/SessionListResult",
    "SessionLoadResult": "$defs/SessionLoadResult",
    "ToolCallShown": "$defs/ToolCallShown",
    "PromptParams": "x-methods/agent~1prompt/params",
    "RunResult": "x-methods/agent~1prompt/result",
    "QueueParams": "x-methods/agent~1steer/params",
    "QueueResult": "x-methods/agent~1steer/result",
    "AgentState": "x-methods/agent~1getState/result",
    "CommandEntry": "$defs/CommandEntry",
    "TurnCheckpoint": "$defs/TurnCheckpoint",
    "RequestPermissionParams": "x-serverRequests/client~1requestPermission/params",
    "RequestPermissionResult": "x-serverRequests/client~1requestPermission/result",
    "ReadTextFileParams": "x-serverRequests/client~1readTextFile/params",
    "ReadTextFileResult": "x-serverRequests/client~1readTextFile/result",
    "WriteTextFileParams": "x-serverRequests/client~1writeTextFile/params",
    "WriteTextFileResult": "$defs/EmptyResult",
}
"""TypeScript object type -> the schema object it mirrors (a JSON pointer)."""

UNIONS = {
    "Message": ("$defs/Message", "role"),
    "AgentEvent": ("$defs/AgentEvent", "type"),
    "MessageUpdateEvent": ("x-events/message_update", "type"),
    "PermissionPreview": ("$defs/RequestPermissionParams/properties/preview", "kind"),
}
"""TypeScript union -> (the schema's union, the tag that tells its members apart)."""

LITERALS = {
    "AssistantStopReason": "$defs/AssistantMessage/properties/stopReason",
    "RunStopReason": "$defs/RunResultModel/properties/stopReason",
    "PermissionMode": "$defs/SessionNewParams/properties/permissionMode",
    "QueueMode": "$defs/SetQueueModesResult/properties/steering",
    "PermissionOption": "$defs/RequestPermissionResult/properties/outcome",
    "CompactionReason": "$defs/CompactionStart/properties/reason",
    "ToolKind": "$defs/ToolExecutionStart/properties/kind",
}
"""TypeScript union of string literals -> the schema's enum."""

FREE_FORM = {
    "ClientCapabilities": "initialize's capabilities are an open object in the schema",
    "UserInput": "string | content blocks: checked as PromptParams.message",
    "AgentEventType": "checked below against x-events",
}

Field = dict[str, Any]


def resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = at(node["$ref"].removeprefix("#/"))
    return node


def at(pointer: str) -> dict[str, Any]:
    node: Any = SCHEMA
    for part in pointer.split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return resolve(node)


def literals(node: dict[str, Any]) -> list[str] | None:
    node = resolve(node)
    if "const" in node:
        return [node["const"]]
    return sorted(node["enum"]) if "enum" in node else None


def schema_fields(node: dict[str, Any]) -> dict[str, Field]:
    required = set(node.get("required", []))
    return {name: {"optional": name not in required, "literals": literals(prop)}
            for name, prop in node.get("properties", {}).items()}


def schema_members(node: dict[str, Any], tag: str) -> dict[str, dict[str, Field]]:
    members = [resolve(member) for member in node.get("oneOf", [node])]
    return {member["properties"][tag]["const"]: schema_fields(member) for member in members}


def ts_members(shape: dict[str, Any], tag: str) -> dict[str, dict[str, Field]]:
    """Union members merged by tag (TypeScript splits ``message_update`` by ``kind``)."""
    merged: dict[str, list[dict[str, Field]]] = {}
    for member in shape.get("union", [shape]):
        [value] = member["fields"][tag]["literals"]
        merged.setdefault(value, []).append(member["fields"])
    result = {}
    for value, variants in merged.items():
        names = {name for fields in variants for name in fields}
        result[value] = {name: {
            "optional": any(name not in f or f[name]["optional"] for f in variants),
            "literals": _merged_literals([f[name] for f in variants if name in f]),
        } for name in names}
    return result


def _merged_literals(fields: list[Field]) -> list[str] | None:
    if any(field["literals"] is None for field in fields):
        return None
    return sorted({value for field in fields for value in field["literals"]})


@pytest.fixture(scope="module")
def declared() -> dict[str, Any]:
    assert NPM is not None and NODE is not None
    if not (EXTENSION / "node_modules" / "typescript").is_dir():
        lock = (EXTENSION / "package-lock.json").is_file()
        subprocess.run([NPM, "ci" if lock else "install", "--no-audit", "--no-fund"],
                       cwd=EXTENSION, check=True, capture_output=True, timeout=300)
    done = subprocess.run([NODE, "test/protocolShapes.cjs"], cwd=EXTENSION, check=True,
                          capture_output=True, text=True, timeout=120)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_every_exported_type_is_checked(declared: dict[str, Any]) -> None:
    mapped = {*OBJECTS, *UNIONS, *LITERALS, *FREE_FORM}
    assert set(declared["types"]) == mapped


@pytest.mark.parametrize("name", sorted(OBJECTS))
def test_object_type_agrees_with_the_schema(declared: dict[str, Any], name: str) -> None:
    assert declared["types"][name]["fields"] == schema_fields(at(OBJECTS[name]))


@pytest.mark.parametrize("name", sorted(UNIONS))
def test_union_type_agrees_with_the_schema(declared: dict[str, Any], name: str) -> None:
    pointer, tag = UNIONS[name]
    assert ts_members(declared["types"][name], tag) == schema_members(at(pointer), tag)


@pytest.mark.parametrize("name", sorted(LITERALS))
def test_literal_type_agrees_with_the_schema(declared: dict[str, Any], name: str) -> None:
    assert declared["types"][name]["literals"] == literals(at(LITERALS[name]))


def test_event_types_and_error_codes(declared: dict[str, Any]) -> None:
    assert declared["types"]["AgentEventType"]["literals"] == sorted(SCHEMA["x-events"])
    codes = {c["const"] for c in at("$defs/ErrorObject")["properties"]["code"]["oneOf"]}
    answered_by_the_client = {"ResourceNotFound"}
    assert {name: code in codes for name, code in declared["errorCodes"].items()
            if name not in answered_by_the_client} == {
        name: True for name in declared["errorCodes"] if name not in answered_by_the_client
    }
