"""``tiller schema`` and protocol.md: every JSON example in the document is checked against it.

How an example is tied to what it shows (``expected_checks``), line by line of each ```json
block:

- a JSON-RPC message (``jsonrpc``): the whole message against the schema's root; a request's
  or notification's ``params`` by its own ``method``; a response's ``result`` by the method of
  the request with the same id earlier in the block, else by the method its section is about;
- a bare object with ``type`` and ``seq``: ``agent/event`` params, by its own ``type``;
- a bare object with ``role``: a message (see Messages);
- any other bare object: the result of the method its section is about (e.g. agent/getState).

A message's ``method`` (an event's ``type``) must also be one its section's heading names.
Examples under "ACP" are ACP's messages: they are checked against the ACP SDK's own models
(``ACP_METHODS``), not against Tiller's schema. Anything else fails as unclassified: nothing
is skipped.
"""

from __future__ import annotations

import json
import pkgutil
import re
import subprocess
import sys
import typing
from dataclasses import dataclass
from importlib import import_module
from typing import Any

import acp.schema
import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, ValidationError

import tiller
from support.paths import PROTOCOL_MD
from support.schema_check import SCHEMA, pointer, problems
from tiller.errors import AcpRequestError, RequestError
from tiller.gate.permissions import OPTIONS
from tiller.modes import PERMISSION_MODES
from tiller.protocol.client_requests import PermissionOutcome
from tiller.protocol.schema import protocol_schema
from tiller.types import RunStopReason

PROTOCOL_MD = PROTOCOL_MD

ACP_METHODS: dict[str, tuple[type[BaseModel], type[BaseModel]]] = {
    "initialize": (acp.schema.InitializeRequest, acp.schema.InitializeResponse),
    "authenticate": (acp.schema.AuthenticateRequest, acp.schema.AuthenticateResponse),
    "elicitation/create": (acp.schema.CreateFormSessionElicitationRequest,
                           acp.schema.AcceptElicitationResponse),
}
"""ACP methods whose examples protocol.md shows: (params model, result model) of the ACP SDK."""

ERROR_CODES = {
    code["const"] for code in SCHEMA["$defs"]["ErrorObject"]["properties"]["code"]["oneOf"]
}


@dataclass
class Example:
    line: int
    headings: list[str]
    """The ``##`` heading and the ``###`` under it, if any."""
    value: Any
    block: list[Any]
    """The values before this one in the same block."""

    @property
    def names(self) -> list[str]:
        """What the closest heading names in backticks (methods, event types)."""
        return re.findall(r"`([^`]+)`", self.headings[-1]) if self.headings else []

    def __str__(self) -> str:
        return f"protocol.md:{self.line} ({' > '.join(self.headings)})"


def examples(text: str) -> list[Example]:
    """Every line of every ```json block: each is one JSON value."""
    found: list[Example] = []
    headings: list[str] = []
    fenced = False
    block: list[Any] | None = None  # the values so far, inside a ```json block
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
            block = [] if fenced and line.strip() == "```json" else None
        elif not fenced and line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            headings = [*headings[: level - 2], line.lstrip("#").strip()] if level >= 2 else []
        elif block is not None and line.strip():
            value = json.loads(line)  # a line that is not JSON fails here, naming itself
            found.append(Example(number, headings, value, list(block)))
            block.append(value)
    return found


def section_method(example: Example, table: str) -> str:
    methods = [name for name in example.names if name in SCHEMA[table]]
    assert len(methods) == 1, f"{example}: which method is this result of? {example.names}"
    return methods[0]


def expected_checks(example: Example) -> list[tuple[str, Any]]:
    """(schema pointer, instance) pairs that ``example`` must pass, the most general first;
    fails if unclassified."""
    value = example.value
    assert isinstance(value, dict), f"{example}: an example is a JSON object"
    if "jsonrpc" in value:
        checks: list[tuple[str, Any]] = [("", value)]
        method = value.get("method")
        if method is not None:
            kind = "request" if "id" in value else "notification"
            table = {
                ("request", True): "x-methods", ("request", False): "x-serverRequests",
                ("notification", True): "x-notifications",
                ("notification", False): "x-serverNotifications",
            }[kind, method in SCHEMA["x-methods"] or method in SCHEMA["x-notifications"]]
            named = value["params"]["type"] if method == "agent/event" else method
            assert named in example.names, f"{example}: {named} is not this section's"
            checks.append((pointer(table, method, "params"), value.get("params", {})))
        elif "result" in value:
            asked = [m for m in example.block if m.get("id") == value["id"] and "method" in m]
            if asked:
                method = asked[-1]["method"]
                table = "x-methods" if method in SCHEMA["x-methods"] else "x-serverRequests"
            else:
                table, method = "x-methods", section_method(example, "x-methods")
            checks.append((pointer(table, method, "result"), value["result"]))
        return checks
    if "type" in value and "seq" in value:
        assert value["type"] in example.names, f"{example}: {value['type']} is not this section's"
        return [(pointer("x-events", value["type"]), value)]
    if "role" in value:
        return [(pointer("$defs", "Message"), value)]
    return [(pointer("x-methods", section_method(example, "x-methods"), "result"), value)]


def acp_problems(example: Example) -> list[str]:
    """ACP examples against the ACP SDK's models: a request's params, a response's result."""
    value = example.value
    if "method" in value:
        model = ACP_METHODS[value["method"]][0]
        instance = value.get("params", {})
    else:
        asked = [m for m in example.block if m.get("id") == value.get("id") and "method" in m]
        assert asked, f"{example}: an ACP response needs its request in the same block"
        model, instance = ACP_METHODS[asked[-1]["method"]][1], value["result"]
    try:
        model.model_validate(instance)
    except ValidationError as exc:
        return [f"{example}: {exc}"]
    return []


ALL_EXAMPLES = examples(PROTOCOL_MD.read_text(encoding="utf-8"))


def test_protocol_md_has_the_examples_this_test_expects() -> None:
    assert len(ALL_EXAMPLES) >= 30
    acp_examples = [e for e in ALL_EXAMPLES if e.headings[0] == "ACP"]
    assert [e.value.get("method", "result") for e in acp_examples] == [
        "initialize", "result", "authenticate", "result", "elicitation/create", "result"]


@pytest.mark.parametrize("example", ALL_EXAMPLES, ids=lambda example: f"line{example.line}")
def test_protocol_md_example_conforms(example: Example) -> None:
    if example.headings[0] == "ACP":
        assert acp_problems(example) == []
        return
    for at, instance in reversed(expected_checks(example)):  # the most specific first
        found = problems(at, instance)
        assert found == [], f"{example} does not conform:\n" + "\n".join(found)


def test_a_drifted_example_fails() -> None:
    text = """## Methods (client → server)\n\n### `agent/steer`\n\n```json
{"jsonrpc": "2.0", "id": 6, "method": "agent/steer", "params": {"message": "tabs"}}
{"jsonrpc": "2.0", "id": 6, "result": {"queued": 1, "queue": "steering"}}
```\n"""
    request, response = examples(text)
    assert [problems(at, value) for at, value in expected_checks(request)] == [[], []]
    assert any(problems(at, value) for at, value in expected_checks(response))
    orphan = examples("## Other\n\n```json\n{\"surprise\": true}\n```\n")[0]
    with pytest.raises(AssertionError, match="which method"):
        expected_checks(orphan)


@pytest.mark.process
def test_tiller_schema_prints_the_schema() -> None:
    done = subprocess.run([sys.executable, "-m", "tiller", "schema"], capture_output=True,
                          text=True, check=True, timeout=60)
    printed = json.loads(done.stdout)
    Draft202012Validator.check_schema(printed)
    assert printed == protocol_schema() == SCHEMA
    assert printed["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_error_codes_are_the_errors_table_of_protocol_md() -> None:
    text = PROTOCOL_MD.read_text(encoding="utf-8")
    table = text.split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    documented = {int(code) for code in re.findall(r"^\| (-\d+) \|", table, re.MULTILINE)}
    assert ERROR_CODES == documented


def test_every_request_error_has_its_code_in_the_schema() -> None:
    for module in pkgutil.walk_packages(tiller.__path__, "tiller."):
        if module.name != "tiller.providers.local":  # needs the optional llama_cpp
            import_module(module.name)
    pending, errors = [RequestError], set()
    while pending:
        for sub in pending.pop().__subclasses__():
            pending.append(sub)
            if not issubclass(sub, AcpRequestError):  # ACP's own codes: ACP's protocol
                errors.add(sub)
    assert {error.__name__: error.code in ERROR_CODES for error in errors} == {
        error.__name__: True for error in errors
    }


def test_permission_outcomes_are_the_gates_options() -> None:
    assert list(typing.get_args(PermissionOutcome)) == OPTIONS


def test_the_word_lists_are_named_once() -> None:
    """Each ``Literal`` alias of the models' modules is one ``$defs`` entry, referenced where
    it is used, never spelled inline."""
    defs = SCHEMA["$defs"]
    assert defs["PermissionMode"]["enum"] == list(PERMISSION_MODES)
    assert defs["RunStopReason"]["enum"] == list(typing.get_args(RunStopReason))
    assert defs["PermissionOutcome"]["enum"] == list(typing.get_args(PermissionOutcome))
    named = {tuple(schema["enum"]) for schema in defs.values() if "enum" in schema}
    assert len(named) >= 9
    inline = re.findall(r'"enum": (\[[^\]]*\])', json.dumps({
        name: schema for name, schema in defs.items() if "enum" not in schema}))
    assert [values for values in map(json.loads, inline) if tuple(values) in named] == []
    assert SCHEMA["$defs"]["SetQueueModesParams"]["properties"]["steering"] == {
        "$ref": "#/$defs/QueueMode"}


def test_two_names_for_one_word_list_are_refused() -> None:
    import types
    from typing import Literal

    from tiller.protocol.schema import _word_lists
    from tiller.types import WireModel

    module = types.ModuleType("twice")
    module.Colour = Literal["red", "blue"]  # type: ignore[attr-defined]
    module.Color = Literal["red", "blue"]  # type: ignore[attr-defined]
    sys.modules["twice"] = module
    try:
        model = type("Paint", (WireModel,), {"__module__": "twice"})
        with pytest.raises(ValueError, match="Colour and Color are the same word list"):
            _word_lists({model})
    finally:
        del sys.modules["twice"]
