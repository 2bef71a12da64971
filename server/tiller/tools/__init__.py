"""Built-in tools. ``default_tools()`` is the set a new session gets.

The tools' modules load on first use (``default_tools()`` or naming a tool class here), not when
``tiller.tools.base`` is imported: answering ``initialize`` needs none of their engines.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tiller.tools.base import Tool, ToolContext, ToolResult

if TYPE_CHECKING:
    from tiller.procs import ProcessScope
    from tiller.tools.bash import BashTool
    from tiller.tools.edit import EditTool
    from tiller.tools.find import FindTool
    from tiller.tools.grep import GrepTool
    from tiller.tools.ls import LsTool
    from tiller.tools.read import ReadTool
    from tiller.tools.todo import TodoTool
    from tiller.tools.write import WriteTool

__all__ = [
    "BashTool",
    "EditTool",
    "FindTool",
    "GrepTool",
    "LsTool",
    "ReadTool",
    "Tool",
    "ToolContext",
    "ToolResult",
    "TodoTool",
    "WriteTool",
    "default_tools",
]

_LAZY = {
    "BashTool": "bash", "EditTool": "edit", "FindTool": "find", "GrepTool": "grep",
    "LsTool": "ls", "ReadTool": "read", "TodoTool": "todo", "WriteTool": "write",
}
"""Tool class -> the module of this package that defines it, imported on first access."""


def __getattr__(name: str) -> Any:
    """Load a tool class's module on first access (PEP 562); other names raise AttributeError."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def default_tools(
    *, sanitize_env: bool = True, processes: ProcessScope | None = None
) -> list[Tool[Any]]:
    """Fresh instances of the core coding tools: read, write, edit, bash, grep, find, ls, and
    todo (the plan).
    ``sanitize_env`` keeps secrets out of the environment of bash commands; ``processes``
    collects what they start (a new scope when None)."""
    from tiller.tools.bash import BashTool
    from tiller.tools.edit import EditTool
    from tiller.tools.find import FindTool
    from tiller.tools.grep import GrepTool
    from tiller.tools.ls import LsTool
    from tiller.tools.read import ReadTool
    from tiller.tools.todo import TodoTool
    from tiller.tools.write import WriteTool

    return [
        ReadTool(), WriteTool(), EditTool(),
        BashTool(sanitize_env=sanitize_env, processes=processes),
        GrepTool(), FindTool(), LsTool(), TodoTool(),
    ]
