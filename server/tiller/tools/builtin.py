"""The built-in tools: ``default_tools()`` is the set a new session gets.

The tools' modules load on first use (``default_tools()``), not when ``tiller.tools.base`` is
imported: answering ``initialize`` needs none of their engines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tiller.tools.base import Tool

if TYPE_CHECKING:
    from tiller.procs import ProcessScope
    from tiller.sandbox.command import CommandSandbox
    from tiller.tools.background import ProcessTable

__all__ = ["default_tools"]


def default_tools(
    *, sanitize_env: bool = True, processes: ProcessScope | None = None,
    sandbox: CommandSandbox | None = None, background: ProcessTable | None = None,
) -> list[Tool[Any]]:
    """Fresh instances of the core coding tools: read, write, edit, bash, grep, find, ls,
    todo (the plan), and process_output, process_kill and process_list (bash's background
    processes).
    ``sanitize_env`` keeps secrets out of the environment of bash commands; ``processes``
    collects what they start (a new scope when None); ``sandbox``: where they run (None:
    unsandboxed); ``background``: the background processes (a new table when None)."""
    from tiller.procs import ProcessScope
    from tiller.tools.background import ProcessTable
    from tiller.tools.bash import BashTool
    from tiller.tools.edit import EditTool
    from tiller.tools.find import FindTool
    from tiller.tools.grep import GrepTool
    from tiller.tools.ls import LsTool
    from tiller.tools.process import ProcessKillTool, ProcessListTool, ProcessOutputTool
    from tiller.tools.read import ReadTool
    from tiller.tools.todo import TodoTool
    from tiller.tools.write import WriteTool

    processes = processes or ProcessScope()
    table = background or ProcessTable(processes)
    return [
        ReadTool(), WriteTool(), EditTool(),
        BashTool(sanitize_env=sanitize_env, processes=processes, sandbox=sandbox,
                 background=table),
        GrepTool(), FindTool(), LsTool(), TodoTool(),
        ProcessOutputTool(table), ProcessKillTool(table), ProcessListTool(table),
    ]
