"""ACP session config options end to end: ``configOptions`` (model, thought level, permission
mode) in the results of session/new, load and resume; ``session/set_config_option`` round trips;
``config_option_update`` after every change, also one made with ``session/set_mode``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block

from support.acp_client import Recorder, spawn_acp
from support.fake_openai import FakeOpenAI, text_reply

pytestmark = pytest.mark.anyio


def current(options: list[Any]) -> dict[str, str]:
    """Option id -> current value, from SDK models or wire dicts."""
    dumped = [o if isinstance(o, dict) else o.model_dump(by_alias=True) for o in options]
    found = {}
    for option in dumped:
        option = option.get("root", option)
        found[option["id"]] = option["currentValue"]
    return found


@pytest.mark.process
async def test_config_options_round_trip_and_announce_every_change(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(text_reply("from gpt-5.6-terra"), text_reply("after restart"))
    recorder = Recorder()
    async with spawn_acp(recorder, fake_openai, tmp_path) as conn:
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        sid = session.session_id
        model = await conn.set_config_option(config_id="model", session_id=sid,
                                             value="openai/gpt-5.6-terra")
        thought = await conn.set_config_option(config_id="thought_level", session_id=sid,
                                               value="high")
        mode = await conn.set_config_option(config_id="mode", session_id=sid, value="auto")
        await conn.set_session_mode(session_id=sid, mode_id="readonly")
        errors = []
        for config_id, value in [("model", "openai/nope"), ("thought_level", "max"),
                                 ("colour", "red")]:
            with pytest.raises(RequestError) as refused:
                await conn.set_config_option(config_id=config_id, session_id=sid, value=value)
            errors.append(refused.value.code)
        await conn.prompt(session_id=sid, prompt=[text_block("hi")])
    async with spawn_acp(Recorder(), fake_openai, tmp_path) as conn:
        await conn.initialize(protocol_version=1)
        loaded = await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
        await conn.prompt(session_id=sid, prompt=[text_block("again")])

    options = [o.model_dump(by_alias=True) for o in session.config_options or []]
    options = [o.get("root", o) for o in options]
    assert [o["id"] for o in options] == ["model", "thought_level", "mode"]
    assert [o["category"] for o in options] == ["model", "thought_level", "mode"]
    assert current(options) == {"model": "openai/fake-model", "thought_level": "off",
                                "mode": "ask"}  # the model the --base-url server serves
    assert "openai/gpt-6.2-sol" in [choice["value"] for choice in options[0]["options"]]
    assert [c["value"] for c in options[1]["options"]] == ["off", "low", "medium", "high"]
    assert [c["value"] for c in options[2]["options"]] == ["ask", "acceptEdits", "auto",
                                                          "readonly"]
    assert current(model.config_options)["model"] == "openai/gpt-5.6-terra"
    assert current(thought.config_options)["thought_level"] == "high"
    assert current(mode.config_options)["mode"] == "auto"
    updates = [u for u in recorder.session_updates()
               if u["sessionUpdate"] in ("config_option_update", "current_mode_update")]
    assert [u["sessionUpdate"] for u in updates] == [
        "config_option_update", "config_option_update", "config_option_update",
        "current_mode_update", "config_option_update"]
    assert current(updates[2]["configOptions"])["mode"] == "auto"
    assert updates[3]["currentModeId"] == "auto"
    assert current(updates[4]["configOptions"])["mode"] == "readonly"
    assert errors == [-32602, -32602, -32602]
    # The catalog's reasoning model gets the level; on this Chat-Completions-only server OpenAI's
    # rule (no tools with reasoning there) refuses it, and the one corrected retry sends none.
    assert [(r["model"], r["reasoning_effort"]) for r in fake_openai.requests] == [
        ("gpt-5.6-terra", "high"), ("gpt-5.6-terra", "none")] * 2
    assert [status for _, status, _ in fake_openai.refusals] == [400, 400]
    assert current(loaded.config_options or []) == {  # the mode is not saved with a session
        "model": "openai/gpt-5.6-terra", "thought_level": "high", "mode": "ask"}


def test_model_choices_are_the_usable_providers_models() -> None:
    from types import SimpleNamespace

    from tiller.config import ServerConfig
    from tiller.fronts.acp.options import model_choices

    session: Any = SimpleNamespace(provider="openai", model="my-finetune")
    without = model_choices(ServerConfig(provider="openai", env={}), session)
    with_key = model_choices(
        ServerConfig(provider="openai", env={"ANTHROPIC_API_KEY": "k"}), session)
    assert without[0] == ("openai", "my-finetune")  # the session's own model first
    assert ("openai", "gpt-6.2-sol") in without
    assert not any(provider == "anthropic" for provider, _ in without)
    assert ("anthropic", "claude-sonnet-4-20250514") in with_key
    assert not any(provider == "local" for provider, _ in with_key)
    assert len(set(with_key)) == len(with_key)
