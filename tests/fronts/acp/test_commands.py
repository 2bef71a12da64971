"""ACP end to end: slash commands reach the official ``agent-client-protocol`` client as
``available_commands_update`` (after session/new, session/load and on a change), and a
``/name`` prompt runs the command. Validated by the ACP SDK's own models."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from acp import spawn_agent_process, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import AvailableCommandsUpdate

from support.acp_client import Recorder, user_texts
from support.fake_openai import FakeOpenAI, text_reply
from support.helpers import clean_env

pytestmark = [pytest.mark.anyio, pytest.mark.process]


@asynccontextmanager
async def spawn_acp(
    recorder: Recorder, fake: FakeOpenAI, cwd: Path, config_home: Path
) -> AsyncIterator[ClientSideConnection]:
    argv = ["-m", "tiller", "--acp", "--base-url", fake.url, "--cwd", str(cwd),
            "--session-dir", str(cwd / ".sessions")]
    async with spawn_agent_process(
        recorder, sys.executable, *argv, env=clean_env(XDG_CONFIG_HOME=str(config_home)),
        cwd=cwd, transport_kwargs={"stderr": None}, observers=[recorder.observe],
    ) as (conn, _process):
        yield conn
    assert not recorder.wire.problems, "\n".join(recorder.wire.problems)


def is_commands_update(message: dict[str, Any]) -> bool:
    update = (message.get("params") or {}).get("update") or {}
    return bool(update.get("sessionUpdate") == "available_commands_update")


def commands_updates(recorder: Recorder) -> list[AvailableCommandsUpdate]:
    """Every available_commands_update received, as the SDK's model (validation included)."""
    return [AvailableCommandsUpdate.model_validate(m["params"]["update"])
            for m in recorder.raw if is_commands_update(m)]


async def test_commands_are_announced_and_run(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    prompts = tmp_path / ".tiller" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / "explain.md").write_text(
        "---\ndescription: Explain code\nargument-hint: <symbol>\n---\nExplain $1 simply.\n")
    skill = tmp_path / "xdg" / "tiller" / "skills" / "style"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: style\ndescription: House style\n---\nBe terse.\n")
    fake_openai.enqueue(text_reply("ok"), text_reply("ok"), text_reply("ok"))
    recorder = Recorder()
    async with spawn_acp(recorder, fake_openai, tmp_path, tmp_path / "xdg") as conn:
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        sid = session.session_id
        first = await recorder.wait_for(is_commands_update)
        await conn.prompt(session_id=sid, prompt=[text_block("/explain parse_args")])
        added = prompts / "tidy.md"
        added.write_text("Tidy up.\n")
        os.utime(added, ns=(1, 1))
        await conn.prompt(session_id=sid, prompt=[text_block("/tidy")])
        await conn.prompt(session_id=sid, prompt=[text_block("/unknown stays")])
    new_response = next(i for i, m in enumerate(recorder.raw)
                        if m.get("result", {}).get("sessionId") == sid)
    assert recorder.raw.index(first) > new_response  # after the client knows the session

    announced = commands_updates(recorder)
    assert len(announced) == 2
    listed = announced[0].available_commands
    assert [(c.name, c.description) for c in listed] == [
        ("explain", "Explain code"), ("skill:style", "House style")]
    hint = listed[0].input
    assert hint is not None and hint.root.hint == "<symbol>"
    assert listed[1].input is None
    assert [c.name for c in announced[1].available_commands] == ["explain", "tidy", "skill:style"]
    assert user_texts(fake_openai, 0) == ["Explain parse_args simply.\n"]
    assert user_texts(fake_openai, 1)[-1] == "Tidy up.\n"
    assert user_texts(fake_openai, 2)[-1] == "/unknown stays"
    assert "- style: House style (" in fake_openai.requests[0]["messages"][0]["content"]


async def test_load_announces_the_commands_again(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    prompts = tmp_path / ".tiller" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / "review.md").write_text("Review.\n")
    fake_openai.enqueue(text_reply("ok"))
    recorder = Recorder()
    async with spawn_acp(recorder, fake_openai, tmp_path, tmp_path / "xdg") as conn:
        await conn.initialize(protocol_version=1)
        sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("hello")])
    recorder = Recorder()
    async with spawn_acp(recorder, fake_openai, tmp_path, tmp_path / "xdg") as conn:
        await conn.initialize(protocol_version=1)
        await conn.load_session(session_id=sid, cwd=str(tmp_path), mcp_servers=[])
        await recorder.wait_for(is_commands_update)

    [update] = commands_updates(recorder)
    assert [c.name for c in update.available_commands] == ["review"]
    replayed = [u["sessionUpdate"] for u in recorder.session_updates()]
    assert replayed == ["user_message_chunk", "agent_message_chunk", "available_commands_update"]
