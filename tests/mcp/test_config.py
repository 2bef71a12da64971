"""``[mcp_servers.NAME]`` in the config file and ``session/new``'s ``mcpServers``
(tiller.mcp.config): what an entry means, and a malformed one names the key and the server."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.paths import README
from tiller.config import load_config
from tiller.errors import ConfigError
from tiller.mcp.config import McpServerConfig, parse_server_list


def load(tmp_path: Path, text: str) -> list[McpServerConfig]:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return list(load_config(["--config", str(path)], {}).mcp_servers)


def test_file_entries(tmp_path: Path) -> None:
    git, web = load(tmp_path, """
[mcp_servers.git]
command = "uvx"
args = ["mcp-server-git"]
env = { GIT_PAGER = "cat" }
tool_timeout = 5
disabled_tools = ["git_reset"]
read_only = true

[mcp_servers.web]
url = "https://example.com/mcp"
headers = { X-Team = "a" }
bearer_token_env = "WEB_TOKEN"
startup_timeout = 3.5
enabled_tools = ["search"]
""")
    assert git.transport == "stdio" and git.args == ("mcp-server-git",)
    assert git.env == {"GIT_PAGER": "cat"} and git.tool_timeout == 5.0
    assert git.read_only and not git.offers("git_reset") and git.offers("git_log")
    assert web.transport == "http" and web.startup_timeout == 3.5
    assert web.offers("search") and not web.offers("fetch")


@pytest.mark.parametrize(("text", "fragment"), [
    ('[mcp_servers.git]\nargs = ["x"]', "mcp_servers.git: command is required"),
    ('[mcp_servers.git]\ncommand = "x"\ntool_timeout = -1', "mcp_servers.git: tool_timeout"),
    ('[mcp_servers.git]\ncommand = "x"\nargs = "x"', "mcp_servers.git: args must be a list"),
    ('[mcp_servers.git]\ncommand = "x"\ncolour = 1', "mcp_servers.git: unknown key(s) colour"),
    ('[mcp_servers.web]\ntype = "sse"', "mcp_servers.web: url is required"),
    ('[mcp_servers.web]\ntype = "ws"\nurl = "x"', "mcp_servers.web: type must be"),
    ('[mcp_servers."a b"]\ncommand = "x"', "a server name may hold only"),
    ('[mcp_servers.git]\ncommand = "x"\nread_only = "yes"', "mcp_servers.git: read_only"),
])
def test_malformed_entries_name_the_file_server_and_key(
    tmp_path: Path, text: str, fragment: str
) -> None:
    with pytest.raises(ConfigError) as error:
        load(tmp_path, text)
    assert str(tmp_path / "config.toml") in str(error.value)
    assert fragment in str(error.value)


def test_session_entries_in_acps_shape() -> None:
    stdio, sse = parse_server_list([
        {"name": "t", "command": "mcp-server-time", "args": [],
         "env": [{"name": "TZ", "value": "UTC"}], "toolTimeout": 9},
        {"type": "sse", "name": "s", "url": "http://127.0.0.1:1/sse",
         "headers": [{"name": "X", "value": "y"}]},
    ], "session/new: mcpServers")
    assert stdio.env == {"TZ": "UTC"} and stdio.tool_timeout == 9.0
    assert sse.transport == "sse" and sse.headers == {"X": "y"}
    with pytest.raises(ConfigError, match=r"mcpServers\[0\]: mcp_servers.t: env must hold"):
        parse_server_list([{"name": "t", "command": "x", "env": [{"name": "A"}]}],
                          "session/new: mcpServers")
    with pytest.raises(ConfigError, match=r"mcpServers\[0\]: name is required"):
        parse_server_list([{"command": "x"}], "session/new: mcpServers")


def test_the_readme_example_loads(tmp_path: Path) -> None:
    readme = README.read_text()
    blocks = [b.split("```", 1)[0] for b in readme.split("```toml\n")[1:]]
    [example] = [block for block in blocks if "[mcp_servers." in block]
    git, docs, linear = load(tmp_path, example)
    assert git.name == "git" and git.disabled_tools == ("git_reset",)
    assert docs.transport == "http" and docs.bearer_token_env == "DOCS_TOKEN"
    assert not docs.uses_oauth  # it sends its own Authorization
    assert linear.transport == "http" and linear.uses_oauth


def test_oauth_keys(tmp_path: Path) -> None:
    fixed, off, headed = load(tmp_path, """
[mcp_servers.fixed]
url = "https://example.com/mcp"
oauth_callback_port = 33418
oauth_client_metadata_url = "https://example.com/tiller.json"

[mcp_servers.off]
url = "https://example.com/mcp"
oauth = false

[mcp_servers.headed]
url = "https://example.com/mcp"
headers = { authorization = "Token x" }
""")
    assert fixed.uses_oauth and fixed.oauth_callback_port == 33418
    assert fixed.oauth_client_metadata_url == "https://example.com/tiller.json"
    assert not off.uses_oauth and not headed.uses_oauth
    [stdio] = load(tmp_path, '[mcp_servers.s]\ncommand = "x"\n')
    assert not stdio.uses_oauth
    for bad, says in [("oauth_callback_port = 0", "must be a port number"),
                      ("oauth_callback_port = true", "must be a port number"),
                      ('oauth_client_metadata_url = "http://example.com/c.json"',
                       "must be an https URL with a path"),
                      ('oauth_client_metadata_url = "https://example.com"',
                       "must be an https URL with a path"),
                      ('oauth = "yes"', "oauth")]:
        with pytest.raises(ConfigError, match=says):
            load(tmp_path, f'[mcp_servers.w]\nurl = "https://example.com/mcp"\n{bad}\n')
