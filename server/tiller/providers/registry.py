"""The registry of provider settings, the model catalog, and the factory.

``create_provider`` builds a provider from its settings (built in, or from the config file) and
the environment; SDKs are imported lazily, on the first model call. Three provider types exist:
``openai`` (OpenAI's Responses API, or Chat Completions for any OpenAI-compatible server: its
``api``), ``anthropic`` (the Messages API) and ``local`` (a GGUF model in-process through
llama-cpp-python).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Mapping
from dataclasses import field
from typing import Literal

from tiller.errors import ProviderNotConfiguredError
from tiller.frozen import frozen
from tiller.providers.anthropic_models import ANTHROPIC_DEFAULT_MODEL, ANTHROPIC_MODELS
from tiller.providers.base import CacheTtl, ModelCost, ModelInfo, Provider
from tiller.providers.embedded import BUNDLED_MODEL_ALIAS, REPLY_TOKENS
from tiller.providers.openai_models import DEFAULT_MODEL as OPENAI_DEFAULT_MODEL
from tiller.providers.openai_models import OPENAI_MODELS

__all__ = [
    "BUILTIN_MODELS",
    "BUILTIN_PROVIDERS",
    "OPENAI_APIS",
    "OpenAIApi",
    "ProviderSettings",
    "create_provider",
    "prepare_ahead",
]

ProviderType = Literal["openai", "anthropic", "local"]
OpenAIApi = Literal["auto", "responses", "chat"]
OPENAI_APIS: tuple[OpenAIApi, ...] = ("auto", "responses", "chat")
LOCAL_SERVER_API_KEY = "not-needed"
"""Sent when a base URL is given without a key: Ollama and llama.cpp ignore it."""


@frozen
class ProviderSettings:
    """How to reach one provider. ``api_key_env`` names the variable that holds the key (the
    key itself is never stored in configuration); ``base_url_env`` one that may hold the URL."""

    name: str
    type: ProviderType
    default_model: str
    base_url: str | None = None
    base_url_env: str | None = None
    api_key_env: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    api: OpenAIApi = "auto"
    """For ``openai``: the Responses API, Chat Completions, or ``auto`` (Responses, and Chat
    Completions for a server without it)."""

    def resolve_base_url(self, env: Mapping[str, str], override: str | None = None) -> str | None:
        from_env = env.get(self.base_url_env) if self.base_url_env else None
        return override or from_env or self.base_url

    def has_key(self, env: Mapping[str, str]) -> bool:
        return bool(self.api_key_env and env.get(self.api_key_env))

    def needs_key(self, env: Mapping[str, str], override: str | None = None) -> bool:
        """Whether calls need the key in ``api_key_env``: always for Anthropic; for an
        OpenAI-compatible server unless the user pointed it at a URL (``override``, i.e.
        --base-url, or the ``base_url_env`` variable) or its settings name a URL and no key
        variable (a local server). A hosted service's URL with a key variable needs the key."""
        if self.type == "local":
            return False
        if self.type == "anthropic":
            return True
        from_user = override or (env.get(self.base_url_env) if self.base_url_env else None)
        return not (from_user or (self.base_url and not self.api_key_env))

    def configured(self, env: Mapping[str, str], override: str | None = None) -> bool:
        """Whether ``create_provider`` would build it: a local model needs the ``local`` extra
        (llama-cpp-python) installed, the others a key unless ``needs_key`` says none."""
        if self.type == "local":
            return importlib.util.find_spec("llama_cpp") is not None
        return self.has_key(env) or not self.needs_key(env, override)


BUILTIN_PROVIDERS: dict[str, ProviderSettings] = {
    "openai": ProviderSettings(
        "openai", "openai", OPENAI_DEFAULT_MODEL,
        base_url_env="OPENAI_BASE_URL", api_key_env="OPENAI_API_KEY",
    ),
    "anthropic": ProviderSettings(
        "anthropic", "anthropic", ANTHROPIC_DEFAULT_MODEL,
        base_url_env="ANTHROPIC_BASE_URL", api_key_env="ANTHROPIC_API_KEY",
    ),
    "local": ProviderSettings("local", "local", BUNDLED_MODEL_ALIAS),
}

BUILTIN_MODELS: tuple[ModelInfo, ...] = (
    *OPENAI_MODELS,  # checked 2026-12-01 (tiller.providers.openai_models)
    *ANTHROPIC_MODELS,  # checked 2026-12-01 (tiller.providers.anthropic_models)
    ModelInfo("local", BUNDLED_MODEL_ALIAS, 8_192, REPLY_TOKENS, ModelCost()),
)
"""Prices (USD per million tokens) as the vendors published them (Anthropic's: see
``tiller.providers.anthropic_models``); the config file overrides."""


PROVIDER_MODULES: Mapping[ProviderType, str] = {
    "openai": "tiller.providers.openai",
    "anthropic": "tiller.providers.anthropic",
    "local": "tiller.providers.local",
}
"""Each type's module; one with a ``warm()`` function imports there what its first call loads."""


def prepare_ahead(settings: ProviderSettings | None, base_url: str | None = None,
                  env: Mapping[str, str] | None = None) -> None:
    """Import what a first model call of this provider imports (ours, the HTTP library
    and their lazily loaded parts) and build the TLS context its HTTP client will use, so that
    call does not wait for them (``tiller.session.warm``). ``base_url`` overrides the
    configured URL, as in ``create_provider``. Raises what an import raises."""
    if settings is None:
        return
    module = importlib.import_module(PROVIDER_MODULES[settings.type])
    warm = getattr(module, "warm", None)
    if warm is not None:
        warm(settings.resolve_base_url(os.environ if env is None else env, base_url))


def create_provider(
    name: str,
    *,
    model: str | None,
    base_url: str | None,
    env: Mapping[str, str],
    providers: Mapping[str, ProviderSettings] | None = None,
    cache_ttl: CacheTtl = "5m",
) -> Provider:
    """The provider called ``name`` (looked up in ``providers``, default the built-in ones).

    ``base_url`` overrides the configured URL; ``cache_ttl`` is how long an Anthropic
    provider's prompt cache lives. Raises ProviderNotConfiguredError, with a message
    saying what to set, for an unknown name or missing credentials. Nothing is sent over the
    network here, and no SDK is imported.
    """
    registry = BUILTIN_PROVIDERS if providers is None else providers
    settings = registry.get(name)
    if settings is None:
        available = ", ".join(sorted(registry))
        raise ProviderNotConfiguredError(f"unknown provider {name!r}: available: {available}")
    model = model or settings.default_model
    if settings.type == "local":
        from tiller.providers.local import LocalProvider

        return LocalProvider(model=model)
    url = settings.resolve_base_url(env, base_url)
    api_key = env.get(settings.api_key_env) if settings.api_key_env else None
    if not api_key:
        if settings.needs_key(env, base_url):
            variable = settings.api_key_env or "an API key variable (api_key_env)"
            hint = (
                ", or pass --base-url for a local OpenAI-compatible server"
                if settings.type == "openai" else ""
            )
            hint += (" (or --provider local: the embedded model, chat only, which `make chat` "
                     "in Tiller's checkout installs)")
            raise ProviderNotConfiguredError(f"no API key: set {variable}{hint}")
        api_key = LOCAL_SERVER_API_KEY
    if settings.type == "anthropic":
        from tiller.providers.anthropic import AnthropicProvider

        return AnthropicProvider(model=model, base_url=url, api_key=api_key,
                                 headers=settings.headers, cache_ttl=cache_ttl)
    from tiller.providers.openai import OpenAIProvider

    return OpenAIProvider(model=model, base_url=url, api_key=api_key, headers=settings.headers,
                          api=settings.api)
