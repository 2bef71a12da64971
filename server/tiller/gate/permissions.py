"""Permission policy: which tool calls run, which wait for the user's answer, which are denied.

``PermissionGate`` is the Agent's ``before_tool_call`` hook. Per session it applies, in order:
the config file's rules, the session's remembered ``allowAlways``/``rejectAlways`` answers, then
the mode. The gate never knows a tool by name: it judges a call by how its tool describes itself
(``tiller.tools.base.ToolInfo``), looked up in the session's tool list:

===============  ====================  =======================  ================  ===========
mode             changes a file in     may change anything      any path outside  other calls
                 the ws (mutates,      (mutates, no path:       the ws            (reads in
                 path: write, edit)    bash; undeclared tools)                    the ws)
===============  ====================  =======================  ================  ===========
``ask``          ask                   ask                      ask               allow
``acceptEdits``  allow                 ask                      deny              allow
``auto``         allow                 allow                    allow             allow
``readonly``     deny                  deny                     deny              allow
===============  ====================  =======================  ================  ===========

A **protected** path (tiller.gate.protected: ``.git/``, Tiller's own folders, ``.vscode/``,
``.envrc``…) is never changed by a file tool without a question in any mode but ``auto``:
``acceptEdits`` asks for it, an ``allow`` rule and a remembered ``allowAlways`` do not cover it,
and ``allowAlways`` on it allows once without being remembered. ``deny`` still denies.

For a command tool the rules' ``command`` and the remembered answers match each simple command
of the command line, parsed as shell (tiller.gate.shell): an answer never covers more
than the command the user saw, and a command the parser cannot vouch for is never allowed by
them.

With the session's command sandbox (``sandbox``, tiller.sandbox.command) a command is judged
by how it would run (``SandboxUse``), decided once and handed to the tool with the verdict
(``BeforeToolCallResult.sandbox``): one the sandbox must refuse is denied first; in ``ask``
and ``acceptEdits`` one that runs sandboxed without network runs without a question
(``auto_allow``); one that asks to leave the sandbox (``escalate``) asks, saying why, and is
denied in ``auto`` unless ``auto_escalate``. A remembered "always" covers the level it was
given at and those below (sandboxed, with network, unsandboxed: ``CommandMemory``).

"Outside" means the real path (symlinks followed) is not under a workspace root. The real path
is resolved once per call; the verdict, the preview the user sees and the path the tool then
acts on (``BeforeToolCallResult.resolved_path``) are all that one path. Asking goes
through the injected ``ask`` (a ``client/requestPermission`` request); a client that cannot be
asked, fails, or does not answer in time counts as a rejection. A rejection is an error tool
result with the user's reason; the run goes on.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio

from tiller.agent.tool_batch import BeforeToolCallResult
from tiller.config import PermissionRule
from tiller.errors import ToolError
from tiller.frozen import frozen
from tiller.gate.protected import ProtectedPaths
from tiller.gate.shell import UNSANDBOXED, CommandMemory, decide_command
from tiller.modes import PermissionMode, Verdict
from tiller.sandbox.command import CommandSandbox
from tiller.sandbox.use import SandboxUse
from tiller.tools.base import EditorFiles, Tool, ToolInfo, describe, find_tool
from tiller.tools.files import resolve_path, unified_diff
from tiller.tools.safefs import pin
from tiller.types import ToolCall

__all__ = ["OPTIONS", "RULE_ASK", "Ask", "Outcome", "PermissionGate", "PermissionRequest"]

Outcome = Literal["allowOnce", "allowAlways", "rejectOnce", "rejectAlways"]
OPTIONS: list[Outcome] = ["allowOnce", "allowAlways", "rejectOnce", "rejectAlways"]


@frozen
class PermissionRequest:
    """What the user is asked about; ``preview`` is what the editor shows (for a command,
    with how it would run: ``sandbox``)."""

    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    preview: dict[str, Any]
    reason: str


Ask = Callable[[PermissionRequest], Awaitable[tuple[Outcome, str | None]]]
RULE_ASK = "a permission rule says ask"
"""How a verdict that an ``ask`` rule gave begins (here and in tiller.gate.shell)."""


@dataclass
class PermissionGate:
    """One session's policy, usable as ``before_tool_call``. ``tools`` are the session's tools,
    whose descriptions the calls are judged by (a name not among them declares nothing);
    ``ask`` is None when the client cannot answer permission requests; ``waiting`` is told when
    a call waits for an answer."""

    mode: PermissionMode
    roots: Sequence[Path]
    tools: Sequence[Tool[Any]] = field(kw_only=True)
    rules: Sequence[PermissionRule] = ()
    ask: Ask | None = None
    files: EditorFiles | None = None
    waiting: Callable[[ToolCall], None] = field(default=lambda _call: None)
    remembered: dict[tuple[str, str], bool] = field(default_factory=dict)
    commands: CommandMemory = field(default_factory=CommandMemory)
    protected: ProtectedPaths = field(default_factory=ProtectedPaths)
    sandbox: CommandSandbox | None = None

    async def __call__(
        self, call: ToolCall, args: dict[str, Any],
        hook: tuple[Literal["allow", "ask"], str | None] | None = None,
    ) -> BeforeToolCallResult | None:
        """The verdict on ``call``. ``hook``: the PreToolUse hooks' permission decision and
        reason (tiller.hooks): ``ask`` asks where the call would be allowed; ``allow`` allows
        where the mode would ask, but not past a deny, an ``ask`` rule, a protected path or a
        command leaving the sandbox."""
        path = self._path_of(call.name, args)
        use = self._plan(call.name, args)
        verdict, reason, key = self.decide(call.name, args, path, use)
        if hook is not None and verdict != "deny":
            verdict, reason = self._hooked(call.name, verdict, reason, hook, path, use)
        if verdict == "allow":
            return self._allowed(path, use)
        if verdict == "deny":
            return BeforeToolCallResult(block=True, reason=reason)
        if self.ask is None:
            return BeforeToolCallResult(
                block=True,
                reason=f"{reason}, but the client cannot be asked (it did not declare the "
                "permissions capability); change the permission mode to allow it",
            )
        return await self._ask_user(call, args, reason, key, path, use)

    def _hooked(
        self, tool: str, verdict: Verdict, reason: str,
        hook: tuple[Literal["allow", "ask"], str | None], path: Path | None,
        use: SandboxUse | None,
    ) -> tuple[Verdict, str]:
        """``verdict`` (allow or ask) as a PreToolUse hook's decision changes it."""
        decision, why = hook
        because = f": {why}" if why else ""
        if decision == "ask" and verdict == "allow":
            return "ask", f"a PreToolUse hook asks to confirm '{tool}'{because}"
        if decision == "allow" and verdict == "ask":
            held = (RULE_ASK in reason or self._protected(describe(self.tools, tool), path)
                    or use is not None and use.escalated)
            if not held:
                return "allow", f"a PreToolUse hook allowed it{because}"
        return verdict, reason

    def may_escalate(self) -> bool:
        """A command asking to leave the sandbox can be allowed now: the mode asks the user
        (and the client can answer), or it is ``auto`` with ``auto_escalate``."""
        if self.mode in ("ask", "acceptEdits"):
            return self.ask is not None
        return self.mode == "auto" and self.sandbox is not None and \
            self.sandbox.settings.auto_escalate

    def _plan(self, tool: str, args: dict[str, Any]) -> SandboxUse | None:
        """How a command tool's call would run in the session's sandbox (None: not a command
        tool, or no sandbox)."""
        info = describe(self.tools, tool)
        if self.sandbox is None or info.command_arg is None:
            return None
        escalate, why = args.get("escalate"), args.get("reason")
        return self.sandbox.plan(escalate if escalate in ("network", "unsandboxed") else None,
                                 why if isinstance(why, str) else None)

    def decide(
        self, tool: str, args: dict[str, Any], path: Path | None = None,
        use: SandboxUse | None = None,
    ) -> tuple[Verdict, str, str]:
        """The verdict for a call, a sentence saying why, and the key a remembered answer for
        it is stored under (the resolved path; the command for a command tool). ``path`` is
        the call's real path when the caller resolved it already (else it is resolved here);
        ``use``: how a command would run (None: unsandboxed, as without a sandbox)."""
        info = describe(self.tools, tool)
        command = info.command(args)
        if command is not None:
            return (*self._decide_command(tool, info, command, use), command)
        path = path if path is not None else self._path_of(tool, args)
        key = str(path or "")
        protected = self._protected(info, path)
        for rule in self.rules:
            if self._matches(rule, tool, path) and not (protected and rule.action == "allow"):
                return rule.action, f"a permission rule says {rule.action}", key
        if (tool, key) in self.remembered and not (protected and self.remembered[(tool, key)]):
            allowed = self.remembered[(tool, key)]
            return ("allow" if allowed else "deny"), "the user rejected this earlier", key
        outside = path is not None and not self._inside(path)
        verdict, reason = self._by_mode(tool, info, outside, path)
        if protected and self.mode != "auto" and verdict != "deny":
            return "ask", f"'{tool}' changes {path}, which is protected ({protected})", key
        return verdict, reason, key

    def _decide_command(
        self, tool: str, info: ToolInfo, command: str, use: SandboxUse | None
    ) -> tuple[Verdict, str]:
        """A command's verdict and why: refused by the sandbox, then rules and remembered
        answers (at the command's level), then the sandbox's auto-allow and escalation, then
        the mode."""
        if use is not None and use.refused:
            return "deny", use.refused
        level = use.level if use is not None else UNSANDBOXED
        verdict, reason = decide_command(command, tool, self.rules, self.commands, level)
        if verdict is not None:
            return verdict, reason
        sandbox = self.sandbox
        if use is not None and sandbox is not None and self.mode in ("ask", "acceptEdits"):
            if use.sandboxed and not use.network and sandbox.settings.auto_allow:
                return "allow", "it runs in the sandbox"
        if use is not None and use.escalated and self.mode == "auto" and not self.may_escalate():
            return "deny", (
                f"'{tool}' asks to {_wants(use)} ({use.reason}), but in the auto permission "
                "mode commands never leave the sandbox: do it within the sandbox, or tell the "
                "user (they can allow it: [sandbox] auto_escalate = true or network = true, "
                "or the ask mode)")
        verdict, by_mode = self._by_mode(tool, info, False, None)
        if verdict == "ask" and use is not None and use.escalated:
            by_mode = f"'{tool}' asks to {_wants(use)}: {use.reason}"
        elif verdict == "ask" and use is not None and not use.sandboxed:
            by_mode = f"{by_mode}, unsandboxed ({use.reason})"
        elif verdict == "ask" and use is not None and use.network:
            by_mode = f"{by_mode} in the sandbox, with network access"
        return verdict, f"{by_mode} ({reason})" if verdict == "ask" and reason else by_mode

    def _protected(self, info: ToolInfo, path: Path | None) -> str | None:
        """Why a call that changes ``path`` touches a protected path (None if it does not)."""
        if path is None or not info.mutates or info.path_arg is None:
            return None
        return self.protected.why(path, self.roots)

    def _by_mode(
        self, tool: str, info: ToolInfo, outside: bool, path: Path | None
    ) -> tuple[Verdict, str]:
        """The mode's verdict (the table in this module's docstring) and why."""
        mode = self.mode
        if mode == "auto" or info.delegates:  # a subagent's calls are judged in its session
            return "allow", ""
        where = f"{path} is outside the workspace" if outside else ""
        if info.command_arg is not None:
            if mode == "readonly":
                return "deny", "running commands is not allowed in read-only mode"
            return "ask", f"'{tool}' runs a command"
        if info.mutates and info.path_arg is not None:
            action = f"'{tool}' changes {path}"
            if mode == "readonly":
                return "deny", f"{action} and the session is read-only"
            if outside:
                return ("ask" if mode == "ask" else "deny"), where
            return ("ask" if mode == "ask" else "allow"), action
        if info.mutates:
            action = f"'{tool}' may make changes"
            if mode == "readonly":
                return "deny", f"{action} and the session is read-only"
            return "ask", action
        if outside:
            return ("ask" if mode == "ask" else "deny"), where
        return "allow", ""

    def _path_of(self, tool: str, args: dict[str, Any]) -> Path | None:
        """The real path of the call's path argument; None without one (or without roots)."""
        raw = describe(self.tools, tool).raw_path(args)
        if raw is None or not self.roots:
            return None
        return pin(resolve_path(raw, self.roots[0]))

    @staticmethod
    def _allowed(path: Path | None, use: SandboxUse | None = None) -> BeforeToolCallResult | None:
        """Allow the call, pinning it to the real path (and the sandbox) it was judged on."""
        if path is None and use is None:
            return None
        return BeforeToolCallResult(resolved_path=path, sandbox=use)

    def _inside(self, path: Path) -> bool:
        return any(path.is_relative_to(os.path.realpath(root)) for root in self.roots)

    def _matches(self, rule: PermissionRule, tool: str, path: Path | None) -> bool:
        if rule.command is not None:
            return False
        if rule.tool is not None and not fnmatch.fnmatchcase(tool, rule.tool):  # a glob
            return False
        if rule.path is not None:
            if path is None:
                return False
            pattern = rule.path if os.path.isabs(rule.path) else str(self.roots[0] / rule.path)
            return fnmatch.fnmatch(str(path), pattern)
        return True

    async def _ask_user(
        self, call: ToolCall, args: dict[str, Any], reason: str, key: str, path: Path | None,
        use: SandboxUse | None,
    ) -> BeforeToolCallResult | None:
        assert self.ask is not None
        preview = await self._preview(call.name, args, path)
        if use is not None and preview.get("kind") == "command":
            preview["sandbox"] = use.wire()
        request = PermissionRequest(call.id, call.name, args, preview, reason)
        self.waiting(call)
        try:
            outcome, user_reason = await self.ask(request)
        except ToolError as exc:
            return BeforeToolCallResult(block=True, reason=f"permission not granted: {exc}")
        info = describe(self.tools, call.name)
        if outcome in ("allowAlways", "rejectAlways") and info.command_arg is not None:
            level = use.level if use is not None else UNSANDBOXED
            self.commands.remember(key, outcome == "allowAlways", level)
        elif outcome == "rejectAlways" or outcome == "allowAlways" and not self._protected(
                info, path):  # "always" on a protected path allows it once
            self.remembered[(call.name, key)] = outcome == "allowAlways"
        if outcome in ("allowOnce", "allowAlways"):
            return self._allowed(path, use)
        because = f": {user_reason}" if user_reason else ""
        return BeforeToolCallResult(block=True, reason=f"the user rejected this call{because}")

    async def _preview(
        self, tool: str, args: dict[str, Any], path: Path | None
    ) -> dict[str, Any]:
        """A unified diff for a file change the tool can predict (``Tool.proposed_text``), the
        command and cwd for a command tool, else the path (``path``: the call's real path, as
        decided on)."""
        tool_object = find_tool(self.tools, tool)
        info = tool_object.info if tool_object is not None else ToolInfo()
        if info.command_arg is not None:
            return {"kind": "command", "command": args.get(info.command_arg, ""),
                    "cwd": str(self.roots[0]) if self.roots else ""}
        if path is None:
            return {"kind": "none"}
        if tool_object is not None and info.changes_files:
            old = await self._current_text(path)
            try:
                new = tool_object.proposed_text(args, old or "", path.name)
            except ToolError:
                new = None  # the tool itself will report the bad edit; show the path
            if new is not None:
                label = str(args.get(info.path_arg or "", path.name))
                return {"kind": "diff", "path": str(path), "diff": unified_diff(old, new, label)}
        return {"kind": "path", "path": str(path)}

    async def _current_text(self, path: Path) -> str | None:
        """The file's text now (the editor's when it reads files, the disk's when it does not
        or cannot), None when there is no such file (the diff comes from ``/dev/null``)."""
        if self.files is not None and self.files.can_read:
            try:
                return await self.files.read_text(path)
            except ToolError:
                pass  # the usual answer for a file that does not exist yet: ask the disk
        try:
            return await anyio.Path(path).read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return None
        except OSError:
            return ""


def _wants(use: SandboxUse) -> str:
    """What an escalated command asks for, in words."""
    return "run outside the sandbox" if use.escalated == "unsandboxed" else (
        "run with network access")
