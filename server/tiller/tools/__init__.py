"""Built-in tools. ``default_tools()`` is the set a new session gets."""

from __future__ import annotations

from typing import Any

from tiller.procs import ProcessScope
from tiller.tools.base import Tool, ToolContext, ToolResult
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


def default_tools(
    *, sanitize_env: bool = True, processes: ProcessScope | None = None
) -> list[Tool[Any]]:
    """Fresh instances of the core coding tools: read, write, edit, bash, grep, find, ls, and
    todo (the plan).
    ``sanitize_env`` keeps secrets out of the environment of bash commands; ``processes``
    collects what they start (a new scope when None)."""
    return [
        ReadTool(), WriteTool(), EditTool(),
        BashTool(sanitize_env=sanitize_env, processes=processes),
        GrepTool(), FindTool(), LsTool(), TodoTool(),
    ]
