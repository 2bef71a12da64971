"""End to end: 50 sessions of one server streaming at once; every session's events arrive, all
of them, gapless and in the order of protocol.md, whatever the others do meanwhile."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio
import pytest

from support.fake_openai import FakeOpenAI, text_reply
from support.helpers import spawn_tiller

pytestmark = [pytest.mark.anyio, pytest.mark.process]

SESSIONS = 50
TEXT = "".join(f"t{i} " for i in range(300))
EXPECTED = [
    "agent_start", "turn_start",
    "message_start", "message_end",  # the prompt
    "message_start", "message_end",  # the streamed answer (updates left out)
    "turn_end", "agent_end", "agent_settled",
]


async def test_fifty_sessions_stream_at_once(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.enqueue(*(text_reply(TEXT, chunk_size=3) for _ in range(SESSIONS)))
    async with spawn_tiller(fake_openai, tmp_path, "--no-session") as tiller:
        ids = [(await tiller.request("session/new", {}))["sessionId"] for _ in range(SESSIONS)]
        results: dict[str, Any] = {}

        async def prompt(session_id: str) -> None:
            results[session_id] = await tiller.request(
                "agent/prompt", {"sessionId": session_id, "message": "talk"}, timeout=120
            )

        async with anyio.create_task_group() as group:
            for session_id in ids:
                group.start_soon(prompt, session_id)
        await tiller.wait_for(lambda _: sum(
            1 for e in tiller.events if e["type"] == "agent_settled") == SESSIONS, timeout=30)
        by_session: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for event in tiller.events:
            by_session[event["sessionId"]].append(event)

    assert sorted(by_session) == sorted(ids)
    for session_id in ids:
        events = by_session[session_id]
        assert results[session_id]["stopReason"] == "stop"
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        retries = [e for e in events if e["type"] == "retry_scheduled"]
        assert not retries, str(retries[0])
        assert [e["type"] for e in events if e["type"] != "message_update"] == EXPECTED
        updates = [i for i, e in enumerate(events) if e["type"] == "message_update"]
        assert updates and events[updates[0] - 1]["type"] == "message_start"
        assert events[updates[-1] + 1]["type"] == "message_end"
        assert "".join(events[i]["delta"] for i in updates) == TEXT
