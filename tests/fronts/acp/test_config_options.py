"""ACP session config options end to end: ``configOptions`` (model, thought level, permission
mode, sandbox) in the results of session/new, load and resume; ``session/set_config_option``
round trips; ``config_option_update`` after every change, also one made with
``session/set_mode``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, spawn_agent_process, text_block

from support.acp_client import Recorder, spawn_acp
from support.fake_anthropic import FakeAnthropic, anthropic_model
from support.fake_openai import FakeOpenAI, text_reply
from support.helpers import clean_env

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
    env = clean_env(XDG_DATA_HOME=str(tmp_path / "data"))  # no model list cached: it is asked
    async with spawn_acp(recorder, fake_openai, tmp_path, env=env) as conn:
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        sid = session.session_id
        model = await conn.set_config_option(config_id="model", session_id=sid,
                                             value="openai/gpt-5.6-terra")
        thought = await conn.set_config_option(config_id="thought_level", session_id=sid,
                                               value="high")
        mode = await conn.set_config_option(config_id="mode", session_id=sid, value="auto")
        await conn.set_session_mode(session_id=sid, mode_id="readonly")
        sandbox = await conn.set_config_option(config_id="sandbox", session_id=sid,
                                               value="read-only")
        errors = []
        for config_id, value in [("model", "openai/nope"), ("thought_level", "extreme"),
                                 ("sandbox", "none"), ("colour", "red")]:
            with pytest.raises(RequestError) as refused:
                await conn.set_config_option(config_id=config_id, session_id=sid, value=value)
            errors.append(refused.value.code)
        await conn.prompt(session_id=sid, prompt=[text_block("hi")])
    async with spawn_acp(Recorder(), fake_openai, tmp_path, env=env) as conn:
        await conn.initialize(protocol_version=1)
        loaded = await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
        await conn.prompt(session_id=sid, prompt=[text_block("again")])

    options = [o.model_dump(by_alias=True) for o in session.config_options or []]
    options = [o.get("root", o) for o in options]
    assert [o["id"] for o in options] == ["model", "thought_level", "mode", "sandbox"]
    assert [o["category"] for o in options][:3] == ["model", "thought_level", "mode"]
    assert current(options) == {"model": "openai/fake-model", "thought_level": "off",
                                "mode": "ask", "sandbox": "workspace-write"}  # the model the
    # --base-url server serves
    assert [c["value"] for c in options[3]["options"]] == ["workspace-write", "read-only", "off",
                                                          "required"]
    assert current(sandbox.config_options)["sandbox"] == "read-only"
    assert "openai/gpt-6.2-sol" in [choice["value"] for choice in options[0]["options"]]
    assert [c["value"] for c in options[1]["options"]] == ["off", "low", "medium", "high",
                                                          "xhigh", "max"]
    assert [c["value"] for c in options[2]["options"]] == ["ask", "acceptEdits", "auto",
                                                          "readonly"]
    assert current(model.config_options)["model"] == "openai/gpt-5.6-terra"
    assert current(thought.config_options)["thought_level"] == "high"
    assert current(mode.config_options)["mode"] == "auto"
    updates = [u for u in recorder.session_updates()
               if u["sessionUpdate"] in ("config_option_update", "current_mode_update")]
    # (the server's model list, asked for after session/new, offers nothing new: it serves
    # fake-model, the session's own; so no update comes of it, whenever it arrives)
    assert [u["sessionUpdate"] for u in updates] == [
        "config_option_update", "config_option_update", "config_option_update",
        "current_mode_update", "config_option_update", "config_option_update"]
    assert current(updates[5]["configOptions"])["sandbox"] == "read-only"
    assert [o["category"] for o in updates[5]["configOptions"]] == [  # on the wire: the SDK's
        "model", "thought_level", "mode", "_sandbox"]  # model drops a custom category
    assert current(updates[2]["configOptions"])["mode"] == "auto"
    assert updates[3]["currentModeId"] == "auto"
    assert current(updates[4]["configOptions"])["mode"] == "readonly"
    assert errors == [-32602, -32602, -32602, -32602]
    # The catalog's reasoning model gets the level; on this Chat-Completions-only server OpenAI's
    # rule (no tools with reasoning there) refuses it, and the one corrected retry sends none.
    assert [(r["model"], r["reasoning_effort"]) for r in fake_openai.requests] == [
        ("gpt-5.6-terra", "high"), ("gpt-5.6-terra", "none")] * 2
    assert [status for _, status, _ in fake_openai.refusals] == [400, 400]
    assert current(loaded.config_options or []) == {  # the mode is not saved with a session
        "model": "openai/gpt-5.6-terra", "thought_level": "high", "mode": "ask",
        "sandbox": "workspace-write"}  # nor is the sandbox


def test_model_choices_are_the_usable_providers_models() -> None:
    from types import SimpleNamespace

    from tiller.config import ServerConfig
    from tiller.fronts.acp.options import model_choices
    from tiller.providers.directory import ListingStore, ModelDirectory

    def choices(config: ServerConfig) -> list[tuple[str, str]]:
        directory = ModelDirectory(config, ListingStore())  # nothing listed: the catalog
        session: Any = SimpleNamespace(provider="openai", model="my-finetune",
                                       directory=directory)
        return [(provider, model) for provider, model, _ in model_choices(config, session)]

    without = choices(ServerConfig(provider="openai", env={}))
    with_key = choices(ServerConfig(provider="openai", env={"ANTHROPIC_API_KEY": "k"}))
    assert without[0] == ("openai", "my-finetune")  # the session's own model first
    assert ("openai", "gpt-6.2-sol") in without
    assert not any(provider == "anthropic" for provider, _ in without)
    assert ("anthropic", "claude-sonnet-5-5") in with_key  # the default
    assert ("anthropic", "claude-opus-5-5") in with_key
    assert ("anthropic", "claude-sonnet-4-20250514") not in with_key  # retired: gone
    assert not any(provider == "local" for provider, _ in with_key)
    assert len(set(with_key)) == len(with_key)


@pytest.mark.process
async def test_the_model_option_offers_what_the_provider_lists(tmp_path: Path) -> None:
    """session/new answers with what is known; the provider's list is asked for right after,
    and the option is updated with it: a new model appears, a retired one is gone, a
    deprecated one says when it retires."""
    recorder = Recorder()
    with FakeAnthropic() as fake:
        fake.models.insert(0, anthropic_model("claude-preview-6", line="opus",
                                              created_at="2026-12-01"))
        env = clean_env(ANTHROPIC_API_KEY="sk-ant-acp", ANTHROPIC_BASE_URL=fake.url,
                        XDG_DATA_HOME=str(tmp_path / "data"))
        argv = ["-m", "tiller", "--acp", "--provider", "anthropic", "--cwd", str(tmp_path),
                "--session-dir", str(tmp_path / ".sessions")]
        async with spawn_agent_process(
            recorder, sys.executable, *argv, env=env, cwd=tmp_path,
            transport_kwargs={"stderr": None}, observers=[recorder.observe],
        ) as (conn, _process):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            update = await recorder.wait_for(
                lambda m: m.get("method") == "session/update"
                and m["params"]["update"].get("sessionUpdate") == "config_option_update")
        assert fake.requests == []  # asked for models only
    assert not recorder.wire.problems, "\n".join(recorder.wire.problems)

    def models(options: list[Any]) -> dict[str, str]:
        dumped = [o if isinstance(o, dict) else o.model_dump(by_alias=True) for o in options]
        model = next(o.get("root", o) for o in dumped if o.get("root", o)["id"] == "model")
        return {c["value"]: c.get("description", "") for c in model["options"]}

    before = models(session.config_options or [])
    after = models(update["params"]["update"]["configOptions"])
    assert "anthropic/claude-preview-6" not in before  # not in the catalog: not known yet
    assert "anthropic/claude-preview-6" in after
    assert "anthropic/claude-sonnet-4-20250514" not in after
    assert after["anthropic/claude-opus-4-5"] == "anthropic, deprecated, retires 2027-01-22"
    assert len(fake.models_requests) == 1
