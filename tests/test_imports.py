"""The package's shape: no module of ``server/tiller`` imports, directly or through others, a
module that imports it back (eagerly or inside a function: both are cycles to untangle); no two
folders (or top-level modules) import each other; the layers point one way, fronts ->
session -> agent -> (tools, providers); and a front reaches a session only through the
methods of ``Session`` and its registry, never past them."""

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


SESSION_INSIDES = frozenset({
    "agent", "gate", "mcp", "checkpoints", "context", "recorder", "plan", "processes", "log",
    "background",
})
"""The attributes that hold a Session's parts (its Agent, permission gate, MCP servers,
checkpoints, project context, log recorder, plan, process scope, log, background processes):
a front reads none of them, on any object (a front has no other object with such an
attribute)."""
BEHIND_THE_SESSION = (
    "tiller.agent", "tiller.gate.permissions", "tiller.gate.shell", "tiller.mcp",
    "tiller.checkpoints", "tiller.context", "tiller.providers", "tiller.store.recorder",
    "tiller.session.plan",
)
"""The parts a Session is made of: a front imports none of them. ``tiller.session``'s own
modules, the protocol's models, the tools' self-descriptions, the store's saved sessions and
``tiller.gate.editor`` (the editor contract a front implements: ``ClientRequest``) are the
front's to use."""


def reaches(tree: ast.Module) -> list[str]:
    """Each place in ``tree`` that reaches past a session's methods: an attribute in
    ``SESSION_INSIDES``, a private attribute (``_name``, not a dunder) of anything but
    ``self``/``cls`` (the registry's dict of live sessions is one), an import from
    ``BEHIND_THE_SESSION``; in source order."""
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            private = node.attr.startswith("_") and not node.attr.endswith("__")
            if node.attr in SESSION_INSIDES or (private and not own):
                found.append((node.lineno, node.col_offset, f".{node.attr}"))
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        found += [(node.lineno, node.col_offset, f"import {name}") for name in names
                  if any(name == part or name.startswith(part + ".")
                         for part in BEHIND_THE_SESSION)]
    return [f"{line}: {what}" for line, _, what in sorted(found)]


def test_the_reach_finder_finds_each_kind_of_reach() -> None:
    source = """
from tiller.agent.compaction import estimate_tokens
from tiller import mcp
import tiller.checkpoints.shadow
from tiller.session.session import Session
from tiller.agentic import fine
session.agent.abort()
mode = session.gate.mode
registry._live.get(sid)
self._registry.lookup(sid)
self._own = session.permission_mode
print(type(x).__name__, saved.close())
"""
    assert [line.split(": ", 1)[1] for line in reaches(ast.parse(source))] == [
        "import tiller.agent.compaction.estimate_tokens", "import tiller.mcp",
        "import tiller.checkpoints.shadow", ".agent", ".gate", "._live",
    ]


def test_the_fronts_reach_a_session_only_through_its_methods() -> None:
    """protocol.md's methods, on both wires, go through ``Session`` (and ``SessionRegistry``):
    no front calls the Agent, sets the gate's mode, starts MCP servers, reads checkpoints or
    the context, or picks a session out of the registry's dict itself."""
    fronts = sorted((PACKAGE / "fronts").rglob("*.py"))
    assert len(fronts) > 10
    found = [f"{path.relative_to(PACKAGE)}:{where}" for path in fronts
             for where in reaches(ast.parse(path.read_text()))]
    assert found == []


def test_only_the_fronts_read_the_methods_params_and_results() -> None:
    """The wire's params and results (``tiller.protocol.models``, ``methods``) are the fronts'
    to translate: the session core takes its own types (``SessionSpec``, not
    ``SessionNewParams``)."""
    graph = import_graph()
    readers = sorted(module for module, targets in graph.items()
                     if targets & {"tiller.protocol.models", "tiller.protocol.methods"}
                     and part(module) not in {"protocol", "fronts.tiller", "fronts.acp"})
    assert readers == []
