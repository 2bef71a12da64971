"""``tiller schema``: the wire protocol as one JSON Schema (draft 2020-12), built from the models.

``protocol_schema()`` reads the method tables of ``tiller.protocol.methods`` (the single source
of truth), the event union of ``tiller.types`` and the error classes of ``tiller.errors``; nothing
here restates a field. The document (protocol.md, "Schema", says how to use it):

- ``$defs``: every model, as on the wire (camelCase; an optional field is absent, never null).
  Objects are closed: a field this version does not define does not validate (the server
  still ignores unknown params, for newer clients). Fields the server always sends are
  required in results and events; in params only what the server requires is.
- each closed word list (a ``Literal`` alias of the models' modules: ``PermissionMode``...) is
  one ``$defs`` entry, referenced by the fields that use it;
- the root validates any single message: a request, notification or response, either way;
- ``x-methods``/``x-serverRequests``: method -> ``{params, result}``; ``x-notifications``/
  ``x-serverNotifications``: method -> ``{params}``; ``x-events``: event type -> its params
  (``{sessionId, seq, type, ...}``). Each value is a schema (a ``$ref`` into ``$defs``).
"""

from __future__ import annotations

import json
import sys
import typing
from collections.abc import Sequence
from typing import Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, models_json_schema

from tiller import PROTOCOL_VERSION
from tiller.errors import (
    JSONRPC_ERRORS,
    AgentBusyError,
    CannotContinueError,
    CheckpointsOffError,
    CommandFailedError,
    NoActiveRunError,
    PromptBlockedError,
    ProviderNotConfiguredError,
    RequestError,
    ResourceLimitError,
    RunFailedError,
    SessionLogError,
    UnknownEntryError,
    UnknownProcessError,
    UnknownSessionError,
)
from tiller.protocol.methods import METHODS, NOTIFICATIONS, SERVER_NOTIFICATIONS, SERVER_REQUESTS
from tiller.protocol.models import EmptyResult
from tiller.types import AgentEvent, AssistantMessage, ToolResultMessage, UserMessage, WireModel

__all__ = ["SCHEMA_ID", "main", "protocol_schema"]

SCHEMA_ID = f"urn:tiller:protocol:{PROTOCOL_VERSION}"

TILLER_ERRORS: tuple[type[RequestError], ...] = (
    AgentBusyError, NoActiveRunError, CannotContinueError, UnknownSessionError,
    ProviderNotConfiguredError, UnknownEntryError, SessionLogError, CheckpointsOffError,
    CommandFailedError, ResourceLimitError, RunFailedError, PromptBlockedError,
    UnknownProcessError,
)
"""Every code a response's ``error`` may carry (protocol.md, "Errors")."""

EVENTS: tuple[type[WireModel], ...] = typing.get_args(typing.get_args(AgentEvent)[0])
MESSAGES = (UserMessage, AssistantMessage, ToolResultMessage)


class _WireSchema(GenerateJsonSchema):
    """Serialization mode is what ``WireModel.dump`` sends: a field with a default other than
    None is always present, so it is required. A constant field (a union's tag: ``type``,
    ``role``, ``kind``) is required both ways: the union needs it to pick the model."""

    def field_is_required(self, field: Any, total: bool) -> bool:
        schema = field["schema"]
        if schema["type"] == "default":
            inner = schema.get("schema", {})
            if inner.get("type") == "literal" and len(inner.get("expected", ())) == 1:
                return True
            if self.mode == "serialization":
                return "default_factory" in schema or schema.get("default") is not None
        return bool(super().field_is_required(field, total))


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/$defs/{name}"}


def _wire_defaults(schema: dict[str, Any]) -> None:
    """Optional fields are omitted, never null: drop null from each property of every object."""
    properties: dict[str, dict[str, Any]] = schema.get("properties", {})
    for name, prop in properties.items():
        prop.pop("title", None)
        if "default" in prop and prop["default"] is None:
            del prop["default"]
        options = prop.get("anyOf")
        if options and {"type": "null"} in options:
            rest = [option for option in options if option != {"type": "null"}]
            del prop["anyOf"]
            prop.update(rest[0] if len(rest) == 1 else {"anyOf": rest})
            if name in schema.get("required", []):
                schema["required"].remove(name)
    if not schema.get("required", True):
        del schema["required"]
    if schema.get("type") == "object":
        schema.setdefault("additionalProperties", False)


def _model_defs() -> tuple[dict[str, Any], dict[tuple[type[WireModel], str], str]]:
    """``$defs`` of every model, and (model, mode) -> its def name."""
    inputs: list[tuple[type[WireModel], JsonSchemaMode]] = []
    for params, result in METHODS.values():
        inputs += [(params, "validation"), (result, "serialization")]
    for params in NOTIFICATIONS.values():
        inputs.append((params, "validation"))
    for server_params, answer in SERVER_REQUESTS.values():
        inputs += [(server_params, "serialization"), (answer or EmptyResult, "validation")]
    for maybe_params in SERVER_NOTIFICATIONS.values():
        if maybe_params is not None:
            inputs.append((maybe_params, "serialization"))
    inputs += [(event, "serialization") for event in EVENTS]
    inputs += [(message, "serialization") for message in MESSAGES]
    keys, generated = models_json_schema(
        inputs, ref_template="#/$defs/{model}", schema_generator=_WireSchema
    )
    defs: dict[str, Any] = generated["$defs"]
    for schema in defs.values():
        _wire_defaults(schema)
    _name_word_lists(defs, {model for model, _ in inputs})
    names: dict[tuple[type[WireModel], str], str] = {
        (model, mode): value["$ref"].rsplit("/", 1)[1]  # type: ignore[misc]
        for (model, mode), value in keys.items()
    }
    return defs, names


def _word_lists(models: set[type[WireModel]]) -> dict[tuple[Any, ...], str]:
    """The closed word lists (``Literal`` aliases: ``PermissionMode``, ``StopReason``...) that
    the models' modules name: values -> name. Two names for the same values are refused."""
    found: dict[tuple[Any, ...], str] = {}
    for module in sorted({sys.modules[model.__module__] for model in models}, key=str):
        for name, value in vars(module).items():
            if name.startswith("_") or typing.get_origin(value) is not typing.Literal:
                continue
            values = typing.get_args(value)
            if found.setdefault(values, name) != name:
                raise ValueError(f"{found[values]} and {name} are the same word list: {values}")
    return found


def _name_word_lists(defs: dict[str, Any], models: set[type[WireModel]]) -> None:
    """Each enum of ``defs`` that is a named word list becomes a ``$ref`` to ``$defs/<name>``,
    so the schema names it once (for clients that generate types from it)."""
    lists = _word_lists(models)

    def visit(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                visit(item)
        elif isinstance(node, dict):
            name = lists.get(tuple(node.get("enum", ())))
            if name is not None and node.get("type") == "string":
                defs[name] = {"title": name, "type": "string", "enum": node.pop("enum")}
                del node["type"]
                node["$ref"] = f"#/$defs/{name}"
            for value in node.values():
                visit(value)

    visit(list(defs.values()))


def _error_object() -> dict[str, Any]:
    codes: list[dict[str, Any]] = [{"const": cls.code, "title": cls.__name__}
                                   for cls in JSONRPC_ERRORS]
    for error in TILLER_ERRORS:
        code: dict[str, Any] = {"const": error.code, "title": error.__name__}
        if error.__doc__:
            code["description"] = " ".join(error.__doc__.split())
        codes.append(code)
    return {
        "type": "object",
        "properties": {"code": {"oneOf": codes}, "message": {"type": "string"}, "data": {}},
        "required": ["code", "message"],
        "additionalProperties": False,
    }


def _message(method: str | None, params: dict[str, Any] | None, *, has_id: bool,
             params_required: bool) -> dict[str, Any]:
    """One JSON-RPC message shape: a request (``has_id``) or a notification of ``method``."""
    properties: dict[str, Any] = {"jsonrpc": {"const": "2.0"}, "method": {"const": method}}
    required = ["jsonrpc", "method"]
    if has_id:
        properties["id"] = _ref("Id")
        required.append("id")
    if params is not None:
        properties["params"] = params
        if params_required:
            required.append("params")
    return {"type": "object", "properties": properties, "required": required,
            "additionalProperties": False}


PARENT_SESSION = "a subagent's session: the session whose task call started it"
PARENT_CALL = "a subagent's session: the parent's task call"


def _requires_params(defs: dict[str, Any], name: str) -> bool:
    return bool(defs[name].get("required"))


def protocol_schema() -> dict[str, Any]:
    """The whole protocol as one JSON Schema document (see the module docstring)."""
    defs, names = _model_defs()
    event_names = [names[(event, "serialization")] for event in EVENTS]
    for name in event_names:  # agent/event params: the event plus its session and sequence
        event = defs[name]
        event["properties"] = {
            "sessionId": {"type": "string"},
            "parentSessionId": {"type": "string", "description": PARENT_SESSION},
            "parentToolCallId": {"type": "string", "description": PARENT_CALL},
            "seq": {"type": "integer", "minimum": 1}, **event["properties"]}
        event["required"] = ["sessionId", "seq", *event.get("required", [])]
    defs["AgentEvent"] = {"oneOf": [_ref(name) for name in event_names]}
    defs["Message"] = {"oneOf": [_ref(names[(m, "serialization")]) for m in MESSAGES]}
    defs["Id"] = {"type": ["integer", "string"]}
    defs["ErrorObject"] = _error_object()

    methods: dict[str, Any] = {}
    requests = []
    for method, (params, result_model) in METHODS.items():
        name = names[(params, "validation")]
        methods[method] = {"params": _ref(name),
                           "result": _ref(names[(result_model, "serialization")])}
        requests.append(_message(method, _ref(name), has_id=True,
                                 params_required=_requires_params(defs, name)))
    notifications: dict[str, Any] = {}
    for method, params in NOTIFICATIONS.items():
        name = names[(params, "validation")]
        notifications[method] = {"params": _ref(name)}
    server_requests: dict[str, Any] = {}
    for method, (params, answer) in SERVER_REQUESTS.items():
        name = names[(params, "serialization")]
        answer_schema = _ref(names[(answer or EmptyResult, "validation")])
        if answer is None:  # the client's answer is ignored: {} or null
            answer_schema = {"anyOf": [answer_schema, {"type": "null"}]}
        server_requests[method] = {"params": _ref(name), "result": answer_schema}
    server_notifications: dict[str, Any] = {}
    for method, maybe_params in SERVER_NOTIFICATIONS.items():
        params_ref = (_ref(names[(maybe_params, "serialization")]) if maybe_params
                      else _ref("AgentEvent"))
        server_notifications[method] = {"params": params_ref}

    def shapes(table: dict[str, Any], *, has_id: bool) -> list[dict[str, Any]]:
        return [_message(method, entry["params"], has_id=has_id, params_required=True)
                for method, entry in table.items()]

    defs["ClientRequest"] = {"oneOf": requests}
    defs["ClientNotification"] = {"oneOf": shapes(notifications, has_id=False)}
    defs["ServerRequest"] = {"oneOf": shapes(server_requests, has_id=True)}
    defs["ServerNotification"] = {"oneOf": shapes(server_notifications, has_id=False)}
    id_or_null = {"anyOf": [_ref("Id"), {"type": "null"}]}
    defs["Response"] = {"oneOf": [
        {"type": "object", "required": ["jsonrpc", "id", "result"], "additionalProperties": False,
         "properties": {"jsonrpc": {"const": "2.0"}, "id": id_or_null, "result": {}}},
        {"type": "object", "required": ["jsonrpc", "id", "error"], "additionalProperties": False,
         "properties": {"jsonrpc": {"const": "2.0"}, "id": id_or_null,
                        "error": _ref("ErrorObject")}},
    ]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"Tiller wire protocol {PROTOCOL_VERSION}",
        "description": "Any one JSON-RPC message of Tiller's protocol (protocol.md). A response's "
                       "result is checked by x-methods/x-serverRequests, which know its method.",
        "x-protocolVersion": PROTOCOL_VERSION,
        "x-methods": methods,
        "x-notifications": notifications,
        "x-serverRequests": server_requests,
        "x-serverNotifications": server_notifications,
        "x-events": {EVENTS[i].model_fields["type"].default: _ref(name)
                     for i, name in enumerate(event_names)},
        "anyOf": [_ref(name) for name in ("ClientRequest", "ClientNotification",
                                          "ServerRequest", "ServerNotification", "Response")],
        "$defs": dict(sorted(defs.items())),
    }


def main(argv: Sequence[str]) -> int:
    """``tiller schema``: print the schema to stdout; no arguments."""
    if argv:
        print("usage: tiller schema  (prints the protocol's JSON Schema)", file=sys.stderr)
        return 2
    json.dump(protocol_schema(), sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0
