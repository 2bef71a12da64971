"""The shape of the package, read from the source: the loop is imported by the Agent only; each
enumeration is spelled once (in ``tiller.modes`` or ``tiller.types``); a package's
``__init__.py`` holds its docstring only; and every name has one import path, the module that
defines it (no re-exports, no ``__all__`` naming what a module only imports)."""

from __future__ import annotations

import ast
from typing import get_args

import pytest

from support.paths import PACKAGE, REPO
from tiller.modes import PERMISSION_MODES, QUEUE_MODES, THINKING_LEVELS
from tiller.types import COMPACTION_REASONS, StopReason


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


def defined(tree: ast.Module) -> set[str]:
    """The names a module binds at its top level (also inside ``if TYPE_CHECKING:`` blocks)."""
    names: set[str] = set()
    for statement in tree.body:
        nodes = list(ast.walk(statement)) if isinstance(statement, ast.If) else [statement]
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return names


def dotted(relative: str) -> str:
    return "tiller" if relative == "__init__" else "tiller." + relative.removesuffix(
        "/__init__").replace("/", ".")


def test_every_package_init_holds_its_docstring_only() -> None:
    inits = {name: tree for name, tree in modules().items() if name.endswith("__init__")}
    assert len(inits) > 10  # the folders are there
    crowded = sorted(name for name, tree in inits.items() if name != "__init__" and (
        len(tree.body) != 1 or ast.get_docstring(tree) is None))
    assert crowded == []


def test_every_name_is_imported_from_the_module_that_defines_it() -> None:
    trees = {dotted(name): tree for name, tree in modules().items()}
    names = {module: defined(tree) for module, tree in trees.items()}
    names["tiller"] |= {"__version__", "PROTOCOL_VERSION"}
    sources = [path for folder in ("server", "tests", "bench") for path in
               (REPO / folder).rglob("*.py") if "node_modules" not in path.parts]
    detours = []
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in names and node.level == 0:
                where = f"{path.relative_to(REPO)}:{node.lineno}"
                detours += [f"{where}: {alias.name} via {node.module}"
                            for alias in node.names if alias.name not in names[node.module]
                            and f"{node.module}.{alias.name}" not in trees]
    assert len(sources) > 100 and detours == []


def test_every_all_names_only_what_its_module_defines() -> None:
    strays = []
    for name, tree in modules().items():
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                    isinstance(target, ast.Name) and target.id == "__all__"
                    for target in node.targets):
                listed = {element.value for element in ast.walk(node.value)
                          if isinstance(element, ast.Constant)}
                strays += [f"{name}: {stray}" for stray in sorted(listed - defined(tree))]
    assert strays == []


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
