"""End to end: once ``initialize`` is answered, the server gets ready for the first prompt in
the background (``tiller.session.warm``): the session's modules and the provider's HTTP library are
imported before any prompt asks for them (protocol.md, ``initialize``)."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

from support.acp_raw import raw_acp
from support.fake_openai import FakeOpenAI, text_reply
from support.helpers import clean_env, spawn_tiller
from support.paths import SUPPORT

pytestmark = [pytest.mark.anyio, pytest.mark.process]

WARMED = re.compile(r"warmed up for the first prompt \(imports: (\d+) ms\)")


def slow_http_library() -> dict[str, str]:
    """The server's environment with its first ``import httpx2`` (the provider's HTTP library)
    1.5 s slower (tests/support/slow_import)."""
    return clean_env(PYTHONPATH=str(SUPPORT / "slow_import"), TILLER_TEST_SLOW_IMPORT="httpx2=1.5")


async def logged(path: Path, pattern: re.Pattern[str], within: float = 60.0) -> re.Match[str]:
    """The first match of ``pattern`` in the log file at ``path``, once it is written there
    (the server announces nothing on the wire: its log is the only witness)."""
    with anyio.fail_after(within):
        while True:
            found = pattern.search(path.read_text() if path.exists() else "")
            if found is not None:
                return found
            await anyio.sleep(0.05)


async def test_the_http_library_is_imported_after_initialize_not_by_the_first_prompt(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """``import httpx2`` (the provider's HTTP library) made 1.5 s slower
    (tests/support/slow_import) happens in the warm-up
    that follows ``initialize``, with no other request sent; the first prompt then runs."""
    log = tmp_path / "tiller.log"
    fake_openai.enqueue(text_reply("Hello."))
    async with spawn_tiller(fake_openai, tmp_path, "--log-level", "DEBUG",
                            "--log-file", str(log), env=slow_http_library()) as tiller:
        await tiller.request("initialize", {"capabilities": {}})
        warmed = await logged(log, WARMED)
        result = await tiller.request("agent/prompt", {"message": "hi"})

    assert int(warmed[1]) >= 1500  # the slow import was the warm-up's
    assert result["stopReason"] == "stop"
    assert len(fake_openai.requests) == 1


async def test_a_server_that_is_never_initialized_does_not_warm_up(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """A script that prompts at once (no ``initialize``) is served as before: the warm-up is
    for clients that say hello first, and the prompt imports what it needs itself."""
    log = tmp_path / "tiller.log"
    fake_openai.enqueue(text_reply("Hello."))
    async with spawn_tiller(fake_openai, tmp_path, "--log-level", "DEBUG",
                            "--log-file", str(log)) as tiller:
        result = await tiller.request("agent/prompt", {"message": "hi"})
    assert result["stopReason"] == "stop"
    assert WARMED.search(log.read_text()) is None


async def test_the_acp_front_warms_up_after_initialize_too(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """ACP's ``initialize`` is followed by the same warm-up: the slow HTTP library import happens
    before ``session/new`` is sent, and the first prompt then runs."""
    log = tmp_path / "tiller.log"
    fake_openai.enqueue(text_reply("Hello."))
    async with raw_acp(fake_openai, tmp_path, "--log-level", "DEBUG", "--log-file", str(log),
                       env=slow_http_library()) as client:
        await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        warmed = await logged(log, WARMED)
        session = await client.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        result = await client.call("session/prompt", {
            "sessionId": session["sessionId"], "prompt": [{"type": "text", "text": "hi"}]})

    assert int(warmed[1]) >= 1500
    assert result["stopReason"] == "end_turn"


async def test_the_warm_up_gives_way_to_a_prompt_sent_at_once(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """A prompt sent right after ``initialize`` does not share the interpreter with the
    warm-up's provider step: that step waits until no request is being handled, so the slow
    ``import httpx2`` is the prompt's own, and the warm-up finds it done. The collector is back
    on once the warm-up's imports are (the first turn does not run with it paused)."""
    log = tmp_path / "tiller.log"
    fake_openai.enqueue(text_reply("Hello."))
    async with spawn_tiller(fake_openai, tmp_path, "--log-level", "DEBUG",
                            "--log-file", str(log), env=slow_http_library()) as tiller:
        await tiller.request("initialize", {"capabilities": {}})
        result = await tiller.request("agent/prompt", {"message": "hi"})
        warmed = await logged(log, WARMED)

    assert result["stopReason"] == "stop"
    assert int(warmed[1]) < 1500  # the warm-up did not import httpx2 (nor wait for it)
    assert log.read_text().index("garbage collection resumed") < warmed.start()
