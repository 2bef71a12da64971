"""Steering over ACP, end to end: the ``_session/steering`` extension of the Claude Code and
Codex ACP adapters (advertised as ``_meta.steering.supported`` in ``initialize``) injects a
message into the running turn, and on an idle session starts a turn or, when asked to, leaves
the message to a ``session/prompt``. (A ``session/prompt`` during a turn steering it is tested
in test_acp.py.)"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError, text_block

from support.acp_client import Recorder, spawn_acp, user_texts
from support.fake_openai import FakeOpenAI, text_reply
from support.helpers import wait_requests

pytestmark = [pytest.mark.anyio, pytest.mark.process]


def steer(session_id: str, text: str, idle: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    if idle is not None:
        params["_meta"] = {"steering": {"idleBehavior": idle}}
    return params


async def test_session_steering_injects_or_follows_the_idle_behavior(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    held = threading.Event()
    fake_openai.enqueue(text_reply("first", gate=held), text_reply("steered"),
                        text_reply("detached"))
    recorder = Recorder()
    async with spawn_acp(recorder, fake_openai, tmp_path) as conn:
        init = await conn.initialize(protocol_version=1)
        session_id = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
        results: dict[str, Any] = {}
        async with anyio.create_task_group() as tg:

            async def prompt() -> None:
                results["start"] = await conn.prompt(session_id=session_id,
                                                     prompt=[text_block("start")])

            tg.start_soon(prompt)
            await wait_requests(fake_openai, 1)
            results["injected"] = await conn.ext_method("session/steering",
                                                        steer(session_id, "use tabs"))
            held.set()
        idle = await conn.ext_method("session/steering",
                                     steer(session_id, "later", "promptRequired"))
        with pytest.raises(RequestError) as bad:
            await conn.ext_method("session/steering", steer(session_id, "x", "whenever"))
        requests_before = len(fake_openai.requests)
        started = await conn.ext_method("session/steering", steer(session_id, "go on alone"))
        await recorder.wait_for(  # the detached turn's answer streams to the client
            lambda _m: recorder.text("agent_message_chunk").endswith("detached"))

    meta = init.field_meta or {}
    assert meta["steering"] == {"supported": True}
    assert results["injected"] == {"outcome": "injected"}
    assert results["start"].stop_reason == "end_turn"
    assert user_texts(fake_openai, 1)[-1] == "use tabs"
    assert idle == {"outcome": "promptRequired", "reason": "noRunningTurn"}
    assert requests_before == 2  # promptRequired consumed nothing
    assert bad.value.code == -32602
    assert started == {"outcome": "startedNewTurn"}
    assert user_texts(fake_openai, 2)[-1] == "go on alone"
