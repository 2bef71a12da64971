"""Configuration precedence and validation: defaults < file < environment < command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiller.config import load_config
from tiller.errors import ConfigError
from tiller.providers.directory import ListingStore, ModelDirectory

FILE = """
provider = "openrouter"
model = "file-model"
thinking = "low"
max_turns = 7

[retry]
max_retries = 5
idle_timeout = 30

[providers.openrouter]
type = "openai"
base_url = "https://openrouter.example/api/v1"
api_key_env = "OPENROUTER_API_KEY"
default_model = "qwen/qwen3-coder"
headers = { "X-Title" = "Tiller" }
api = "chat"

[[models]]
provider = "openrouter"
id = "file-model"
context_window = 32000
cost = { input = 1.5, output = 3 }
"""


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return str(path)


def test_file_values_apply(tmp_path: Path) -> None:
    config = load_config(["--config", write(tmp_path, FILE)], {})
    assert (config.provider, config.model, config.thinking) == ("openrouter", "file-model", "low")
    assert config.max_turns == 7
    assert config.retry.max_retries == 5 and config.retry.idle_timeout == 30
    assert config.retry.base_delay == 1.0  # untouched keys keep their defaults
    router = config.providers["openrouter"]
    assert router.base_url == "https://openrouter.example/api/v1"
    assert router.headers == {"X-Title": "Tiller"}
    assert router.api == "chat" and config.providers["openai"].api == "auto"
    assert "openai" in config.providers  # built-ins stay
    info = ModelDirectory(config, ListingStore()).info("openrouter", "file-model")
    assert info is not None and info.cost is not None and info.cost.input == 1.5
    assert info.source == "config" and info.given == {"context_window", "cost"}


def test_environment_beats_file_and_command_line_beats_both(tmp_path: Path) -> None:
    path = write(tmp_path, FILE)
    env = {"TILLER_MODEL": "env-model", "TILLER_MAX_TURNS": "9"}
    from_env = load_config(["--config", path], env)
    assert from_env.model == "env-model" and from_env.max_turns == 9
    from_cli = load_config(["--config", path, "--model", "cli-model", "--max-turns", "3"], env)
    assert from_cli.model == "cli-model" and from_cli.max_turns == 3
    assert from_cli.provider == "openrouter"


def test_default_path_under_xdg_config_home(tmp_path: Path) -> None:
    (tmp_path / "tiller").mkdir()
    (tmp_path / "tiller" / "config.toml").write_text('model = "xdg-model"\n')
    assert load_config([], {"XDG_CONFIG_HOME": str(tmp_path)}).model == "xdg-model"
    assert load_config([], {"XDG_CONFIG_HOME": str(tmp_path / "none")}).model is None


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("modle = 'x'\n", "unknown key(s) modle"),
        ("max_turns = 'many'\n", "max_turns must be a int"),
        ("thinking = 'extreme'\n", "thinking must be one of"),
        ("[retry]\nmax_retires = 2\n", "unknown retry key(s) max_retires"),
        ("[providers.x]\ntype = 'grpc'\n", "providers.x: type must be"),
        ("[[models]]\nid = 'm'\n", "models[0]: provider must be a str"),
        ("[providers.x]\ntype = 'openai'\nbase_ulr = 'http://h/v1'\n",
         "providers.x: unknown key(s) base_ulr"),
        ("[providers.x]\ntype = 'openai'\napi_key = 'sk-secret'\n",
         "providers.x: unknown key(s) api_key; keys never go in the file"),
        ("[[models]]\nprovider = 'openai'\nid = 'm'\ncontext_windw = 8000\n",
         "models[0]: unknown key(s) context_windw"),
        ("[[models]]\nprovider = 'openai'\nid = 'm'\ncost = { inptu = 1 }\n",
         "models[0].cost: unknown key(s) inptu"),
        ("this is not toml", "cannot read config file"),
        ("[providers.x]\ntype = 'openai'\napi = 'completions'\n",
         "providers.x: api must be auto, responses, chat, not 'completions'"),
        ("[providers.x]\ntype = 'anthropic'\napi = 'chat'\n",
         'providers.x: api is for type = "openai" providers only'),
        ("[sandbox]\nmode = 'docker'\n", "sandbox.mode must be one of workspace-write, read-only"),
        ("[sandbox]\nnetwrok = true\n", "sandbox: unknown key(s) netwrok"),
        ("[sandbox]\nhidden = ['relative/secrets']\n", "not an absolute path (or ~/...)"),
    ],
)
def test_bad_files_say_where(tmp_path: Path, text: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(["--config", write(tmp_path, text)], {})
    assert fragment in str(caught.value)


def test_sandbox_settings_from_file_then_command_line(tmp_path: Path) -> None:
    path = write(tmp_path, "[sandbox]\nmode = 'read-only'\nnetwork = true\n"
                           "hidden = ['~/.ssh', '/srv/keys']\nauto_allow = false\n")
    from_file = load_config(["--config", path], {}).sandbox
    from_cli = load_config(["--config", path, "--sandbox", "required", "--no-sandbox-network"],
                           {}).sandbox
    assert (from_file.mode, from_file.network, from_file.auto_allow) == ("read-only", True, False)
    assert from_file.hidden == ("~/.ssh", "/srv/keys")
    assert (from_cli.mode, from_cli.network, from_cli.hidden) == ("required", False,
                                                                  ("~/.ssh", "/srv/keys"))
    assert load_config([], {}).sandbox.mode == "workspace-write"


def test_missing_explicit_config_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(["--config", str(tmp_path / "nope.toml")], {})
