"""Model providers. ``create_provider`` picks one by name; SDKs are imported lazily."""

from __future__ import annotations

from collections.abc import Mapping

from tiller.errors import ProviderNotConfiguredError
from tiller.providers.base import ModelRequest, Provider, StreamItem, ToolSpec

__all__ = [
    "DEFAULT_MODELS",
    "ModelRequest",
    "PROVIDER_NAMES",
    "Provider",
    "StreamItem",
    "ToolSpec",
    "create_provider",
]

PROVIDER_NAMES = ("openai",)
DEFAULT_MODELS = {"openai": "gpt-4o-mini"}
LOCAL_SERVER_API_KEY = "not-needed"
"""Sent when a base URL is given without a key: Ollama and llama.cpp ignore it."""


def create_provider(
    name: str, *, model: str | None, base_url: str | None, env: Mapping[str, str]
) -> Provider:
    """The provider called ``name``, configured from the arguments and ``env``.

    Raises ProviderNotConfiguredError, with a message saying what to set, for an unknown name or
    missing credentials. Nothing is sent over the network here.
    """
    if name != "openai":
        available = ", ".join(PROVIDER_NAMES)
        raise ProviderNotConfiguredError(f"unknown provider {name!r}: available: {available}")
    from tiller.providers.openai import OpenAIProvider

    resolved_url = base_url or env.get("OPENAI_BASE_URL") or None
    api_key = env.get("OPENAI_API_KEY") or None
    if api_key is None:
        if resolved_url is None:
            raise ProviderNotConfiguredError(
                "no API key: set OPENAI_API_KEY, "
                "or pass --base-url for a local OpenAI-compatible server"
            )
        api_key = LOCAL_SERVER_API_KEY
    return OpenAIProvider(
        model=model or DEFAULT_MODELS["openai"], base_url=resolved_url, api_key=api_key
    )
