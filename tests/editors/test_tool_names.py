"""Neither editor knows a tool by its name: the Neovim plugin and the VS Code extension show a
call from how the server describes it (``tool_execution_start``'s ``title``, ``kind`` and
``path``; ``session/load``'s ``toolCalls``), so an MCP tool or one added later shows as a
built-in one does. As ``tests/tools/test_tool_info.py`` holds the server to it, this holds the
editors' sources: no built-in tool's name as a string, and no built-in tool's argument read
off a call's arguments by its name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.paths import EDITORS
from tiller.tools.builtin import default_tools

NEOVIM = EDITORS / "neovim"
VSCODE = EDITORS / "vscode"

TOOLS = default_tools()
NAMES = "|".join(tool.name for tool in TOOLS)
ARGUMENTS = "|".join(sorted({name for tool in TOOLS
                             for name in tool.parameters_schema()["properties"]}))
NAMED_TOOL = re.compile(rf"""["'`]({NAMES})["'`]""")
NAMED_ARGUMENT = re.compile(
    rf"""\b(?:args|arguments|parsedArgs)\??(?:\.({ARGUMENTS})\b|\[\s*["'`]({ARGUMENTS})["'`])""")


def sources(root: Path, patterns: tuple[str, ...]) -> list[Path]:
    found = sorted(path for pattern in patterns for path in root.glob(pattern))
    assert found, f"no sources under {root}"
    return found


NEOVIM_SOURCES = sources(NEOVIM, ("lua/**/*.lua", "plugin/*.lua"))
VSCODE_SOURCES = [path for path in sources(VSCODE, ("src/*.ts", "media/*.js"))
                  if path.name != "protocol.ts"]
"""protocol.ts is left out: it is the wire's types (no behaviour), whose comments quote
protocol.md (``'write' changes …``), and it is to be generated from ``tiller schema``."""


def named(text: str) -> list[str]:
    """Each place in ``text`` that names a built-in tool or reads one's argument by name, as
    ``line: what``."""
    return [f"{text.count(chr(10), 0, match.start()) + 1}: {match.group(0)}"
            for pattern in (NAMED_TOOL, NAMED_ARGUMENT) for match in pattern.finditer(text)]


def test_the_check_finds_a_tool_named_in_either_language() -> None:
    assert named("if (name === 'bash') { pick(args.command) }\n"
                 "if name == \"edit\" then return arguments['path'] end\n"
                 "const title = `grep`; show(parsedArgs?.pattern)\n") == [
        "1: 'bash'", '2: "edit"', "3: `grep`", "1: args.command", "2: arguments['path'",
        "3: parsedArgs?.pattern"]
    assert named("call.title; event.path; 'bashful'; params.path; reader('ls -la')") == []


@pytest.mark.parametrize("path", NEOVIM_SOURCES, ids=lambda path: path.name)
def test_the_neovim_plugin_names_no_tool(path: Path) -> None:
    assert named(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("path", VSCODE_SOURCES, ids=lambda path: path.name)
def test_the_vscode_extension_names_no_tool(path: Path) -> None:
    assert named(path.read_text(encoding="utf-8")) == []
