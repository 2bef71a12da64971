"""The protocol's JSON Schema (``tiller.protocol.schema``) as checks for tests.

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

from tiller.protocol.schema import SCHEMA_ID, protocol_schema

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
    """Checks every message the server sent on one connection (``received``, in order): requests
    and notifications by their method, responses by the method of the client's request (from
    ``sent``) they answer. ``problems`` lists what does not conform; ``checked`` names what was
    checked, as ``("method" | "result" | "error" | "event", name)``."""

    def __init__(self, sent: Iterable[dict[str, Any]], received: Iterable[dict[str, Any]]):
        self.problems: list[str] = []
        self.checked: set[tuple[str, str]] = set()
        asked = {m["id"]: m["method"] for m in sent if "method" in m and "id" in m}
        for message in received:
            found = self._check(message, asked)
            self.problems += [f"{problem}\n    in {message}" for problem in found]

    def _check(self, message: dict[str, Any], asked: dict[Any, str]) -> list[str]:
        """The problems of the part that depends on the method, else of the whole message."""
        found: list[str] = []
        method = message.get("method")
        if method is not None:
            table = "x-serverRequests" if "id" in message else "x-serverNotifications"
            if method not in SCHEMA[table]:
                return [f"{method} is not in {table}"]
            found = problems(pointer(table, method, "params"), message.get("params", {}))
            self.checked.add(("method", method))
            if method == "agent/event":
                self.checked.add(("event", message["params"]["type"]))
        elif "result" in message:
            answers = asked.get(message.get("id"))
            if answers not in SCHEMA["x-methods"]:
                return [f"a result for no known request ({answers})"]
            found = problems(pointer("x-methods", answers, "result"), message["result"])
            self.checked.add(("result", answers))
        else:
            self.checked.add(("error", str(message.get("error", {}).get("code"))))
        return found or problems("", message)
