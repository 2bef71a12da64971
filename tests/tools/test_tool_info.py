"""Tools describe themselves (``ToolInfo``): a tool added later, e.g. an MCP tool, is judged by
the permission gate and shown by the ACP mapping and the editor bridge from its description
alone, with no change anywhere else; and no module outside the tools names a built-in tool."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from support.paths import PACKAGE
from tiller.agent.abort import AbortSignal
from tiller.agent.settings import AgentSettings
from tiller.agent.tool_batch import execute_tool_calls, fail_tool_calls
from tiller.fronts.acp.editor import AcpEditorBridge, BridgedSession
from tiller.fronts.acp.updates import UpdateMapper
from tiller.gate.permissions import Outcome, PermissionGate, PermissionRequest
from tiller.modes import PERMISSION_MODES, PermissionMode, Verdict
from tiller.tools.base import Tool, ToolContext, ToolInfo, ToolResult
from tiller.tools.builtin import default_tools
from tiller.types import AgentEvent, ToolCall, ToolExecutionStart

pytestmark = pytest.mark.anyio

SERVER = PACKAGE


class PathParams(BaseModel):
    path: str


class NoParams(BaseModel):
    pass


class TouchTool(Tool[PathParams]):
    """A tool added later: it changes the file its ``path`` names."""

    name = "touch"
    description = "Create an empty file or update its modification time."
    Params = PathParams
    info = ToolInfo(kind="edit", path_arg="path", title="Touch {path}")

    async def execute(self, params: PathParams, ctx: ToolContext) -> ToolResult:
        (ctx.cwd / params.path).touch()
        return ToolResult.text("touched")


class ClockTool(Tool[NoParams]):
    """A tool that only reads (the time) and names no path."""

    name = "clock"
    description = "The current time."
    Params = NoParams
    info = ToolInfo(mutates=False)

    async def execute(self, params: NoParams, ctx: ToolContext) -> ToolResult:
        return ToolResult.text("noon")


class McpTool(Tool[NoParams]):
    """A tool that declares nothing, as an MCP tool may."""

    name = "deploy"
    description = "Something an MCP server offers."
    Params = NoParams

    async def execute(self, params: NoParams, ctx: ToolContext) -> ToolResult:
        return ToolResult.text("done")


TOOLS: list[Tool[Any]] = [*default_tools(), TouchTool(), ClockTool(), McpTool()]

EDIT_INSIDE: dict[PermissionMode, Verdict] = {
    "ask": "ask", "acceptEdits": "allow", "auto": "allow", "readonly": "deny",
}
EDIT_OUTSIDE: dict[PermissionMode, Verdict] = {
    "ask": "ask", "acceptEdits": "deny", "auto": "allow", "readonly": "deny",
}
UNDECLARED: dict[PermissionMode, Verdict] = {
    "ask": "ask", "acceptEdits": "ask", "auto": "allow", "readonly": "deny",
}


def verdicts(tmp_path: Path, tool: str, args: dict[str, Any]) -> dict[PermissionMode, Verdict]:
    return {
        mode: PermissionGate(mode, [tmp_path], tools=TOOLS).decide(tool, args)[0]
        for mode in PERMISSION_MODES
    }


def test_a_new_mutating_tool_with_a_path_is_gated_like_write(tmp_path: Path) -> None:
    assert verdicts(tmp_path, "touch", {"path": "a.txt"}) == EDIT_INSIDE
    assert verdicts(tmp_path, "write", {"path": "a.txt", "content": ""}) == EDIT_INSIDE
    outside = str(tmp_path.parent / "elsewhere.txt")
    assert verdicts(tmp_path, "touch", {"path": outside}) == EDIT_OUTSIDE
    assert verdicts(tmp_path, "write", {"path": outside, "content": ""}) == EDIT_OUTSIDE


def test_a_tool_that_declares_nothing_may_change_anything(tmp_path: Path) -> None:
    assert verdicts(tmp_path, "deploy", {}) == UNDECLARED
    assert verdicts(tmp_path, "bash", {"command": "make"}) == UNDECLARED
    assert PermissionGate("ask", [tmp_path], tools=TOOLS).decide("deploy", {})[1] == (
        "'deploy' may make changes"
    )


def test_a_tool_that_only_reads_and_names_no_path_is_always_allowed(tmp_path: Path) -> None:
    assert set(verdicts(tmp_path, "clock", {}).values()) == {"allow"}


async def test_the_gate_asks_about_a_new_tool_showing_its_path(tmp_path: Path) -> None:
    asked: list[PermissionRequest] = []

    async def ask(request: PermissionRequest) -> tuple[Outcome, str | None]:
        asked.append(request)
        return "allowOnce", None

    gate = PermissionGate("ask", [tmp_path], tools=TOOLS, ask=ask)
    verdict = await gate(ToolCall(id="c1", name="touch", arguments={}), {"path": "a.txt"})
    assert verdict is not None and not verdict.block
    assert verdict.resolved_path == tmp_path.resolve() / "a.txt"
    [request] = asked
    assert request.preview == {"kind": "path", "path": str(tmp_path.resolve() / "a.txt")}
    assert request.reason == f"'touch' changes {tmp_path.resolve() / 'a.txt'}"


def test_acp_shows_a_new_tool_from_its_description(tmp_path: Path) -> None:
    mapper = UpdateMapper(tmp_path, TOOLS)
    start = ToolExecutionStart(tool_call_id="c1", tool_name="touch", args={"path": "a.txt"},
                               title="Touch a.txt", kind="edit", path=str(tmp_path / "a.txt"))
    [call] = mapper.on_event(start)
    assert call["kind"] == "edit" and call["title"] == "Touch a.txt"
    assert call["locations"] == [{"path": str(tmp_path / "a.txt")}]
    for name in ("deploy", "clock", "no-such-tool"):
        start = ToolExecutionStart(tool_call_id="c2", tool_name=name, args={}, title=name,
                                   kind="other")
        [call] = mapper.on_event(start)
        assert call["kind"] == "other" and call["title"] == name and "locations" not in call


def shown(events: list[AgentEvent]) -> dict[str, tuple[str, str, str | None]]:
    """Each call's (title, kind, path) as its tool_execution_start showed it."""
    return {event.tool_call_id: (event.title, event.kind, event.path)
            for event in events if isinstance(event, ToolExecutionStart)}


async def test_tool_execution_start_shows_a_call_as_its_tool_describes_itself(
    tmp_path: Path,
) -> None:
    calls = [
        ToolCall(id="t", name="touch", arguments={"path": "sub/a.txt"}),
        ToolCall(id="r", name="read", arguments={"path": "/etc/hostname"}),
        ToolCall(id="l", name="ls", arguments={}),
        ToolCall(id="b", name="bash", arguments={"command": "echo one\necho two"}),
        ToolCall(id="d", name="deploy", arguments={}),
        ToolCall(id="u", name="no-such-tool", arguments={"path": "x"}),
    ]
    events: list[AgentEvent] = []
    settings = AgentSettings(tools=TOOLS, cwd=tmp_path)
    await execute_tool_calls(calls, settings, events.append, AbortSignal())
    assert shown(events) == {
        "t": ("Touch sub/a.txt", "edit", str(tmp_path / "sub/a.txt")),
        "r": ("Read /etc/hostname", "read", "/etc/hostname"),
        "l": ("List .", "read", str(tmp_path)),
        "b": ("echo one…", "execute", None),
        "d": ("deploy", "other", None),
        "u": ("no-such-tool", "other", None),
    }
    # Calls answered without running (a reply cut by the output limit) are shown alike.
    events.clear()
    fail_tool_calls(calls[:1], "cut", settings, events.append)
    assert shown(events) == {"t": ("Touch sub/a.txt", "edit", str(tmp_path / "sub/a.txt"))}


async def test_the_editor_bridge_asks_about_a_new_tool_from_its_description(
    tmp_path: Path,
) -> None:
    sent: list[tuple[str, dict[str, Any]]] = []

    async def send(method: str, params: dict[str, Any], timeout: float) -> Any:
        sent.append((method, params))
        return {"outcome": {"outcome": "selected", "optionId": "allow_always"}}

    bridge = AcpEditorBridge(send, lambda _id: BridgedSession(tmp_path, None, TOOLS))
    answer = await bridge("client/requestPermission", {
        "sessionId": "s1", "toolCallId": "c1", "toolName": "touch", "args": {"path": "a.txt"},
        "preview": {"kind": "path", "path": str(tmp_path / "a.txt")}, "reason": "why",
    }, 5.0)
    assert answer == {"outcome": "allowAlways"}
    [(method, question)] = sent
    assert method == "session/request_permission"
    assert question["toolCall"]["kind"] == "edit"
    assert question["toolCall"]["locations"] == [{"path": str(tmp_path / "a.txt")}]
    assert question["options"][1]["name"] == "Always allow touch on a.txt"


def test_each_built_in_tool_describes_arguments_it_has() -> None:
    for tool in default_tools():
        properties = tool.parameters_schema()["properties"]
        for argument in (tool.info.path_arg, tool.info.command_arg):
            assert argument is None or argument in properties, (tool.name, argument)


@pytest.mark.parametrize("module", [
    "gate/permissions.py", "session/session.py", "session/registry.py", "fronts/acp/updates.py",
    "fronts/acp/editor.py", "fronts/acp/server.py", "gate/editor.py", "fronts/tiller/front.py",
    "chat/app.py", "chat/render.py",
])
def test_no_module_outside_the_tools_names_a_built_in_tool(module: str) -> None:
    source = (SERVER / module).read_text(encoding="utf-8")
    names = "|".join(tool.name for tool in default_tools())
    assert re.findall(rf"""["']({names})["']""", source) == []
