"""Anthropic Messages request conversion: Tiller's ``ModelRequest`` as ``messages.create`` params.

``build_request_params`` (re-exported by ``tiller.providers.anthropic``) converts the messages to
alternating Anthropic ``user``/``assistant`` messages (tool results become ``user`` messages,
consecutive messages of one role merge, empty ones are dropped), the tools to ``input_schema``
specs, and the thinking level to a ``budget_tokens`` budget from ``THINKING_BUDGETS``.

* Thinking goes back to the API only with its signature; unsigned thinking is dropped, and
  thinking whose signature starts with ``REDACTED_THINKING_PREFIX`` goes back as
  ``redacted_thinking``.
* Tool call ids are sanitized to ``[A-Za-z0-9_-]`` in ``tool_use`` and ``tool_result`` alike.

Imports nothing from the ``anthropic`` SDK.
"""

from __future__ import annotations

import re
from typing import Any

from tiller.providers.base import ModelRequest
from tiller.types import (
    AssistantContent,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolResultMessage,
    UserMessage,
)

__all__ = ["REDACTED_THINKING_PREFIX", "THINKING_BUDGETS", "build_request_params"]

THINKING_BUDGETS = {"low": 1024, "medium": 4096, "high": 16384}
"""``budget_tokens`` per thinking level; ``off`` sends no ``thinking`` parameter."""
REDACTED_THINKING_PREFIX = "redacted_thinking:"
_TOOL_ID_FORBIDDEN = re.compile(r"[^A-Za-z0-9_-]")


def build_request_params(
    request: ModelRequest, model: str, default_max_tokens: int = 8192
) -> dict[str, Any]:
    """The keyword arguments of ``messages.create`` for ``request`` (streaming on).

    ``max_tokens`` is the request's or ``default_max_tokens``; with thinking on it is raised to
    ``budget + default_max_tokens`` if it would not exceed the thinking budget.
    """
    max_tokens = request.max_tokens or default_max_tokens
    params: dict[str, Any] = {
        "model": model,
        "messages": _convert_messages(request.messages),
        "stream": True,
    }
    if request.system_prompt:
        params["system"] = request.system_prompt
    if request.tools:
        params["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": _schema(t.parameters)}
            for t in request.tools
        ]
    budget = THINKING_BUDGETS.get(request.thinking)
    if budget is not None:
        params["thinking"] = {"type": "enabled", "budget_tokens": budget}
        if max_tokens <= budget:
            max_tokens = budget + default_max_tokens
    params["max_tokens"] = max_tokens
    return params


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
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": _tool_id(message.tool_call_id),
            "is_error": message.is_error,
        }
        if inner := _user_blocks(message.content):
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
    """A tool's JSON schema as ``input_schema``, which must be an object schema."""
    return {"type": "object", **parameters}


def _tool_id(call_id: str) -> str:
    """A tool call id the API accepts (``[A-Za-z0-9_-]+``)."""
    return _TOOL_ID_FORBIDDEN.sub("_", call_id) or "toolu_unknown"
