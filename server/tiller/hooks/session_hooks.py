"""``SessionHooks``: one session's hooks, run at their events and reported as they run.

A session's hooks are the config file's (``[hooks]``, the user's own: they always run) and its
workspace's ``.tiller/settings.json`` and ``.claude/settings.json`` (``WORKSPACE_FILES``), which
run only once the user trusts them (tiller.hooks.trust): before each prompt the files are read
again, and one not trusted yet at its current content is asked about through the client's
``client/requestPermission`` (naming each command); without a client that can answer, its hooks
do not run and a ``notice`` says so.

Each matching command runs (tiller.hooks.run) with the event's JSON on stdin, all of an event's
at once; each is reported by ``hook_start`` and ``hook_end`` events. What they answer
(tiller.hooks.output) is combined: a block wins over an ask, an ask over an allow; contexts are
joined in order. The events and what their answers do:

- ``SessionStart`` (``source`` ``startup`` or ``resume``), at the session's first prompt (or
  continue): its context goes with the next prompt.
- ``UserPromptSubmit`` (``prompt``): a block refuses the prompt (PromptBlockedError); context is
  added to the prompt's message.
- ``PreToolUse`` (``tool_name``, ``tool_input``, ``tool_use_id``): a block (or ``deny``) fails the
  call with the reason; ``allow`` and ``ask`` go to the permission gate (``PreToolDecision``).
- ``PostToolUse`` (also ``tool_response``), after a call that succeeded and before its checkpoint
  (a formatter's changes are the call's): context and block reasons are added to the result.
- ``PostToolBatch`` (``tool_calls``), after a batch when the run goes on: context and block
  reasons reach the model as a message delivered with the steering.
- ``Stop`` (``stop_hook_active``, ``last_assistant_message``): a block sends the agent on with
  the reason (tiller.agent.run_hooks bounds it); ``continue: false`` lets it stop.
- ``PreCompact`` (``trigger`` ``manual`` or ``auto``, ``custom_instructions``): runs only.

Tool names: a matcher matches Tiller's name of a tool or the one Claude Code's hooks know it by
(``ToolInfo.hook_name``: ``Bash``, ``Edit``...), which is also ``tool_name`` on stdin (Tiller's
own is ``tiller_tool_name``); ``tool_input`` is the call's arguments plus ``file_path``, the
absolute path, for a tool with a path argument.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio

from tiller.errors import ConfigError, PromptBlockedError
from tiller.frozen import frozen
from tiller.gate.permissions import Ask, PermissionRequest
from tiller.hooks.output import HookReply, interpret
from tiller.hooks.run import run_command
from tiller.hooks.settings import HookCommand, HookGroup, HookSet, read_settings_file
from tiller.hooks.trust import TrustStore, content_hash
from tiller.modes import HookEventName, HookOutcome
from tiller.procs import ProcessScope
from tiller.tools.base import Tool, describe
from tiller.tools.bash import command_env
from tiller.types import (
    AgentEvent,
    AssistantMessage,
    CompactionReason,
    HookEnd,
    HookStart,
    Message,
    Notice,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserContent,
    UserMessage,
)

__all__ = ["WORKSPACE_FILES", "PreToolDecision", "SessionHooks", "with_context"]

WORKSPACE_FILES = (".tiller/settings.json", ".claude/settings.json")
"""The workspace's hook files, relative to its root."""

Prompt = str | Sequence[UserContent] | UserMessage


@frozen
class PreToolDecision:
    """The PreToolUse hooks' verdict on a call: ``block`` (the reason it is not run), else
    ``permission`` (``allow`` skips the permission question, ``ask`` asks it) with ``reason``;
    all None: the hooks have no opinion."""

    block: str | None = None
    permission: Literal["allow", "ask"] | None = None
    reason: str | None = None


@dataclass
class _Combined:
    decision: str | None = None
    reasons: list[str] = field(default_factory=list)
    contexts: list[str] = field(default_factory=list)
    stop: str | None = None


def _combine(replies: Sequence[HookReply]) -> _Combined:
    """One verdict of several: block > ask > allow (the reasons of the winning decision, in
    order); every context; the first ``continue: false``."""
    combined = _Combined()
    for decision in ("block", "ask", "allow"):
        if any(reply.decision == decision for reply in replies):
            combined.decision = decision
            combined.reasons = [r.reason for r in replies if r.decision == decision and r.reason]
            break
    combined.contexts = [reply.context for reply in replies if reply.context]
    combined.stop = next((reply.stop for reply in replies if reply.stop), None)
    return combined


def with_context(content: Prompt, texts: Sequence[str]) -> Prompt:
    """``content`` with ``texts`` added as text blocks after it (unchanged without texts)."""
    if not texts:
        return content
    extra = [TextContent(text=text) for text in texts]
    if isinstance(content, UserMessage):
        blocks = [TextContent(text=content.content)] if isinstance(content.content, str) \
            else list(content.content)
        return content.model_copy(update={"content": [*blocks, *extra]})
    if isinstance(content, str):
        return [TextContent(text=content), *extra]
    return [*content, *extra]


def _prompt_text(content: Prompt) -> str:
    body = content.content if isinstance(content, UserMessage) else content
    if isinstance(body, str):
        return body
    return "\n".join(block.text for block in body if isinstance(block, TextContent))


def _from_hooks(event: HookEventName, texts: Sequence[str]) -> str:
    return f"[{event} hook]\n" + "\n\n".join(texts)


class SessionHooks:
    """One session's hooks (the module docstring). ``user``: the config file's; ``ask``: the
    client's permission question (None: it cannot be asked), set as the editor connects;
    ``trust``: where "always"/"never" answers are kept (None: for this process only)."""

    def __init__(
        self, user: HookSet, *, cwd: Path, session_id: str, transcript: Path | None,
        processes: ProcessScope, publish: Callable[[AgentEvent], None],
        tools: Callable[[], Sequence[Tool[Any]]], mode: Callable[[], str],
        model: Callable[[], str], trust: TrustStore | None, sanitize_env: bool = True,
    ) -> None:
        self.user, self.cwd, self.session_id, self.transcript = user, cwd, session_id, transcript
        self.processes, self.publish, self.tools = processes, publish, tools
        self.mode, self.model, self.trust = mode, model, trust
        self.sanitize_env = sanitize_env
        self.ask: Ask | None = None
        self.active: HookSet = user
        """The hooks that run now: the user's and the trusted workspace files'."""
        self._answers: dict[tuple[str, str], bool] = {}
        """This session's answers for (file, content hash) not remembered in ``trust``."""
        self._told: set[str] = set()
        self._started = False
        self._start_context: list[str] = []
        self._count = 0

    # ------------------------------------------------------------------ reporting

    def _notice(self, key: str, message: str, level: Literal["info", "warning"] = "warning"
                ) -> None:
        """Publish ``message`` once per session (per ``key``)."""
        if key not in self._told:
            self._told.add(key)
            self.publish(Notice(level=level, message=message))

    def _told_ignored(self, hooks: HookSet) -> None:
        for line in hooks.ignored:
            self._notice(f"ignored:{line}", f"hooks: {line}", "info")

    # ------------------------------------------------------------------ the workspace's files

    async def prepare(self, resumed: bool) -> None:
        """Before a prompt (or continue): read the workspace's hook files again, ask about
        those not trusted at their current content, and, the first time, run SessionStart
        (``resumed``: the session was loaded with messages). Never raises."""
        self._told_ignored(self.user)
        found = await anyio.to_thread.run_sync(self._read_files)
        workspace = HookSet()
        for shown, digest, parsed in found:
            if isinstance(parsed, str):
                self._notice(f"bad:{shown}:{digest}", f"hooks: {parsed}; its hooks do not run")
            elif parsed and await self._trusted(shown, digest, parsed):
                self._told_ignored(parsed)
                workspace += parsed
        self.active = self.user + workspace
        if not self._started:
            self._started = True
            replies = await self._run("SessionStart", ["resume" if resumed else "startup"],
                                      {"source": "resume" if resumed else "startup",
                                       "model": self.model()})
            self._start_context = _combine(replies).contexts

    def _read_files(self) -> list[tuple[str, str, HookSet | str]]:
        """Each workspace hook file there is: its name, content hash, and hooks (or why they
        cannot be read)."""
        found: list[tuple[str, str, HookSet | str]] = []
        for name in WORKSPACE_FILES:
            path = self.cwd / name
            try:
                data = path.read_bytes()
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                continue
            except OSError as exc:
                found.append((name, "", f"{name}: cannot read it: {exc}"))
                continue
            try:
                found.append((name, content_hash(data), read_settings_file(data, name)))
            except ConfigError as exc:
                found.append((name, content_hash(data), str(exc)))
        return found

    async def _trusted(self, shown: str, digest: str, hooks: HookSet) -> bool:
        """Whether the user trusts file ``shown`` at ``digest``: answered before (this
        session, or remembered), else asked now."""
        key = (shown, digest)
        if key in self._answers:
            return self._answers[key]
        remembered = None
        if self.trust is not None:
            remembered = await anyio.to_thread.run_sync(self.trust.get, self.cwd, shown, digest)
        if remembered is not None:
            return remembered
        if self.ask is None:
            self._notice(f"untrusted:{shown}:{digest}", (
                f"the hooks in {shown} did not run: a workspace's hooks run only once you trust "
                "them, and this client cannot be asked (it did not declare the permissions "
                "capability); open the workspace in a client that can ask, or put the hooks in "
                "your own config file"))
            return False
        commands = hooks.described()
        question = PermissionRequest(
            tool_call_id=f"hooks:{shown}", tool_name="hooks",
            args={"file": shown, "sha256": digest, "commands": commands},
            preview={"kind": "hooks", "file": shown, "commands": commands},
            reason=(f"{shown} in this workspace asks to run {len(commands)} command"
                    f"{'s' if len(commands) != 1 else ''} as hooks, as you, outside the "
                    "sandbox. Trust them? (Asked again if the file changes.)"),
        )
        try:
            outcome, _reason = await self.ask(question)
        except Exception as exc:  # a client that fails or does not answer: not trusted
            self._notice(f"unanswered:{shown}:{digest}",
                         f"the hooks in {shown} did not run: {exc}")
            return False
        trusted = outcome in ("allowOnce", "allowAlways")
        if outcome in ("allowAlways", "rejectAlways") and self.trust is not None:
            await anyio.to_thread.run_sync(self.trust.put, self.cwd, shown, digest, trusted)
        self._answers[key] = trusted
        return trusted

    # ------------------------------------------------------------------ running

    def _common(self, event: HookEventName) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "transcript_path": str(self.transcript) if self.transcript else None,
            "cwd": str(self.cwd),
            "permission_mode": self.mode(),
            "hook_event_name": event,
        }

    async def _run(self, event: HookEventName, names: Sequence[str], payload: dict[str, Any],
                   tool_call_id: str | None = None) -> list[HookReply]:
        """Run every command of ``event`` whose matcher matches one of ``names``, at once;
        their replies in order."""
        matched = self.active.matching(event, names)
        if not matched:
            return []
        data = json.dumps({**self._common(event), **payload}, default=str).encode()
        env = dict(command_env(os.environ) if self.sanitize_env else os.environ)
        env.update(CLAUDE_PROJECT_DIR=str(self.cwd), TILLER_PROJECT_DIR=str(self.cwd),
                   TILLER_SESSION_ID=self.session_id)
        replies: list[HookReply | None] = [None] * len(matched)

        async def one(index: int, group: HookGroup, command: HookCommand) -> None:
            self._count += 1
            start = HookStart(hook_id=f"hook-{self._count}", hook_event=event,
                              command=command.command, source=group.source,
                              tool_call_id=tool_call_id)
            self.publish(start)

            def end(outcome: HookOutcome, message: str | None,
                    reply: HookReply | None = None) -> HookEnd:
                return HookEnd(hook_id=start.hook_id, hook_event=event, command=start.command,
                               source=start.source, tool_call_id=tool_call_id, outcome=outcome,
                               exit_code=reply.exit_code if reply else None,
                               decision=reply.decision if reply else None, message=message)

            try:
                outcome = await run_command(command.command, data, cwd=self.cwd, env=env,
                                            timeout=command.timeout, processes=self.processes)
            except anyio.get_cancelled_exc_class():
                self.publish(end("error", "cancelled: it was killed"))
                raise
            reply = replies[index] = interpret(event, outcome, command.timeout)
            self.publish(end(reply.outcome, reply.message, reply))

        async with anyio.create_task_group() as group:
            for index, (hook_group, command) in enumerate(matched):
                group.start_soon(one, index, hook_group, command)
        return [reply for reply in replies if reply is not None]

    def _tool_names(self, name: str) -> list[str]:
        hook_name = describe(self.tools(), name).hook_name
        return [name, hook_name] if hook_name else [name]

    def _tool_fields(self, call: ToolCall) -> dict[str, Any]:
        info = describe(self.tools(), call.name)
        tool_input = dict(call.arguments)
        path = info.call_path(call.arguments, self.cwd)
        if path is not None:
            tool_input.setdefault("file_path", str(path))
        return {"tool_name": info.hook_name or call.name, "tiller_tool_name": call.name,
                "tool_input": tool_input, "tool_use_id": call.id}

    @staticmethod
    def _response(call_fields: dict[str, Any], result: ToolResultMessage) -> dict[str, Any]:
        response: dict[str, Any] = {"success": not result.is_error, "output": result.text}
        if "file_path" in call_fields["tool_input"]:
            response["filePath"] = call_fields["tool_input"]["file_path"]
        return response

    # ------------------------------------------------------------------ the events

    async def submit_prompt(self, content: Prompt) -> Prompt:
        """UserPromptSubmit: ``content`` with the hooks' context (and SessionStart's, the
        first time) added; PromptBlockedError when a hook refuses it."""
        replies = await self._run("UserPromptSubmit", [], {"prompt": _prompt_text(content)})
        combined = _combine(replies)
        refusal = combined.stop if combined.stop else (
            "; ".join(combined.reasons) if combined.decision == "block" else None)
        if refusal is not None:
            raise PromptBlockedError(f"a UserPromptSubmit hook refused the prompt: {refusal}",
                                     {"hookEvent": "UserPromptSubmit", "reason": refusal})
        texts = []
        if self._start_context:
            texts.append(_from_hooks("SessionStart", self._start_context))
            self._start_context = []
        if combined.contexts:
            texts.append(_from_hooks("UserPromptSubmit", combined.contexts))
        return with_context(content, texts)

    async def pre_tool_use(self, call: ToolCall) -> PreToolDecision:
        """PreToolUse: the hooks' verdict on ``call`` (never raises)."""
        replies = await self._run("PreToolUse", self._tool_names(call.name),
                                  self._tool_fields(call), call.id)
        combined = _combine(replies)
        reason = "; ".join(combined.reasons) or None
        if combined.stop is not None:
            return PreToolDecision(block=f"a PreToolUse hook stopped it: {combined.stop}")
        if combined.decision == "block":
            return PreToolDecision(block=f"a PreToolUse hook blocked it: {reason}")
        if combined.decision in ("allow", "ask"):
            permission: Literal["allow", "ask"] = "ask" if combined.decision == "ask" \
                else "allow"
            return PreToolDecision(permission=permission, reason=reason)
        return PreToolDecision()

    async def post_tool_use(self, call: ToolCall, result: ToolResultMessage) -> list[str]:
        """PostToolUse, after a call that succeeded: texts to add to its result."""
        if result.is_error:
            return []
        fields = self._tool_fields(call)
        replies = await self._run("PostToolUse", self._tool_names(call.name),
                                  {**fields, "tool_response": self._response(fields, result)},
                                  call.id)
        combined = _combine(replies)
        texts = [*(combined.reasons if combined.decision == "block" else []),
                 *combined.contexts]
        return [_from_hooks("PostToolUse", texts)] if texts else []

    async def after_batch(
        self, message: AssistantMessage, results: Sequence[ToolResultMessage]
    ) -> list[Message]:
        """PostToolBatch (tiller.agent.run_hooks.RunHooks)."""
        by_id = {result.tool_call_id: result for result in results}
        calls = []
        for call in message.tool_calls:
            fields = self._tool_fields(call)
            result = by_id.get(call.id)
            if result is not None:
                fields["tool_response"] = self._response(fields, result)
            calls.append(fields)
        replies = await self._run("PostToolBatch", [], {"tool_calls": calls})
        combined = _combine(replies)
        texts = [*(combined.reasons if combined.decision == "block" else []),
                 *combined.contexts]
        return [UserMessage(content=_from_hooks("PostToolBatch", texts))] if texts else []

    async def before_stop(self, message: AssistantMessage, continued: int) -> str | None:
        """Stop (tiller.agent.run_hooks.RunHooks): the reason to go on, or None."""
        replies = await self._run("Stop", [], {"stop_hook_active": continued > 0,
                                               "last_assistant_message": message.text})
        combined = _combine(replies)
        if combined.stop is not None or combined.decision != "block":
            return None
        return "; ".join(combined.reasons)

    async def before_compact(self, reason: CompactionReason, instructions: str | None) -> None:
        """PreCompact (tiller.agent.run_hooks.RunHooks): the hooks run; nothing they say
        changes the compaction."""
        trigger = "manual" if reason == "manual" else "auto"
        await self._run("PreCompact", [trigger], {"trigger": trigger,
                                                  "custom_instructions": instructions or ""})
