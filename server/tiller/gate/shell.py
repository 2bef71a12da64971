"""What a ``bash`` command is made of, for the permission gate: simple-command signatures.

``parse_command`` parses a command with tree-sitter's bash grammar. A **signature** is one simple
command's words as bash would pass them to the program (quotes and backslashes removed):
``git 'status' -s`` is ``("git", "status", "-s")``. A command is **plain** when it is nothing but
simple commands of plain words joined by ``;``, ``&&``, ``||``, ``|``, ``|&`` or newlines, where
the only redirections are ``N>&M``, ``N>&-`` and output to ``/dev/null``. Anything else has a
``doubt`` saying why: it does not parse, it uses substitution or expansion (``$(…)``, backticks,
``<(…)``, ``$VAR``, ``{a,b}``), assignments, other redirections (files, here-docs), ``&``,
subshells, functions, compound statements, a line continuation or control character, a program
that runs other commands (``eval``, ``sh -c``, ``env``, ``xargs``, …), or, in a list of several
parts, a builtin that changes how the later parts run (``cd``, ``export``, …): parts allowed one
by one must not combine into something the user did not see.

A word with an unquoted glob (``*``, ``?``, ``[…]``) is in doubt too, unless it starts with a
path: its literal part before the first pattern character holds a ``/`` and does not start with
``-`` (``./*``, ``src/*.py``). What bash makes of a glob depends on the files there when it runs:
after "always" for ``tar cf out.tar *``, files named ``--checkpoint=1`` and
``--checkpoint-action=exec=sh x.sh`` would turn the same words into a command that runs
``x.sh``. Every file ``./*`` expands to starts with ``./``, so none can be taken for an option.

Matching (``decide_command``), part by part:

- A config rule with ``command`` matches a part when the rule's words start the part's words
  (``command = "git status"`` matches ``git status -s``, not ``git statusx``); a rule without
  ``command`` matches every part. For each part the first matching rule decides.
- A remembered ``allowAlways`` is the exact signatures of the parts the user saw, and only for
  a plain command (``CommandMemory``); ``rejectAlways`` remembers the parts of any command.
- Deny (a rule or a remembered reject) if **any** part is denied, even when the command is in
  doubt. Allow only if **every** part is allowed and the command is plain (a rule without
  ``command`` allows even a command in doubt: it was written to allow any command). Otherwise
  the mode decides.

The parser is one module-level object: call these from one thread (the event loop's).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Protocol

from tiller.frozen import frozen
from tiller.modes import Verdict

if TYPE_CHECKING:  # the parser loads on the first command judged, not with the session
    import tree_sitter

__all__ = [
    "UNSANDBOXED",
    "CommandMemory",
    "CommandRule",
    "ShellCommand",
    "Signature",
    "decide_command",
    "parse_command",
]

Signature = tuple[str, ...]
"""A simple command's words, unquoted; a word that is not plain keeps its source text."""

RUNS_OTHER_COMMANDS = frozenset({
    "eval", "exec", "source", ".", "command", "builtin", "trap",
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "busybox",
    "env", "xargs", "sudo", "doas", "su", "nohup", "timeout", "nice", "ionice", "time",
    "setsid", "stdbuf", "chroot", "unshare", "nsenter", "flock", "watch", "strace", "script",
    "parallel", "coproc",
})
CHANGES_LATER_PARTS = frozenset({
    "cd", "pushd", "popd", "set", "shopt", "alias", "unalias", "enable", "hash", "umask",
    "export", "unset", "declare", "typeset", "readonly", "local", "read", "mapfile",
    "readarray", "printf", "getopts", "ulimit",
})
SEPARATORS = frozenset({";", "&&", "||", "|", "|&", "\n"})
PLAIN_REDIRECTS = {">&": "number", "<&": "number", ">": "/dev/null", ">>": "/dev/null",
                   "&>": "/dev/null", "&>>": "/dev/null", ">|": "/dev/null"}
WORDS = frozenset({"word", "number", "string", "raw_string", "concatenation"})
NOT_WORDS = frozenset({"variable_assignment", "file_redirect", "herestring_redirect",
                       "heredoc_redirect", "comment"})
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
"""Control characters: bash reads carriage return, form feed, … as part of a word, where the
grammar sees a blank."""
BRACE_EXPANSION = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")
READABLE = {
    "command_substitution": "command substitution",
    "process_substitution": "process substitution",
    "simple_expansion": "variable expansion",
    "expansion": "variable expansion",
    "arithmetic_expansion": "arithmetic expansion",
    "variable_assignment": "a variable assignment",
    "file_redirect": "a redirection to or from a file",
    "heredoc_redirect": "a here-document",
    "herestring_redirect": "a here-string",
    "&": "a background job (&)",
}

@cache
def _parser() -> tree_sitter.Parser:
    """The bash parser, built on first use (a loaded session may never judge a command)."""
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


@frozen
class ShellCommand:
    """``parts``: every simple command found anywhere in the text (also inside substitutions),
    in source order; ``doubt``: why no rule or remembered answer may allow it (None if plain)."""

    parts: tuple[Signature, ...]
    doubt: str | None


class CommandRule(Protocol):
    """The part of a config rule (``tiller.gate.permissions.PermissionRule``) commands look at."""

    @property
    def action(self) -> Verdict: ...
    @property
    def tool(self) -> str | None: ...
    @property
    def path(self) -> str | None: ...
    @property
    def command(self) -> str | None: ...


UNSANDBOXED = 2
"""The level of a command that runs outside the sandbox (``tiller.sandbox.use.SandboxUse``)."""


@dataclass
class CommandMemory:
    """A session's remembered ``allowAlways``/``rejectAlways`` answers for commands. An allow
    is remembered with the level it was given at (0 sandboxed without network, 1 sandboxed
    with network, 2 unsandboxed: ``SandboxUse.level``) and covers that level and those below;
    a rejection covers every level."""

    allowed: dict[Signature, int] = field(default_factory=dict)
    rejected: set[Signature] = field(default_factory=set)

    def remember(self, command: str, allowed: bool, level: int = UNSANDBOXED) -> None:
        """Remember an answer for each part of ``command``; an allow only if it is plain."""
        parsed = parse_command(command)
        if allowed and parsed.doubt is None:
            for part in parsed.parts:
                self.allowed[part] = max(level, self.allowed.get(part, -1))
        elif not allowed:
            self.rejected.update(parsed.parts)

    def allows(self, part: Signature, level: int) -> bool:
        """An "always" answer covers ``part`` at ``level``."""
        return self.allowed.get(part, -1) >= level


def parse_command(command: str) -> ShellCommand:
    """The command's parts and doubt (see the module docstring); never raises."""
    if "\\\n" in command or CONTROL.search(command):
        why = "it has a line continuation" if "\\\n" in command else (
            "it contains a control character")
        return ShellCommand(_parts_of(_parse(command.replace("\\\n", ""))), why)
    root = _parse(command)
    if root is None:
        return ShellCommand((), "it cannot be encoded")
    parts = _parts_of(root)
    if root.has_error:
        return ShellCommand(parts, "it does not parse")
    return ShellCommand(parts, next(_doubts(root), None) or _program_doubt(parts))


def _program_doubt(parts: tuple[Signature, ...]) -> str | None:
    if not parts:
        return "it runs no command"
    for part in parts:
        name = PurePosixPath(part[0]).name
        if name in RUNS_OTHER_COMMANDS:
            return f"`{name}` runs other commands"
        if name in CHANGES_LATER_PARTS and len(parts) > 1:
            return f"`{name}` changes how the commands after it run"
    return None


def decide_command(
    command: str, tool: str, rules: Sequence[CommandRule], memory: CommandMemory,
    level: int = UNSANDBOXED,
) -> tuple[Verdict | None, str]:
    """The verdict of the config rules and remembered answers for running ``command`` with
    ``tool`` at ``level`` (``CommandMemory``), and why; the verdict is None when they leave it
    to the permission mode (the reason then says why no "always" answer can cover the
    command, or is empty)."""
    parsed = parse_command(command)
    ruled = [_first_rule(rules, tool, part) for part in parsed.parts or ((),)]
    actions = [rule.action if rule else None for rule in ruled]
    if "deny" in actions:
        return "deny", "a permission rule says deny"
    undecided = [part for part, action in zip(parsed.parts, actions, strict=False) if not action]
    if any(part in memory.rejected for part in undecided):
        return "deny", "the user rejected this earlier"
    if "ask" in actions:
        return "ask", "a permission rule says ask"
    if all(rule is not None and rule.command is None for rule in ruled):
        return "allow", "a permission rule says allow"
    if parsed.doubt is None and all(memory.allows(part, level) for part in undecided):
        return "allow", "the user allowed this earlier" if undecided else "rules allow every part"
    return None, f"no 'always' answer can cover it: {parsed.doubt}" if parsed.doubt else ""


def _first_rule(rules: Sequence[CommandRule], tool: str, part: Signature) -> CommandRule | None:
    for rule in rules:
        if rule.tool not in (None, tool) or rule.path is not None:
            continue
        if rule.command is None or _starts_with(part, _rule_words(rule.command)):
            return rule
    return None


def _rule_words(command: str) -> Signature:
    try:
        return tuple(shlex.split(command))
    except ValueError:
        return tuple(command.split())


def _starts_with(part: Signature, words: Signature) -> bool:
    return bool(part) and part[: len(words)] == words


def _parse(command: str) -> tree_sitter.Node | None:
    try:
        return _parser().parse(command.encode("utf-8")).root_node
    except UnicodeEncodeError:
        return None


def _parts_of(root: tree_sitter.Node | None) -> tuple[Signature, ...]:
    """Every ``command`` node under ``root``, as a signature."""
    if root is None:
        return ()
    parts: list[Signature] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "command":
            words = [child.children[0] if child.type == "command_name" and child.children else child
                     for child in node.children if child.type not in NOT_WORDS]
            parts.append(tuple(_word(word) for word in words))
        stack.extend(reversed(node.children))
    return tuple(part for part in parts if part)


def _word(node: tree_sitter.Node) -> str:
    """The word bash passes for ``node``, or the node's source text if it is not plain."""
    value = _plain(node)
    return value if value is not None else _text(node)


def _plain(node: tree_sitter.Node) -> str | None:
    """The unquoted value of a word node made only of literal text, else None."""
    kind = node.type
    if kind in ("word", "number") and node.named_child_count:
        return None
    if kind == "word":
        text = _text(node)
        return None if BRACE_EXPANSION.search(text) else re.sub(r"\\(.)", r"\1", text)
    if kind == "number":
        return _text(node)
    if kind == "raw_string":
        return _text(node)[1:-1]
    if kind == "string":
        inner = node.children[1:-1]
        if any(child.type != "string_content" for child in inner):
            return None
        return re.sub(r'\\([$`"\\])', r"\1", "".join(_text(child) for child in inner))
    if kind == "concatenation":
        if BRACE_EXPANSION.search("".join(_text(c) for c in node.children if c.type == "word")):
            return None
        pieces = [_plain(child) for child in node.children]
        return None if any(p is None for p in pieces) else "".join(p or "" for p in pieces)
    return None


def _characters(node: tree_sitter.Node) -> list[tuple[str, bool]]:
    """The characters of a plain word node, each with whether it is quoted (or escaped)."""
    kind = node.type
    if kind == "concatenation":
        return [pair for child in node.children for pair in _characters(child)]
    if kind == "raw_string":
        return [(char, True) for char in _text(node)[1:-1]]
    if kind == "string":
        return [(char, True) for char in _plain(node) or ""]
    found: list[tuple[str, bool]] = []
    text = _text(node)
    index = 0
    while index < len(text):
        if text[index] == "\\" and index + 1 < len(text):
            found.append((text[index + 1], True))
            index += 2
        else:
            found.append((text[index], False))
            index += 1
    return found


def _glob(node: tree_sitter.Node) -> str | None:
    """The word, if it is a glob bash expands that does not start with a path (see the module
    docstring); None if it is literal or starts with one."""
    chars = _characters(node)
    first = None
    for index, (char, quoted) in enumerate(chars):
        if quoted:
            continue
        if char in "*?" or char == "[" and any(c == "]" and not q for c, q in chars[index + 1:]):
            first = index
            break
    if first is None:
        return None
    prefix = "".join(char for char, _ in chars[:first])
    if "/" in prefix and not prefix.startswith("-"):
        return None
    return _text(node)


def _doubts(root: tree_sitter.Node) -> Iterator[str]:
    """Why each construct under ``root`` is more than plain simple commands."""
    stack = [root]
    while stack:
        node = stack.pop()
        kind = node.type
        if kind in ("program", "list", "pipeline", "redirected_statement"):
            for child in node.children:
                if child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                    if not _plain_redirect(child):
                        yield f"it uses {READABLE[child.type]}"
                elif child.is_named:
                    stack.append(child)
                elif child.type not in SEPARATORS:
                    yield f"it uses {READABLE.get(child.type, f'`{child.type}`')}"
        elif kind == "command":
            for child in node.children:
                word = child.children[0] if child.type == "command_name" and child.children \
                    else child
                if child.type in ("file_redirect", "herestring_redirect"):
                    if not _plain_redirect(child):
                        yield f"it uses {READABLE[child.type]}"
                elif _plain(word) is None:
                    yield _describe(word)
                elif (pattern := _glob(word)) is not None:
                    yield (f"it uses a glob ({pattern}) whose files could be read as options: "
                           "start it with a path, as in ./*")
        elif kind != "comment":
            yield _describe(node)


def _plain_redirect(node: tree_sitter.Node) -> bool:
    """``N>&M``, ``N>&-`` or output to ``/dev/null``, with no word trailing the target."""
    rest = [child for child in node.children if child.type != "file_descriptor"]
    if node.type != "file_redirect" or not rest:
        return False
    operator, targets = rest[0].type, rest[1:]
    if operator in (">&-", "<&-"):
        return not targets
    wanted = PLAIN_REDIRECTS.get(operator)
    if len(targets) != 1 or wanted is None:
        return False
    if wanted == "number":
        return targets[0].type == "number"
    return targets[0].type == "word" and _text(targets[0]) == wanted


def _describe(node: tree_sitter.Node) -> str:
    for inner in _walk(node):
        if inner.type in READABLE:
            return f"it uses {READABLE[inner.type]}"
    if node.type in WORDS and BRACE_EXPANSION.search(_text(node)):
        return "it uses brace expansion"
    if node.type in WORDS:
        return f"it uses a word the permission matcher does not read: {_text(node)}"
    return f"it uses {node.type.replace('_', ' ')}"


def _walk(node: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def _text(node: tree_sitter.Node) -> str:
    return (node.text or b"").decode("utf-8", errors="replace")
