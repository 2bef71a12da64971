"""End to end: listing models, switching model and thinking level between runs, secrets."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from support.fake_openai import FakeOpenAI, text_reply
from support.helpers import clean_env, spawn_tiller
from tiller.client import RpcError
from tiller.config import default_provider

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


@pytest.mark.process
async def test_thinking_reaches_only_models_that_reason(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """A catalog model that does not reason gets no thinking knob (OpenAI refuses it there); a
    model the catalog does not know gets what the user chose."""
    config = tmp_path / "config.toml"
    config.write_text('[[models]]\nprovider = "openai"\nid = "plain"\nreasoning = false\n')
    fake_openai.enqueue(text_reply("plain"), text_reply("unknown"))
    async with spawn_tiller(fake_openai, tmp_path, "--thinking", "high", "--model", "plain",
                            "--config", str(config)) as tiller:
        await tiller.request("agent/prompt", {"message": "one"})
        await tiller.request("agent/setModel", {"provider": "openai", "model": "my-finetune"})
        await tiller.request("agent/prompt", {"message": "two"})
    plain, unknown = fake_openai.requests
    assert plain["model"] == "plain" and "reasoning_effort" not in plain
    assert unknown["model"] == "my-finetune" and unknown["reasoning_effort"] == "high"


@pytest.mark.process
async def test_models_list_shows_providers_and_models_without_secrets(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    config = config_with_second_server(tmp_path, "http://127.0.0.1:9/v1")
    env = clean_env(SECOND_KEY="sk-second-SECRET", ANTHROPIC_API_KEY="sk-ant-SECRET",
                    ANTHROPIC_BASE_URL="http://127.0.0.1:9")  # asked for its models: refused
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
    assert ("openai", "gpt-6.2-sol") in models
    assert "SECRET" not in json.dumps(tiller.received)


@pytest.mark.process
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
    assert level == {"level": "high", "effective": "high"}  # m2's config entry: it reasons
    assert "reasoning_effort" not in fake_openai.requests[0]
    request = second.requests[0]
    assert request["model"] == "m2" and request["reasoning_effort"] == "high"
    # the conversation carries over to the new model
    assert [m["content"] for m in request["messages"][1:]] == ["one", "from the first", "two"]
    assert (state["provider"], state["model"], state["thinkingLevel"]) == ("second", "m2", "high")


@pytest.mark.process
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


@pytest.mark.process
async def test_models_list_configured_is_what_a_call_would_find(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """A hosted service's URL with its key variable unset is not configured (the README's
    openrouter example); `local` is configured only with the local extra installed."""
    config = tmp_path / "config.toml"
    config.write_text(
        '[providers.openrouter]\ntype = "openai"\nbase_url = "https://openrouter.example/v1"\n'
        'api_key_env = "OPENROUTER_API_KEY"\n'
        '[providers.ollama]\ntype = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
    )
    async with spawn_tiller(fake_openai, tmp_path, "--config", str(config)) as tiller:
        providers = {p["name"]: p for p in (await tiller.request("models/list"))["providers"]}
        with pytest.raises(RpcError) as refused:
            await tiller.request("session/new", {"provider": "openrouter"})

    assert providers["openrouter"]["configured"] is False
    assert refused.value.code == -32014 and "OPENROUTER_API_KEY" in refused.value.message
    assert providers["ollama"]["configured"] is True  # a local server: no key variable
    assert providers["openai"]["configured"] is True  # spawn_tiller points it at the fake
    assert providers["anthropic"]["configured"] is False
    local_installed = importlib.util.find_spec("llama_cpp") is not None
    assert providers["local"]["configured"] is local_installed


def test_provider_help_names_the_default_it_would_pick() -> None:
    from tiller.chat.cli import build_parser as chat_parser
    from tiller.config import build_parser

    env = {"ANTHROPIC_API_KEY": "sk-ant"}
    assert "anthropic here" in " ".join(build_parser(env).format_help().split())
    os_default = default_provider(os.environ, None)
    assert f"{os_default} here" in " ".join(chat_parser().format_help().split())


@pytest.mark.process
async def test_session_new_takes_a_thinking_level_that_is_saved_with_it(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    config = config_with_second_server(tmp_path, fake_openai.url)
    env = clean_env(SECOND_KEY="sk-second")
    fake_openai.enqueue(text_reply("thought hard"))
    async with spawn_tiller(fake_openai, tmp_path, "--config", config, env=env) as tiller:
        created = await tiller.request("session/new", {"provider": "second", "model": "m2",
                                                       "thinkingLevel": "xhigh"})
        state = await tiller.request("agent/getState", {"sessionId": created["sessionId"]})
        await tiller.request("agent/prompt", {"sessionId": created["sessionId"],
                                              "message": "think"})
    async with spawn_tiller(fake_openai, tmp_path, "--config", config, env=env) as tiller:
        await tiller.request("session/load", {"sessionId": created["sessionId"]})
        loaded = await tiller.request("agent/getState", {"sessionId": created["sessionId"]})

    # m2's entry says it reasons but not which levels: xhigh goes as set
    assert (state["thinkingLevel"], state["effectiveThinkingLevel"]) == ("xhigh", "xhigh")
    assert loaded["thinkingLevel"] == "xhigh"  # from the session log
