"""A scripted stand-in for ``llama_cpp.Llama``, for ``LocalProvider`` tests with no GGUF file.

``FakeLlama(script)`` answers each ``create_chat_completion(..., stream=True)`` with the next
scripted reply, as llama-cpp-python streams one: a chunk with ``delta: {"role": "assistant"}``,
one chunk per piece of text (``delta: {"content": ...}``), then a chunk with ``delta: {}`` and
the ``finish_reason``. It records every call's keyword arguments in ``calls`` (the messages as
rendered, ``max_tokens``, the sampling options, a ``grammar``) and, like the real one, keeps
``n_tokens`` (the context's size after each chunk: the prompt, then a token per piece) and
``tokenize``s text (a token per 4 bytes). The script is strict: a call with no reply left fails
the test, and ``assert_script_complete`` fails on an unused reply. ``loader`` is a
``LocalProvider`` ``load`` function that hands this model out and records the load options.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["FakeLlama", "FakeReply"]


@dataclass(frozen=True)
class FakeReply:
    """The pieces of text one completion streams, and why it ends (``stop`` or ``length``)."""

    pieces: Sequence[str]
    finish_reason: str = "stop"

    @classmethod
    def of(cls, text: str, size: int = 5, finish_reason: str = "stop") -> FakeReply:
        """``text`` in pieces of ``size`` characters."""
        return cls([text[i:i + size] for i in range(0, len(text), size)], finish_reason)


@dataclass
class FakeLlama:
    script: list[FakeReply]
    prompt_tokens: int = 21
    calls: list[dict[str, Any]] = field(default_factory=list)
    loads: list[tuple[Path, dict[str, Any]]] = field(default_factory=list)
    n_tokens: int = 0
    closed: bool = False

    def loader(self, path: Path, options: dict[str, Any]) -> FakeLlama:
        self.loads.append((path, dict(options)))
        return self

    def create_chat_completion(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        assert kwargs.get("stream") is True, "LocalProvider streams"
        self.calls.append(kwargs)
        assert self.script, f"fake_llama: no scripted reply for call {len(self.calls)}"
        reply = self.script.pop(0)
        return self._chunks(reply)

    def _chunks(self, reply: FakeReply) -> Iterator[dict[str, Any]]:
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                "id": "chatcmpl-fake", "model": "fake.gguf", "created": created,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "logprobs": None,
                             "finish_reason": finish}],
            }

        self.n_tokens = self.prompt_tokens
        yield chunk({"role": "assistant"})
        for piece in reply.pieces:
            self.n_tokens += 1
            yield chunk({"content": piece})
        yield chunk({}, reply.finish_reason)

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return list(range(-(-len(text) // 4)))

    def close(self) -> None:
        self.closed = True

    def assert_script_complete(self) -> None:
        assert not self.script, f"fake_llama: {len(self.script)} scripted replies never used"
