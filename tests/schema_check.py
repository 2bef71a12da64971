"""The protocol's JSON Schema (``tiller.schema``) as checks for tests.

``problems(pointer, instance)`` validates ``instance`` against the part of the schema at JSON
pointer ``pointer`` (``""`` is the root: any one message) and returns what is wrong, one line
each ("" when fine). ``WireLog`` checks a whole conversation: requests and notifications by
their method, responses by the method of the request they answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry, Resource

from tiller.schema import SCHEMA_ID, protocol_schema

SCHEMA = protocol_schema()
_REGISTRY: Registry[Any] = Registry().with_resource(SCHEMA_ID, Resource.from_contents(SCHEMA))


def pointer(*parts: str) -> str:
    """The JSON pointer of ``parts`` (``pointer("x-methods", "agent/prompt")``)."""
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in parts)


def problems(at: str, instance: Any) -> list[str]:
    """What is wrong with ``instance`` as the schema at pointer ``at`` describes it."""
    validator = Draft202012Validator({"$ref": f"{SCHEMA_ID}#{at}"}, registry=_REGISTRY)
    found = []
    for error in validator.iter_errors(instance):
        error = _closest(error)
        where = "/".join(str(part) for part in error.absolute_path) or "(top)"
        found.append(f"{at or '(root)'} at {where}: {error.message}")
    return found


def _closest(error: ValidationError) -> ValidationError:
    """For "no branch of a oneOf/anyOf matched", the error inside the branch whose tag (a
    ``const`` such as ``role`` or ``type``) did match, if exactly one did."""
    if not error.context:
        return error
    branches: dict[Any, list[ValidationError]] = {}
    for sub in error.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    tagged = [errors for errors in branches.values()
              if not any(sub.validator == "const" for sub in errors)]
    return _closest(best_match(tagged[0] if len(tagged) == 1 else error.context))


class WireLog:
    """Checks every message of one connection; ``sent`` by the client, ``received`` from the
    server, each in order. ``problems`` lists what does not conform; ``checked`` names what was
    checked, as ``("method" | "result" | "error" | "event", name)``."""

    def __init__(self, sent: Iterable[dict[str, Any]], received: Iterable[dict[str, Any]]):
        self.problems: list[str] = []
        self.checked: set[tuple[str, str]] = set()
        sent, received = list(sent), list(received)
        client_requests = {m["id"]: m["method"] for m in sent if "method" in m and "id" in m}
        server_requests = {m["id"]: m["method"] for m in received if "method" in m and "id" in m}
        for message in sent:
            self._check(message, "x-methods", "x-notifications", server_requests,
                        "x-serverRequests")
        for message in received:
            self._check(message, "x-serverRequests", "x-serverNotifications", client_requests,
                        "x-methods")

    def _check(self, message: dict[str, Any], requests: str, notifications: str,
               answered: dict[Any, str], answered_table: str) -> None:
        found = problems("", message)
        method = message.get("method")
        if method is not None:
            table = requests if "id" in message else notifications
            found += problems(pointer(table, method, "params"), message.get("params", {}))
            self.checked.add(("method", method))
            if method == "agent/event":
                self.checked.add(("event", message["params"]["type"]))
        elif "result" in message:
            answers = answered.get(message.get("id"))
            if answers is None:
                found.append(f"a result for no request: {message}")
            else:
                found += problems(pointer(answered_table, answers, "result"), message["result"])
                self.checked.add(("result", answers))
        else:
            self.checked.add(("error", str(message.get("error", {}).get("code"))))
        self.problems += [f"{problem}\n    in {message}" for problem in found]
