"""Tiller: a JSON-RPC agent backend that editors spawn over stdio.

Importing it turns pydantic's plugins off for the process (``_without_pydantic_plugins``).
"""

from __future__ import annotations

import sys
from types import ModuleType

__version__ = "0.1.0"
PROTOCOL_VERSION = 1

__all__ = ["PROTOCOL_VERSION", "__version__"]

_PYDANTIC_PLUGIN_LOADER = "pydantic.plugin._loader"


def _without_pydantic_plugins() -> None:
    """Give pydantic a plugin loader that finds no plugins, before its first model is built.

    pydantic looks for plugins (``pydantic`` entry points, e.g. an observability package) when
    it builds its first validator: its loader imports ``importlib.metadata`` (and with it
    ``email``, ``zipfile``, ``csv``...) and reads the metadata of every installed distribution,
    ~12 ms of every start (README, Performance). Tiller validates its own wire types and wants
    no installed package hooking into that, so its loader returns none. This is the loader's
    one function pydantic calls (``pydantic.plugin._schema_validator``); its public switch,
    ``PYDANTIC_DISABLE_PLUGINS``, still imports ``importlib.metadata``, and as an environment
    variable would reach the commands the agent runs. Does nothing once the real loader is
    imported."""
    if _PYDANTIC_PLUGIN_LOADER not in sys.modules:
        loader = ModuleType(_PYDANTIC_PLUGIN_LOADER, "Tiller's: no pydantic plugins.")
        loader.get_plugins = tuple  # type: ignore[attr-defined]  # () for every call
        sys.modules[_PYDANTIC_PLUGIN_LOADER] = loader


_without_pydantic_plugins()
