"""End to end: ``initialize`` lists every method, server request and event that protocol.md
documents; a client states the Tiller protocol version it speaks; an integer ``protocolVersion``
alone is ACP's, and Tiller's methods then fail with a hint instead of a bare "not found"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.fake_openai import FakeOpenAI
from support.helpers import spawn_tiller
from support.paths import PROTOCOL_MD
from tiller.client import RpcError
from tiller.providers.embedded import CHAT_ONLY_NOTICE

pytestmark = [pytest.mark.anyio, pytest.mark.process]

PROTOCOL_MD = PROTOCOL_MD.read_text()


def documented(start: str, end: str) -> set[str]:
    """The backticked names of the ``###`` headings between two ``##`` headings."""
    section = PROTOCOL_MD[PROTOCOL_MD.index(start) : PROTOCOL_MD.index(end)]
    headings = re.findall(r"^### (.*)$", section, flags=re.MULTILINE)
    return {name for heading in headings for name in re.findall(r"`([^`]+)`", heading)}


async def test_capabilities_list_what_protocol_md_documents(tmp_path: Path) -> None:
    async with spawn_tiller(None, tmp_path) as tiller:
        result = await tiller.request("initialize", {"capabilities": {}})

    capabilities = result["capabilities"]
    assert set(capabilities["methods"]) == documented(
        "## Methods (client → server)", "## Requests (server → client)"
    )
    assert set(capabilities["serverRequests"]) == documented(
        "## Requests (server → client)", "## Permissions"
    )
    assert set(capabilities["events"]) == documented("## Notification (server → client)",
                                                     "## Messages")


async def test_a_client_states_the_version_it_speaks(tmp_path: Path) -> None:
    async with spawn_tiller(None, tmp_path) as tiller:
        spoken = await tiller.request("initialize", {"protocolVersion": 1, "capabilities": {}})
        state = await tiller.request("agent/getState")
        with pytest.raises(RpcError) as newer:
            await tiller.request("initialize", {"protocolVersion": 2, "capabilities": {}})

    assert spoken["protocolVersion"] == 1 and "serverInfo" in spoken
    assert state["isRunning"] is False
    assert newer.value.code == -32602 and "Tiller protocol version 1, not 2" in newer.value.message


async def test_an_integer_version_alone_is_acp_and_tiller_methods_say_why(tmp_path: Path) -> None:
    async with spawn_tiller(None, tmp_path) as tiller:
        acp = await tiller.request("initialize", {"protocolVersion": 1})
        with pytest.raises(RpcError) as refused:
            await tiller.request("agent/prompt", {"message": "hi"})

    assert "agentCapabilities" in acp
    assert refused.value.code == -32601
    assert "speaks ACP" in refused.value.message and "capabilities" in refused.value.message


async def test_unusual_params_are_read_as_the_model_reads_them(tmp_path: Path) -> None:
    """snake_case names and a version as a string take pydantic's reading; errors name the field
    (the usual shape is read without pydantic: tests/fronts/tiller/test_initialize_params.py)."""
    async with spawn_tiller(None, tmp_path) as tiller:
        loose = await tiller.request("initialize", {
            "protocol_version": "1", "capabilities": {"fs": {"keeps_unsaved": True}},
            "delta_window_ms": 0})
        with pytest.raises(RpcError) as too_long:
            await tiller.request("initialize", {"capabilities": {}, "deltaWindowMs": 5000})
        with pytest.raises(RpcError) as nameless:
            await tiller.request("initialize", {"capabilities": {}, "clientInfo": {}})
        with pytest.raises(RpcError) as no_object:
            await tiller.request("initialize", {"capabilities": None})
        models = await tiller.request("models/list")

    assert loose["protocolVersion"] == 1 and models["models"]
    assert too_long.value.code == -32602 and "deltaWindowMs" in too_long.value.message
    assert nameless.value.code == -32602 and "clientInfo.name" in nameless.value.message
    assert no_object.value.code == -32602 and "capabilities" in no_object.value.message


async def test_the_embedded_model_says_it_is_chat_only(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """``initialize`` and ``agent/getState`` carry the notice for the embedded model only;
    its session lists no context files (its prompt has none), and switching to it says so."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "AGENTS.md").write_text("Use tabs.\n")
    async with spawn_tiller(None, tmp_path, "--provider", "local") as tiller:
        embedded = await tiller.request("initialize", {"capabilities": {}})
        state = await tiller.request("agent/getState")
    assert embedded["notice"] == state["notice"] == CHAT_ONLY_NOTICE
    assert CHAT_ONLY_NOTICE.startswith("chat only: ") and "OPENAI_API_KEY" in CHAT_ONLY_NOTICE
    assert state["model"] == "smollm2" and state["contextFiles"] == []

    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        served = await tiller.request("initialize", {"capabilities": {}})
        before = await tiller.request("agent/getState")
        await tiller.request("agent/setModel", {"provider": "local"})
        after = await tiller.request("agent/getState")
    assert "notice" not in served and "notice" not in before
    assert [f["path"] for f in before["contextFiles"]] == [str(tmp_path / "AGENTS.md")]
    assert after["notice"] == CHAT_ONLY_NOTICE and after["contextFiles"] == []
