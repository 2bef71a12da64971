"""The package's shape: no module of ``server/tiller`` imports, directly or through others, a
module that imports it back (eagerly or inside a function: both are cycles to untangle); no two
folders (or top-level modules) import each other; and the layers point one way, fronts ->
session -> agent -> (tools, providers)."""

from __future__ import annotations

import ast
from pathlib import Path

import tiller

PACKAGE = Path(tiller.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Each ``tiller`` module -> the ``tiller`` modules it names in an import statement."""
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    targets.add(full if full in modules else node.module)
        graph[name] = {target for target in targets if target in modules and target != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, ..., a]``, or None."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return path[path.index(node):] + [node]
        if node in done:
            return None
        for target in sorted(graph[node]):
            cycle = visit(target, [*path, node])
            if cycle:
                return cycle
        done.add(node)
        return None

    for start in sorted(graph):
        cycle = visit(start, [])
        if cycle:
            return cycle
    return None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_in_the_package() -> None:
    graph = import_graph()
    assert "tiller.fronts.tiller.front" in graph and "tiller.fronts.acp.server" in graph
    assert find_cycle(graph) is None


def part(module: str) -> str:
    """The folder (``fronts.acp`` and ``fronts.tiller`` are two) or top-level module of a name."""
    parts = module.split(".")[1:]
    if parts[:1] == ["fronts"] and len(parts) > 1:
        return ".".join(parts[:2])
    return parts[0] if parts else "tiller"


def two_way_parts(graph: dict[str, set[str]]) -> list[tuple[str, str, list[str]]]:
    """Each pair of parts that import each other, with the imports that make it so."""
    arrows: dict[tuple[str, str], list[str]] = {}
    for module, targets in graph.items():
        for target in targets:
            if part(module) != part(target):
                arrows.setdefault((part(module), part(target)), []).append(f"{module} -> {target}")
    return sorted((a, b, why + arrows[b, a]) for (a, b), why in arrows.items()
                  if (b, a) in arrows and a < b)


def test_the_two_way_finder_finds_a_pair() -> None:
    graph = {
        "tiller.agent.loop": {"tiller.tools.base"}, "tiller.tools.base": {"tiller.agent.abort"},
        "tiller.agent.abort": set(), "tiller.fronts.acp.x": {"tiller.fronts.tiller.y"},
        "tiller.fronts.tiller.y": set(),
    }
    assert [(a, b) for a, b, _ in two_way_parts(graph)] == [("agent", "tools")]


def test_no_two_folders_import_each_other() -> None:
    graph = import_graph()
    assert "tiller.agent.loop" in graph and "tiller.fronts.acp.server" in graph
    assert two_way_parts(graph) == []


def test_the_fronts_come_first_and_the_agent_knows_no_session() -> None:
    """The direction of the layers: fronts -> session -> agent -> (tools, providers)."""
    graph = import_graph()
    below = {"session": {"fronts.tiller", "fronts.acp"},
             "agent": {"session", "fronts.tiller", "fronts.acp", "store", "checkpoints", "mcp"},
             "tools": {"agent", "session", "fronts.tiller", "fronts.acp", "gate"},
             "providers": {"agent", "session", "fronts.tiller", "fronts.acp", "tools"}}
    wrong = sorted(f"{module} -> {target}" for module, targets in graph.items()
                   for target in targets if part(target) in below.get(part(module), set()))
    assert wrong == []
