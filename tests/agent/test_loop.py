"""Unit tests of the agent loop (docs/loop.md), driven by a strict scripted model.

The Agent is driven with ``ScriptedProvider`` and small tools defined here. Concurrency is
synchronised with ``anyio.Event`` only (no sleeps); every await that could hang is bounded by
``anyio.fail_after``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest
from pydantic import BaseModel

from support.scripted import ScriptedProvider, call, reply_error, reply_text, reply_tools
from tiller.agent.abort import AbortSignal
from tiller.agent.agent import Agent
from tiller.agent.loop import LENGTH_POISON_MESSAGE, Queues, run_agent_loop
from tiller.agent.model_call import ModelSpec, model_context, streaming_call
from tiller.agent.settings import AgentSettings
from tiller.agent.tool_batch import AfterToolCallResult, BeforeToolCallResult
from tiller.errors import (
    AgentBusyError,
    CannotContinueError,
    NoActiveRunError,
    ProviderNotConfiguredError,
    ToolError,
)
from tiller.providers.base import ModelRequest, StreamItem
from tiller.tools.base import Tool, ToolContext, ToolResult
from tiller.types import (
    AgentEvent,
    AssistantMessage,
    Message,
    MessageUpdate,
    RunResult,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

pytestmark = pytest.mark.anyio

TIMEOUT = 5


@pytest.fixture
def provider() -> Iterator[ScriptedProvider]:
    scripted = ScriptedProvider()
    yield scripted
    scripted.assert_done()


# ---------------------------------------------------------------------------------------------
# Test tools


class EchoParams(BaseModel):
    text: str
    times: int = 1


class Echo(Tool[EchoParams]):
    name = "echo"
    description = "Echo the text back."
    Params = EchoParams

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def execute(self, params: EchoParams, ctx: ToolContext) -> ToolResult:
        self.calls.append(params.text)
        return ToolResult.text(params.text * params.times)


class GateParams(BaseModel):
    key: str
    wait_for: list[str] = []


class Gate(Tool[GateParams]):
    """Records start/end; waits until every key in ``wait_for`` has started, then for its own
    release event."""

    name = "gate"
    description = "Wait for the test to release it."
    Params = GateParams

    def __init__(self) -> None:
        self.started: defaultdict[str, anyio.Event] = defaultdict(anyio.Event)
        self.release: defaultdict[str, anyio.Event] = defaultdict(anyio.Event)
        self.log: list[tuple[str, str]] = []
        self.cancelled: list[str] = []

    async def execute(self, params: GateParams, ctx: ToolContext) -> ToolResult:
        self.log.append(("start", params.key))
        self.started[params.key].set()
        try:
            for other in params.wait_for:
                await self.started[other].wait()
            await self.release[params.key].wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled.append(params.key)
            raise
        self.log.append(("end", params.key))
        return ToolResult.text(f"gate {params.key} done")


class NoParams(BaseModel):
    pass


class Forever(Tool[NoParams]):
    name = "forever"
    description = "Never returns."
    Params = NoParams

    async def execute(self, params: NoParams, ctx: ToolContext) -> ToolResult:
        await anyio.Event().wait()
        raise AssertionError("unreachable")


class FailParams(BaseModel):
    kind: str


class Fail(Tool[FailParams]):
    name = "fail"
    description = "Raises."
    Params = FailParams

    async def execute(self, params: FailParams, ctx: ToolContext) -> ToolResult:
        if params.kind == "tool_error":
            raise ToolError("the file does not exist")
        if params.kind == "timeout_error":
            raise TimeoutError("upstream timed out")
        raise RuntimeError("kaboom")


class Terminate(Tool[NoParams]):
    name = "terminate"
    description = "Asks the loop to end the run."
    Params = NoParams

    async def execute(self, params: NoParams, ctx: ToolContext) -> ToolResult:
        return ToolResult(content=[TextContent(text="bye")], terminate=True)


class ProbeParams(BaseModel):
    key: str


class Probe(Tool[ProbeParams]):
    """Measures how many probes run at once; yields to the scheduler while running."""

    name = "probe"
    description = "Concurrency probe."
    Params = ProbeParams

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    async def execute(self, params: ProbeParams, ctx: ToolContext) -> ToolResult:
        state = self.state
        state["log"].append(("start", params.key))
        state["running"] += 1
        state["max"] = max(state["max"], state["running"])
        for _ in range(5):
            await anyio.lowlevel.checkpoint()
        state["running"] -= 1
        state["log"].append(("end", params.key))
        return ToolResult.text(params.key)


class SequentialProbe(Probe):
    name = "seq_probe"
    sequential = True


def probe_state() -> dict[str, Any]:
    return {"log": [], "running": 0, "max": 0}


# ---------------------------------------------------------------------------------------------
# Helpers


class Recorder:
    """The ``emit`` callback: keeps every event and lets a test wait for one."""

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []
        self._waiters: list[tuple[Callable[[Any], bool], anyio.Event]] = []

    def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)
        for predicate, flag in self._waiters:
            if not flag.is_set() and predicate(event):
                flag.set()

    async def wait_for(self, predicate: Callable[[Any], bool]) -> None:
        if any(predicate(event) for event in self.events):
            return
        flag = anyio.Event()
        self._waiters.append((predicate, flag))
        await flag.wait()

    @property
    def types(self) -> list[str]:
        return [event.type for event in self.events]

    def of_type(self, kind: str) -> list[Any]:
        return [event for event in self.events if event.type == kind]


def make_agent(
    provider: ScriptedProvider, *tools: Tool[Any], **settings: Any
) -> tuple[Agent, Recorder]:
    recorder = Recorder()
    agent = Agent(AgentSettings(tools=tools, **settings), lambda: provider, recorder)
    return agent, recorder


def gated(
    reply: AssistantMessage, started: anyio.Event, release: anyio.Event
) -> Callable[[ModelRequest], Awaitable[AssistantMessage]]:
    """A model step that signals ``started`` and answers ``reply`` once ``release`` is set."""

    async def step(request: ModelRequest) -> AssistantMessage:
        started.set()
        await release.wait()
        return reply

    return step


def hanging(started: anyio.Event) -> Callable[[ModelRequest], Awaitable[AssistantMessage]]:
    """A model step that never answers (until cancelled)."""

    async def step(request: ModelRequest) -> AssistantMessage:
        started.set()
        await anyio.Event().wait()
        raise AssertionError("unreachable")

    return step


def spawn(
    group: anyio.abc.TaskGroup, run: Callable[[], Awaitable[RunResult]]
) -> dict[str, RunResult]:
    """Start ``run`` in ``group``; its result lands in the returned dict under "result"."""
    box: dict[str, RunResult] = {}

    async def runner() -> None:
        box["result"] = await run()

    group.start_soon(runner)
    return box


def text_of(message: Message) -> str:
    if isinstance(message, UserMessage):
        if isinstance(message.content, str):
            return message.content
        return "".join(b.text for b in message.content if isinstance(b, TextContent))
    return message.text


def roles(messages: list[Message]) -> list[str]:
    return [message.role for message in messages]


def tool_results(messages: list[Message]) -> list[ToolResultMessage]:
    return [m for m in messages if isinstance(m, ToolResultMessage)]


def is_assistant_start(event: Any) -> bool:
    return event.type == "message_start" and event.message.role == "assistant"


# ---------------------------------------------------------------------------------------------
# 1-2. Event order


async def test_plain_text_reply_event_order(provider: ScriptedProvider) -> None:
    provider.enqueue(reply_text("hello"))
    agent, rec = make_agent(provider)

    with anyio.fail_after(TIMEOUT):
        result = await agent.prompt("hi")

    assert rec.types == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_update",
        "message_update",
        "message_end",
        "turn_end",
        "agent_end",
        "agent_settled",
    ]
    ev = rec.events
    assert ev[2].message.role == "user" and text_of(ev[2].message) == "hi"
    assert ev[3].message.role == "user"
    assert ev[4].message.role == "assistant"
    assert "".join(e.delta for e in ev[5:7]) == "hello"
    assert ev[7].message.role == "assistant" and ev[7].message.text == "hello"
    assert ev[8].message.text == "hello" and ev[8].tool_results == []
    assert ev[9].stop_reason == "stop"
    assert ev[9].usage.input_tokens == 10 and ev[9].usage.output_tokens == 5
    assert result.stop_reason == "stop"
    assert roles(agent.messages) == ["user", "assistant"]
    assert [text_of(m) for m in provider.requests[0].messages] == ["hi"]


async def test_tool_round_event_order_and_second_request(provider: ScriptedProvider) -> None:
    echo = Echo()
    tool_call = call("echo", text="ping")
    provider.enqueue(reply_tools(tool_call), reply_text("done"))
    agent, rec = make_agent(provider, echo)

    with anyio.fail_after(TIMEOUT):
        result = await agent.prompt("go")

    assert rec.types == [
        "agent_start",
        "turn_start",
        "message_start",  # user
        "message_end",
        "message_start",  # assistant with the tool call
        "message_update",
        "message_update",
        "message_end",
        "tool_execution_start",
        "tool_execution_end",
        "message_start",  # tool result
        "message_end",
        "turn_end",
        "turn_start",
        "message_start",  # final assistant
        "message_update",
        "message_update",
        "message_end",
        "turn_end",
        "agent_end",
        "agent_settled",
    ]
    start = rec.of_type("tool_execution_start")[0]
    assert start.tool_call_id == tool_call.id and start.args == {"text": "ping"}
    end = rec.of_type("tool_execution_end")[0]
    assert end.tool_call_id == tool_call.id and not end.is_error
    assert rec.events[10].message.role == "toolResult"
    first_turn_end = rec.of_type("turn_end")[0]
    assert [r.tool_call_id for r in first_turn_end.tool_results] == [tool_call.id]

    assert echo.calls == ["ping"]
    assert result.stop_reason == "stop"
    assert roles(agent.messages) == ["user", "assistant", "toolResult", "assistant"]
    assert len(provider.requests) == 2
    second = provider.requests[1].messages
    assert roles(second) == ["user", "assistant", "toolResult"]
    assert isinstance(second[1], AssistantMessage)
    assert [c.id for c in second[1].tool_calls] == [tool_call.id]
    assert isinstance(second[2], ToolResultMessage)
    assert second[2].tool_call_id == tool_call.id
    assert second[2].text == "ping" and not second[2].is_error


# ---------------------------------------------------------------------------------------------
# 3-6. Steering, follow-up and queue modes


async def test_steering_queued_before_prompt_is_in_first_request(
    provider: ScriptedProvider,
) -> None:
    provider.enqueue(reply_text("ok"))
    agent, rec = make_agent(provider)
    agent.steer("also this")

    with anyio.fail_after(TIMEOUT):
        await agent.prompt("first")

    assert len(provider.requests) == 1
    assert [text_of(m) for m in provider.requests[0].messages] == ["first", "also this"]
    assert not agent.steering_queue
    # Both user messages are announced before the model call starts.
    assert rec.types[:7] == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "message_start",
    ]
    assert text_of(rec.events[4].message) == "also this"
    assert rec.events[6].message.role == "assistant"


async def test_steering_during_tool_batch_is_delivered_after_the_whole_batch(
    provider: ScriptedProvider,
) -> None:
    gate = Gate()
    call_a, call_b = call("gate", key="a"), call("gate", key="b")
    provider.enqueue(reply_tools(call_a, call_b), reply_text("changed course"))
    agent, rec = make_agent(provider, gate)

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:
            box = spawn(group, lambda: agent.prompt("go"))
            await gate.started["a"].wait()
            await gate.started["b"].wait()
            agent.steer("stop and do X")
            gate.release["a"].set()
            gate.release["b"].set()

    assert box["result"].stop_reason == "stop"
    assert gate.cancelled == []
    assert sorted(gate.log) == [("end", "a"), ("end", "b"), ("start", "a"), ("start", "b")]

    types = rec.types
    first_exec = types.index("tool_execution_start")
    assert types[first_exec:first_exec + 14] == [
        "tool_execution_start",
        "tool_execution_start",
        "tool_execution_end",
        "tool_execution_end",
        "message_start",  # result a
        "message_end",
        "message_start",  # result b
        "message_end",
        "turn_end",
        "turn_start",
        "message_start",  # steering
        "message_end",
        "message_start",  # next assistant
        "message_update",
    ]
    steering_event = rec.events[first_exec + 10]
    assert text_of(steering_event.message) == "stop and do X"
    for result in tool_results(agent.messages):
        assert not result.is_error

    assert len(provider.requests) == 2
    second = provider.requests[1].messages
    assert roles(second) == ["user", "assistant", "toolResult", "toolResult", "user"]
    assert [m.tool_call_id for m in tool_results(second)] == [call_a.id, call_b.id]
    assert text_of(second[-1]) == "stop and do X"


async def test_follow_up_is_delivered_only_after_the_model_stops_in_the_same_run(
    provider: ScriptedProvider,
) -> None:
    echo = Echo()
    started, release = anyio.Event(), anyio.Event()
    provider.enqueue(
        gated(reply_tools(call("echo", text="x")), started, release),
        reply_text("first task done"),
        reply_text("second task done"),
    )
    agent, rec = make_agent(provider, echo)

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:
            box = spawn(group, lambda: agent.prompt("task one"))
            await started.wait()
            agent.follow_up("task two")
            release.set()

    assert box["result"].stop_reason == "stop"
    assert rec.types.count("agent_start") == 1
    assert rec.types.count("agent_end") == 1
    assert rec.types.count("agent_settled") == 1
    assert len(provider.requests) == 3
    # Not delivered while the model was still calling tools...
    assert "task two" not in [text_of(m) for m in provider.requests[1].messages]
    # ...only once it stopped without tool calls.
    third = provider.requests[2].messages
    assert roles(third) == ["user", "assistant", "toolResult", "assistant", "user"]
    assert text_of(third[-1]) == "task two"
    assert not agent.follow_up_queue


async def test_steering_is_preferred_over_follow_up(provider: ScriptedProvider) -> None:
    started, release = anyio.Event(), anyio.Event()
    provider.enqueue(
        gated(reply_text("one"), started, release), reply_text("two"), reply_text("three")
    )
    agent, rec = make_agent(provider)

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:
            spawn(group, lambda: agent.prompt("start"))
            await started.wait()
            agent.follow_up("later")
            agent.steer("now")
            release.set()

    assert len(provider.requests) == 3
    second = [text_of(m) for m in provider.requests[1].messages]
    assert second[-1] == "now" and "later" not in second
    assert text_of(provider.requests[2].messages[-1]) == "later"
    assert rec.types.count("agent_start") == 1
    assert rec.types.count("agent_end") == 1


async def test_queue_mode_one_at_a_time_delivers_one_per_poll(
    provider: ScriptedProvider,
) -> None:
    provider.enqueue(
        reply_text("r1"), reply_text("r2"), reply_text("r3"), reply_text("r4")
    )
    agent, _ = make_agent(provider)
    assert agent.steering_mode == "one-at-a-time"
    assert agent.follow_up_mode == "one-at-a-time"
    agent.steer("s1")
    agent.steer("s2")
    agent.follow_up("f1")
    agent.follow_up("f2")

    with anyio.fail_after(TIMEOUT):
        await agent.prompt("p")

    assert [text_of(m) for m in provider.requests[0].messages] == ["p", "s1"]
    assert [text_of(r.messages[-1]) for r in provider.requests] == ["s1", "s2", "f1", "f2"]
    # Each request after the first adds exactly one user message after the last reply.
    for request in provider.requests[1:]:
        assert roles(request.messages)[-2:] == ["assistant", "user"]


async def test_queue_mode_all_drains(provider: ScriptedProvider) -> None:
    provider.enqueue(reply_text("r1"), reply_text("r2"))
    agent, _ = make_agent(provider)
    agent.steering_mode = "all"
    agent.follow_up_mode = "all"
    agent.steer("s1")
    agent.steer("s2")
    agent.follow_up("f1")
    agent.follow_up("f2")

    with anyio.fail_after(TIMEOUT):
        await agent.prompt("p")

    assert [text_of(m) for m in provider.requests[0].messages] == ["p", "s1", "s2"]
    assert [text_of(m) for m in provider.requests[1].messages] == [
        "p", "s1", "s2", "r1", "f1", "f2"
    ]
    assert not agent.steering_queue and not agent.follow_up_queue


# ---------------------------------------------------------------------------------------------
# 7-8. Length poison and terminate


async def test_length_stop_poisons_the_whole_batch(provider: ScriptedProvider) -> None:
    echo = Echo()
    calls = [call("echo", text="a"), call("echo", text="b")]
    provider.enqueue(reply_tools(*calls, stop_reason="length"), reply_text("retrying"))
    recorder = Recorder()
    context: list[Message] = []
    settings = AgentSettings(tools=[echo])
    abort = AbortSignal()
    spec = ModelSpec(provider.stream, provider.name, provider.model)
    call_model = streaming_call(spec, recorder, abort)

    with anyio.fail_after(TIMEOUT):
        result = await run_agent_loop(
            [UserMessage(content="write")], context, settings, call_model, Queues(), recorder, abort
        )

    assert echo.calls == []
    results = tool_results(context)
    assert [r.tool_call_id for r in results] == [c.id for c in calls]
    for r in results:
        assert r.is_error
        assert "output token limit" in r.text
        assert r.text == LENGTH_POISON_MESSAGE
    ends = recorder.of_type("tool_execution_end")
    assert [e.tool_call_id for e in ends] == [c.id for c in calls]
    assert all(e.is_error for e in ends)
    # The loop continued to a second model call that sees the error results.
    assert len(provider.requests) == 2
    assert roles(provider.requests[1].messages) == ["user", "assistant", "toolResult", "toolResult"]
    assert result.stop_reason == "stop"


async def test_terminate_when_every_result_terminates(provider: ScriptedProvider) -> None:
    provider.enqueue(reply_tools(call("terminate"), call("terminate")))
    agent, rec = make_agent(provider, Terminate())

    with anyio.fail_after(TIMEOUT):
        result = await agent.prompt("finish")

    assert len(provider.requests) == 1
    assert roles(agent.messages) == ["user", "assistant", "toolResult", "toolResult"]
    assert rec.types[-3:] == ["turn_end", "agent_end", "agent_settled"]
    assert result.stop_reason == "toolUse"


async def test_mixed_terminate_batch_continues(provider: ScriptedProvider) -> None:
    provider.enqueue(
        reply_tools(call("terminate"), call("echo", text="x")), reply_text("carried on")
    )
    agent, _ = make_agent(provider, Terminate(), Echo())

    with anyio.fail_after(TIMEOUT):
        result = await agent.prompt("go")

    assert len(provider.requests) == 2
    assert result.stop_reason == "stop"
    assert agent.messages[-1].role == "assistant"


# ---------------------------------------------------------------------------------------------
# 9. Parallel and sequential execution


async def test_parallel_tools_overlap_end_in_completion_order_append_in_source_order(
    provider: ScriptedProvider,
) -> None:
    gate = Gate()
    call_a = call("gate", key="a", wait_for=["b"])
    call_b = call("gate", key="b", wait_for=["a"])
    provider.enqueue(reply_tools(call_a, call_b), reply_text("done"))
    agent, rec = make_agent(provider, gate)

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:
            spawn(group, lambda: agent.prompt("go"))
            # Barrier: each gate only gets past its start once the other has started too.
            await gate.started["a"].wait()
            await gate.started["b"].wait()
            gate.release["b"].set()
            await rec.wait_for(
                lambda e: e.type == "tool_execution_end" and e.tool_call_id == call_b.id
            )
            gate.release["a"].set()

    ends = rec.of_type("tool_execution_end")
    assert [e.tool_call_id for e in ends] == [call_b.id, call_a.id]
    assert gate.log == [("start", "a"), ("start", "b"), ("end", "b"), ("end", "a")]
    assert [r.tool_call_id for r in tool_results(agent.messages)] == [call_a.id, call_b.id]
    turn_end = rec.of_type("turn_end")[0]
    assert [r.tool_call_id for r in turn_end.tool_results] == [call_a.id, call_b.id]
    assert [r.tool_call_id for r in tool_results(provider.requests[1].messages)] == [
        call_a.id,
        call_b.id,
    ]


async def test_parallel_probe_control_shows_overlap(provider: ScriptedProvider) -> None:
    state = probe_state()
    provider.enqueue(
        reply_tools(call("probe", key="1"), call("probe", key="2")), reply_text("done")
    )
    agent, _ = make_agent(provider, Probe(state))

    with anyio.fail_after(TIMEOUT):
        await agent.prompt("go")

    assert state["max"] == 2


async def test_sequential_tool_makes_the_batch_sequential(provider: ScriptedProvider) -> None:
    state = probe_state()
    call_1, call_2 = call("probe", key="1"), call("seq_probe", key="2")
    provider.enqueue(reply_tools(call_1, call_2), reply_text("done"))
    agent, rec = make_agent(provider, Probe(state), SequentialProbe(state))

    with anyio.fail_after(TIMEOUT):
        await agent.prompt("go")

    assert state["max"] == 1
    assert state["log"] == [("start", "1"), ("end", "1"), ("start", "2"), ("end", "2")]
    assert [e.tool_call_id for e in rec.of_type("tool_execution_end")] == [call_1.id, call_2.id]
    assert [r.tool_call_id for r in tool_results(agent.messages)] == [call_1.id, call_2.id]


# ---------------------------------------------------------------------------------------------
# 10. Tool failures become error results


@pytest.mark.parametrize(
    ("tool_call", "expected"),
    [
        pytest.param(call("nope", x=1), ["Unknown tool 'nope'", "echo"], id="unknown-tool"),
        pytest.param(
            call("echo", text="hi", times="many"), ["Invalid arguments", "times"],
            id="invalid-arguments",
        ),
        pytest.param(call("echo"), ["Invalid arguments", "text"], id="missing-argument"),
        pytest.param(call("fail", kind="tool_error"), ["the file does not exist"], id="tool-error"),
        pytest.param(call("fail", kind="other"), ["RuntimeError", "kaboom"], id="other-exception"),
    ],
)
async def test_tool_failure_becomes_error_result_and_run_continues(
    provider: ScriptedProvider, tool_call: ToolCall, expected: list[str]
) -> None:
    echo = Echo()
    provider.enqueue(reply_tools(tool_call), reply_text("I see the error"))
    agent, rec = make_agent(provider, echo, Fail())

    with anyio.fail_after(TIMEOUT):
        result = await agent.prompt("go")

    assert echo.calls == []
    [tool_result] = tool_results(agent.messages)
    assert tool_result.tool_call_id == tool_call.id
    assert tool_result.is_error
    for fragment in expected:
        assert fragment in tool_result.text
    [end] = rec.of_type("tool_execution_end")
    assert end.is_error and end.tool_call_id == tool_call.id
    assert result.stop_reason == "stop"
    assert len(provider.requests) == 2
    assert tool_results(provider.requests[1].messages)[0].tool_call_id == tool_call.id


async def test_tool_timeout_becomes_error_result(provider: ScriptedProvider) -> None:
    tool_call = call("forever")
    provider.enqueue(reply_tools(tool_call), reply_text("it timed out"))
    agent, _ = make_agent(provider, Forever(), tool_timeout=0.05)

    with anyio.fail_after(TIMEOUT):
        result = await agent.prompt("go")

    [tool_result] = tool_results(agent.messages)
    assert tool_result.is_error
    assert "timed out" in tool_result.text
    assert result.stop_reason == "stop"


async def test_tool_raising_timeout_error_without_tool_timeout_is_an_error_result(
    provider: ScriptedProvider,
) -> None:
    """A tool's own TimeoutError (socket, asyncio, subprocess timeouts) must become an error
    result like any other exception, even when no tool_timeout is configured."""
    tool_call = call("fail", kind="timeout_error")
    provider.enqueue(reply_tools(tool_call), reply_text("ok"))
    agent, _ = make_agent(provider, Fail(), tool_timeout=None)

    with anyio.fail_after(TIMEOUT):
        result = await agent.prompt("go")

    [tool_result] = tool_results(agent.messages)
    assert tool_result.is_error
    assert "upstream timed out" in tool_result.text
    assert result.stop_reason == "stop"


async def test_tool_own_timeout_error_is_not_reported_as_the_deadline(
    provider: ScriptedProvider,
) -> None:
    """With a generous tool_timeout, a TimeoutError the tool raises itself is the tool's
    failure, not "timed out after 60 seconds"."""
    tool_call = call("fail", kind="timeout_error")
    provider.enqueue(reply_tools(tool_call), reply_text("ok"))
    agent, _ = make_agent(provider, Fail(), tool_timeout=60.0)

    with anyio.fail_after(TIMEOUT):
        result = await agent.prompt("go")

    [tool_result] = tool_results(agent.messages)
    assert tool_result.is_error
    assert "upstream timed out" in tool_result.text
    assert "60 seconds" not in tool_result.text
    assert result.stop_reason == "stop"


# ---------------------------------------------------------------------------------------------
# 11. Hooks


async def test_before_tool_call_hook_blocks(provider: ScriptedProvider) -> None:
    echo = Echo()
    seen: list[tuple[str, dict[str, Any]]] = []

    async def before(tool_call: ToolCall, args: dict[str, Any]) -> BeforeToolCallResult | None:
        seen.append((tool_call.id, args))
        if args.get("text") == "rm -rf":
            return BeforeToolCallResult(block=True, reason="not allowed in this project")
        return None

    blocked, allowed = call("echo", text="rm -rf"), call("echo", text="fine")
    provider.enqueue(reply_tools(blocked, allowed), reply_text("ok"))
    agent, _ = make_agent(provider, echo, before_tool_call=before)

    with anyio.fail_after(TIMEOUT):
        result = await agent.prompt("go")

    assert seen == [(blocked.id, {"text": "rm -rf"}), (allowed.id, {"text": "fine"})]
    assert echo.calls == ["fine"]
    blocked_result, allowed_result = tool_results(agent.messages)
    assert blocked_result.tool_call_id == blocked.id and blocked_result.is_error
    assert "not allowed in this project" in blocked_result.text
    assert allowed_result.tool_call_id == allowed.id and not allowed_result.is_error
    assert result.stop_reason == "stop"
    assert len(provider.requests) == 2


async def test_after_tool_call_hook_replaces_content_and_error_flag(
    provider: ScriptedProvider,
) -> None:
    originals: list[ToolResultMessage] = []

    async def after(tool_call: ToolCall, result: ToolResultMessage) -> AfterToolCallResult:
        originals.append(result)
        return AfterToolCallResult(content=[TextContent(text="redacted")], is_error=True)

    tool_call = call("echo", text="secret")
    provider.enqueue(reply_tools(tool_call), reply_text("ok"))
    agent, rec = make_agent(provider, Echo(), after_tool_call=after)

    with anyio.fail_after(TIMEOUT):
        result = await agent.prompt("go")

    assert [o.text for o in originals] == ["secret"] and not originals[0].is_error
    [tool_result] = tool_results(agent.messages)
    assert tool_result.text == "redacted" and tool_result.is_error
    [end] = rec.of_type("tool_execution_end")
    assert end.is_error and end.result.text == "redacted"
    assert tool_results(provider.requests[1].messages)[0].text == "redacted"
    assert result.stop_reason == "stop"


# ---------------------------------------------------------------------------------------------
# 12-13. Errors and continue


async def test_error_stop_reason_ends_the_run_without_polling_follow_ups(
    provider: ScriptedProvider,
) -> None:
    provider.enqueue(reply_error("rate limited: retry in 30s"))
    agent, rec = make_agent(provider)
    agent.follow_up("after that")

    with anyio.fail_after(TIMEOUT):
        result = await agent.prompt("go")

    assert result.stop_reason == "error"
    assert result.error_message == "rate limited: retry in 30s"
    assert rec.types == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
        "agent_settled",
    ]
    [end] = rec.of_type("agent_end")
    assert end.stop_reason == "error"
    assert end.error_message == "rate limited: retry in 30s"
    assert [text_of(m) for m in agent.follow_up_queue] == ["after that"]
    assert len(provider.requests) == 1
    last = agent.messages[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "error"


async def test_continue_after_error_resends_up_to_the_last_user_message(
    provider: ScriptedProvider,
) -> None:
    provider.enqueue(reply_error("overloaded"), reply_text("recovered"))
    agent, rec = make_agent(provider)

    with anyio.fail_after(TIMEOUT):
        first = await agent.prompt("hello")
        second = await agent.continue_()

    assert first.stop_reason == "error"
    assert second.stop_reason == "stop"
    request = provider.requests[1].messages
    assert roles(request) == ["user"]
    assert text_of(request[-1]) == "hello"
    # The errored message stays in the transcript.
    assert roles(agent.messages) == ["user", "assistant", "assistant"]
    errored = agent.messages[1]
    assert isinstance(errored, AssistantMessage) and errored.stop_reason == "error"
    assert rec.types.count("agent_start") == 2


async def test_continue_rejects_an_empty_conversation(provider: ScriptedProvider) -> None:
    agent, rec = make_agent(provider)
    with pytest.raises(CannotContinueError):
        await agent.continue_()
    assert rec.events == []
    assert not agent.is_running


async def test_continue_rejects_a_context_ending_with_an_assistant_message(
    provider: ScriptedProvider,
) -> None:
    provider.enqueue(reply_text("all done"))
    agent, rec = make_agent(provider)
    with anyio.fail_after(TIMEOUT):
        await agent.prompt("go")
    count = len(rec.events)

    with pytest.raises(CannotContinueError):
        await agent.continue_()

    assert len(rec.events) == count
    assert len(provider.requests) == 1
    assert not agent.is_running


@pytest.mark.parametrize("queue", ["steer", "follow_up"])
async def test_continue_delivers_queued_messages(provider: ScriptedProvider, queue: str) -> None:
    provider.enqueue(reply_text("all done"), reply_text("on it"))
    agent, rec = make_agent(provider)
    with anyio.fail_after(TIMEOUT):
        await agent.prompt("go")
        getattr(agent, queue)("one more thing")
        result = await agent.continue_()

    assert result.stop_reason == "stop"
    request = provider.requests[1].messages
    assert roles(request) == ["user", "assistant", "user"]
    assert text_of(request[-1]) == "one more thing"
    assert not agent.steering_queue and not agent.follow_up_queue
    assert rec.types.count("agent_start") == 2


async def test_continue_keeps_queued_messages_when_the_provider_cannot_be_created() -> None:
    """A continue that fails before the run starts must not eat the queued user input."""

    def no_provider() -> ScriptedProvider:
        raise ProviderNotConfiguredError("no API key for the new model")

    agent = Agent(AgentSettings(), no_provider, lambda event: None)
    agent.follow_up("one more thing")

    with pytest.raises(ProviderNotConfiguredError):
        await agent.continue_()

    assert [text_of(m) for m in agent.follow_up_queue] == ["one more thing"]


# ---------------------------------------------------------------------------------------------
# 14. Abort


async def test_abort_during_model_stream(provider: ScriptedProvider) -> None:
    started = anyio.Event()
    provider.enqueue(hanging(started))
    agent, rec = make_agent(provider)

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:
            box = spawn(group, lambda: agent.prompt("hello"))
            await rec.wait_for(is_assistant_start)
            await started.wait()
            agent.abort()

    result = box["result"]
    assert result.stop_reason == "aborted"
    [end] = rec.of_type("agent_end")
    assert end.stop_reason == "aborted"
    assert rec.types[-3:] == ["turn_end", "agent_end", "agent_settled"]
    assert roles(agent.messages) == ["user", "assistant"]
    aborted = agent.messages[1]
    assert isinstance(aborted, AssistantMessage) and aborted.stop_reason == "aborted"
    assert not agent.is_running

    provider.enqueue(reply_text("resumed"))
    with anyio.fail_after(TIMEOUT):
        resumed = await agent.continue_()

    assert resumed.stop_reason == "stop"
    request = provider.requests[1].messages
    assert roles(request) == ["user"] and text_of(request[0]) == "hello"
    assert roles(agent.messages) == ["user", "assistant", "assistant"]


class HalfAnswer(ScriptedProvider):
    """Streams the start of a reply, then hangs until cancelled (its usage never comes)."""

    def __init__(self, streamed: anyio.Event) -> None:
        super().__init__()
        self.streamed = streamed

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        self.requests.append(request)
        yield MessageUpdate(kind="text", index=0, delta="The answer begins with " * 8)
        self.streamed.set()
        await anyio.Event().wait()
        raise AssertionError("unreachable")


async def test_an_abort_mid_reply_estimates_the_usage() -> None:
    """Providers report usage at the end: a reply aborted after it began streaming gets an
    estimate (marked), so the run does not report 0 tokens; one aborted before any token
    reports none."""
    streamed = anyio.Event()
    agent, rec = make_agent(HalfAnswer(streamed))
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:
            box = spawn(group, lambda: agent.prompt("tell me " * 40))
            await streamed.wait()
            agent.abort()

    usage = box["result"].usage
    assert box["result"].stop_reason == "aborted"
    assert usage.estimated is True
    assert usage.output_tokens == len("The answer begins with " * 8) // 4
    assert usage.input_tokens >= len("tell me " * 40) // 4
    [end] = rec.of_type("agent_end")
    assert end.usage == usage and agent.usage == usage  # the session's total counts it too

    started = anyio.Event()
    provider = ScriptedProvider(hanging(started))
    silent, _ = make_agent(provider)
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:
            box = spawn(group, lambda: silent.prompt("hello"))
            await started.wait()
            silent.abort()
    assert box["result"].usage.total_tokens == 0 and not box["result"].usage.estimated


async def test_abort_during_tool_batch_answers_every_call(provider: ScriptedProvider) -> None:
    gate, echo = Gate(), Echo()
    fast, slow = call("echo", text="quick"), call("gate", key="slow")
    provider.enqueue(reply_tools(fast, slow))
    agent, rec = make_agent(provider, echo, gate)

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:
            box = spawn(group, lambda: agent.prompt("go"))
            await gate.started["slow"].wait()
            await rec.wait_for(
                lambda e: e.type == "tool_execution_end" and e.tool_call_id == fast.id
            )
            agent.abort()

    result = box["result"]
    assert result.stop_reason == "aborted"
    assert gate.cancelled == ["slow"]
    results = tool_results(agent.messages)
    assert [r.tool_call_id for r in results] == [fast.id, slow.id]
    assert not results[0].is_error and results[0].text == "quick"
    assert results[1].is_error and "aborted" in results[1].text
    ends = {e.tool_call_id: e for e in rec.of_type("tool_execution_end")}
    assert set(ends) == {fast.id, slow.id} and ends[slow.id].is_error
    assert rec.types[-3:] == ["turn_end", "agent_end", "agent_settled"]
    assert rec.of_type("agent_end")[0].stop_reason == "aborted"
    assert len(provider.requests) == 1


async def test_abort_during_before_hook_pairs_every_tool_end_with_a_start(
    provider: ScriptedProvider,
) -> None:
    """An abort while a before_tool_call hook waits (e.g. a permission prompt) answers every
    call; each tool_execution_end must still follow a tool_execution_start for that id."""
    echo = Echo()
    hook_waiting = anyio.Event()

    async def before(tool_call: ToolCall, args: dict[str, Any]) -> BeforeToolCallResult | None:
        hook_waiting.set()
        await anyio.Event().wait()
        return None

    first, second = call("echo", text="a"), call("echo", text="b")
    provider.enqueue(reply_tools(first, second))
    agent, rec = make_agent(provider, echo, before_tool_call=before)

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:
            box = spawn(group, lambda: agent.prompt("go"))
            await hook_waiting.wait()
            agent.abort()

    assert box["result"].stop_reason == "aborted"
    assert echo.calls == []
    results = tool_results(agent.messages)
    assert [r.tool_call_id for r in results] == [first.id, second.id]
    assert all(r.is_error for r in results)
    started: set[str] = set()
    for event in rec.events:
        if event.type == "tool_execution_start":
            started.add(event.tool_call_id)
        elif event.type == "tool_execution_end":
            assert event.tool_call_id in started, (
                f"tool_execution_end for {event.tool_call_id} without a tool_execution_start"
            )


async def test_abort_when_idle_raises(provider: ScriptedProvider) -> None:
    agent, _ = make_agent(provider)
    with pytest.raises(NoActiveRunError):
        agent.abort()


# ---------------------------------------------------------------------------------------------
# 15-16. Busy and max turns


async def test_prompt_while_busy_is_rejected_and_the_run_is_unaffected(
    provider: ScriptedProvider,
) -> None:
    started, release = anyio.Event(), anyio.Event()
    provider.enqueue(gated(reply_text("answer"), started, release))
    agent, rec = make_agent(provider)

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:
            box = spawn(group, lambda: agent.prompt("first"))
            await started.wait()
            assert agent.is_running
            with pytest.raises(AgentBusyError):
                await agent.prompt("second")
            with pytest.raises(AgentBusyError):
                await agent.continue_()
            assert agent.is_running
            release.set()

    assert box["result"].stop_reason == "stop"
    assert [text_of(m) for m in agent.messages] == ["first", "answer"]
    assert len(provider.requests) == 1
    assert rec.types.count("agent_start") == 1
    assert rec.types[-2:] == ["agent_end", "agent_settled"]
    assert not agent.is_running


async def test_max_turns_stops_the_run(provider: ScriptedProvider) -> None:
    echo = Echo()
    provider.enqueue(*(reply_tools(call("echo", text=str(i))) for i in range(3)))
    agent, rec = make_agent(provider, echo, max_turns=3)

    with anyio.fail_after(TIMEOUT):
        result = await agent.prompt("loop forever")

    assert result.stop_reason == "maxTurns"
    assert len(provider.requests) == 3
    assert echo.calls == ["0", "1", "2"]
    assert rec.of_type("agent_end")[0].stop_reason == "maxTurns"
    assert rec.types.count("agent_start") == 1
    assert rec.types.count("turn_end") == 3
    assert agent.messages[-1].role == "toolResult"


async def test_max_turns_stops_at_the_turn_boundary(provider: ScriptedProvider) -> None:
    """docs/loop.md: a limit is checked at the turn boundary (after ``turn_end``), before
    steering is polled. No dangling turn_start, no steering consumed into a turn that
    never calls the model."""
    started, release = anyio.Event(), anyio.Event()
    provider.enqueue(
        reply_tools(call("echo", text="1")),
        gated(reply_tools(call("echo", text="2")), started, release),
    )
    agent, rec = make_agent(provider, Echo(), max_turns=2)

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:
            box = spawn(group, lambda: agent.prompt("loop"))
            await started.wait()
            agent.steer("change of plan")
            release.set()

    assert box["result"].stop_reason == "maxTurns"
    assert rec.types.count("turn_start") == rec.types.count("turn_end") == 2
    assert rec.types[-3:] == ["turn_end", "agent_end", "agent_settled"]
    assert [text_of(m) for m in agent.steering_queue] == ["change of plan"]


# ---------------------------------------------------------------------------------------------
# 17. model_context


def test_model_context_drops_failed_assistant_messages_and_their_results() -> None:
    errored_call = ToolCall(id="e1", name="echo", arguments={"text": "x"})
    aborted_call = ToolCall(id="a1", name="echo", arguments={"text": "y"})
    live_call = ToolCall(id="ok1", name="echo", arguments={"text": "z"})
    u1 = UserMessage(content="one")
    errored = AssistantMessage(content=[errored_call], stop_reason="error", error_message="boom")
    errored_result = ToolResultMessage(tool_call_id="e1", tool_name="echo", is_error=True)
    aborted = AssistantMessage(
        content=[TextContent(text="partial"), aborted_call], stop_reason="aborted"
    )
    aborted_result = ToolResultMessage(tool_call_id="a1", tool_name="echo", is_error=True)
    u2 = UserMessage(content="two")
    live = AssistantMessage(content=[live_call], stop_reason="toolUse")
    live_result = ToolResultMessage(tool_call_id="ok1", tool_name="echo")
    final = AssistantMessage(content=[TextContent(text="done")], stop_reason="stop")
    transcript: list[Message] = [
        u1, errored, errored_result, aborted, aborted_result, u2, live, live_result, final
    ]

    kept = model_context(transcript)

    assert kept == [u1, u2, live, live_result, final]
    assert len(transcript) == 9  # the transcript itself is untouched
