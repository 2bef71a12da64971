"""ACP authentication: Tiller's providers take their keys from environment variables, so the
only method it offers is ACP's ``env_var`` one, and only while the default provider has no key.

``missing_key`` says which variable is missing; ``auth_methods`` lists the method for
``initialize``; ``session/new`` then fails with ACP's auth-required error (-32000) instead of
-32014; ``authenticate`` re-reads the configuration (the config file and the environment the
server was started with, ``tiller.config.load_config``) and succeeds once the provider can be
built. Keys are never sent over ACP.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tiller.config import ServerConfig, load_config
from tiller.procs import scrub_environ

__all__ = ["ConfigLoader", "auth_methods", "config_loader", "method_id", "missing_key"]

ConfigLoader = Callable[[], ServerConfig]
"""Reads the configuration again (blocking: call it in a worker thread); raises ConfigError."""


def config_loader(argv: tuple[str, ...] | None, config: ServerConfig) -> ConfigLoader:
    """Re-read the configuration the way the server read it at start (``argv`` None: the
    server was not started from a command line; the same ``config`` comes back). New key
    variables are scrubbed from the server's environment as at start (tiller.procs)."""

    def load() -> ServerConfig:
        if argv is None:
            return config
        fresh = load_config(argv, config.env)
        scrub_environ(fresh.key_variables())
        return fresh

    return load


def missing_key(config: ServerConfig) -> str | None:
    """The variable the default provider's key should be in, when it is not set and the
    provider needs it (``ProviderSettings.configured``, what ``create_provider`` checks before
    it builds one); None when the provider is usable (or fails for another reason, such as an
    unknown name, which no key fixes). Nothing is built or imported."""
    settings = config.providers.get(config.provider)
    if settings is None or not settings.api_key_env:
        return None
    if settings.configured(config.env, config.base_url):
        return None
    return settings.api_key_env


def method_id(variable: str) -> str:
    return f"env:{variable}"


def auth_methods(config: ServerConfig) -> list[dict[str, Any]]:
    """``initialize``'s ``authMethods``: one ``env_var`` method naming the missing variable,
    or none."""
    variable = missing_key(config)
    if variable is None:
        return []
    return [{
        "type": "env_var", "id": method_id(variable), "name": f"{variable}",
        "description": f"Set {variable} in the agent's environment (or configure another "
                       "provider in Tiller's config file), then authenticate",
        "vars": [{"name": variable, "label": f"{config.provider} API key", "secret": True}],
    }]
