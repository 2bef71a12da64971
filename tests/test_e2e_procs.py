"""End to end: the API keys the server holds cannot be read back by the commands it runs
(``tiller.procs``), driven by the real ``bash`` tool and the loopback fakes."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_anthropic import FakeAnthropic, tool_use_reply
from fake_anthropic import text_reply as anthropic_text
from fake_openai import FakeOpenAI, text_reply, tool_call_reply
from helpers import clean_env
from tiller.client import TillerClient

pytestmark = pytest.mark.anyio

NOBODY = 65534


# ------------------------------------------------------------------------------ secrets


def as_nobody() -> list[str]:
    """The command prefix that runs the server as an unprivileged user: root reads any process's
    ``/proc`` entries, so only a non-root server shows what ``PR_SET_DUMPABLE`` protects."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("this test runs as root and needs setpriv (util-linux) to drop to uid "
                    f"{NOBODY}: install util-linux or run the tests as a non-root user")
    return [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


@contextlib.contextmanager
def open_workspace() -> Iterator[Path]:
    """A workspace any user may use (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="tiller-procs-"))
    try:
        path.chmod(0o777)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def test_keys_cannot_be_read_through_proc(fake_openai: FakeOpenAI) -> None:
    key = f"sk-proc-{uuid.uuid4().hex}"
    with open_workspace() as workspace:
        env = clean_env(OPENAI_API_KEY=key, HOME=str(workspace),
                        XDG_CONFIG_HOME=str(workspace), PYTHONDONTWRITEBYTECODE="1")
        argv = ["--base-url", fake_openai.url, "--cwd", str(workspace), "--no-session",
                "--permission-mode", "auto"]
        command = [*as_nobody(), sys.executable, "-m", "tiller"]
        tiller = await TillerClient.spawn(argv, env=env, cwd=workspace, command=command)
        async with tiller:
            server_pid = tiller.process.pid
            probe = (f"echo ppid=$PPID; cat /proc/$PPID/environ; echo rc=$?; "
                     f"cat /proc/{server_pid}/environ; echo rc=$?; "
                     f"head -c 4096 /proc/{server_pid}/cmdline >/dev/null; echo rc=$?")
            fake_openai.enqueue(
                tool_call_reply([("call_probe", "bash", {"command": probe})]),
                text_reply("nothing to see"),
            )
            result = await tiller.request("agent/prompt", {"message": "read the keys"})
            assert await tiller.close() == 0

    assert result["stopReason"] == "stop"  # the server still works
    end = next(e for e in tiller.events if e["type"] == "tool_execution_end")
    output = end["result"]["content"][0]["text"]
    assert f"ppid={server_pid}" in output  # $PPID is the server: the probe read the right file
    assert re.findall(r"rc=(\d+)", output)[:2] == ["1", "1"], output
    assert key not in json.dumps(tiller.received)
    assert key not in json.dumps(fake_openai.requests[1])


async def test_provider_keys_leave_the_environment_commands_inherit(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    own_key, openai_key = f"sk-mine-{uuid.uuid4().hex}", f"sk-openai-{uuid.uuid4().hex}"
    config = tmp_path / "config.toml"
    config.write_text(  # commands may see secrets, but not the keys the providers use
        "[tools]\nsanitize_env = false\n\n[providers.mine]\ntype = \"anthropic\"\n"
        f"api_key_env = \"MINE_KEY\"\nbase_url = \"{fake_anthropic.url}\"\n"
        "default_model = \"claude-test\"\n"
    )
    fake_anthropic.enqueue(
        tool_use_reply([("toolu_env", "bash", {"command": "env"})]), anthropic_text("seen")
    )
    env = clean_env(MINE_KEY=own_key, OPENAI_API_KEY=openai_key, OTHER_TOKEN="for-commands")
    argv = ["--config", str(config), "--provider", "mine", "--cwd", str(tmp_path),
            "--no-session"]
    async with await TillerClient.spawn(argv, env=env, cwd=tmp_path) as tiller:
        result = await tiller.request("agent/prompt", {"message": "env"})

    assert result["stopReason"] == "stop"
    sent = fake_anthropic.request_headers  # the key reaches the SDK from the config
    assert len(sent) == 2 and all(own_key in json.dumps(headers) for headers in sent)
    output = next(e for e in tiller.events
                  if e["type"] == "tool_execution_end")["result"]["content"][0]["text"]
    assert "OTHER_TOKEN=for-commands" in output
    assert own_key not in output and openai_key not in output
