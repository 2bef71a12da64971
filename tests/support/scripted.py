"""A scripted provider for unit tests of the loop: tests read like stories.

``provider.enqueue(reply_text("hi"), reply_tools(call("bash", command="ls")))`` scripts the next
model calls; every call is recorded in ``provider.requests``. The script is strict: a model call
with no step left, or steps left over at the end (``assert_done``), fails the test.
"""

from __future__ import annotations

import itertools
import json
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from tiller.providers.base import ModelRequest, Provider, StreamItem
from tiller.types import (
    AssistantMessage,
    MessageUpdate,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)

Step = AssistantMessage | Callable[[ModelRequest], Awaitable[AssistantMessage]]

_ids = itertools.count(1)


def call(name: str, **arguments: Any) -> ToolCall:
    """A tool call with a fresh id."""
    return ToolCall(id=f"call_{next(_ids)}", name=name, arguments=arguments)


def reply_text(text: str, stop_reason: StopReason = "stop", **kw: Any) -> AssistantMessage:
    return AssistantMessage(
        content=[TextContent(text=text)],
        stop_reason=stop_reason,
        usage=Usage(input_tokens=10, output_tokens=5),
        **kw,
    )


def reply_tools(*calls: ToolCall, text: str | None = None,
                stop_reason: StopReason = "toolUse") -> AssistantMessage:
    content: list[TextContent | ThinkingContent | ToolCall] = []
    if text:
        content.append(TextContent(text=text))
    content.extend(calls)
    return AssistantMessage(
        content=content, stop_reason=stop_reason, usage=Usage(input_tokens=10, output_tokens=5)
    )


def reply_error(message: str) -> AssistantMessage:
    return AssistantMessage(stop_reason="error", error_message=message)


class ScriptedProvider(Provider):
    """Plays back scripted replies as streamed deltas; records each request."""

    def __init__(self, *steps: Step) -> None:
        self.name = "scripted"
        self.model = "scripted-1"
        self.script: deque[Step] = deque(steps)
        self.requests: list[ModelRequest] = []
        self.unexpected_calls = 0

    def enqueue(self, *steps: Step) -> None:
        self.script.extend(steps)

    def assert_done(self) -> None:
        assert self.unexpected_calls == 0, f"{self.unexpected_calls} model call(s) not scripted"
        assert not self.script, f"{len(self.script)} scripted step(s) never used"

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        self.requests.append(request)
        if not self.script:
            self.unexpected_calls += 1
            yield AssistantMessage(stop_reason="error", error_message="script exhausted")
            return
        step = self.script.popleft()
        message = step if isinstance(step, AssistantMessage) else await step(request)
        for update in deltas_of(message):
            yield update
        yield message.model_copy(update={"provider": self.name, "model": self.model})


def deltas_of(message: AssistantMessage) -> list[MessageUpdate]:
    """The MessageUpdate events a real provider would stream for ``message``."""
    updates = []
    for index, block in enumerate(message.content):
        if isinstance(block, TextContent):
            half = len(block.text) // 2
            for piece in (block.text[:half], block.text[half:]):
                updates.append(MessageUpdate(kind="text", index=index, delta=piece))
        elif isinstance(block, ThinkingContent):
            updates.append(MessageUpdate(kind="thinking", index=index, delta=block.thinking))
        else:
            updates.append(MessageUpdate(
                kind="toolCallStart", index=index, tool_call_id=block.id, tool_name=block.name
            ))
            updates.append(MessageUpdate(
                kind="toolCallArgs", index=index, delta=json.dumps(block.arguments)
            ))
    return updates
