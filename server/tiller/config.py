"""Start-up configuration: built-in defaults < config file < environment < command line.

``load_config(argv, env)`` is pure (no process globals), so tests build configs directly. The
config file is TOML, at ``$XDG_CONFIG_HOME/tiller/config.toml`` (``~/.config/tiller/...``) or
``--config PATH``; README.md documents its keys. Secrets never live in it: providers name the
environment variable that holds their key.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from tiller import __version__
from tiller.diagnostics.settings import DiagnosticsSettings, parse_diagnostics
from tiller.errors import ConfigError
from tiller.frozen import frozen
from tiller.hooks.settings import HookSet, parse_hooks
from tiller.mcp.config import McpServerConfig, parse_server_table
from tiller.modes import (
    PERMISSION_MODES,
    SANDBOX_MODES,
    THINKING_LEVELS,
    PermissionMode,
    SandboxMode,
    ThinkingLevel,
    Verdict,
)
from tiller.providers.base import CacheTtl, ModelCost, ModelInfo
from tiller.providers.registry import (
    BUILTIN_MODELS,
    BUILTIN_PROVIDERS,
    OPENAI_APIS,
    ProviderSettings,
)
from tiller.sandbox.settings import SandboxSettings

__all__ = [
    "CompactionSettings",
    "PermissionRule",
    "RetryPolicy",
    "ServerConfig",
    "TaskSettings",
    "build_parser",
    "config_dir",
    "default_config_path",
    "default_data_dir",
    "default_provider",
    "default_session_dir",
    "load_config",
    "provider_help",
    "sandbox_mode",
    "workspace_folder",
]

FramingOption = Literal["auto", "lsp", "ndjson"]


@frozen
class CompactionSettings:
    """``reserve_tokens`` of the window stay free for the reply; ``keep_recent_tokens`` of the
    newest messages are kept verbatim."""

    enabled: bool = True
    reserve_tokens: int = 16_384
    keep_recent_tokens: int = 20_000


@frozen
class RetryPolicy:
    """Retries of one model call: exponential backoff with jitter, bounded in count and delay.

    ``delay(n)`` for retry n is ``base_delay * 2**(n-1)`` (±``jitter``), or the provider's
    ``Retry-After`` when it gave one; None when that exceeds ``max_delay`` (then give up).
    ``idle_timeout`` is how long a stream may stay silent before it counts as failed.
    """

    max_retries: int = 3
    base_delay: float = 1.0
    max_delay: float = 60.0
    jitter: float = 0.2
    idle_timeout: float = 120.0

    def delay(self, retry: int, retry_after: float | None = None) -> float | None:
        if retry_after is not None:
            return retry_after if retry_after <= self.max_delay else None
        backoff: float = self.base_delay * 2.0 ** (retry - 1)
        backoff *= 1 + random.uniform(-self.jitter, self.jitter)
        return min(backoff, self.max_delay)


@frozen
class TaskSettings:
    """Subagents (the ``task`` tool, tiller.session.subagents): how many of a session's run at
    once, how deep they nest (1: a subagent starts none), and each subagent run's limits on
    turns and tokens (an agent file's ``maxTurns`` wins)."""

    max_concurrent: int = 4
    max_depth: int = 1
    max_turns: int = 30
    max_tokens: int = 2_000_000


@frozen
class PermissionRule:
    """A config-file rule; the first that matches decides. ``path`` is a glob against the
    resolved path (relative globs are taken from the workspace root); ``command`` the first words
    of a command tool's (``bash``'s) command (see tiller.gate.shell)."""

    action: Verdict
    tool: str | None = None
    path: str | None = None
    command: str | None = None



@dataclass
class ServerConfig:
    """Everything the server process is started with."""

    provider: str = "openai"
    """The default provider: as configured, else ``default_provider`` picks one."""
    provider_chosen: bool = False
    """Whether the file, the environment or the command line named the provider."""
    model: str | None = None
    base_url: str | None = None
    cwd: Path = field(default_factory=Path.cwd)
    framing: FramingOption = "auto"
    acp: bool = False
    """Serve the Agent Client Protocol (``--acp``) instead of Tiller's own (tiller.fronts.acp)."""
    log_file: Path | None = None
    log_level: str = "WARNING"
    max_turns: int = 50
    max_run_tokens: int = 10_000_000
    compaction: CompactionSettings = field(default_factory=CompactionSettings)
    tasks: TaskSettings = field(default_factory=TaskSettings)
    """Subagents (``[tasks]``)."""
    thinking: ThinkingLevel = "off"
    permission_mode: PermissionMode | None = None
    """None: ``ask`` when the client can answer permission requests, else ``auto``."""
    permission_timeout: float = 300.0
    permission_rules: list[PermissionRule] = field(default_factory=list)
    sanitize_env: bool = True
    """Keep secrets (API keys, tokens, passwords) out of the environment of bash commands."""
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    """Where commands run (``[sandbox]``, ``--sandbox``, ``--sandbox-network``)."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    providers: dict[str, ProviderSettings] = field(default_factory=lambda: dict(BUILTIN_PROVIDERS))
    models: list[ModelInfo] = field(default_factory=lambda: list(BUILTIN_MODELS))
    config_path: Path | None = None
    session_dir: Path | None = None
    """Where session logs go; None keeps sessions in memory only (--no-session)."""
    data_dir: Path | None = None
    """Tiller's data folder (``$XDG_DATA_HOME/tiller``): the providers' model lists are cached
    under ``models/``; None caches them in memory only."""
    cache_ttl: CacheTtl = "5m"
    """How long Anthropic keeps the prompt cache Tiller asks for (``cache_control.ttl``)."""
    system_prompt: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    checkpoint_max_bytes: int = 2 * 1024 * 1024
    """Files larger than this are left out of checkpoints
    (tiller.checkpoints.checkpoints)."""
    mcp_servers: list[McpServerConfig] = field(default_factory=list)
    """The config file's ``[mcp_servers.NAME]`` (tiller.mcp), started by every session."""
    hooks: HookSet = field(default_factory=HookSet)
    """The config file's ``[hooks]`` (tiller.hooks): the user's own, run in every session."""
    diagnostics: DiagnosticsSettings = field(default_factory=DiagnosticsSettings)
    """The config file's ``[diagnostics]`` (tiller.diagnostics.settings)."""

    def key_variables(self) -> set[str]:
        """The environment variables that hold a configured provider's API key."""
        return {s.api_key_env for s in self.providers.values() if s.api_key_env}

    def default_model(self, provider: str) -> str:
        """The configured default model of ``provider`` ("default" for an unknown provider)."""
        settings = self.providers.get(provider)
        return settings.default_model if settings is not None else "default"


def default_config_path(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".config")
    return Path(base) / "tiller" / "config.toml"


def default_data_dir(env: Mapping[str, str]) -> Path:
    """``$XDG_DATA_HOME/tiller`` (``~/.local/share/tiller``)."""
    home = Path(env.get("HOME", "~")).expanduser()
    base = env.get("XDG_DATA_HOME") or str(home / ".local" / "share")
    return Path(base) / "tiller"


def workspace_folder(cwd: str, name: str) -> Path:
    """``cwd`` (``~`` expanded, relative to the current directory) as an absolute folder;
    ConfigError naming it as ``name`` and saying why when it is not one (missing, a file, a
    name the system refuses)."""
    path = Path(cwd).expanduser()
    try:
        path = path.resolve()
        if path.is_dir():
            return path
        why = "not a folder" if path.exists() else "no such folder"
    except OSError as exc:  # a name too long, a loop of symlinks...
        why = exc.strerror or str(exc)
    raise ConfigError(f"{name}: {cwd[:200]!r}: {why}")


def default_session_dir(env: Mapping[str, str]) -> Path:
    return default_data_dir(env) / "sessions"


def provider_help(env: Mapping[str, str]) -> str:
    """``--provider``'s help: the choices, and the default it would get in ``env``."""
    return ("openai, anthropic, local, or one from the config file (default: the config "
            f"file's provider, else one chosen from the environment: {default_provider(env, None)}"
            " here)")


COMMANDS_HELP = """\
commands:
  tiller chat [PROMPT]   chat with the agent in this terminal (tiller chat --help)
  tiller run PROMPT      run one prompt, print the reply and exit, for scripts (tiller run --help)
  tiller schema          print the protocol as one JSON Schema (draft 2020-12)"""


def build_parser(env: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    """The server's command line; ``env`` (default: none) is the environment the help
    describes defaults in."""
    parser = argparse.ArgumentParser(
        prog="tiller",
        usage="%(prog)s [options]\n       %(prog)s {chat,run,schema} ...",
        description="Tiller, a coding-agent backend: with no command it serves JSON-RPC 2.0 on "
        "stdin/stdout, for the editor or script that spawned it (protocol.md).",
        epilog=COMMANDS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("--version", action="version", version=f"tiller {__version__}")
    add("--config", help="config file (default: $XDG_CONFIG_HOME/tiller/config.toml)")
    add("--provider", help=provider_help(env or {}))
    add("--model", help="model name, or a GGUF path for --provider local (env TILLER_MODEL)")
    add("--base-url", help="provider base URL (Ollama, vLLM, llama.cpp server, OpenRouter...)")
    add("--cwd", help="workspace root (default: the current directory)")
    add("--framing", choices=["auto", "lsp", "ndjson"], help="stdio framing (default: auto)")
    add("--acp", action="store_true",
        help="speak the Agent Client Protocol (also chosen by an ACP client's initialize)")
    add("--thinking", choices=THINKING_LEVELS,
        help="thinking level (default: off); a model that lacks it runs at the nearest")
    add("--permission-mode", choices=PERMISSION_MODES,
        help="ask, acceptEdits, auto or readonly (default: ask if the client can answer)")
    add("--sandbox", choices=SANDBOX_MODES,
        help="where commands run: workspace-write (default), read-only, off, or required "
        "(workspace-write, never unsandboxed)")
    add("--sandbox-network", action=argparse.BooleanOptionalAction, default=None,
        help="sandboxed commands keep the network (default: no network)")
    add("--max-turns", type=int, help="per-run limit on model calls (default 50)")
    add("--max-run-tokens", type=int, help="per-run limit on tokens (default 10,000,000)")
    add("--max-retries", type=int, help="retries of a transient provider failure (default 3)")
    add("--idle-timeout", type=float, help="seconds without a byte before a stream is retried")
    add("--session-dir", help="session logs (default: $XDG_DATA_HOME/tiller/sessions)")
    add("--no-session", action="store_true", help="keep sessions in memory only")
    add("--checkpoint-max-bytes", type=int,
        help="files larger than this are left out of checkpoints (default 2 MB)")
    add("--log-file", help="append logs here instead of stderr")
    add("--log-level", help="DEBUG, INFO, WARNING (default), ERROR")
    return parser


def load_config(argv: Sequence[str], env: Mapping[str, str]) -> ServerConfig:
    """Merge defaults, the config file, ``env`` and ``argv`` (later wins).

    Raises ConfigError, naming the file and key, on bad values."""
    args = build_parser(env).parse_args(list(argv))
    path = Path(args.config).expanduser() if args.config else default_config_path(env)
    if args.config and not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    config = ServerConfig(env=dict(env), session_dir=default_session_dir(env),
                          data_dir=default_data_dir(env))
    if path.is_file():
        config = _apply_file(config, path)
    config = _apply_env(config, env)
    config = _apply_args(config, args)
    if not config.provider_chosen:
        config = replace(config, provider=default_provider(env, config.base_url))
    return config


def default_provider(env: Mapping[str, str], base_url: str | None) -> str:
    """With no provider configured: OpenAI when its key or a base URL is there, else Anthropic
    when its key is, else the embedded local model when its extra is installed, else OpenAI
    (whose error then says what to set)."""
    if base_url or env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"):
        return "openai"
    if env.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    if importlib.util.find_spec("llama_cpp") is not None:
        return "local"
    return "openai"



def _apply_file(config: ServerConfig, path: Path) -> ServerConfig:
    import tomllib  # only with a config file: its regular expressions cost ~3 ms to compile

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    where = str(path)
    known = {"provider", "model", "thinking", "max_turns", "max_run_tokens", "retry",
             "compaction", "permissions", "tools", "sandbox", "providers", "models",
             "mcp_servers", "cache_ttl", "hooks", "diagnostics", "tasks"}
    if unknown := sorted(set(data) - known):
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}")
    updates: dict[str, Any] = {"config_path": path}
    for key in ("provider", "model"):
        if key in data:
            updates[key] = _typed(data, key, str, where)
    updates["provider_chosen"] = "provider" in data
    if "thinking" in data:
        updates["thinking"] = _thinking(data["thinking"], f"{where}: thinking")
    if "cache_ttl" in data:
        if data["cache_ttl"] not in ("5m", "1h"):
            raise ConfigError(f"{where}: cache_ttl must be \"5m\" or \"1h\", not "
                              f"{data['cache_ttl']!r}")
        updates["cache_ttl"] = data["cache_ttl"]
    if "max_turns" in data:
        updates["max_turns"] = _positive(_typed(data, "max_turns", int, where), "max_turns")
    if "max_run_tokens" in data:
        updates["max_run_tokens"] = _positive(
            _typed(data, "max_run_tokens", int, where), "max_run_tokens"
        )
    if "retry" in data:
        updates["retry"] = _retry(config.retry, data["retry"], where)
    if "compaction" in data:
        updates["compaction"] = _compaction(config.compaction, data["compaction"], where)
    if "tasks" in data:
        updates["tasks"] = _tasks(config.tasks, data["tasks"], f"{where}: tasks")
    if "permissions" in data:
        updates.update(_permissions(data["permissions"], f"{where}: permissions"))
    if "tools" in data:
        tools = _typed(data, "tools", dict, where)
        if unknown := sorted(set(tools) - {"sanitize_env"}):
            raise ConfigError(f"{where}: unknown tools key(s) {', '.join(unknown)}")
        if "sanitize_env" in tools:
            updates["sanitize_env"] = _typed(tools, "sanitize_env", bool, f"{where}: tools")
    if "diagnostics" in data:
        updates["diagnostics"] = parse_diagnostics(data["diagnostics"], f"{where}: diagnostics")
    if "sandbox" in data:
        updates["sandbox"] = _sandbox(config.sandbox, data["sandbox"], f"{where}: sandbox")
    providers = dict(config.providers)
    for name, table in _typed(data, "providers", dict, where, default={}).items():
        providers[name] = _provider(name, table, providers.get(name), where)
    updates["providers"] = providers
    models = list(config.models)
    for index, table in enumerate(_typed(data, "models", list, where, default=[])):
        models.append(_model(table, f"{where}: models[{index}]"))
    updates["models"] = models
    updates["mcp_servers"] = [
        parse_server_table(name, table, where)
        for name, table in _typed(data, "mcp_servers", dict, where, default={}).items()
    ]
    if "hooks" in data:
        updates["hooks"] = parse_hooks(data["hooks"], where, where)
    return replace(config, **updates)


def _apply_env(config: ServerConfig, env: Mapping[str, str]) -> ServerConfig:
    updates: dict[str, Any] = {}
    if env.get("TILLER_PROVIDER"):
        updates["provider"] = env["TILLER_PROVIDER"]
        updates["provider_chosen"] = True
    if env.get("TILLER_MODEL"):
        updates["model"] = env["TILLER_MODEL"]
    if env.get("TILLER_FRAMING"):
        updates["framing"] = env["TILLER_FRAMING"]
    if env.get("TILLER_LOG_LEVEL"):
        updates["log_level"] = env["TILLER_LOG_LEVEL"].upper()
    if env.get("TILLER_MAX_TURNS"):
        updates["max_turns"] = _positive(_int(env["TILLER_MAX_TURNS"], "TILLER_MAX_TURNS"),
                                         "TILLER_MAX_TURNS")
    return replace(config, **updates)


def _apply_args(config: ServerConfig, args: argparse.Namespace) -> ServerConfig:
    updates: dict[str, Any] = {}
    for name in ("provider", "model", "base_url", "framing", "thinking", "permission_mode"):
        if getattr(args, name) is not None:
            updates[name] = getattr(args, name)
    if args.provider is not None:
        updates["provider_chosen"] = True
    if args.acp:
        updates["acp"] = True
    if args.cwd:
        updates["cwd"] = workspace_folder(args.cwd, "--cwd")
    if args.max_turns is not None:
        updates["max_turns"] = _positive(args.max_turns, "--max-turns")
    if args.max_run_tokens is not None:
        updates["max_run_tokens"] = _positive(args.max_run_tokens, "--max-run-tokens")
    retry = config.retry
    if args.max_retries is not None:
        retry = replace(retry, max_retries=max(args.max_retries, 0))
    if args.idle_timeout is not None:
        retry = replace(retry, idle_timeout=_positive(args.idle_timeout, "--idle-timeout"))
    updates["retry"] = retry
    if args.session_dir:
        updates["session_dir"] = Path(args.session_dir).expanduser().resolve()
    if args.no_session:
        updates["session_dir"] = None
    sandbox = config.sandbox
    if args.sandbox is not None:
        sandbox = replace(sandbox, mode=args.sandbox)
    if args.sandbox_network is not None:
        sandbox = replace(sandbox, network=args.sandbox_network)
    updates["sandbox"] = sandbox
    if args.checkpoint_max_bytes is not None:
        updates["checkpoint_max_bytes"] = _positive(args.checkpoint_max_bytes,
                                                    "--checkpoint-max-bytes")
    if args.log_file:
        updates["log_file"] = Path(args.log_file)
    if args.log_level:
        updates["log_level"] = args.log_level.upper()
    return replace(config, **updates)


PROVIDER_KEYS = frozenset({"type", "base_url", "base_url_env", "api_key_env", "default_model",
                           "headers", "api"})
MODEL_KEYS = frozenset({"provider", "id", "context_window", "max_output_tokens", "cost",
                        "reasoning", "thinking_levels"})
COST_KEYS = ("input", "output", "cache_read", "cache_write", "cache_write_1h")


def _known_keys(table: Mapping[str, Any], known: Iterable[str], where: str) -> None:
    """Raise ConfigError naming every key of ``table`` not in ``known``; a key itself in the
    file (``api_key``) gets a hint to name its environment variable instead."""
    unknown = sorted(set(table) - set(known))
    if not unknown:
        return
    hint = ("; keys never go in the file: set api_key_env to the environment variable that "
            "holds it" if "api_key" in unknown else "")
    raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}{hint}")


def _typed(table: Mapping[str, Any], key: str, kind: type, where: str, default: Any = None) -> Any:
    value = table.get(key, default)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise ConfigError(f"{where}: {key} must be a {kind.__name__}, not {value!r}")
    return value


def _number(table: Mapping[str, Any], key: str, where: str) -> float:
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}: {key} must be a number, not {value!r}")
    return float(value)


def _int(value: str, name: str) -> int:
    try:
        return int(value)
    except ValueError as exc:
        raise ConfigError(f"{name} must be an integer, not {value!r}") from exc


def _positive(value: Any, name: str) -> Any:
    if value <= 0:
        raise ConfigError(f"{name} must be positive, not {value!r}")
    return value


def _thinking(value: Any, name: str) -> ThinkingLevel:
    if value not in THINKING_LEVELS:
        raise ConfigError(f"{name} must be one of {', '.join(THINKING_LEVELS)}, not {value!r}")
    level: ThinkingLevel = value
    return level


def _retry(base: RetryPolicy, table: Any, where: str) -> RetryPolicy:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: retry must be a table")
    names = {f.name for f in fields(RetryPolicy)}
    if unknown := sorted(set(table) - names):
        raise ConfigError(f"{where}: unknown retry key(s) {', '.join(unknown)}")
    values: dict[str, Any] = {key: _number(table, key, f"{where}: retry") for key in table}
    if "max_retries" in values:
        values["max_retries"] = int(values["max_retries"])
    return replace(base, **values)


def _compaction(base: CompactionSettings, table: Any, where: str) -> CompactionSettings:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: compaction must be a table")
    names = {f.name for f in fields(CompactionSettings)}
    if unknown := sorted(set(table) - names):
        raise ConfigError(f"{where}: unknown compaction key(s) {', '.join(unknown)}")
    values: dict[str, Any] = {}
    for key in table:
        kind = bool if key == "enabled" else int
        values[key] = _typed(table, key, kind, f"{where}: compaction")
    return replace(base, **values)


def _tasks(base: TaskSettings, table: Any, where: str) -> TaskSettings:
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    names = [f.name for f in fields(TaskSettings)]
    _known_keys(table, names, where)
    values = {key: _typed(table, key, int, where) for key in table}
    for key, value in values.items():
        if value < (0 if key == "max_depth" else 1):
            least = "0 or more" if key == "max_depth" else "positive"
            raise ConfigError(f"{where}: {key} must be {least}, not {value}")
    return replace(base, **values)


def _permissions(table: Any, where: str) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    if unknown := sorted(set(table) - {"mode", "timeout", "rules"}):
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}")
    updates: dict[str, Any] = {}
    if "mode" in table:
        updates["permission_mode"] = _permission_mode(table["mode"], f"{where}.mode")
    if "timeout" in table:
        updates["permission_timeout"] = _positive(_number(table, "timeout", where), "timeout")
    rules = []
    for index, rule in enumerate(_typed(table, "rules", list, where, default=[])):
        at = f"{where}.rules[{index}]"
        if not isinstance(rule, dict) or rule.get("action") not in ("allow", "deny", "ask"):
            raise ConfigError(f"{at}: needs action = allow, deny or ask")
        if unknown := sorted(set(rule) - {"action", "tool", "path", "command"}):
            raise ConfigError(f"{at}: unknown key(s) {', '.join(unknown)}")
        rules.append(PermissionRule(rule["action"], rule.get("tool"), rule.get("path"),
                                    rule.get("command")))
    updates["permission_rules"] = rules
    return updates


SANDBOX_KEYS = ("mode", "network", "auto_allow", "auto_escalate", "hidden", "writable")


def _sandbox(base: SandboxSettings, table: Any, where: str) -> SandboxSettings:
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    _known_keys(table, SANDBOX_KEYS, where)
    values: dict[str, Any] = {}
    if "mode" in table:
        values["mode"] = sandbox_mode(table["mode"], f"{where}.mode")
    for key in ("network", "auto_allow", "auto_escalate"):
        if key in table:
            values[key] = _typed(table, key, bool, where)
    for key in ("hidden", "writable"):
        if key in table:
            paths = _typed(table, key, list, where)
            if not all(isinstance(p, str) and p for p in paths):
                raise ConfigError(f"{where}: {key} must be a list of paths")
            if bad := [p for p in paths if not os.path.isabs(os.path.expanduser(p))]:
                raise ConfigError(f"{where}: {key}: not an absolute path (or ~/...): {bad[0]!r}")
            values[key] = tuple(paths)
    return replace(base, **values)


def sandbox_mode(value: Any, name: str) -> SandboxMode:
    """``value`` as a sandbox mode; ConfigError naming ``name`` otherwise."""
    if value not in SANDBOX_MODES:
        raise ConfigError(f"{name} must be one of {', '.join(SANDBOX_MODES)}, not {value!r}")
    mode: SandboxMode = value
    return mode


def _permission_mode(value: Any, name: str) -> PermissionMode:
    if value not in PERMISSION_MODES:
        raise ConfigError(f"{name} must be one of {', '.join(PERMISSION_MODES)}, not {value!r}")
    mode: PermissionMode = value
    return mode


def _provider(
    name: str, table: Any, base: ProviderSettings | None, where: str
) -> ProviderSettings:
    where = f"{where}: providers.{name}"
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    _known_keys(table, PROVIDER_KEYS, where)
    kind = table.get("type", base.type if base else None)
    if kind not in ("openai", "anthropic", "local"):
        raise ConfigError(f"{where}: type must be openai, anthropic or local, not {kind!r}")
    headers = _typed(table, "headers", dict, where, default=dict(base.headers) if base else {})
    api = table.get("api", base.api if base else "auto")
    if api not in OPENAI_APIS:
        raise ConfigError(f"{where}: api must be {', '.join(OPENAI_APIS)}, not {api!r}")
    if "api" in table and kind != "openai":
        raise ConfigError(f"{where}: api is for type = \"openai\" providers only")
    return ProviderSettings(
        name=name,
        type=kind,
        default_model=table.get("default_model", base.default_model if base else "default"),
        base_url=table.get("base_url", base.base_url if base else None),
        base_url_env=table.get("base_url_env", base.base_url_env if base else None),
        api_key_env=table.get("api_key_env", base.api_key_env if base else None),
        headers={str(k): str(v) for k, v in headers.items()},
        api=api,
    )


def _model(table: Any, where: str) -> ModelInfo:
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    _known_keys(table, MODEL_KEYS, where)
    cost_table = _typed(table, "cost", dict, where, default=None) if "cost" in table else None
    cost = None
    if cost_table is not None:
        _known_keys(cost_table, COST_KEYS, f"{where}.cost")
        cost = ModelCost(**{
            key: _number(cost_table, key, f"{where}.cost")
            for key in COST_KEYS if key in cost_table
        })
    levels = None
    if "thinking_levels" in table:
        given = _typed(table, "thinking_levels", list, where)
        levels = tuple(_thinking(level, f"{where}.thinking_levels") for level in given)
        levels = tuple(level for level in THINKING_LEVELS if level in levels) or ("off",)
    keys = {"context_window", "max_output_tokens", "cost", "reasoning"} & set(table)
    if levels is not None or "reasoning" in table:
        keys |= {"reasoning", "thinking_levels"}
    return ModelInfo(
        provider=_typed(table, "provider", str, where),
        id=_typed(table, "id", str, where),
        context_window=table.get("context_window"),
        max_output_tokens=table.get("max_output_tokens"),
        cost=cost,
        reasoning=bool(table.get("reasoning", levels is not None and levels != ("off",))),
        thinking_levels=levels,
        source="config",
        given=frozenset(keys),
    )

def config_dir(config: ServerConfig) -> Path:
    """The user's config dir: the config file's folder (``--config`` or the default one)."""
    return (config.config_path or default_config_path(config.env)).parent
