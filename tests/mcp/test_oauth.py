"""End to end: an OAuth-protected MCP server (tests/support/mcp/oauth_server.py, the official
SDK's server-side auth: metadata, dynamic client registration, PKCE, token, refresh, revoke)
on loopback, through the real ``tiller`` server. The server is ``needsAuth`` first;
``mcp/login`` sends ``client/openUrl`` with the authorization URL, the test follows it like a
browser (the authorization server approves at once and redirects to Tiller's loopback
listener), and the tool call then works. A restart reuses the stored token (0600), a stale one
is refreshed before use, a revoked one makes the server ``needsAuth`` again, ``mcp/logout``
revokes. Every message of the first connection is checked against ``tiller schema``.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import clean_env, record_sent, spawn_tiller
from support.mcp_servers import write_config
from support.paths import SUPPORT
from support.schema_check import WireLog
from tiller.client import RpcError, TillerClient

pytestmark = [pytest.mark.anyio, pytest.mark.process]

OAUTH_SERVER = SUPPORT / "mcp" / "oauth_server.py"


async def free_port() -> int:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = int(listener.extra(anyio.abc.SocketAttribute.local_port))
    await listener.aclose()
    return port


@asynccontextmanager
async def oauth_server() -> AsyncIterator[str]:
    """The protected server's base URL while it runs."""
    port = await free_port()
    process = await anyio.open_process([sys.executable, str(OAUTH_SERVER), str(port)],
                                       stderr=subprocess.PIPE)
    try:
        assert process.stderr is not None
        seen = b""
        with anyio.fail_after(30):
            async for chunk in process.stderr:  # it says so when it listens
                seen += chunk
                if f"listening on {port}".encode() in seen:
                    break
        yield f"http://127.0.0.1:{port}"
    finally:
        process.kill()
        await process.wait()


def http(method: str, url: str) -> Any:
    """One request (urllib follows redirects, like a browser); the JSON answer, or the text."""
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=20) as response:  # noqa: S310 (loopback)
        body = response.read().decode()
    try:
        return json.loads(body)
    except ValueError:
        return body


async def server_log(base: str) -> list[str]:
    log: list[str] = await anyio.to_thread.run_sync(http, "GET", f"{base}/test/log")
    return log


class Browser:
    """Answers ``client/openUrl`` at once and then follows the URL, as a browser would."""

    def __init__(self, group: anyio.abc.TaskGroup) -> None:
        self.group = group
        self.opened: list[dict[str, Any]] = []
        self.pages: list[Any] = []

    async def open_url(self, params: dict[str, Any]) -> dict[str, Any]:
        self.opened.append(params)
        self.group.start_soon(self.follow, params["url"])
        return {}

    async def follow(self, url: str) -> None:
        self.pages.append(await anyio.to_thread.run_sync(http, "GET", url))


def server_state(result: dict[str, Any]) -> dict[str, Any]:
    [server] = result["servers"]
    return dict(server)


def tool_text(tiller: TillerClient, call_id: str) -> tuple[bool, str]:
    end = next(e for e in tiller.events
               if e["type"] == "tool_execution_end" and e["toolCallId"] == call_id)
    return end["isError"], "".join(b.get("text", "") for b in end["result"]["content"])


async def test_sign_in_reuse_refresh_revocation_and_logout(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    env = clean_env(XDG_DATA_HOME=str(data))
    fake_openai.enqueue(
        tool_call_reply([("w1", "mcp__secure__whoami", {})]), text_reply("signed in"),
        tool_call_reply([("w2", "mcp__secure__whoami", {})]), text_reply("refreshed"),
        tool_call_reply([("w3", "mcp__secure__whoami", {})]), text_reply("revoked"),
        tool_call_reply([("w4", "mcp__secure__whoami", {})]), text_reply("again"),
    )
    async with oauth_server() as base:
        config = write_config(tmp_path, {"secure": {
            "type": "http", "url": f"{base}/mcp", "startup_timeout": 20}})
        args = ("--config", str(config), "--permission-mode", "auto")

        # ---- first run: needsAuth, then the browser sign-in
        async with anyio.create_task_group() as group:
            browser = Browser(group)
            async with spawn_tiller(fake_openai, tmp_path, *args, env=env) as tiller:
                sent = record_sent(tiller)
                tiller.on_request("client/openUrl", browser.open_url)
                await tiller.request("initialize", {"capabilities": {"openUrl": True}})
                before = server_state(await tiller.request("mcp/list", timeout=60))
                signed_in = (await tiller.request("mcp/login", {"server": "secure"},
                                                  timeout=60))["server"]
                await tiller.request("agent/prompt", {"message": "who am I?"}, timeout=60)
                received = list(tiller.received)

        assert before["status"] == "needsAuth" and before["tools"] == []
        assert before["error"] == "the server needs you to sign in (mcp/login)"
        [opened] = browser.opened
        url = opened["url"]
        assert url.startswith(f"{base}/authorize?")
        assert "code_challenge_method=S256" in url and "code_challenge=" in url
        assert "redirect_uri=http%3A%2F%2F127.0.0.1%3A" in url
        assert opened["server"] == "secure" and opened["reason"] == "Sign in to MCP server secure"
        assert browser.pages and "Tiller is signed in." in browser.pages[0]
        waiting = [e["server"] for e in tiller.events if e["type"] == "mcp_status"
                   and e["server"].get("authUrl")]
        assert waiting and waiting[0]["status"] == "needsAuth" and waiting[0]["authUrl"] == url
        assert signed_in["status"] == "ready" and signed_in["tools"] == ["mcp__secure__whoami"]
        assert "authUrl" not in signed_in
        is_error, text = tool_text(tiller, "w1")
        assert not is_error and text.startswith("client ")
        client_id = text.removeprefix("client ")
        assert await server_log(base) == ["register", "authorize", "code"]
        log = WireLog(sent, received)
        assert log.problems == []
        assert ("method", "client/openUrl") in log.checked
        assert ("result", "mcp/login") in log.checked

        [token_file] = list((data / "tiller" / "mcp-oauth").glob("*.json"))
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
        record = json.loads(token_file.read_text())
        assert record["serverUrl"] == f"{base}/mcp" and record["tokens"]["refresh_token"]
        assert record["clientInfo"]["client_id"] == client_id

        # ---- a restart reuses the token: ready at once, no browser
        async with spawn_tiller(fake_openai, tmp_path, *args, env=env) as tiller:
            tiller.on_request("client/openUrl", browser.open_url)
            await tiller.request("initialize", {"capabilities": {"openUrl": True}})
            again = server_state(await tiller.request("mcp/list", timeout=60))
        assert again["status"] == "ready" and len(browser.opened) == 1
        assert await server_log(base) == ["register", "authorize", "code"]

        # ---- an hour later (the token's expiry passed while Tiller was stopped): refreshed
        await anyio.to_thread.run_sync(http, "POST", f"{base}/test/expire")
        record = json.loads(token_file.read_text())
        token_file.write_text(json.dumps({**record, "expiresAt": time.time() - 60}))
        os.chmod(token_file, 0o600)
        async with anyio.create_task_group() as group:
            browser = Browser(group)
            async with spawn_tiller(fake_openai, tmp_path, *args, env=env) as tiller:
                tiller.on_request("client/openUrl", browser.open_url)
                await tiller.request("initialize", {"capabilities": {"openUrl": True}})
                await tiller.request("agent/prompt", {"message": "still me?"}, timeout=60)
                assert tool_text(tiller, "w2") == (False, f"client {client_id}")
                assert (await server_log(base))[-2:] == ["expire-all", "refresh"]
                assert json.loads(token_file.read_text())["tokens"] != record["tokens"]

                # ---- revoked mid-session: the call says to sign in, the server needsAuth
                await anyio.to_thread.run_sync(http, "POST", f"{base}/test/revoke")
                await tiller.request("agent/prompt", {"message": "and now?"}, timeout=60)
                is_error, text = tool_text(tiller, "w3")
                assert is_error and "the server needs you to sign in (mcp/login)" in text
                revoked = server_state(await tiller.request("mcp/list"))
                assert revoked["status"] == "needsAuth" and revoked["tools"] == []
                assert browser.opened == []  # nobody asked for a sign-in: no browser

                # ---- signing in again, then out
                relogged = (await tiller.request("mcp/login", {"server": "secure"},
                                                 timeout=60))["server"]
                await tiller.request("agent/prompt", {"message": "back?"}, timeout=60)
                assert tool_text(tiller, "w4")[0] is False
                out = (await tiller.request("mcp/logout", {"server": "secure"},
                                            timeout=60))["server"]

        assert relogged["status"] == "ready" and len(browser.opened) == 1
        assert out["status"] == "needsAuth"
        tail = await server_log(base)
        assert tail[-4:] == ["authorize", "code", "revoke", "revoke"]  # refresh, access token
        assert "tokens" not in json.loads(token_file.read_text())


async def test_login_errors_name_the_server(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    config = write_config(tmp_path, {
        "local": {"command": sys.executable, "args": ["-c", "pass"]},
        "static": {"type": "http", "url": "http://127.0.0.1:9/mcp",
                   "bearer_token_env": "STATIC_TOKEN", "startup_timeout": 2},
    })
    async with spawn_tiller(fake_openai, tmp_path, "--config", str(config),
                            env=clean_env(XDG_DATA_HOME=str(tmp_path / "data"))) as tiller:
        errors: dict[str, RpcError] = {}
        for name in ("nope", "local", "static"):
            with pytest.raises(RpcError) as refused:
                await tiller.request("mcp/login", {"server": name}, timeout=60)
            errors[name] = refused.value
    assert {name: error.code for name, error in errors.items()} == {
        "nope": -32602, "local": -32602, "static": -32602}
    assert "has no MCP server 'nope' (it has: local, static)" in str(errors["nope"])
    assert "MCP server local does not use OAuth (a stdio server)" in str(errors["local"])
    assert "MCP server static does not use OAuth (it sends its own Authorization)" in \
        str(errors["static"])


async def test_without_open_url_the_status_carries_the_url(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    env = clean_env(XDG_DATA_HOME=str(tmp_path / "data"))
    async with oauth_server() as base:
        config = write_config(tmp_path, {"secure": {
            "type": "http", "url": f"{base}/mcp", "startup_timeout": 20}})
        async with spawn_tiller(fake_openai, tmp_path, "--config", str(config),
                                env=env) as tiller:
            await tiller.request("initialize", {"capabilities": {}})
            async with anyio.create_task_group() as group:
                results: list[dict[str, Any]] = []

                async def login() -> None:
                    results.append(await tiller.request("mcp/login", {"server": "secure"},
                                                        timeout=60))

                group.start_soon(login)
                event = await tiller.wait_for(
                    lambda m: m.get("method") == "agent/event"
                    and m["params"]["type"] == "mcp_status"
                    and bool(m["params"]["server"].get("authUrl")), timeout=60)
                url = event["params"]["server"]["authUrl"]
                page = await anyio.to_thread.run_sync(http, "GET", url)
        assert not [m for m in tiller.received if m.get("method") == "client/openUrl"]
    assert url.startswith(f"{base}/authorize?") and "Tiller is signed in." in page
    assert results[0]["server"]["status"] == "ready"
