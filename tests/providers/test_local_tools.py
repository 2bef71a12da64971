"""LocalProvider with no GGUF file: a scripted ``FakeLlama`` (support.fake_llama) stands in for
llama-cpp-python's ``Llama``. The embedded model is chat only (no tools, a capped reply, a repeat
penalty); a GGUF of one's own gets the tools, described in its system prompt and enforced by a
grammar built from them, and its call blocks come back as tool calls the Agent runs.

llama-cpp-python itself is needed (its JSON-schema-to-grammar converter builds the grammar), as
in test_local.py; the real model is not.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

pytest.importorskip("llama_cpp")

from support.fake_llama import FakeLlama, FakeReply  # noqa: E402
from tiller.agent.agent import Agent  # noqa: E402
from tiller.agent.settings import AgentSettings  # noqa: E402
from tiller.providers.base import ModelRequest, ToolSpec  # noqa: E402
from tiller.providers.embedded import (  # noqa: E402
    BUNDLED_MODEL_ALIAS,
    REPEAT_PENALTY,
    REPEAT_WINDOW,
    REPLY_TOKENS,
)
from tiller.providers.local import LocalProvider  # noqa: E402
from tiller.providers.local_tools import (  # noqa: E402
    MAX_CALLS,
    parse_tool_calls,
    tool_grammar,
    tools_prompt,
)
from tiller.tools.builtin import default_tools  # noqa: E402
from tiller.types import (  # noqa: E402
    AgentEvent,
    AssistantMessage,
    MessageUpdate,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

pytestmark = pytest.mark.anyio

READ = ToolSpec("read", "Read a file.", {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"],
})
LS = ToolSpec("ls", "List a folder.", {"type": "object", "properties": {}})
HELLO = ModelRequest(messages=[UserMessage(content="hi")], system_prompt="Be brief.",
                     tools=[READ, LS])


async def collect(provider: LocalProvider, request: ModelRequest = HELLO) -> tuple[
    list[MessageUpdate], AssistantMessage
]:
    with anyio.fail_after(10):
        *updates, final = [item async for item in provider.stream(request)]
    assert isinstance(final, AssistantMessage)
    return [u for u in updates if isinstance(u, MessageUpdate)], final


@pytest.fixture
def own_model(tmp_path: Path) -> Path:
    """A GGUF path of the user's own (the fake never reads it; the provider checks it exists)."""
    path = tmp_path / "my-model.Q4_K_M.gguf"
    path.write_bytes(b"GGUF")
    return path


async def test_the_embedded_model_is_chat_only_capped_and_penalized() -> None:
    fake = FakeLlama([FakeReply.of("a list that goes on and on", finish_reason="length")])
    provider = LocalProvider(load=fake.loader)
    updates, final = await collect(provider)

    [(path, options)] = fake.loads
    assert path.suffix == ".gguf" and options["last_n_tokens_size"] == REPEAT_WINDOW
    [call] = fake.calls
    assert call["max_tokens"] == REPLY_TOKENS and 256 <= REPLY_TOKENS <= 512
    assert call["repeat_penalty"] == REPEAT_PENALTY > 1.0
    assert "grammar" not in call  # tools were in the request: none go to this model
    assert call["messages"][0] == {"role": "system", "content": "Be brief."}
    assert final.stop_reason == "length" and final.text == "a list that goes on and on"
    assert "".join(u.delta or "" for u in updates) == final.text
    assert final.model == provider.model == BUNDLED_MODEL_ALIAS  # as the session names it
    assert final.usage.input_tokens == fake.prompt_tokens and final.usage.output_tokens > 0
    await provider.aclose()
    assert fake.closed
    fake.assert_script_complete()


async def test_ones_own_model_gets_the_tools_and_a_grammar_of_them(own_model: Path) -> None:
    block = '<tool_call>{"name": "read", "arguments": {"path": "notes.txt"}}</tool_call>'
    fake = FakeLlama([FakeReply.of(block)])
    provider = LocalProvider(model=str(own_model), load=fake.loader)
    updates, final = await collect(provider)

    [call] = fake.calls
    assert call["grammar"]._grammar == tool_grammar([READ, LS])
    assert "repeat_penalty" not in call and call["max_tokens"] == 1024
    system = call["messages"][0]
    assert system["role"] == "system"
    assert system["content"] == f"Be brief.\n\n{tools_prompt([READ, LS])}"
    assert final.model == str(own_model)
    assert final.stop_reason == "toolUse" and final.text == ""
    [tool_call] = final.tool_calls
    assert (tool_call.name, tool_call.arguments, tool_call.arguments_error) == (
        "read", {"path": "notes.txt"}, None)
    assert [u.kind for u in updates] == ["toolCallStart", "toolCallArgs"]  # no text shown
    assert updates[0].tool_call_id == tool_call.id and updates[0].tool_name == "read"
    fake.assert_script_complete()


async def test_a_plain_answer_with_tools_offered_streams_as_text(own_model: Path) -> None:
    fake = FakeLlama([FakeReply.of("Nothing to read: hello!")])
    updates, final = await collect(LocalProvider(model=str(own_model), load=fake.loader))

    assert final.stop_reason == "stop" and final.text == "Nothing to read: hello!"
    assert final.tool_calls == []
    assert "".join(u.delta or "" for u in updates if u.kind == "text") == final.text


async def test_a_call_cut_at_the_output_limit_is_marked_and_ends_with_length(
    own_model: Path,
) -> None:
    fake = FakeLlama([FakeReply.of('<tool_call>{"name": "read", "arguments": {"path": "no',
                                   finish_reason="length")])
    _, final = await collect(LocalProvider(model=str(own_model), load=fake.loader))

    assert final.stop_reason == "length"  # the loop answers it with an error, never runs it
    [call] = final.tool_calls
    assert call.name == "read" and call.arguments_error is not None


async def test_earlier_calls_and_results_are_shown_as_blocks(own_model: Path) -> None:
    fake = FakeLlama([FakeReply.of("It says hello.")])
    request = ModelRequest(tools=[READ], messages=[
        UserMessage(content="what is in a.txt?"),
        AssistantMessage(content=[ToolCall(id="c1", name="read", arguments={"path": "a.txt"})],
                         stop_reason="toolUse"),
        ToolResultMessage(tool_call_id="c1", tool_name="read",
                          content=[TextContent(text="hello")]),
    ])
    await collect(LocalProvider(model=str(own_model), load=fake.loader), request)

    messages = fake.calls[0]["messages"]
    block = '<tool_call>{"name": "read", "arguments": {"path": "a.txt"}}</tool_call>'
    assert messages[2] == {"role": "assistant", "content": block}
    assert messages[3] == {"role": "user", "content": "[result of read]\nhello"}


async def test_the_agent_runs_the_call_ones_own_model_makes(
    own_model: Path, tmp_path: Path
) -> None:
    """End to end in the Agent: the call block becomes a real ``write``, its result goes back
    to the model, whose answer ends the run."""
    block = ('<tool_call>{"name": "write", "arguments": {"path": "hello.py", '
             '"content": "print(\'hi\')\\n"}}</tool_call>')
    fake = FakeLlama([FakeReply.of(block), FakeReply.of("Created hello.py.")])
    provider = LocalProvider(model=str(own_model), load=fake.loader)
    events: list[AgentEvent] = []
    agent = Agent(AgentSettings(tools=default_tools(), cwd=tmp_path), lambda: provider,
                  events.append)
    with anyio.fail_after(20):
        result = await agent.prompt("create hello.py that prints hi")

    assert result.stop_reason == "stop"
    assert (tmp_path / "hello.py").read_text() == "print('hi')\n"
    assert [m.role for m in agent.messages] == ["user", "assistant", "toolResult", "assistant"]
    result_message = agent.messages[2]
    assert isinstance(result_message, ToolResultMessage) and not result_message.is_error
    second = fake.calls[1]["messages"]
    assert second[-1]["role"] == "user" and second[-1]["content"].startswith("[result of write]")
    grammar = fake.calls[0]["grammar"]._grammar
    assert all(f'"\\"{tool.name}\\""' in grammar for tool in default_tools())
    fake.assert_script_complete()


def test_parsing_call_blocks() -> None:
    two = ('<tool_call>{"name": "ls", "arguments": {}}</tool_call>\n'
           '<tool_call>{"name": "read", "arguments": {"path": "a"}}</tool_call>')
    calls = parse_tool_calls(two)
    assert [(c.name, c.arguments, c.arguments_error) for c in calls] == [
        ("ls", {}, None), ("read", {"path": "a"}, None)]
    assert len({c.id for c in calls}) == 2
    [bad] = parse_tool_calls('<tool_call>{"name": "ls", "arguments": [1]}</tool_call>')
    assert bad.name == "ls" and bad.arguments_error is not None


def test_the_grammar_names_each_tool_and_bounds_the_calls() -> None:
    grammar = tool_grammar([READ, LS])
    rules = dict(line.split(" ::= ", 1) for line in grammar.splitlines() if " ::= " in line)
    assert rules["root"] == "tiller-calls | tiller-answer"
    assert rules["tiller-answer"].startswith("[^<]")  # text can never open a call block
    assert f"{{0,{MAX_CALLS - 1}}}" in rules["tiller-calls"]
    assert '"\\"read\\""' in rules["tiller-call"] and '"\\"ls\\""' in rules["tiller-call"]
    assert "read-arguments" in rules and "ls-arguments" in rules
    assert tool_grammar([READ], required=True).splitlines()[0] == "root ::= tiller-calls"
    assert json.loads(json.dumps(READ.parameters)) == READ.parameters  # not modified
