"""Model facts from the providers: ``GET /v1/models`` through the real SDKs against the loopback
fakes, the disk cache and its expiry, the merge with the catalog and the config file, and the
thinking levels a model takes."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from support.fake_anthropic import FakeAnthropic, anthropic_model
from support.fake_openai import FakeOpenAI
from tiller.config import ServerConfig, load_config
from tiller.providers.base import ModelInfo
from tiller.providers.directory import MODELS_TTL, Listing, ListingStore, ModelDirectory
from tiller.providers.levels import effective_level, nearest_level
from tiller.providers.models_endpoint import fetch_models
from tiller.providers.registry import BUILTIN_PROVIDERS

pytestmark = pytest.mark.anyio


def anthropic_config(url: str, **extra: Any) -> ServerConfig:
    env = {"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": url}
    return ServerConfig(provider="anthropic", env=env, **extra)


async def test_anthropic_list_carries_capabilities_and_lifecycle(
    fake_anthropic: FakeAnthropic,
) -> None:
    models = await fetch_models(BUILTIN_PROVIDERS["anthropic"], base_url=fake_anthropic.url,
                                api_key="sk-ant-test", timeout=5)
    by_id = {m.id: m for m in models}
    assert [m.id for m in models][:3] == ["claude-fable-5-2", "claude-haiku-5-5",
                                          "claude-sonnet-5-5"]  # as listed: newest first
    fable, opus, haiku = by_id["claude-fable-5-2"], by_id["claude-opus-5"], by_id[
        "claude-haiku-4-5"]
    assert fable.thinking_shape == "adaptive" and "off" not in (fable.thinking_levels or ())
    assert opus.thinking_levels == ("off", "low", "medium", "high", "xhigh", "max")
    assert haiku.thinking_shape == "budget" and haiku.context_window == 200_000
    assert (fable.line, fable.created, fable.source) == ("fable", "2026-11-09", "provider")
    retired = by_id["claude-sonnet-4-20250514"]  # asked for: retired models are listed too
    assert (retired.lifecycle, retired.retires_at) == ("retired", "2026-06-15")
    assert by_id["claude-opus-4-5"].lifecycle == "deprecated"
    [path] = fake_anthropic.models_requests
    assert "lifecycle%5B%5D=retired" in path and "limit=1000" in path


async def test_a_model_without_thinking_takes_only_off(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.models = [anthropic_model("claude-plain", thinking=(), efforts=())]
    [plain] = await fetch_models(BUILTIN_PROVIDERS["anthropic"], base_url=fake_anthropic.url,
                                 api_key="k", timeout=5)
    assert (plain.reasoning, plain.thinking_levels) == (False, ("off",))
    level = effective_level("high", plain)
    assert level.level == "off" and "claude-plain does not think" in (level.note or "")


def test_a_level_the_model_lacks_runs_at_the_nearest() -> None:
    no_xhigh = ModelInfo("anthropic", "m", thinking_levels=("off", "low", "medium", "high",
                                                            "max"))
    always = ModelInfo("anthropic", "a", thinking_levels=("low", "medium", "high"))
    assert nearest_level("xhigh", no_xhigh.thinking_levels or ()) == "high"  # a tie: the weaker
    assert effective_level("xhigh", no_xhigh).level == "high"
    assert effective_level("max", always).level == "high"
    off = effective_level("off", always)
    assert off.level == "low" and "always thinks" in (off.note or "")
    assert effective_level("medium", no_xhigh).note is None  # a level it takes: no note
    assert effective_level("max", None).level == "max"  # nothing known: as set


async def test_the_list_is_cached_on_disk_for_a_day(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    config = anthropic_config(fake_anthropic.url, data_dir=tmp_path)
    first = ModelDirectory(config, ListingStore(tmp_path / "models"))
    listing = await first.refresh("anthropic")
    assert listing is not None and listing.error is None and len(listing.models) > 5
    [saved] = (tmp_path / "models").glob("anthropic-*.json")
    assert json.loads(saved.read_text())["models"][0]["id"] == "claude-fable-5-2"

    # Another process (a new store on the same folder) reads it back without asking.
    again = ModelDirectory(config, ListingStore(tmp_path / "models"))
    assert (await again.refresh("anthropic")) == listing
    assert len(fake_anthropic.models_requests) == 1
    info = again.info("anthropic", "claude-opus-5")
    assert info is not None and info.thinking_shape == "adaptive" and info.source == "provider"
    assert info.cost is not None and info.cost.input == 5  # the catalog's price, filled in

    # A day later it is asked again, and a model it added shows up.
    fake_anthropic.models.insert(0, anthropic_model("claude-new-6", line="sonnet",
                                                    created_at="2026-12-01"))
    stale = Listing(listing.models, time.time() - MODELS_TTL - 1)
    again.store.put(again._key("anthropic") or "", stale)
    refreshed = await again.refresh("anthropic")
    assert refreshed is not None and refreshed.models[0].id == "claude-new-6"
    assert len(fake_anthropic.models_requests) == 2
    sonnet = again.info("anthropic", "claude-sonnet-5")
    assert sonnet is not None
    successor = again.successor("anthropic", sonnet)  # the newest active of the line
    assert successor is not None and successor.id == "claude-new-6"


async def test_a_provider_that_cannot_answer_keeps_the_catalog(tmp_path: Path) -> None:
    config = anthropic_config("http://127.0.0.1:9")  # nothing listens there
    directory = ModelDirectory(config, ListingStore())
    listing = await directory.refresh("anthropic")
    assert listing is not None and listing.models == () and listing.error
    assert "sk-ant-test" not in listing.error
    ids = [m.id for m in directory.models("anthropic")]
    assert "claude-sonnet-5-5" in ids and "claude-3-5-haiku-latest" not in ids
    assert all(m.source == "catalog" and m.checked for m in directory.models("anthropic"))
    assert (await directory.refresh("anthropic")) == listing  # the failure is kept a while
    # no key: nothing is asked
    assert await ModelDirectory(ServerConfig(env={}), ListingStore()).refresh("anthropic") is None


async def test_config_entries_win_over_the_providers_facts(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        '[[models]]\nprovider = "anthropic"\nid = "claude-sonnet-5-5"\n'
        "cost = { input = 1.0, output = 2.0, cache_read = 0.1, cache_write = 1.25, "
        "cache_write_1h = 2.0 }\n"
        '[[models]]\nprovider = "anthropic"\nid = "my-alias"\ncontext_window = 4096\n'
        'thinking_levels = ["off", "high"]\n'
    )
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": fake_anthropic.url}
    config = load_config(["--config", str(path), "--provider", "anthropic"], env)
    directory = ModelDirectory(config, ListingStore())
    await directory.refresh("anthropic")
    models = {m.id: m for m in directory.models("anthropic")}
    sonnet = models["claude-sonnet-5-5"]
    assert sonnet.cost is not None and (sonnet.cost.input, sonnet.cost.cache_write_1h) == (1, 2)
    assert sonnet.context_window == 1_000_000 and sonnet.thinking_shape == "adaptive"
    assert sonnet.source == "config"
    alias = models["my-alias"]  # not listed by the provider: the config's own entry
    assert alias.thinking_levels == ("off", "high") and alias.context_window == 4096
    assert "claude-sonnet-4-20250514" not in models  # retired: not offered


async def test_openai_lists_ids_merged_with_the_catalog(tmp_path: Path) -> None:
    with FakeOpenAI(models=("gpt-6.2-sol", "my-local-model")) as fake:
        config = ServerConfig(provider="openai", base_url=fake.url, env={})
        directory = ModelDirectory(config, ListingStore())
        await directory.refresh("openai")
        models = {m.id: m for m in directory.models("openai")}
    assert list(models)[:2] == ["gpt-6.2-sol", "my-local-model"]  # the server's, first
    assert "gpt-6.2-astra" in models  # then the catalog's: a list of ids may not say it all
    assert models["gpt-6.2-sol"].cost is not None  # the catalog's price on the provider's id
    assert models["my-local-model"].levels() is None  # nothing known: any level as set
    assert fake.other_requests == [("GET", "/v1/models")]
