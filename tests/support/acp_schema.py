"""ACP's published JSON schema as a check on everything Tiller sends in ACP mode.

The schema is ``schema/v1/schema.json`` of the npm package ``@agentclientprotocol/sdk``, pinned in
tests/acp-sdk/package.json and installed by ``.ci/run`` (``npm ci`` in tests/support/acp-sdk). Every
definition of a method's params or result carries ``x-method`` and ``x-side`` (who serves it),
so a message is checked against exactly its method's definition:

* a request the agent sends (``session/request_permission``, ``fs/*``, ``terminal/*``) against
  the client-side ``…Request``; a notification (``session/update``) against its definition;
* a result against the agent-side ``…Response`` of the client's request it answers (looked up by
  id); an error against ``Error``;
* extension methods (``_…``) only against the JSON-RPC envelope.

``AcpWireCheck.observe`` is an observer for the SDK's connection; ``problems`` lists what did
not conform, one entry per message.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

SCHEMA_PATH = (Path(__file__).parent / "acp-sdk" / "node_modules" / "@agentclientprotocol" / "sdk"
               / "schema" / "v1" / "schema.json")


def _load() -> dict[str, Any]:
    if not SCHEMA_PATH.is_file():
        raise RuntimeError(
            f"{SCHEMA_PATH} is missing: `npm ci` in tests/support/acp-sdk (.ci/run does)"
        )
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
    return schema


SCHEMA = _load()
DEFS: dict[str, Any] = SCHEMA["$defs"]


def _by_method(side: str, suffixes: tuple[str, ...]) -> dict[str, str]:
    return {body["x-method"]: name for name, body in DEFS.items()
            if body.get("x-side") == side and "x-method" in body and name.endswith(suffixes)}


AGENT_REQUESTS = _by_method("client", ("Request",))
"""What the agent may ask the client: method -> definition."""
NOTIFICATIONS = {**_by_method("client", ("Notification",)),
                 **_by_method("protocol", ("Notification",))}
RESPONSES = _by_method("agent", ("Response",))
"""What the agent answers the client's requests with: method -> definition."""


def validate(definition: str, instance: Any) -> list[str]:
    """What is wrong with ``instance`` as ``$defs/definition`` ([] when it conforms)."""
    validator = Draft202012Validator({"$ref": f"#/$defs/{definition}", "$defs": DEFS})
    found = []
    for error in validator.iter_errors(instance):
        error = best_match([error]) if not error.context else best_match(error.context)
        where = "/".join(str(part) for part in error.absolute_path) or "(top)"
        found.append(f"{definition} at {where}: {error.message}")
    return found


class AcpWireCheck:
    """Checks each message of one connection as it passes (see the module docstring)."""

    def __init__(self) -> None:
        self.asked: dict[Any, str] = {}
        self.problems: list[str] = []
        self.checked: list[str] = []

    def client_sent(self, message: dict[str, Any]) -> None:
        """Remember the client's requests, to check the results that answer them."""
        if "method" in message and "id" in message:
            self.asked[message["id"]] = message["method"]

    def agent_sent(self, message: dict[str, Any]) -> None:
        """Check one message the agent sent."""
        found = self._check(message)
        self.problems += [f"{problem}\n    in {json.dumps(message)[:600]}" for problem in found]

    def _check(self, message: dict[str, Any]) -> list[str]:
        if message.get("jsonrpc") != "2.0":
            return ["not a JSON-RPC 2.0 message"]
        method = message.get("method")
        if isinstance(method, str):
            if method.startswith("_"):
                return []  # an extension: only the envelope is specified
            table = AGENT_REQUESTS if "id" in message else NOTIFICATIONS
            if method not in table:
                return [f"{method} is not something an agent sends"]
            self.checked.append(method)
            return validate(table[method], message.get("params"))
        if "error" in message:
            self.checked.append("error")
            return validate("Error", message["error"])
        answered = self.asked.get(message.get("id"))
        if answered is None:
            return [f"a result for no request of the client ({message.get('id')!r})"]
        if answered.startswith("_"):
            return []
        if answered not in RESPONSES:
            return [f"a result for {answered}, which is no ACP method"]
        self.checked.append(f"result:{answered}")
        return validate(RESPONSES[answered], message.get("result"))
