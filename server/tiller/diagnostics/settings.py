"""The config file's ``[diagnostics]`` section: which command reports a file's problems, by glob,
and how long Tiller waits for diagnostics (tiller.diagnostics.watch).

```toml
[diagnostics]
"*.py" = "ruff check --output-format json {path}"
timeout = 10          # seconds a command may run (default 10)
editor_timeout = 3    # seconds the editor may take to answer client/getDiagnostics (default 3)
```

Every key but ``timeout`` and ``editor_timeout`` is a glob (``*.py`` matches file names at any
depth, a glob with ``/`` the path from the workspace root, as ``find``'s); its value a command
line in which ``{path}`` stands for the file (quoted for the shell). The first glob that matches
a file, in the file's order, names its command.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tiller.errors import ConfigError
from tiller.frozen import frozen

__all__ = ["SETTINGS", "DiagnosticsSettings", "parse_diagnostics"]

SETTINGS = ("timeout", "editor_timeout")
"""The section's keys that are settings, not globs."""


@frozen
class DiagnosticsSettings:
    """``commands``: (glob, command line) pairs in the config file's order; ``timeout``: the
    seconds a command may run; ``editor_timeout``: the seconds the editor has to answer."""

    commands: tuple[tuple[str, str], ...] = ()
    timeout: float = 10.0
    editor_timeout: float = 3.0


def _seconds(table: Mapping[str, Any], key: str, where: str) -> float:
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ConfigError(f"{where}: {key} must be a positive number of seconds, not {value!r}")
    return float(value)


def parse_diagnostics(table: Any, where: str) -> DiagnosticsSettings:
    """The ``[diagnostics]`` table; ConfigError naming ``where`` and the key on a bad value."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    commands = []
    for glob, command in table.items():
        if glob in SETTINGS:
            continue
        if not isinstance(command, str) or not command.strip():
            raise ConfigError(f"{where}: {glob!r} must be a command line (a string), not "
                              f"{command!r}")
        if not glob.strip():
            raise ConfigError(f"{where}: an empty glob")
        commands.append((glob, command))
    timeouts = {key: _seconds(table, key, where) for key in SETTINGS if key in table}
    return DiagnosticsSettings(commands=tuple(commands), **timeouts)
