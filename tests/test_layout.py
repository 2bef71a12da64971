"""The shape of the agent core, read from the source: the loop is imported by the Agent only,
and each enumeration is spelled once (in ``tiller.types``)."""

from __future__ import annotations

import ast
from typing import get_args

import pytest

from support.paths import PACKAGE
from tiller.types import (
    COMPACTION_REASONS,
    PERMISSION_MODES,
    QUEUE_MODES,
    THINKING_LEVELS,
    StopReason,
)

PACKAGE = PACKAGE


def modules() -> dict[str, ast.Module]:
    return {
        path.relative_to(PACKAGE).with_suffix("").as_posix(): ast.parse(path.read_text())
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def imported(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_only_the_agent_imports_the_loop() -> None:
    importers = sorted(
        name for name, tree in modules().items() if "tiller.agent.loop" in imported(tree)
    )
    assert importers == ["agent/agent"]


def constant_groups(tree: ast.Module) -> list[tuple[int, frozenset[object]]]:
    """Every tuple, list, set or ``Literal[...]`` made only of constants: (line, values)."""
    groups = []
    for node in ast.walk(tree):
        items: list[ast.expr] | None = None
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = list(node.elts)
        elif isinstance(node, ast.Subscript) and getattr(node.value, "id", None) == "Literal":
            inner = node.slice
            items = list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
        if items and all(isinstance(item, ast.Constant) for item in items):
            values = frozenset(item.value for item in items if isinstance(item, ast.Constant))
            groups.append((node.lineno, values))
    return groups


@pytest.mark.parametrize("values", [
    PERMISSION_MODES, QUEUE_MODES, THINKING_LEVELS, COMPACTION_REASONS,
    get_args(StopReason),
], ids=["permission modes", "queue modes", "thinking levels", "compaction reasons",
        "stop reasons (run stop reasons extend them)"])
def test_each_enumeration_is_spelled_once(values: tuple[str, ...]) -> None:
    wanted = frozenset(values)
    spelled = sorted({
        f"{name}.py:{line}"
        for name, tree in modules().items()
        for line, group in constant_groups(tree)
        if group >= wanted
    })
    assert len(spelled) == 1 and spelled[0].startswith(("types.py:", "modes.py:")), spelled
