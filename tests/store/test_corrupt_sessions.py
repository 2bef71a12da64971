"""End to end: a corrupt session log is reported and skipped; it never stalls the server.

A log whose ``parentId`` links form a loop once made ``session/list`` and ``session/load`` walk the
branch forever on the event loop: no answer, every other request blocked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support.helpers import spawn_tiller
from tiller.client import RpcError

pytestmark = [pytest.mark.anyio, pytest.mark.process]

GOOD_ID = "a" * 32
LOOP_ID = "b" * 32
ANSWER_WITHIN = 10.0
"""Seconds a request may take: the server answers at once; a stalled one never does."""


def _write_log(folder: Path, session_id: str, entries: list[dict[str, Any]]) -> None:
    header = {"type": "session", "version": 1, "id": session_id, "cwd": str(folder),
              "created": 1, "provider": "openai", "model": "gpt-4o-mini"}
    lines = [json.dumps(value) for value in [header, *entries]]
    (folder / f"{session_id}.jsonl").write_text("\n".join(lines) + "\n")


def _message(entry_id: str, parent_id: str | None, text: str) -> dict[str, Any]:
    message = {"role": "user", "content": text, "timestamp": 1}
    return {"type": "message", "id": entry_id, "parentId": parent_id, "timestamp": 2,
            "message": message}


async def test_a_parent_loop_is_reported_and_skipped(tmp_path: Path) -> None:
    folder = tmp_path / ".sessions" / "workspace"
    folder.mkdir(parents=True)
    _write_log(folder, GOOD_ID, [_message("e1", None, "a good session")])
    _write_log(folder, LOOP_ID, [  # e3 -> e2 -> e1 -> e3 -> ...
        _message("e1", "e3", "one"), _message("e2", "e1", "two"), _message("e3", "e2", "three"),
    ])

    async with spawn_tiller(None, tmp_path) as tiller:
        listed = await tiller.request("session/list", timeout=ANSWER_WITHIN)
        with pytest.raises(RpcError) as caught:
            await tiller.request("session/load", {"sessionId": LOOP_ID}, timeout=ANSWER_WITHIN)
        loaded = await tiller.request("session/load", {"sessionId": GOOD_ID},
                                      timeout=ANSWER_WITHIN)

    assert [s["sessionId"] for s in listed["sessions"]] == [GOOD_ID]
    assert caught.value.code == -32016
    assert "loop" in caught.value.message and LOOP_ID in caught.value.message
    assert [m["content"] for m in loaded["messages"]] == ["a good session"]


async def test_a_malformed_entry_is_reported_and_skipped(tmp_path: Path) -> None:
    folder = tmp_path / ".sessions" / "workspace"
    folder.mkdir(parents=True)
    _write_log(folder, GOOD_ID, [_message("e1", None, "a good session")])
    broken = {"type": "message", "id": "e1", "parentId": None, "timestamp": 2}  # no "message"
    _write_log(folder, LOOP_ID, [broken])

    async with spawn_tiller(None, tmp_path) as tiller:
        listed = await tiller.request("session/list", timeout=ANSWER_WITHIN)
        with pytest.raises(RpcError) as caught:
            await tiller.request("session/load", {"sessionId": LOOP_ID}, timeout=ANSWER_WITHIN)

    assert [s["sessionId"] for s in listed["sessions"]] == [GOOD_ID]
    assert caught.value.code == -32016 and "e1" in caught.value.message
