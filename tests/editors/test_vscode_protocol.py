"""The VS Code extension's protocol types (editors/vscode/src/protocol.ts) are generated from
``tiller schema`` by editors/vscode/scripts/protocol_ts.py, and the file is current.

What generation does not make true by itself is checked on the generated file as TypeScript
reads it (editors/vscode/test/protocolShapes.cjs, with the TypeScript compiler): every
``$defs`` object's fields, their optionality (optional in TypeScript = not ``required`` in the
schema) and string literals; each union's members; each word list's values, in order; the error
codes; and each method map entry's params and result types. An exported name that is not one of
the schema's fails, so nothing is written by hand there. Those checks need ``node``/``npm`` and
are skipped without them (as test_vscode.py); the generation checks need neither.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from types import ModuleType
from typing import Any

import pytest

from support.paths import EDITORS
from support.schema_check import SCHEMA

EXTENSION = EDITORS / "vscode"
PROTOCOL_TS = EXTENSION / "src" / "protocol.ts"
NODE, NPM = shutil.which("node"), shutil.which("npm")
MAPS = {"Methods": "x-methods", "Notifications": "x-notifications",
        "ServerRequests": "x-serverRequests", "ServerNotifications": "x-serverNotifications"}
ENVELOPES = {ref["$ref"].rsplit("/", 1)[1] for ref in SCHEMA["anyOf"]}


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "protocol_ts", EXTENSION / "scripts" / "protocol_ts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATE = generator().generate


# generation ------------------------------------------------------------------------------------


def test_protocol_ts_is_what_tiller_schema_generates() -> None:
    assert PROTOCOL_TS.read_text(encoding="utf-8") == GENERATE(SCHEMA), (
        "editors/vscode/src/protocol.ts is not current: run `make protocol-ts`")


def test_a_change_to_the_schema_changes_the_file() -> None:
    changed = json.loads(json.dumps(SCHEMA))
    changed["$defs"]["QueueResult"]["properties"]["dropped"] = {
        "type": "integer", "description": "how many were dropped"}
    changed["$defs"]["QueueMode"]["enum"].append("drain")
    text = GENERATE(changed)
    assert "  /** how many were dropped */\n  dropped?: number;\n" in text
    assert "export const QueueMode = ['one-at-a-time', 'all', 'drain'] as const;" in text
    assert text != GENERATE(SCHEMA)


def test_optional_fields_defaults_and_docs() -> None:
    text = GENERATE(SCHEMA)
    assert "export interface SessionListParams {\n  cwd?: string;\n  /** Default: `50`. */\n" \
        "  limit?: number;\n" in text
    assert "  /** messages now waiting in that queue, this one included */\n  queued: number;" \
        in text
    assert "  'agent/prompt': { params: PromptParams; result: RunResultModel };" in text
    assert "  'client/writeTextFile': { params: WriteTextFileParams; result: EmptyResult | null" \
        " };" in text
    assert "export interface ClientRequest" not in text  # the envelopes are left out
    assert max(len(line) for line in text.splitlines()) <= 100


# as TypeScript reads the generated file ----------------------------------------------------------


@pytest.fixture(scope="module")
def declared() -> dict[str, Any]:
    if NODE is None or NPM is None:
        pytest.skip("node and npm are needed")
    if not (EXTENSION / "node_modules" / "typescript").is_dir():
        lock = (EXTENSION / "package-lock.json").is_file()
        subprocess.run([NPM, "ci" if lock else "install", "--no-audit", "--no-fund"],
                       cwd=EXTENSION, check=True, capture_output=True, timeout=300)
    done = subprocess.run([NODE, "test/protocolShapes.cjs"], cwd=EXTENSION, check=True,
                          capture_output=True, text=True, timeout=120)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[1]]
    return node


def literals(node: dict[str, Any]) -> list[str] | None:
    node = resolve(node)
    if "const" in node:
        return [node["const"]]
    return sorted(node["enum"]) if "enum" in node else None


def schema_fields(node: dict[str, Any]) -> dict[str, Any]:
    required = set(node.get("required", []))
    return {name: {"optional": name not in required, "literals": literals(prop)}
            for name, prop in node.get("properties", {}).items()}


def kind(node: dict[str, Any]) -> str:
    if "enum" in node:
        return "list"
    if node.get("type") == "object":
        return "object"
    return "union" if all("$ref" in m for m in node.get("oneOf", [{}])) else "other"


DEFS = {name: node for name, node in SCHEMA["$defs"].items() if name not in ENVELOPES}


@pytest.mark.process
def test_every_exported_name_is_the_schemas(declared: dict[str, Any]) -> None:
    assert set(declared["types"]) == {*DEFS, "PROTOCOL_VERSION"}
    assert set(declared["maps"]) == set(MAPS)
    assert declared["types"]["PROTOCOL_VERSION"] == {"value": True}


@pytest.mark.process
@pytest.mark.parametrize("name", sorted(n for n, node in DEFS.items() if kind(node) == "object"))
def test_object_type_agrees_with_the_schema(declared: dict[str, Any], name: str) -> None:
    assert declared["types"][name]["fields"] == schema_fields(DEFS[name])


@pytest.mark.process
@pytest.mark.parametrize("name", sorted(n for n, node in DEFS.items() if kind(node) == "union"))
def test_union_type_agrees_with_the_schema(declared: dict[str, Any], name: str) -> None:
    members = [member["fields"] for member in declared["types"][name]["union"]]
    expected = [schema_fields(resolve(member)) for member in DEFS[name]["oneOf"]]
    assert sorted(members, key=json.dumps) == sorted(expected, key=json.dumps)


@pytest.mark.process
@pytest.mark.parametrize("name", sorted(n for n, node in DEFS.items() if kind(node) == "list"))
def test_word_list_agrees_with_the_schema(declared: dict[str, Any], name: str) -> None:
    assert declared["lists"][name] == DEFS[name]["enum"]
    assert declared["types"][name]["literals"] == sorted(DEFS[name]["enum"])


def test_only_the_id_is_neither_object_union_nor_list() -> None:
    assert [name for name, node in DEFS.items() if kind(node) == "other"] == ["Id"]


@pytest.mark.process
def test_error_codes_and_method_maps(declared: dict[str, Any]) -> None:
    codes = SCHEMA["$defs"]["ErrorObject"]["properties"]["code"]["oneOf"]
    assert declared["errorCodes"] == {code["title"]: code["const"] for code in codes}
    for name, key in MAPS.items():
        expected = {
            method: {part: " | ".join(
                ref["$ref"].rsplit("/", 1)[1] if "$ref" in ref else ref["type"]
                for ref in schema.get("anyOf", [schema]))
                for part, schema in entry.items()}
            for method, entry in SCHEMA[key].items()}
        assert declared["maps"][name] == expected, name
