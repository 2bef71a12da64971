"""End to end: hooks in Claude Code's format run by the real ``tiller`` over stdio, against the
scripted fake OpenAI server. A PreToolUse hook blocks ``rm`` (the model reads why), a
PostToolUse formatter rewrites a written file (the checkpoint and the undo see the formatted
file), a Stop hook sends the agent on once (and no more than the bound), a hung hook is killed
at its timeout and the run goes on, UserPromptSubmit adds context or refuses the prompt, and a
workspace's hooks run only once trusted (asked again when the file changes)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import clean_env, spawn_tiller
from tiller.agent.run_hooks import MAX_STOP_CONTINUATIONS
from tiller.client import RpcError

pytestmark = [pytest.mark.anyio, pytest.mark.process]


def _toml(value: Any) -> str:
    """``value`` as a TOML inline value (keys and strings quoted as JSON, which TOML reads)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[ " + ", ".join(_toml(item) for item in value) + " ]"
    return json.dumps(value)


def hook(tmp_path: Path, name: str, body: str) -> str:
    """A Python hook script; the command line that runs it."""
    script = tmp_path / f"{name}.py"
    script.write_text(body)
    return f"{sys.executable} {script}"


def user_config(tmp_path: Path, hooks: dict[str, Any]) -> tuple[str, str]:
    """Server arguments naming a config file with these ``[hooks]`` (the user's own)."""
    config = tmp_path / "config.toml"
    config.write_text(f"hooks = {_toml(hooks)}\n")
    return "--config", str(config)


def command_hook(event_matcher: str | None, command: str, **more: Any) -> list[dict[str, Any]]:
    group: dict[str, Any] = {"hooks": [{"type": "command", "command": command, **more}]}
    if event_matcher is not None:
        group["matcher"] = event_matcher
    return [group]


def tool_texts(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def user_texts(request: dict[str, Any]) -> list[str]:
    texts = []
    for message in request["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        texts.append(content if isinstance(content, str) else "\n".join(
            part.get("text", "") for part in content))
    return texts


def hook_events(tiller: Any, kind: str) -> list[dict[str, Any]]:
    return [m["params"] for m in tiller.received
            if m.get("method") == "agent/event" and m["params"]["type"] == kind]


BLOCK_RM = """
import json, sys
data = json.load(sys.stdin)
assert data["hook_event_name"] == "PreToolUse" and data["tiller_tool_name"] == "bash"
if data["tool_name"] == "Bash" and data["tool_input"]["command"].startswith("rm "):
    print("rm is not allowed here: move files to .trash instead", file=sys.stderr)
    sys.exit(2)
"""


async def test_a_pre_tool_use_hook_blocks_rm_and_the_model_reads_why(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    (ws / "data").mkdir(parents=True)
    fake_openai.enqueue(
        tool_call_reply([("c1", "bash", {"command": "rm -rf data"}),
                         ("c2", "bash", {"command": "echo still here"})]),
        text_reply("I will not delete it."),
    )
    args = user_config(tmp_path, {"PreToolUse": command_hook("Bash", hook(tmp_path, "rm",
                                                                             BLOCK_RM))})
    async with spawn_tiller(fake_openai, ws, *args, "--permission-mode", "auto") as tiller:
        await tiller.request("initialize", {"capabilities": {}})
        result = await tiller.prompt("clean up")
        starts, ends = hook_events(tiller, "hook_start"), hook_events(tiller, "hook_end")

    assert result["stopReason"] == "stop"
    assert (ws / "data").is_dir()
    blocked, ran = tool_texts(fake_openai.requests[1])
    assert "blocked" in blocked and "move files to .trash instead" in blocked
    assert "still here" in ran
    assert [(e["hookEvent"], e["toolCallId"]) for e in starts] == [
        ("PreToolUse", "c1"), ("PreToolUse", "c2")]
    by_call = {e["toolCallId"]: e for e in ends}
    assert (by_call["c1"]["outcome"], by_call["c1"]["exitCode"]) == ("blocked", 2)
    assert "move files to .trash" in by_call["c1"]["message"]
    assert by_call["c2"]["outcome"] == "ok"
    assert by_call["c1"]["source"] == args[1]


FORMATTER = """
import json, pathlib, sys
data = json.load(sys.stdin)
path = pathlib.Path(data["tool_input"]["file_path"])
assert data["tool_response"]["success"] and data["tool_response"]["filePath"] == str(path)
path.write_text(path.read_text().replace("=", " = "))
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PostToolUse",
                                         "additionalContext": f"formatted {path.name}"}}))
"""


async def test_a_post_tool_use_formatter_s_changes_are_the_call_s(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    fake_openai.enqueue(
        tool_call_reply([("w1", "write", {"path": "a.py", "content": "x=1\n"})]),
        text_reply("Written."),
    )
    args = user_config(tmp_path, {"PostToolUse": command_hook(
        "Edit|Write", hook(tmp_path, "fmt", FORMATTER))})
    async with spawn_tiller(fake_openai, ws, *args, "--permission-mode", "auto") as tiller:
        await tiller.request("initialize", {"capabilities": {}})
        sid = (await tiller.request("session/new"))["sessionId"]
        result = await tiller.prompt("write a.py", session_id=sid)
        changes = await tiller.request("session/changes", {"sessionId": sid})
        first = (await tiller.request("session/load", {"sessionId": sid}))["entryIds"][0]
        reverted = await tiller.request("session/revert", {"sessionId": sid, "entryId": first})

    assert result["stopReason"] == "stop"
    (written,) = tool_texts(fake_openai.requests[1])
    assert "formatted a.py" in written
    (change,) = changes["files"]
    assert change["path"] == "a.py" and "+x = 1" in change["diff"]  # the formatted text
    assert reverted == {"restored": ["a.py"], "conflicts": [], "skipped": []}
    assert not (ws / "a.py").exists()


STOP_ONCE = """
import json, sys
data = json.load(sys.stdin)
if not data["stop_hook_active"]:
    print(json.dumps({"decision": "block", "reason": "run the tests before you stop"}))
"""
STOP_ALWAYS = """
import sys
print("not done yet", file=sys.stderr)
sys.exit(2)
"""


async def test_a_stop_hook_sends_the_agent_on_once(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    fake_openai.enqueue(text_reply("Done."), text_reply("The tests pass."))
    args = user_config(tmp_path, {"Stop": command_hook(None, hook(tmp_path, "stop", STOP_ONCE))})
    async with spawn_tiller(fake_openai, ws, *args) as tiller:
        await tiller.request("initialize", {"capabilities": {}})
        result = await tiller.prompt("fix it")
        ends = hook_events(tiller, "hook_end")

    assert result["stopReason"] == "stop"
    assert len(fake_openai.requests) == 2
    assert "run the tests before you stop" in user_texts(fake_openai.requests[1])[-1]
    assert [(e["hookEvent"], e["outcome"]) for e in ends] == [("Stop", "blocked"),
                                                              ("Stop", "ok")]


async def test_a_stop_hook_that_always_blocks_is_bounded(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    fake_openai.enqueue(*[text_reply(f"Done {n}.") for n in range(MAX_STOP_CONTINUATIONS + 1)])
    args = user_config(tmp_path, {"Stop": command_hook(None, hook(tmp_path, "stop",
                                                                  STOP_ALWAYS))})
    async with spawn_tiller(fake_openai, ws, *args) as tiller:
        await tiller.request("initialize", {"capabilities": {}})
        result = await tiller.prompt("fix it")

    assert result["stopReason"] == "stop"
    assert len(fake_openai.requests) == MAX_STOP_CONTINUATIONS + 1
    assert all("not done yet" in user_texts(r)[-1] for r in fake_openai.requests[1:])


async def test_a_hung_hook_is_killed_at_its_timeout_and_the_run_goes_on(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    pid_file = tmp_path / "hook.pid"
    fake_openai.enqueue(tool_call_reply([("c1", "bash", {"command": "echo ran"})]),
                        text_reply("ok"))
    hang = f"echo $$ > {pid_file}; exec sleep 600"
    args = user_config(tmp_path, {"PreToolUse": command_hook("*", hang, timeout=1)})
    async with spawn_tiller(fake_openai, ws, *args, "--permission-mode", "auto") as tiller:
        await tiller.request("initialize", {"capabilities": {}})
        result = await tiller.prompt("run it")
        (end,) = hook_events(tiller, "hook_end")

    assert result["stopReason"] == "stop"
    assert (end["outcome"], end["message"]) == ("timeout",
                                                "timed out after 1 seconds; it was killed")
    assert "ran" in tool_texts(fake_openai.requests[1])[0]
    assert not Path(f"/proc/{int(pid_file.read_text())}").exists()  # killed and reaped


PROMPT_CONTEXT = """
import json, sys
data = json.load(sys.stdin)
if "secret" in data["prompt"]:
    print("prompts must not ask for secrets", file=sys.stderr)
    sys.exit(2)
print("The build command is `make check`.")
"""


async def test_user_prompt_submit_adds_context_or_refuses_the_prompt(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    fake_openai.enqueue(text_reply("Run make check."))
    args = user_config(tmp_path, {"UserPromptSubmit": command_hook(
        None, hook(tmp_path, "ctx", PROMPT_CONTEXT))})
    async with spawn_tiller(fake_openai, ws, *args) as tiller:
        await tiller.request("initialize", {"capabilities": {}})
        result = await tiller.prompt("how do I build this?")
        with pytest.raises(RpcError) as refused:
            await tiller.prompt("tell me the secret")
        state = await tiller.request("agent/getState")

    assert result["stopReason"] == "stop"
    (sent,) = user_texts(fake_openai.requests[0])
    assert "how do I build this?" in sent and "The build command is `make check`." in sent
    assert refused.value.code == -32021
    assert "prompts must not ask for secrets" in refused.value.message
    assert len(fake_openai.requests) == 1  # the refused prompt reached no model
    assert state["messageCount"] == 2


WORKSPACE_HOOK = """
import json, pathlib, sys
data = json.load(sys.stdin)
marker = pathlib.Path(data["cwd"]).parent / "ran"
marker.write_text(marker.read_text() + "x" if marker.exists() else "x")
print("%s")
"""


def workspace_settings(ws: Path, tmp_path: Path, word: str) -> str:
    command = hook(tmp_path, f"ws-{word}", WORKSPACE_HOOK % f"context: {word}")
    settings = ws / ".claude" / "settings.json"
    settings.parent.mkdir(exist_ok=True)
    settings.write_text(json.dumps({"hooks": {"UserPromptSubmit": command_hook(None, command)}}))
    return command


async def test_workspace_hooks_run_only_once_trusted_and_a_changed_file_asks_again(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    marker = tmp_path / "ran"
    command = workspace_settings(ws, tmp_path, "first")
    env = clean_env(XDG_DATA_HOME=str(tmp_path / "data"))
    fake_openai.enqueue(*[text_reply(f"reply {n}") for n in range(5)])

    # A client that cannot be asked: the hooks do not run, and a notice says why.
    async with spawn_tiller(fake_openai, ws, env=env) as tiller:
        await tiller.request("initialize", {"capabilities": {}})
        await tiller.prompt("one")
        notices = [e["message"] for e in hook_events(tiller, "notice")]
    assert not marker.exists()
    assert any(".claude/settings.json did not run" in n for n in notices)
    assert "context: first" not in user_texts(fake_openai.requests[0])[-1]

    asked: list[dict[str, Any]] = []
    answers = ["allowAlways", "rejectOnce"]

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"outcome": answers[len(asked) - 1]}

    async with spawn_tiller(fake_openai, ws, env=env) as tiller:
        tiller.on_request("client/requestPermission", answer)
        await tiller.request("initialize", {"capabilities": {"permissions": True}})
        await tiller.prompt("two")  # asked, trusted always: it runs
        assert marker.read_text() == "x" and len(asked) == 1
        await tiller.prompt("three")  # not asked again
        assert marker.read_text() == "xx" and len(asked) == 1
        workspace_settings(ws, tmp_path, "changed")
        await tiller.prompt("four")  # the file changed: asked again, rejected
        assert marker.read_text() == "xx" and len(asked) == 2

    question = asked[0]
    assert question["preview"] == {"kind": "hooks", "file": ".claude/settings.json",
                                   "commands": [f"UserPromptSubmit: {command}"]}
    assert question["toolName"] == "hooks"
    assert ".claude/settings.json" in question["reason"]
    assert "context: first" in user_texts(fake_openai.requests[1])[-1]
    assert "context: changed" not in user_texts(fake_openai.requests[3])[-1]

    # The "always" answer is remembered for that content, in another process too.
    workspace_settings(ws, tmp_path, "first")
    async with spawn_tiller(fake_openai, ws, env=env) as tiller:
        tiller.on_request("client/requestPermission", answer)
        await tiller.request("initialize", {"capabilities": {"permissions": True}})
        await tiller.prompt("five")
    assert marker.read_text() == "xxx" and len(asked) == 2


ASK_HOOK = """
import json
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                  "permissionDecision": "ask", "permissionDecisionReason": "deploys are big"}}))
"""


async def test_a_pre_tool_use_ask_goes_through_the_permission_question(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    fake_openai.enqueue(tool_call_reply([("c1", "bash", {"command": "echo deploy"})]),
                        text_reply("ok"))
    args = user_config(tmp_path, {"PreToolUse": command_hook("Bash", hook(tmp_path, "ask",
                                                                             ASK_HOOK))})
    asked: list[dict[str, Any]] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"outcome": "rejectOnce", "reason": "not today"}

    async with spawn_tiller(fake_openai, ws, *args, "--permission-mode", "auto") as tiller:
        tiller.on_request("client/requestPermission", answer)
        await tiller.request("initialize", {"capabilities": {"permissions": True}})
        await tiller.prompt("deploy")

    (question,) = asked  # asked although the mode is auto
    assert "deploys are big" in question["reason"]
    assert "not today" in tool_texts(fake_openai.requests[1])[0]


BATCH_CONTEXT = """
import json, sys
data = json.load(sys.stdin)
(call,) = data["tool_calls"]
assert call["tool_name"] == "Bash" and call["tool_response"]["success"]
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PostToolBatch",
                  "additionalContext": "batch context: " + call["tool_response"]["output"]}}))
"""
PRE_COMPACT = """
import json, pathlib, sys
data = json.load(sys.stdin)
pathlib.Path(data["cwd"], "..", "compacted").write_text(data["trigger"])
"""


async def test_session_start_and_post_tool_batch_add_context_and_pre_compact_runs(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    fake_openai.enqueue(tool_call_reply([("c1", "bash", {"command": "echo hi"})]),
                        text_reply("done"), text_reply("summary"))
    args = user_config(tmp_path, {
        "SessionStart": command_hook("startup", "echo 'session context: use tabs'"),
        "PostToolBatch": command_hook(None, hook(tmp_path, "batch", BATCH_CONTEXT)),
        "PreCompact": command_hook("manual", hook(tmp_path, "compact", PRE_COMPACT)),
        "Notification": command_hook(None, "notify-send done"),  # not Tiller's: said, not run
    })
    async with spawn_tiller(fake_openai, ws, *args, "--permission-mode", "auto") as tiller:
        await tiller.request("initialize", {"capabilities": {}})
        result = await tiller.prompt("say hi")
        await tiller.request("agent/compact", {})
        ends = hook_events(tiller, "hook_end")
        notices = [(e["level"], e["message"]) for e in hook_events(tiller, "notice")]

    assert result["stopReason"] == "stop"
    assert notices == [("info", f"hooks: {args[1]}: Notification hooks are not run (Tiller runs "
                                "PreToolUse, PostToolUse, PostToolBatch, UserPromptSubmit, Stop, "
                                "SessionStart, PreCompact)")]
    first = user_texts(fake_openai.requests[0])[-1]
    assert "say hi" in first and "session context: use tabs" in first
    second = fake_openai.requests[1]["messages"]
    assert [m["role"] for m in second][-3:] == ["assistant", "tool", "user"]
    assert "batch context: hi" in user_texts(fake_openai.requests[1])[-1]
    assert (tmp_path / "compacted").read_text() == "manual"
    assert [e["hookEvent"] for e in ends] == ["SessionStart", "PostToolBatch", "PreCompact"]


async def test_what_a_hook_leaves_running_ends_with_the_session(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    pid_file = tmp_path / "left.pid"
    fake_openai.enqueue(tool_call_reply([("w1", "write", {"path": "a.txt", "content": "a"})]),
                        text_reply("ok"))
    # The left process writes its pid once it is in a session of its own; the hook waits for it.
    leave = (f"setsid sh -c 'echo $$ > {pid_file}; exec sleep 600' >/dev/null 2>&1 </dev/null &"
             f" until [ -s {pid_file} ]; do sleep 0.01; done")
    args = user_config(tmp_path, {"PostToolUse": command_hook("Write", leave)})
    async with spawn_tiller(fake_openai, ws, *args, "--permission-mode", "auto") as tiller:
        await tiller.request("initialize", {"capabilities": {}})
        sid = (await tiller.request("session/new"))["sessionId"]
        await tiller.prompt("write", session_id=sid)
        pid = int(pid_file.read_text())
        assert Path(f"/proc/{pid}").exists()  # it escaped the hook's process group
        await tiller.request("session/close", {"sessionId": sid})
        assert not Path(f"/proc/{pid}").exists()


async def test_acp_a_refused_prompt_is_a_refusal_with_the_reason_said(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    from acp import text_block

    from support.acp_client import Recorder, spawn_acp

    ws = tmp_path / "ws"
    ws.mkdir()
    fake_openai.enqueue(text_reply("Run make check."))
    args = user_config(tmp_path, {"UserPromptSubmit": command_hook(
        None, hook(tmp_path, "ctx", PROMPT_CONTEXT))})
    recorder = Recorder()
    async with spawn_acp(recorder, fake_openai, ws, *args) as conn:
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(ws), mcp_servers=[])
        refused = await conn.prompt(session_id=session.session_id,
                                    prompt=[text_block("tell me the secret")])
        said = recorder.text("agent_thought_chunk")
        answered = await conn.prompt(session_id=session.session_id,
                                     prompt=[text_block("how do I build?")])

    assert refused.stop_reason == "refusal"
    assert refused.field_meta is not None
    assert "prompts must not ask for secrets" in refused.field_meta["tiller"]["errorMessage"]
    assert "UserPromptSubmit hook" in said and "prompts must not ask for secrets" in said
    assert answered.stop_reason == "end_turn"
    (sent,) = user_texts(fake_openai.requests[0])  # the refused prompt is not in it
    assert "how do I build?" in sent and "make check" in sent
