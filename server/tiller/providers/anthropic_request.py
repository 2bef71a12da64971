"""Anthropic Messages request conversion: Tiller's ``ModelRequest`` as ``messages.create`` params.

``build_request_params`` (re-exported by ``tiller.providers.anthropic``) converts the messages to
alternating Anthropic ``user``/``assistant`` messages (tool results become ``user`` messages,
consecutive messages of one role merge, empty ones are dropped), the tools to ``input_schema``
specs, and the thinking level (already mapped to one the model takes) to the model's shape:

* ``adaptive`` (the model's capabilities say it takes ``thinking.type: adaptive``):
  ``thinking: {type: "adaptive", display: "summarized"}`` (summarized: the thinking text comes
  back) and ``output_config: {effort: <level>}``; ``off`` sends ``thinking: {type:
  "disabled"}``, since such models may think by default;
* ``budget`` (``thinking.type: enabled``): a ``budget_tokens`` budget from ``THINKING_BUDGETS``;
  ``off`` sends nothing. A model Tiller knows nothing about gets this shape (what proxies and
  older models take); the provider corrects it once on the API's 400 (``anthropic.py``).

Prompt caching: ``cache_control`` breakpoints (``ttl`` from ``cache_ttl``; at most
``CACHE_BREAKPOINTS``) go on the last tool, the system prompt, the newest message and the
message the previous request ended with (the one before the newest assistant message), so
each request reads the prefix the previous one wrote. Nothing in the request depends on the
turn but the messages appended, so that prefix is byte for byte the same.

* Thinking goes back to the API only with its signature; unsigned thinking is dropped, and
  thinking whose signature starts with ``REDACTED_THINKING_PREFIX`` goes back as
  ``redacted_thinking``.
* Tool call ids are sanitized to ``[A-Za-z0-9_-]`` in ``tool_use`` and ``tool_result`` alike.
* Every call resends the tools and the history, so what carries no information is left out:
  schema ``title``s, ``anyOf [X, null]`` of optional fields (just ``X``), ``is_error: false``;
  a tool result of one text is a string.

Imports nothing from the ``anthropic`` SDK.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from tiller.providers.base import CacheTtl, ModelRequest
from tiller.types import (
    AssistantContent,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolResultMessage,
    UserMessage,
)

__all__ = [
    "CACHE_BREAKPOINTS", "REDACTED_THINKING_PREFIX", "THINKING_BUDGETS", "ThinkingShape",
    "build_request_params",
]

THINKING_BUDGETS = {"low": 1024, "medium": 4096, "high": 16384, "xhigh": 32768, "max": 63999}
"""``budget_tokens`` per thinking level for the ``budget`` shape; ``off`` sends none."""
ADAPTIVE_MAX_TOKENS = 32768
"""``max_tokens`` at least, with adaptive thinking on (thinking counts toward it)."""
CACHE_BREAKPOINTS = 4
"""The most ``cache_control`` blocks a request may carry (the API refuses a fifth)."""
REDACTED_THINKING_PREFIX = "redacted_thinking:"
_TOOL_ID_FORBIDDEN = re.compile(r"[^A-Za-z0-9_-]")
_UNCACHEABLE = frozenset({"thinking", "redacted_thinking"})

ThinkingShape = Literal["adaptive", "budget"]


def build_request_params(
    request: ModelRequest, model: str, default_max_tokens: int = 8192, *,
    shape: ThinkingShape | None = None, cache_ttl: CacheTtl = "5m",
) -> dict[str, Any]:
    """The keyword arguments of ``messages.create`` for ``request`` (streaming on).

    ``shape`` overrides the model's thinking shape (``request.model``; unknown: ``budget``).
    ``max_tokens`` is the request's or ``default_max_tokens``, raised with thinking on (to
    ``budget + default_max_tokens`` if it would not exceed the budget; to at least
    ``ADAPTIVE_MAX_TOKENS``), never above the model's limit.
    """
    info = request.model
    shape = shape or (info.thinking_shape if info else None) or "budget"
    limit = info.max_output_tokens if info and info.max_output_tokens else None
    max_tokens = request.max_tokens or default_max_tokens
    marker = _marker(cache_ttl)
    params: dict[str, Any] = {
        "model": model,
        "messages": _cached_messages(_convert_messages(request.messages), marker),
        "stream": True,
    }
    if request.system_prompt:
        params["system"] = [{"type": "text", "text": request.system_prompt,
                             "cache_control": marker}]
    if request.tools:
        params["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": _schema(t.parameters)}
            for t in request.tools
        ]
        params["tools"][-1]["cache_control"] = marker
    level = request.thinking
    if shape == "adaptive" and level != "off":
        params["thinking"] = {"type": "adaptive", "display": "summarized"}
        params["output_config"] = {"effort": level}
        max_tokens = max(max_tokens, ADAPTIVE_MAX_TOKENS)
    elif shape == "adaptive" and info is not None and info.levels() not in (None, ("off",)):
        params["thinking"] = {"type": "disabled"}
    elif (budget := THINKING_BUDGETS.get(level)) is not None:
        if max_tokens <= budget:
            max_tokens = budget + default_max_tokens
        if limit is not None and max_tokens > limit:
            max_tokens, budget = limit, max(min(budget, limit - default_max_tokens), 1024)
        params["thinking"] = {"type": "enabled", "budget_tokens": budget}
    params["max_tokens"] = min(max_tokens, limit) if limit else max_tokens
    return params


def _marker(ttl: CacheTtl) -> dict[str, str]:
    return {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}


def _cached_messages(
    messages: list[dict[str, Any]], marker: dict[str, str]
) -> list[dict[str, Any]]:
    """``messages`` with breakpoints on the newest one and on the one the previous request
    ended with (the last before the newest assistant message)."""
    targets = [len(messages) - 1]
    assistants = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    if assistants and assistants[-1] > 0:
        targets.append(assistants[-1] - 1)
    for index in dict.fromkeys(targets):
        if index < 0:
            continue
        blocks = messages[index]["content"]
        for position in range(len(blocks) - 1, -1, -1):
            if blocks[position]["type"] not in _UNCACHEABLE:
                blocks[position] = {**blocks[position], "cache_control": marker}
                break
    return messages


def _convert_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Tiller messages as alternating Anthropic messages: tool results become ``user`` messages,
    consecutive messages of one role merge, and messages left with no content are dropped."""
    result: list[dict[str, Any]] = []
    for message in messages:
        role, blocks = _convert_message(message)
        if not blocks:
            continue
        if result and result[-1]["role"] == role:
            result[-1]["content"].extend(blocks)
        else:
            result.append({"role": role, "content": blocks})
    return result


def _convert_message(message: Message) -> tuple[str, list[dict[str, Any]]]:
    """One Tiller message as a role and its Anthropic content blocks."""
    if isinstance(message, UserMessage):
        content = message.content
        if isinstance(content, str):
            return "user", [{"type": "text", "text": content}] if content else []
        return "user", _user_blocks(content)
    if isinstance(message, ToolResultMessage):
        call_id = _tool_id(message.tool_call_id)
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
        if message.is_error:
            block["is_error"] = True
        inner = _user_blocks(message.content)
        if len(inner) == 1 and inner[0]["type"] == "text":
            block["content"] = inner[0]["text"]  # one text: a string, as the API allows
        elif inner:
            block["content"] = inner
        return "user", [block]
    return "assistant", _assistant_blocks(message.content)


def _user_blocks(content: list[TextContent | ImageContent]) -> list[dict[str, Any]]:
    """Text blocks (empty ones dropped: the API rejects them) and base64 image blocks."""
    blocks: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            if block.text:
                blocks.append({"type": "text", "text": block.text})
        else:
            source = {"type": "base64", "media_type": block.mime_type, "data": block.data}
            blocks.append({"type": "image", "source": source})
    return blocks


def _assistant_blocks(content: list[AssistantContent]) -> list[dict[str, Any]]:
    """Signed thinking (or redacted thinking), non-empty text, and tool_use blocks."""
    blocks: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, ThinkingContent):
            signature = block.signature or ""
            if signature.startswith(REDACTED_THINKING_PREFIX):
                data = signature.removeprefix(REDACTED_THINKING_PREFIX)
                blocks.append({"type": "redacted_thinking", "data": data})
            elif signature:
                blocks.append(
                    {"type": "thinking", "thinking": block.thinking, "signature": signature}
                )
        elif isinstance(block, TextContent):
            if block.text:
                blocks.append({"type": "text", "text": block.text})
        else:
            call = {"id": _tool_id(block.id), "name": block.name, "input": block.arguments}
            blocks.append({"type": "tool_use", **call})
    return blocks


def _schema(parameters: dict[str, Any]) -> dict[str, Any]:
    """A tool's JSON schema as ``input_schema``, which must be an object schema, without what
    costs tokens on every call and tells the model nothing (``_lean``). (An MCP tool's schema
    is one object already: ``tiller.mcp.tool.object_schema``.)"""
    return {"type": "object", **_lean(parameters)}


def _lean(schema: Any) -> Any:
    """``schema`` without ``title`` keywords, and an optional ``anyOf: [X, null]`` with a
    ``null`` default as plain ``X`` (leaving it out means the same)."""
    if isinstance(schema, list):
        return [_lean(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    lean = {key: (value if key in ("enum", "const", "default", "required") else _lean(value))
            for key, value in schema.items()
            if not (key == "title" and isinstance(value, str))}
    if "properties" in schema and isinstance(schema["properties"], dict):
        lean["properties"] = {name: _lean(value) for name, value in schema["properties"].items()}
    options = lean.get("anyOf")
    if (isinstance(options, list) and len(options) == 2 and {"type": "null"} in options
            and "default" in lean and lean["default"] is None):
        [kept] = [option for option in options if option != {"type": "null"}]
        lean = {**{k: v for k, v in lean.items() if k not in ("anyOf", "default")}, **kept}
    return lean


def _tool_id(call_id: str) -> str:
    """A tool call id the API accepts (``[A-Za-z0-9_-]+``)."""
    return _TOOL_ID_FORBIDDEN.sub("_", call_id) or "toolu_unknown"
