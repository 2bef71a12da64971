"""OpenAI request conversion: Tiller's ``ModelRequest`` as ``chat.completions.create`` params
(``build_request_params``) or as ``responses.create`` params (``build_responses_params``).

Responses API requests are stateless (``store: false``); ``include:
["reasoning.encrypted_content"]`` brings models' reasoning items back whole. An assistant
message keeps them in ``response_items`` (``openai_responses.ResponsesBuilder.finish``): its
output items in order, reasoning and function-call items as received, message items without
their content (that is the message's text). Those items go back unchanged, each message item
with its text again, when the message came from the same provider and model family
(``openai_models.model_family``); a reply from another provider or family goes back as plain
text and function calls, its reasoning dropped (the items would be refused or ignored there).

Imports nothing from the ``openai`` SDK.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tiller.providers.base import ModelRequest
from tiller.providers.openai_models import model_family
from tiller.types import (
    AssistantContent,
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = ["build_request_params", "build_responses_params", "replays_items"]


# ---------------------------------------------------------------------------------------------
# Chat Completions requests


def build_request_params(
    request: ModelRequest, model: str, *, effort: str | None = None
) -> dict[str, Any]:
    """The keyword arguments of ``chat.completions.create`` for ``request`` (streaming on).
    ``effort`` is the ``reasoning_effort`` to send (None: none sent); with tools,
    ``tool_choice`` is ``auto`` (llama-cpp-python's server reads a missing one as ``none``)."""
    messages: list[dict[str, Any]] = []
    if request.system_prompt:
        messages.append({"role": "system", "content": request.system_prompt})
    messages.extend(_convert_message(message) for message in request.messages)
    params: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in request.tools
        ]
        params["tool_choice"] = "auto"
    if request.max_tokens is not None:
        params["max_tokens"] = request.max_tokens
    if effort is not None:
        params["reasoning_effort"] = effort
    return params


def _convert_message(message: Message) -> dict[str, Any]:
    """One Tiller message as one Chat Completions message."""
    if isinstance(message, UserMessage):
        return {"role": "user", "content": _user_content(message.content)}
    if isinstance(message, ToolResultMessage):
        text = message.text
        if any(isinstance(block, ImageContent) for block in message.content):
            text = f"{text}\n[image omitted]" if text else "[image omitted]"
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": text}
    result: dict[str, Any] = {"role": "assistant", "content": message.text}
    if message.tool_calls:
        result["content"] = message.text or None
        result["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in message.tool_calls
        ]
    return result


def _user_content(content: str | list[TextContent | ImageContent]) -> str | list[dict[str, Any]]:
    """A string stays a string, and so does text-only content (local servers prefer it): its
    blocks are separated by a blank line, as separate blocks read (a prompt, then an attached
    file or resource, must not run into each other)."""
    if isinstance(content, str):
        return content
    if all(isinstance(block, TextContent) for block in content):
        return "\n\n".join(block.text for block in content if isinstance(block, TextContent))
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append({"type": "text", "text": block.text})
        else:
            url = f"data:{block.mime_type};base64,{block.data}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


# ---------------------------------------------------------------------------------------------
# Responses API requests


def replays_items(message: AssistantMessage, provider: str, model: str) -> bool:
    """Whether ``message``'s ``response_items`` go back to ``provider``/``model``: it made them
    and is of the same model family."""
    return (
        bool(message.response_items)
        and message.provider == provider
        and model_family(message.model) == model_family(model)
    )


def build_responses_params(
    request: ModelRequest,
    model: str,
    *,
    provider: str,
    effort: str | None,
    encrypted_reasoning: bool,
) -> dict[str, Any]:
    """The keyword arguments of ``responses.create`` for ``request`` (streaming on, nothing
    stored). ``effort`` None sends no ``reasoning``; ``encrypted_reasoning`` asks for the
    reasoning items' encrypted content; ``provider`` is the name on this provider's replies."""
    items: list[dict[str, Any]] = []
    for message in request.messages:
        items.extend(_input_items(message, provider, model))
    params: dict[str, Any] = {"model": model, "input": items, "stream": True, "store": False}
    if request.system_prompt:
        params["instructions"] = request.system_prompt
    if request.tools:
        params["tools"] = [
            {"type": "function", "name": tool.name, "description": tool.description,
             "parameters": tool.parameters, "strict": False}
            for tool in request.tools
        ]
        params["tool_choice"] = "auto"
    if request.max_tokens is not None:
        params["max_output_tokens"] = request.max_tokens
    if effort is not None:
        params["reasoning"] = {"effort": effort, "summary": "auto"}
    if encrypted_reasoning:
        params["include"] = ["reasoning.encrypted_content"]
    if request.cache_key:
        params["prompt_cache_key"] = request.cache_key
    return params


def _input_items(message: Message, provider: str, model: str) -> list[dict[str, Any]]:
    if isinstance(message, UserMessage):
        return [{"role": "user", "content": _input_content(message.content)}]
    if isinstance(message, ToolResultMessage):
        output: str | list[dict[str, Any]] = message.text
        if any(isinstance(block, ImageContent) for block in message.content):
            output = _parts(message.content)
        return [{"type": "function_call_output", "call_id": message.tool_call_id,
                 "output": output}]
    if replays_items(message, provider, model):
        return _replayed(message)
    return _rebuilt(message.content)


def _replayed(message: AssistantMessage) -> list[dict[str, Any]]:
    """The message's own output items, unchanged, each message item with its text again."""
    texts = iter([block for block in message.content if isinstance(block, TextContent)])
    sent_calls: set[str] = set()
    items: list[dict[str, Any]] = []
    for item in message.response_items or ():
        kind = item.get("type")
        if kind == "message":
            text = next(texts, None)
            if text is not None:
                part = {"type": "output_text", "text": text.text, "annotations": []}
                items.append({**item, "content": [part]})
        else:
            if kind == "function_call":
                sent_calls.add(str(item.get("call_id")))
            items.append(item)
    rest: list[AssistantContent] = [*texts]
    rest += [call for call in message.tool_calls if call.id not in sent_calls]
    return items + _rebuilt(rest)


def _rebuilt(content: Sequence[AssistantContent]) -> list[dict[str, Any]]:
    """A reply as plain items: text as assistant messages, calls as function calls, thinking
    dropped (it is private, and only its own model can read its encrypted form)."""
    items: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            if block.text:
                items.append({"role": "assistant", "content": block.text})
        elif isinstance(block, ToolCall):
            items.append({"type": "function_call", "call_id": block.id, "name": block.name,
                          "arguments": json.dumps(block.arguments)})
    return items


def _input_content(content: str | list[TextContent | ImageContent]) -> str | list[dict[str, Any]]:
    """As Chat Completions' ``_user_content``, with the Responses API's input parts."""
    if isinstance(content, str) or all(isinstance(block, TextContent) for block in content):
        return _user_content(content)
    return _parts(content)


def _parts(content: Sequence[TextContent | ImageContent]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append({"type": "input_text", "text": block.text})
        else:
            url = f"data:{block.mime_type};base64,{block.data}"
            parts.append({"type": "input_image", "image_url": url, "detail": "auto"})
    return parts
