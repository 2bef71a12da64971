"""One table per method: ``tiller.protocol.names`` lists protocol.md's methods, server requests,
notifications and events in the document's order, without importing anything, and
``tiller.protocol.methods`` has exactly one row per name, in the same order; the schema's tables
are built from those rows."""

from __future__ import annotations

import ast
import inspect
import re
import typing

from support.paths import PROTOCOL_MD
from support.schema_check import SCHEMA
from tiller.protocol import methods, names
from tiller.types import AgentEvent

TEXT = PROTOCOL_MD.read_text(encoding="utf-8")


def headings(start: str, end: str) -> list[str]:
    """The backticked names of the ``###`` headings between two ``##`` headings, in order."""
    section = TEXT[TEXT.index(f"\n{start}\n") : TEXT.index(f"\n{end}\n")]
    found = re.findall(r"^### (.*)$", section, flags=re.MULTILINE)
    return [name for heading in found for name in re.findall(r"`([^`]+)`", heading)]


def test_the_methods_are_protocol_md_s_sections_in_order() -> None:
    documented = headings("## Methods (client → server)", "## Requests (server → client)")
    assert [*names.METHODS, *names.NOTIFICATIONS] == documented
    assert re.search(r"^### `\$/cancelRequest` \(notification\)$", TEXT, re.MULTILINE)


def test_the_server_requests_and_events_are_protocol_md_s() -> None:
    assert list(names.SERVER_REQUESTS) == headings("## Requests (server → client)",
                                                   "## Permissions")
    assert sorted(names.EVENT_TYPES) == sorted(
        headings(f"## Notification (server → client): `{names.EVENT_METHOD}`", "## Messages"))


def test_the_event_types_are_the_event_union_in_order() -> None:
    union = [member.model_fields["type"].default
             for member in typing.get_args(typing.get_args(AgentEvent)[0])]
    assert list(names.EVENT_TYPES) == union


def test_each_table_has_one_row_per_name_in_the_same_order() -> None:
    assert list(methods.METHODS) == list(names.METHODS)
    assert list(methods.NOTIFICATIONS) == list(names.NOTIFICATIONS)
    assert list(methods.SERVER_REQUESTS) == list(names.SERVER_REQUESTS)
    assert list(methods.SERVER_NOTIFICATIONS) == list(names.SERVER_NOTIFICATIONS)


def test_the_schema_is_built_from_the_rows() -> None:
    assert list(SCHEMA["x-methods"]) == list(names.METHODS)
    assert list(SCHEMA["x-notifications"]) == list(names.NOTIFICATIONS)
    assert list(SCHEMA["x-serverRequests"]) == list(names.SERVER_REQUESTS)
    assert list(SCHEMA["x-serverNotifications"]) == list(names.SERVER_NOTIFICATIONS)
    assert list(SCHEMA["x-events"]) == list(names.EVENT_TYPES)
    for name, row in methods.METHODS.items():
        entry = SCHEMA["x-methods"][name]
        assert entry["params"]["$ref"] == f"#/$defs/{row.params.__name__}", name
        assert entry["result"]["$ref"] == f"#/$defs/{row.result.__name__}", name


def test_the_names_import_nothing() -> None:
    """``initialize`` reads them: the module must not pull in pydantic or the models."""
    tree = ast.parse(inspect.getsource(names))
    imported = [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]
    assert [ast.unparse(node) for node in imported] == ["from __future__ import annotations"]
