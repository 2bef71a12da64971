"""End to end: listing models, switching model and thinking level between runs, secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI, text_reply
from helpers import clean_env, spawn_tiller
from tiller.client import RpcError

pytestmark = pytest.mark.anyio


def config_with_second_server(tmp_path: Path, url: str) -> str:
    path = tmp_path / "config.toml"
    path.write_text(
        f'[providers.second]\ntype = "openai"\nbase_url = "{url}"\n'
        'api_key_env = "SECOND_KEY"\ndefault_model = "second-default"\n'
        '\n[[models]]\nprovider = "second"\nid = "m2"\ncontext_window = 4096\n'
        "reasoning = true\ncost = { input = 1, output = 2 }\n"
    )
    return str(path)


async def test_models_list_shows_providers_and_models_without_secrets(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    config = config_with_second_server(tmp_path, "http://127.0.0.1:9/v1")
    env = clean_env(SECOND_KEY="sk-second-SECRET", ANTHROPIC_API_KEY="sk-ant-SECRET")
    async with spawn_tiller(fake_openai, tmp_path, "--config", config, env=env) as tiller:
        listed = await tiller.request("models/list")

    providers = {p["name"]: p for p in listed["providers"]}
    assert set(providers) >= {"openai", "anthropic", "local", "second"}
    assert providers["second"]["configured"] is True
    assert providers["second"]["apiKeyEnv"] == "SECOND_KEY"
    assert providers["openai"]["baseUrl"] == fake_openai.url
    assert providers["anthropic"]["configured"] is True
    models = {(m["provider"], m["id"]): m for m in listed["models"]}
    assert models[("second", "m2")]["contextWindow"] == 4096
    assert models[("second", "m2")]["cost"]["output"] == 2
    assert ("openai", "gpt-4o-mini") in models
    assert "SECRET" not in json.dumps(tiller.received)


async def test_set_model_and_thinking_level_apply_to_the_next_run(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    with FakeOpenAI() as second:
        config = config_with_second_server(tmp_path, second.url)
        fake_openai.enqueue(text_reply("from the first"))
        second.enqueue(text_reply("from the second"))
        env = clean_env(SECOND_KEY="sk-second")
        async with spawn_tiller(fake_openai, tmp_path, "--config", config, env=env) as tiller:
            await tiller.request("agent/prompt", {"message": "one"})
            switched = await tiller.request(
                "agent/setModel", {"provider": "second", "model": "m2"}
            )
            level = await tiller.request("agent/setThinkingLevel", {"level": "high"})
            await tiller.request("agent/prompt", {"message": "two"})
            state = await tiller.request("agent/getState")
        second.assert_script_complete()

    assert switched == {"provider": "second", "model": "m2"}
    assert level == {"level": "high"}
    assert "reasoning_effort" not in fake_openai.requests[0]
    request = second.requests[0]
    assert request["model"] == "m2" and request["reasoning_effort"] == "high"
    # the conversation carries over to the new model
    assert [m["content"] for m in request["messages"][1:]] == ["one", "from the first", "two"]
    assert (state["provider"], state["model"], state["thinkingLevel"]) == ("second", "m2", "high")


async def test_set_model_without_a_key_keeps_the_old_model(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    async with spawn_tiller(fake_openai, tmp_path) as tiller:
        with pytest.raises(RpcError) as caught:
            await tiller.request("agent/setModel", {"provider": "anthropic"})
        state = await tiller.request("agent/getState")
        with pytest.raises(RpcError) as bad_level:
            await tiller.request("agent/setThinkingLevel", {"level": "extreme"})

    assert caught.value.code == -32014 and "ANTHROPIC_API_KEY" in caught.value.message
    assert state["provider"] == "openai"
    assert bad_level.value.code == -32602 and "level" in bad_level.value.message
