"""MCP server entries: ``[mcp_servers.NAME]`` tables of the config file and the ``mcpServers``
lists of ``session/new`` (Tiller's and ACP's shape), both checked into ``McpServerConfig``.

A malformed entry raises ``ConfigError`` naming where it was, the server and the key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any, Literal
from urllib.parse import urlsplit

from tiller.errors import ConfigError
from tiller.frozen import frozen

__all__ = ["McpServerConfig", "McpTransport", "parse_server_list", "parse_server_table"]

McpTransport = Literal["stdio", "http", "sse"]

_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_TABLE_KEYS = {
    "type", "command", "args", "env", "cwd", "url", "headers", "bearer_token_env", "enabled",
    "startup_timeout", "tool_timeout", "enabled_tools", "disabled_tools", "read_only",
    "oauth", "oauth_client_metadata_url", "oauth_callback_port",
}


@frozen
class McpServerConfig:
    """One MCP server. ``transport`` ``stdio`` runs ``command`` with ``args`` (``env`` added to
    a minimal environment, in ``cwd``); ``http`` (streamable HTTP) and ``sse`` (legacy) connect
    to ``url`` with ``headers`` and, when ``bearer_token_env`` names a set variable,
    ``Authorization: Bearer <its value>``. ``enabled_tools`` (None: all) and ``disabled_tools``
    choose which tools the model sees; ``read_only`` promises no tool of it changes anything.
    Timeouts are in seconds.

    OAuth (``http``/``sse`` only, tiller.mcp.oauth): on unless ``oauth`` is False or the entry
    sends its own ``Authorization`` (a header, ``bearer_token_env``). ``oauth_client_metadata_url``
    is an HTTPS URL of a client ID metadata document (CIMD) to use as the client id where the
    authorization server takes one (else Tiller registers itself, RFC 7591);
    ``oauth_callback_port`` fixes the loopback port of the redirect URI (None: any free one)."""

    name: str
    transport: McpTransport = "stdio"
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    bearer_token_env: str | None = None
    enabled: bool = True
    startup_timeout: float = 10.0
    tool_timeout: float = 60.0
    enabled_tools: tuple[str, ...] | None = None
    disabled_tools: tuple[str, ...] = ()
    read_only: bool = False
    oauth: bool = True
    oauth_client_metadata_url: str | None = None
    oauth_callback_port: int | None = None

    @property
    def uses_oauth(self) -> bool:
        """Whether a 401 from this server starts OAuth (see the class docstring)."""
        static = self.bearer_token_env is not None or any(
            name.lower() == "authorization" for name in self.headers)
        return self.transport != "stdio" and self.oauth and not static

    def offers(self, tool: str) -> bool:
        """Whether the model sees the server's tool called ``tool``."""
        if self.enabled_tools is not None and tool not in self.enabled_tools:
            return False
        return tool not in self.disabled_tools


def _fail(where: str, key: str, why: str) -> ConfigError:
    return ConfigError(f"{where}: {key} {why}")


def _str(table: Mapping[str, Any], key: str, where: str) -> str | None:
    value = table.get(key)
    if value is not None and not isinstance(value, str):
        raise _fail(where, key, f"must be a string, not {value!r}")
    return value


def _strings(table: Mapping[str, Any], key: str, where: str) -> tuple[str, ...] | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(where, key, f"must be a list of strings, not {value!r}")
    return tuple(value)


def _str_map(table: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    value = table.get(key, {})
    if isinstance(value, list):  # ACP's shape: [{name, value}]
        pairs = {}
        for item in value:
            if not (isinstance(item, dict) and isinstance(item.get("name"), str)
                    and isinstance(item.get("value"), str)):
                raise _fail(where, key, f"must hold {{name, value}} strings, not {item!r}")
            pairs[item["name"]] = item["value"]
        return pairs
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise _fail(where, key, f"must be a table of strings, not {value!r}")
    return dict(value)


def _seconds(table: Mapping[str, Any], key: str, where: str, default: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise _fail(where, key, f"must be a positive number of seconds, not {value!r}")
    return float(value)


def _port(table: Mapping[str, Any], key: str, where: str) -> int | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise _fail(where, key, f"must be a port number (1-65535), not {value!r}")
    return value


def _https_url(table: Mapping[str, Any], key: str, where: str) -> str | None:
    value = _str(table, key, where)
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme != "https" or not parts.netloc or parts.path in ("", "/"):
        raise _fail(where, key, f"must be an https URL with a path, not {value!r}")
    return value


def _bool(table: Mapping[str, Any], key: str, where: str, default: bool) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise _fail(where, key, f"must be true or false, not {value!r}")
    return value


def parse_server_table(name: str, table: Any, where: str) -> McpServerConfig:
    """The config file's ``[mcp_servers.NAME]`` (``where``: the file); raises ConfigError."""
    where = f"{where}: mcp_servers.{name}"
    if not _NAME.match(name):
        raise ConfigError(f"{where}: a server name may hold only letters, digits, _ and -")
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    if unknown := sorted(set(table) - _TABLE_KEYS):
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}")
    url = _str(table, "url", where)
    kind = table.get("type", "http" if url else "stdio")
    if kind not in ("stdio", "http", "sse"):
        raise _fail(where, "type", f"must be stdio, http or sse, not {kind!r}")
    command = _str(table, "command", where)
    if kind == "stdio" and not command:
        raise _fail(where, "command", "is required for a stdio server")
    if kind != "stdio" and not url:
        raise _fail(where, "url", f"is required for an {kind} server")
    return McpServerConfig(
        name=name, transport=kind, command=command,
        args=_strings(table, "args", where) or (), env=_str_map(table, "env", where),
        cwd=_str(table, "cwd", where), url=url, headers=_str_map(table, "headers", where),
        bearer_token_env=_str(table, "bearer_token_env", where),
        enabled=_bool(table, "enabled", where, True),
        startup_timeout=_seconds(table, "startup_timeout", where, 10.0),
        tool_timeout=_seconds(table, "tool_timeout", where, 60.0),
        enabled_tools=_strings(table, "enabled_tools", where),
        disabled_tools=_strings(table, "disabled_tools", where) or (),
        read_only=_bool(table, "read_only", where, False),
        oauth=_bool(table, "oauth", where, True),
        oauth_client_metadata_url=_https_url(table, "oauth_client_metadata_url", where),
        oauth_callback_port=_port(table, "oauth_callback_port", where),
    )


def _snake(key: str) -> str:
    """``startupTimeout`` -> ``startup_timeout`` (the wire's camelCase for the file's keys)."""
    return re.sub(r"[A-Z]", lambda match: "_" + match.group().lower(), key)


def parse_server_list(entries: Sequence[Any], where: str) -> list[McpServerConfig]:
    """``session/new``'s ``mcpServers`` in ACP's shape (``{name, command, args, env: [{name,
    value}]}`` or ``{type: "http"|"sse", name, url, headers: [{name, value}]}``); Tiller's own
    keys (timeouts, tool lists, ``read_only``) are accepted too. Raises ConfigError."""
    servers = []
    for index, entry in enumerate(entries):
        at = f"{where}[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ConfigError(f"{at}: name is required")
        table = {_snake(key): value for key, value in entry.items()
                 if key not in ("name", "_meta")}
        servers.append(parse_server_table(entry["name"], table, at))
    return servers
