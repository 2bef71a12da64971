"""Tool calls for a local GGUF model: what it is told, the grammar it must follow, what it wrote.

A model run in-process has no tool-calling API, so Tiller gives it one of its own, in the
Hermes style that Qwen, Hermes and many other open models were trained on:

* ``tools_prompt`` is the system prompt's section naming each tool, its description and its
  arguments' JSON schema, and saying how to call one: a reply that is only
  ``<tool_call>{"name": NAME, "arguments": {...}}</tool_call>`` blocks;
* ``tool_grammar`` is a GBNF grammar (llama.cpp's constrained sampling) that admits exactly
  that: either a plain-text answer (which cannot start with ``<``) or up to ``MAX_CALLS`` call
  blocks whose ``name`` is one of the tools and whose ``arguments`` match that tool's schema
  (converted by llama-cpp-python's own JSON-schema converter);
* ``parse_tool_calls`` turns the blocks back into ``ToolCall``s; a block the output limit cut
  short still becomes a call (its arguments repaired for display, ``arguments_error`` set),
  which the loop answers with an error and never runs.

The grammar makes every call well formed; it cannot make a small model choose well.
``llama_cpp`` is imported by ``tool_grammar`` only, on first use.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from typing import Any

from tiller import jsontext
from tiller.providers.base import ToolSpec
from tiller.providers.tool_arguments import parse_tool_arguments, streamed_tool_call
from tiller.types import ToolCall

__all__ = [
    "MAX_CALLS",
    "call_block",
    "parse_tool_calls",
    "tool_grammar",
    "tools_prompt",
]

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
MAX_CALLS = 4
"""Call blocks one reply may hold: a small model left unbounded repeats its call until the
output limit."""
_BLOCK = re.compile(re.escape(CALL_OPEN) + r"(.*?)(?:" + re.escape(CALL_CLOSE) + r"|\Z)", re.S)


def tools_prompt(tools: Sequence[ToolSpec]) -> str:
    """The system prompt's section that describes ``tools`` and the call format."""
    lines = [
        "# Tools",
        "You can call the tools below. To call tools, reply with nothing but one or more "
        f"blocks like {CALL_OPEN}{{\"name\": \"TOOL\", \"arguments\": {{...}}}}{CALL_CLOSE} "
        "(the arguments as a JSON object matching the tool's schema). Each call's result "
        "comes back in the next message. To answer the user instead, reply in plain text.",
        "",
    ]
    for tool in tools:
        schema = json.dumps(tool.parameters, separators=(",", ":"))
        lines.append(f"- {tool.name}: {tool.description.strip()}\n  arguments: {schema}")
    return "\n".join(lines)


def call_block(name: str, arguments: dict[str, Any]) -> str:
    """One call as the model is told to write it (earlier calls are shown to it this way)."""
    return f"{CALL_OPEN}{json.dumps({'name': name, 'arguments': arguments})}{CALL_CLOSE}"


def tool_grammar(tools: Sequence[ToolSpec], *, required: bool = False) -> str:
    """The GBNF grammar of a reply: plain text not starting with ``<``, or 1 to ``MAX_CALLS``
    call blocks naming one of ``tools`` with arguments that match its schema; with
    ``required``, only the calls."""
    from llama_cpp import llama_grammar

    schemas: Any = llama_grammar  # untyped
    converter = schemas.SchemaConverter(prop_order={}, allow_fetch=False, dotall=False,
                                raw_pattern=False)
    calls = []
    for tool in tools:
        schema = converter.resolve_refs(json.loads(json.dumps(tool.parameters)),
                                        f"tiller-tool-{tool.name}")
        arguments = converter.visit(schema, f"{tool.name}-arguments")
        calls.append(
            f'"{{" space {_literal(json.dumps("name"))} space ":" space '
            f'{_literal(json.dumps(tool.name))} space "," space '
            f'{_literal(json.dumps("arguments"))} space ":" space {arguments} space "}}"'
        )
    block = f'{_literal(CALL_OPEN)} tiller-call {_literal(CALL_CLOSE)}'
    head = [
        "root ::= tiller-calls" + ("" if required else " | tiller-answer"),
        f'tiller-calls ::= {block} ("\\n"? {block}){{0,{MAX_CALLS - 1}}}',
        "tiller-answer ::= [^<] [^\\x00]*",
        "tiller-call ::= " + " | ".join(f"( {call} )" for call in calls),
    ]
    return "\n".join(head) + "\n" + str(converter.format_grammar())


def parse_tool_calls(raw: str) -> list[ToolCall]:
    """The calls in a reply made of call blocks (``tool_grammar``'s calls). A block that does
    not hold ``{"name": ..., "arguments": {...}}``, typically one cut at the output limit,
    becomes a call with ``arguments_error`` set (what could be read of it kept for display)."""
    calls: list[ToolCall] = []
    for match in _BLOCK.finditer(raw):
        text = match.group(1).strip()
        call_id = f"call_{uuid.uuid4().hex[:12]}"
        try:
            value = jsontext.loads(text)
        except ValueError:
            value = None
        if (isinstance(value, dict) and isinstance(value.get("name"), str)
                and isinstance(value.get("arguments"), dict)):
            calls.append(streamed_tool_call(call_id, value["name"],
                                            json.dumps(value["arguments"])))
            continue
        repaired = parse_tool_arguments(text)
        name = repaired.get("name") if isinstance(repaired.get("name"), str) else ""
        arguments = repaired.get("arguments")
        calls.append(ToolCall(
            id=call_id, name=str(name),
            arguments=arguments if isinstance(arguments, dict) else {},
            arguments_error="the call was cut off before it was complete",
        ))
    return calls


def _literal(text: str) -> str:
    """``text`` as a GBNF string literal."""
    for plain, escaped in (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\r", "\\r")):
        text = text.replace(plain, escaped)
    return f'"{text}"'
