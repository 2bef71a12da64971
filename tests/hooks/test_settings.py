"""Hook settings in Claude Code's format: its documented examples parse unchanged (what Tiller
does not run is said, not refused), matchers match names, globs and regular expressions, and a
command's exit code and output mean what Claude Code's rules say."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiller.errors import ConfigError
from tiller.hooks.output import interpret
from tiller.hooks.settings import match_names, parse_hooks, read_settings_file
from tiller.procs import CommandOutcome

# Claude Code's settings as its hooks reference and guide show them (written here from their
# shapes): a PreToolUse guard with the newer ``if`` field, a formatter, a notification (an
# event Tiller does not have), a prompt hook (a handler type Tiller does not run), SessionStart
# with a matcher, hooks without a matcher, MCP matchers, other settings beside ``hooks``.
CLAUDE_CODE_SETTINGS = {
    "permissions": {"allow": ["Bash(npm run lint)"], "deny": ["Read(./.env)"]},
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{
                "type": "command",
                "command": "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/block-rm.sh",
                "if": "Bash(rm *)"}]},
            {"matcher": "mcp__memory__.*", "hooks": [{
                "type": "command", "command": "echo 'memory op' >> ~/mcp-operations.log"}]},
            {"matcher": "Edit|Write", "hooks": [{
                "type": "command",
                "command": "python3 -c \"import json, sys; d = json.load(sys.stdin); "
                           "sys.exit(2 if '.env' in d['tool_input'].get('file_path', '') "
                           "else 0)\""}]},
        ],
        "PostToolUse": [
            {"matcher": "Edit|Write", "hooks": [{
                "type": "command",
                "command": "jq -r '.tool_input.file_path' | xargs npx prettier --write",
                "timeout": 30}]},
        ],
        "Notification": [
            {"matcher": "permission_prompt", "hooks": [{
                "type": "command", "command": "notify-send 'Claude Code' 'Needs input'"}]},
        ],
        "UserPromptSubmit": [
            {"hooks": [{"type": "command", "command": "cat ~/.claude/context.md"}]},
        ],
        "SessionStart": [
            {"matcher": "compact", "hooks": [{
                "type": "command",
                "command": "echo 'Reminder: use Bun, not npm. Run bun test before committing.'"}]},
        ],
        "Stop": [
            {"hooks": [{"type": "prompt",
                        "prompt": "Check if all tasks are complete. $ARGUMENTS"}]},
        ],
    },
}


def test_claude_code_s_documented_settings_parse_unchanged() -> None:
    data = json.dumps(CLAUDE_CODE_SETTINGS, indent=2).encode()
    hooks = read_settings_file(data, ".claude/settings.json")
    assert [(g.event, g.matcher) for g in hooks.groups] == [
        ("PreToolUse", "Bash"), ("PreToolUse", "mcp__memory__.*"), ("PreToolUse", "Edit|Write"),
        ("PostToolUse", "Edit|Write"), ("UserPromptSubmit", None), ("SessionStart", "compact")]
    assert hooks.groups[3].commands[0].timeout == 30
    assert hooks.groups[0].commands[0].timeout == 60  # Claude Code's default
    ignored = "\n".join(hooks.ignored)
    assert "Notification hooks are not run" in ignored
    assert "a Stop hook of type 'prompt' is not run" in ignored
    assert "if not honoured" in ignored
    assert [g.source for g in hooks.groups] == [".claude/settings.json"] * 6


def test_tiller_s_config_file_takes_the_same_shape_in_toml(tmp_path: Path) -> None:
    from tiller.config import load_config

    config = tmp_path / "config.toml"
    config.write_text(
        '[[hooks.PostToolUse]]\nmatcher = "Edit|Write"\n'
        'hooks = [{ type = "command", command = "ruff format $(jq -r .tool_input.file_path)" }]\n'
        '[[hooks.Stop]]\nhooks = [{ type = "command", command = "make test", timeout = 300 }]\n')
    loaded = load_config(["--config", str(config)], {"HOME": str(tmp_path)})
    assert [(g.event, g.matcher, g.commands[0].timeout) for g in loaded.hooks.groups] == [
        ("PostToolUse", "Edit|Write", 60.0), ("Stop", None, 300.0)]
    assert loaded.hooks.groups[0].source == str(config)


@pytest.mark.parametrize("bad, message", [
    ({"PreToolUse": {"matcher": "Bash"}}, "must be a list of matcher groups"),
    ({"PreToolUse": [{"hooks": [{"type": "command"}]}]}, "command must be a non-empty string"),
    ({"PreToolUse": [{"hooks": [{"command": "x", "timeout": -1}]}]}, "timeout must be"),
    ({"PreToolUse": [{"matcher": "a(b", "hooks": [{"command": "x"}]}]},
     "is not a regular expression"),
    ({"Stop": ["make test"]}, "must be an object"),
])
def test_a_malformed_shape_is_an_error_naming_where(bad: object, message: str) -> None:
    with pytest.raises(ConfigError, match="settings.json: hooks") as caught:
        parse_hooks(bad, "settings.json", "settings.json")
    assert message in str(caught.value)


@pytest.mark.parametrize("matcher, matched, unmatched", [
    (None, ["bash", "mcp__git__status"], []),
    ("*", ["anything"], []),
    ("", ["anything"], []),
    ("Bash", ["Bash"], ["bash", "BashOutput"]),
    ("Edit|Write", ["Edit", "Write"], ["edit", "TodoWrite", "MultiEdit"]),
    ("mcp__git__*", ["mcp__git__status", "mcp__git__"], ["mcp__github__x", "bash"]),
    ("mcp__*__read*", ["mcp__fs__read_file"], ["mcp__fs__write", "read"]),
    ("mcp__memory__.*", ["mcp__memory__store"], ["mcp__fs__read"]),
    ("^Notebook", ["NotebookEdit"], ["Edit"]),
])
def test_matchers(matcher: str | None, matched: list[str], unmatched: list[str]) -> None:
    test = match_names(matcher, "here")
    assert [name for name in matched if test(name)] == matched
    assert [name for name in unmatched if test(name)] == []


def test_exit_codes_and_json_mean_what_claude_code_says() -> None:
    blocked = interpret("PreToolUse", CommandOutcome(2, "", "no rm\n"), 60)
    assert (blocked.outcome, blocked.decision, blocked.reason) == ("blocked", "block", "no rm")
    failed = interpret("PreToolUse", CommandOutcome(1, "", "oops"), 60)
    assert (failed.outcome, failed.decision, failed.message) == ("error", None, "oops")
    start = interpret("SessionStart", CommandOutcome(2, "", "cannot"), 60)
    assert (start.outcome, start.decision) == ("error", None)  # SessionStart cannot block
    text = interpret("UserPromptSubmit", CommandOutcome(0, "Use make check.\n"), 60)
    assert text.context == "Use make check."
    assert interpret("PreToolUse", CommandOutcome(0, "plain text"), 60).context is None
    deny = interpret("PreToolUse", CommandOutcome(0, json.dumps({"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": "not here"}})), 60)
    assert (deny.outcome, deny.decision, deny.reason) == ("blocked", "block", "not here")
    ask = interpret("PreToolUse", CommandOutcome(0, json.dumps({"hookSpecificOutput": {
        "permissionDecision": "ask", "permissionDecisionReason": "sure?"}})), 60)
    assert (ask.outcome, ask.decision, ask.reason) == ("ok", "ask", "sure?")
    stop = interpret("Stop", CommandOutcome(0, json.dumps(
        {"decision": "block", "reason": "tests fail"})), 60)
    assert (stop.decision, stop.reason) == ("block", "tests fail")
    halt = interpret("PostToolUse", CommandOutcome(0, json.dumps(
        {"continue": False, "stopReason": "enough", "hookSpecificOutput": {
            "additionalContext": "formatted"}})), 60)
    assert (halt.stop, halt.context, halt.message) == ("enough", "formatted", "enough")
    late = interpret("Stop", CommandOutcome(None, timed_out=True), 5)
    assert (late.outcome, late.message) == ("timeout", "timed out after 5 seconds; it was killed")


def test_the_readme_s_hook_examples_parse_and_cover_every_event() -> None:
    import re
    import tomllib

    from support.paths import REPO
    from tiller.modes import HOOK_EVENTS

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Hooks\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```toml\n(.*?)```", section, re.DOTALL)
    events = []
    for block in blocks:
        text = "\n".join(line.removeprefix("  ") for line in block.splitlines())
        hooks = parse_hooks(tomllib.loads(text)["hooks"], "README.md", "README.md")
        assert hooks.ignored == ()
        events += [group.event for group in hooks.groups]
    assert sorted(set(events)) == sorted(HOOK_EVENTS)
    assert "ruff format" in section and "prettier --write" in section
