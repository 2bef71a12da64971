"""End to end: Tiller as an MCP client of real servers nobody here wrote (``mcp-server-time``,
``mcp-server-git`` from PyPI; ``@modelcontextprotocol/server-everything`` from npm, installed
under tests/support/mcp by ``.ci/run``), and of ``tests/support/mcp/scripted_server.py`` (the
official SDK's server) for what published servers do not do on demand: die mid-call, hang, add a
tool.

The model is the loopback OpenAI fake: its recorded requests show what the model saw.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from support.fake_openai import FakeOpenAI, text_reply, tool_call_reply
from support.helpers import process_gone, spawn_tiller
from support.mcp_servers import SCRIPTED, everything_argv, write_config
from tiller.client import RpcError, TillerClient

pytestmark = [pytest.mark.anyio, pytest.mark.process]


def git_repo(path: Path) -> Path:
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "hello.txt").write_text("hi\n")
    return path


def tool_specs(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The tools a model request offered, by name: their function objects."""
    return {tool["function"]["name"]: tool["function"] for tool in request.get("tools", [])}


def ends(tiller: TillerClient) -> dict[str, dict[str, Any]]:
    """Every ``tool_execution_end`` so far, by tool call id."""
    return {e["toolCallId"]: e for e in tiller.events if e["type"] == "tool_execution_end"}


def text_of(end: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in end["result"]["content"])


def descendants(pid: int) -> dict[int, str]:
    """The running descendants of ``pid`` and their command lines."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: dict[int, str] = {}
    pending = list(children.get(pid, []))
    while pending:
        child = pending.pop()
        try:
            found[child] = (Path(f"/proc/{child}/cmdline").read_bytes()
                            .replace(b"\0", b" ").decode())
        except OSError:
            continue
        pending += children.get(child, [])
    return found


async def all_gone(pids: list[int], timeout: float = 10.0) -> bool:
    with anyio.move_on_after(timeout):
        while not all(process_gone(pid) for pid in pids):  # noqa: ASYNC110 (/proc: no event)
            await anyio.sleep(0.05)
    return all(process_gone(pid) for pid in pids)


async def test_real_servers_tools_reach_the_model_and_calls_round_trip(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo")
    config = write_config(tmp_path, {
        "time": {"command": sys.executable,
                 "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]},
        "git": {"command": sys.executable, "args": ["-m", "mcp_server_git"]},
        "everything": {"command": everything_argv()[0],
                       "args": [everything_argv()[1], "stdio"], "startup_timeout": 30},
    })
    fake_openai.enqueue(
        tool_call_reply([
            ("t1", "mcp__time__get_current_time", {"timezone": "Europe/Paris"}),
            ("g1", "mcp__git__git_status", {"repo_path": str(repo)}),
            ("e1", "mcp__everything__echo", {"message": "round trip"}),
            ("e2", "mcp__everything__get-sum", {"a": 20, "b": 22}),
            ("e3", "mcp__everything__get-tiny-image", {}),
            ("e4", "mcp__everything__get-resource-reference",
             {"resourceType": "Text", "resourceId": 7}),
            ("e5", "mcp__everything__get-resource-reference",
             {"resourceType": "Blob", "resourceId": 8}),
        ]),
        text_reply("done"),
    )
    async with spawn_tiller(fake_openai, tmp_path, "--config", str(config),
                            "--permission-mode", "auto") as tiller:
        result = await tiller.request("agent/prompt", {"message": "use the servers"}, timeout=60)
        listed = await tiller.request("mcp/list")
    assert result["stopReason"] == "stop"

    specs = tool_specs(fake_openai.requests[0])
    time_spec = specs["mcp__time__get_current_time"]
    assert time_spec["parameters"]["required"] == ["timezone"]
    assert "timezone" in time_spec["parameters"]["properties"]
    assert "repo_path" in specs["mcp__git__git_status"]["parameters"]["properties"]
    assert set(specs["mcp__everything__get-sum"]["parameters"]["properties"]) == {"a", "b"}
    assert "read" in specs  # the built-in tools stay

    done = ends(tiller)
    assert not any(done[call]["isError"] for call in ("t1", "g1", "e1", "e2", "e3", "e4", "e5"))
    assert json.loads(text_of(done["t1"]))["timezone"] == "Europe/Paris"
    assert "hello.txt" in text_of(done["g1"])  # untracked, as git itself says
    assert "round trip" in text_of(done["e1"])
    assert "42" in text_of(done["e2"])
    [image] = [b for b in done["e3"]["result"]["content"] if b["type"] == "image"]
    assert image["mimeType"] == "image/png"
    assert base64.b64decode(image["data"]).startswith(b"\x89PNG")
    assert "Resource 7: This is a plaintext resource" in text_of(done["e4"])
    assert "[binary resource " in text_of(done["e5"]) and "not shown" in text_of(done["e5"])
    tool_messages = [m for m in fake_openai.requests[1]["messages"] if m["role"] == "tool"]
    assert "round trip" in tool_messages[2]["content"]

    assert {s["name"]: s["status"] for s in listed["servers"]} == {
        "time": "ready", "git": "ready", "everything": "ready"}
    statuses = [(e["server"]["name"], e["server"]["status"])
                for e in tiller.events if e["type"] == "mcp_status"]
    assert ("time", "starting") in statuses and ("time", "ready") in statuses


async def test_failures_become_error_results_and_statuses(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    config = write_config(tmp_path, {
        "s": {"command": sys.executable, "args": [str(SCRIPTED)], "tool_timeout": 2},
        # 5 s: under a loaded CI machine a Python start-up alone once took longer than 2 s,
        # so the server's stderr line was not there yet when its start-up timed out
        "hangs": {"command": sys.executable, "args": [str(SCRIPTED), "--hang"],
                  "startup_timeout": 5},
        "exits": {"command": sys.executable, "args": [str(SCRIPTED), "--exit-at-start"]},
        "missing": {"command": str(tmp_path / "no-such-server")},
        "off": {"command": "true", "enabled": False},
    })
    fake_openai.enqueue(
        tool_call_reply([("slow", "mcp__s__slow", {"seconds": 30})]),
        tool_call_reply([("flood", "mcp__s__flood", {})]),
        tool_call_reply([("fail", "mcp__s__fail", {"why": "no such widget"})]),
        tool_call_reply([("crash", "mcp__s__crash", {})]),
        text_reply("survived"),
    )
    async with spawn_tiller(fake_openai, tmp_path, "--config", str(config),
                            "--permission-mode", "auto") as tiller:
        listed = await tiller.request("mcp/list")
        result = await tiller.request("agent/prompt", {"message": "go"}, timeout=60)
        after = await tiller.request("mcp/list")

    servers = {s["name"]: s for s in listed["servers"]}
    assert set(servers) == {"s", "hangs", "exits", "missing"}  # "off" is disabled
    assert servers["s"]["status"] == "ready" and "mcp__s__crash" in servers["s"]["tools"]
    assert servers["hangs"]["status"] == "failed"
    assert "did not start within 5 seconds" in servers["hangs"]["error"]
    assert "scripted server: hanging" in servers["hangs"]["error"]  # its stderr's tail
    assert "refusing to start" in servers["exits"]["error"]
    assert "no-such-server" in servers["missing"]["error"]

    assert result["stopReason"] == "stop"
    done = ends(tiller)
    assert done["slow"]["isError"]
    assert text_of(done["slow"]) == "MCP server s: slow timed out after 2 seconds"
    flood = text_of(done["flood"])
    assert not done["flood"]["isError"] and "[Output truncated: " in flood
    assert len(flood.encode()) < 60 * 1024
    assert done["fail"]["isError"]
    assert text_of(done["fail"]).startswith("MCP server s reported an error: ")
    assert "no such widget" in text_of(done["fail"])
    assert done["crash"]["isError"] and "MCP server s" in text_of(done["crash"])
    s_after = next(s for s in after["servers"] if s["name"] == "s")
    assert s_after["status"] == "failed" and "crashing on purpose" in s_after["error"]
    assert "mcp__s__crash" not in tool_specs(fake_openai.requests[4])


async def test_list_changed_refreshes_the_tools_before_the_next_model_call(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    config = write_config(tmp_path, {"s": {"command": sys.executable, "args": [str(SCRIPTED)]}})
    fake_openai.enqueue(
        tool_call_reply([("grow", "mcp__s__grow", {})]),
        tool_call_reply([("extra", "mcp__s__extra", {})]),
        text_reply("done"),
    )
    async with spawn_tiller(fake_openai, tmp_path, "--config", str(config),
                            "--permission-mode", "auto") as tiller:
        await tiller.request("agent/prompt", {"message": "grow"}, timeout=60)

    assert "mcp__s__extra" not in tool_specs(fake_openai.requests[0])
    assert "mcp__s__extra" in tool_specs(fake_openai.requests[1])
    assert text_of(ends(tiller)["extra"]) == "extra here"
    changes = [(e["server"]["status"], "mcp__s__extra" in e["server"]["tools"])
               for e in tiller.events if e["type"] == "mcp_status"]
    assert changes == [("starting", False), ("ready", False), ("ready", True),
                       ("stopped", False)]


async def test_names_that_collide_once_sanitised_are_told_apart_and_reported(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """Issue 26, 16: ``a.b`` and ``a_b`` both sanitise to ``mcp__s__a_b``, and server ``s``'s
    tool ``x__a_b`` is server ``s__x``'s ``a_b``: each was offered twice, which real providers
    refuse ("tools: Tool names must be unique."). The first keeps the name; the others get a
    suffix, are listed under ``renamed`` and reach their own tool."""
    config = write_config(tmp_path, {
        "s": {"command": sys.executable, "args": [str(SCRIPTED), "--named", "a.b,a_b,x__a_b"]},
        "s__x": {"command": sys.executable, "args": [str(SCRIPTED), "--named", "a_b"]},
    })
    fake_openai.enqueue(
        tool_call_reply([("dot", "mcp__s__a_b", {}), ("under", "mcp__s__a_b_2", {}),
                         ("other", "mcp__s__x__a_b_2", {})]),
        text_reply("done"),
    )
    async with spawn_tiller(fake_openai, tmp_path, "--config", str(config),
                            "--permission-mode", "auto") as tiller:
        await tiller.request("agent/prompt", {"message": "call them"}, timeout=60)
        listed = await tiller.request("mcp/list")

    names = [tool["function"]["name"] for tool in fake_openai.requests[0]["tools"]]
    assert len(names) == len(set(names))
    offered = {name for name in names if name.startswith("mcp__s")}
    assert offered >= {"mcp__s__a_b", "mcp__s__a_b_2", "mcp__s__x__a_b", "mcp__s__x__a_b_2"}
    servers = {server["name"]: server for server in listed["servers"]}
    assert servers["s"]["renamed"] == [{"tool": "a_b", "name": "mcp__s__a_b_2"}]
    assert servers["s__x"]["renamed"] == [{"tool": "a_b", "name": "mcp__s__x__a_b_2"}]
    assert "mcp__s__x__a_b" in servers["s"]["tools"]
    done = ends(tiller)
    assert [text_of(done[call]) for call in ("dot", "under", "other")] == [
        "this is a.b", "this is a_b", "this is a_b"]
    assert "renamed" not in next(e for e in tiller.events if e["type"] == "mcp_status")["server"]


async def test_a_flood_of_notifications_does_not_stall_the_session(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    config = write_config(tmp_path, {"s": {"command": sys.executable, "args": [str(SCRIPTED)],
                                           "tool_timeout": 50}})
    fake_openai.enqueue(
        tool_call_reply([("c1", "mcp__s__chatter", {"count": 1000})]),
        text_reply("heard"),
    )
    async with spawn_tiller(fake_openai, tmp_path, "--config", str(config),
                            "--permission-mode", "auto") as tiller:
        result = await tiller.request("agent/prompt", {"message": "chatter"}, timeout=55)
        listed = await tiller.request("mcp/list")
    assert result["stopReason"] == "stop"
    assert text_of(ends(tiller)["c1"]) == "said 1000 things"
    assert listed["servers"][0]["status"] == "ready"
    relisted = [e for e in tiller.events
                if e["type"] == "mcp_status" and e["server"]["status"] == "ready"]
    assert len(relisted) == 1  # a list_changed that changes nothing is no news


async def test_permissions_judge_mcp_tools_by_their_description(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    config = write_config(tmp_path, {
        "s": {"command": sys.executable, "args": [str(SCRIPTED)]},
        "ro": {"command": sys.executable, "args": [str(SCRIPTED)], "read_only": True},
        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]},
    })
    fake_openai.enqueue(
        tool_call_reply([
            ("s1", "mcp__s__flood", {"lines": 1}),
            ("r1", "mcp__ro__flood", {"lines": 1}),
            ("t1", "mcp__time__get_current_time", {"timezone": "UTC"}),
        ]),
        text_reply("judged"),
    )
    async with spawn_tiller(fake_openai, tmp_path, "--config", str(config),
                            "--permission-mode", "readonly") as tiller:
        await tiller.request("agent/prompt", {"message": "try"}, timeout=60)
    done = ends(tiller)
    assert done["s1"]["isError"] and "blocked" in text_of(done["s1"])
    assert not done["r1"]["isError"]  # its server is read_only
    assert not done["t1"]["isError"]  # the tool says readOnlyHint


async def test_rules_glob_tool_names_and_ask_shows_the_call(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path, {"s": {"command": sys.executable, "args": [str(SCRIPTED)]},
                   "t": {"command": sys.executable, "args": [str(SCRIPTED)]}},
        extra='[[permissions.rules]]\naction = "allow"\ntool = "mcp__s__*"\n',
    )
    fake_openai.enqueue(
        tool_call_reply([("s1", "mcp__s__flood", {"lines": 1}),
                         ("t1", "mcp__t__flood", {"lines": 2})]),
        text_reply("judged"),
    )
    asked: list[dict[str, Any]] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"outcome": "rejectOnce"}

    async with spawn_tiller(fake_openai, tmp_path, "--config", str(config)) as tiller:
        tiller.on_request("client/requestPermission", answer)
        await tiller.request("initialize", {"capabilities": {"permissions": True}})
        await tiller.request("agent/prompt", {"message": "try"}, timeout=60)
    [question] = asked
    assert question["toolName"] == "mcp__t__flood" and question["args"] == {"lines": 2}
    assert question["reason"] == "'mcp__t__flood' may make changes"
    done = ends(tiller)
    assert not done["s1"]["isError"] and done["t1"]["isError"]


@pytest.mark.parametrize(("mode", "transport", "path"),
                         [("streamableHttp", "http", "/mcp"), ("sse", "sse", "/sse")])
async def test_session_servers_over_http_and_malformed_entries(
    fake_openai: FakeOpenAI, tmp_path: Path, mode: str, transport: str, path: str
) -> None:
    node, script = everything_argv()
    with anyio.fail_after(30):
        port = await free_port()
        server = await anyio.open_process(
            [node, script, mode], env={**os.environ, "PORT": str(port)},
            stderr=subprocess.PIPE,
        )
        try:
            assert server.stderr is not None
            seen = b""
            async for chunk in server.stderr:  # it says so when it listens
                seen += chunk
                if f"port {port}".encode() in seen:
                    break
            await run_http_session(fake_openai, tmp_path, transport,
                                   f"http://127.0.0.1:{port}{path}")
        finally:
            server.kill()
            await server.wait()


async def free_port() -> int:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = int(listener.extra(anyio.abc.SocketAttribute.local_port))
    await listener.aclose()
    return port


async def run_http_session(fake: FakeOpenAI, tmp_path: Path, transport: str, url: str) -> None:
    fake.enqueue(tool_call_reply([("e1", "mcp__web__echo", {"message": "over http"})]),
                 text_reply("done"))
    async with spawn_tiller(fake, tmp_path, "--permission-mode", "auto") as tiller:
        with pytest.raises(RpcError) as bad:
            await tiller.request("session/new", {"mcpServers": [{"name": "x", "type": "http"}]})
        assert bad.value.code == -32602
        assert "mcpServers[0]: mcp_servers.x: url is required" in bad.value.message
        session = await tiller.request("session/new", {"mcpServers": [
            {"type": transport, "name": "web", "url": url,
             "headers": [{"name": "X-Test", "value": "1"}]}]})
        sid = session["sessionId"]
        [web] = (await tiller.request("mcp/list", {"sessionId": sid}))["servers"]
        assert web["status"] == "ready" and web["transport"] == transport, web
        assert "mcp__web__echo" in web["tools"]
        await tiller.request("agent/prompt", {"sessionId": sid, "message": "echo"}, timeout=60)
    assert "over http" in text_of(ends(tiller)["e1"])


@pytest.mark.parametrize("ending", ["eof", "session/close"])
async def test_no_server_process_outlives_its_session(
    fake_openai: FakeOpenAI, tmp_path: Path, ending: str
) -> None:
    config = write_config(tmp_path, {
        "s": {"command": sys.executable, "args": [str(SCRIPTED)]},
        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]},
    })
    async with spawn_tiller(fake_openai, tmp_path, "--config", str(config)) as tiller:
        sid = (await tiller.request("session/new"))["sessionId"]
        listed = await tiller.request("mcp/list", {"sessionId": sid})
        assert [s["status"] for s in listed["servers"]] == ["ready", "ready"]
        servers = [pid for pid, cmd in descendants(tiller.process.pid).items()
                   if "scripted_server" in cmd or "mcp_server_time" in cmd]
        assert len(servers) == 2
        if ending == "session/close":
            await tiller.request("session/close", {"sessionId": sid})
            assert await all_gone(servers)
            closed = [e["server"]["status"] for e in tiller.events if e["type"] == "mcp_status"]
            assert closed[-2:] == ["stopped", "stopped"]
        assert await tiller.close() == 0
    assert await all_gone(servers)
