"""Start-up configuration: built-in defaults < environment < command line.

``load_config(argv, env)`` is pure (no process globals), so tests build configs directly.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tiller import __version__
from tiller.errors import ConfigError

__all__ = ["ServerConfig", "build_parser", "default_system_prompt", "load_config"]

FramingOption = Literal["auto", "lsp", "ndjson"]


@dataclass
class ServerConfig:
    """Everything the server process is started with."""

    provider: str = "openai"
    model: str | None = None
    base_url: str | None = None
    cwd: Path = field(default_factory=Path.cwd)
    framing: FramingOption = "auto"
    log_file: Path | None = None
    log_level: str = "WARNING"
    max_turns: int = 50
    system_prompt: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)


def default_system_prompt(cwd: Path) -> str:
    """The system prompt a session gets unless ``session/new`` passes one."""
    return (
        "You are Tiller, a coding agent working inside the user's editor. "
        f"The workspace is {cwd}. Use the tools to read files, make precise edits, "
        "and run commands; prefer small verified steps, and say briefly what you changed."
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tiller",
        description="JSON-RPC agent backend: serves JSON-RPC 2.0 on stdin/stdout.",
    )
    parser.add_argument("--version", action="version", version=f"tiller {__version__}")
    parser.add_argument("--provider", help="model provider (default: openai; env TILLER_PROVIDER)")
    parser.add_argument("--model", help="model name (env TILLER_MODEL)")
    parser.add_argument("--base-url", help="provider base URL (env OPENAI_BASE_URL for openai)")
    parser.add_argument("--cwd", help="workspace root (default: the current directory)")
    parser.add_argument(
        "--framing", choices=["auto", "lsp", "ndjson"], default=None,
        help="stdio framing; auto detects it from the first bytes (default)",
    )
    parser.add_argument("--log-file", help="append logs here instead of stderr")
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING (default), ERROR")
    parser.add_argument("--max-turns", type=int, help="per-run limit on model calls (default 50)")
    return parser


def load_config(argv: Sequence[str], env: Mapping[str, str]) -> ServerConfig:
    """Merge defaults, ``env`` and ``argv`` (later wins). Raises ConfigError on bad values."""
    args = build_parser().parse_args(list(argv))
    cwd = Path(args.cwd).expanduser().resolve() if args.cwd else Path.cwd()
    if not cwd.is_dir():
        raise ConfigError(f"--cwd {cwd} is not a directory")
    max_turns = args.max_turns if args.max_turns is not None else _int_env(env, "TILLER_MAX_TURNS")
    if max_turns is not None and max_turns < 1:
        raise ConfigError("--max-turns must be at least 1")
    return ServerConfig(
        provider=args.provider or env.get("TILLER_PROVIDER") or "openai",
        model=args.model or env.get("TILLER_MODEL") or None,
        base_url=args.base_url,
        cwd=cwd,
        framing=args.framing or env.get("TILLER_FRAMING") or "auto",  # type: ignore[arg-type]
        log_file=Path(args.log_file) if args.log_file else None,
        log_level=(args.log_level or env.get("TILLER_LOG_LEVEL") or "WARNING").upper(),
        max_turns=max_turns or 50,
        env=dict(env),
    )


def _int_env(env: Mapping[str, str], name: str) -> int | None:
    value = env.get(name)
    if not value:
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise ConfigError(f"{name} must be an integer, not {value!r}") from exc
