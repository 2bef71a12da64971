"""End to end through the real server against FakeAnthropic (December 2026's wire, its models
endpoint, its refusals and its cache accounting): a thinking run on a claude-opus-5-class
model, the prompt cache over a 20-call session, retired and deprecated models, the thinking
levels a model lacks, and models/list from the endpoint merged with the config file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.fake_anthropic import FakeAnthropic, anthropic_model, text_reply, tool_use_reply
from support.helpers import clean_env, spawn_tiller
from tiller.client import TillerClient
from tiller.providers.anthropic_models import ANTHROPIC_MODELS

pytestmark = [pytest.mark.anyio, pytest.mark.process]

KEY = "sk-ant-e2e-SECRET"


def anthropic_env(fake: FakeAnthropic, data: Path) -> dict[str, str]:
    """Anthropic's key and the fake's URL; the data folder (the model lists' cache) of the
    test's own."""
    return clean_env(ANTHROPIC_API_KEY=KEY, ANTHROPIC_BASE_URL=fake.url,
                     XDG_DATA_HOME=str(data))


def events_of(tiller: TillerClient, kind: str) -> list[dict[str, Any]]:
    return [event for event in tiller.events if event["type"] == kind]


def price(model_id: str) -> Any:
    [info] = [m for m in ANTHROPIC_MODELS if m.id == model_id]
    return info.cost


async def test_a_thinking_run_with_bash_read_and_edit_on_an_opus_5_class_model(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    (tmp_path / "app.py").write_text("x = 1\n")
    edit = {"path": "app.py", "edits": [{"oldText": "x = 1", "newText": "x = 2"}]}
    fake_anthropic.enqueue(
        tool_use_reply([("toolu_1", "bash", {"command": "ls"})], thinking="Look first.",
                       signature="sig-1"),
        tool_use_reply([("toolu_2", "read", {"path": "app.py"})], thinking="Read it.",
                       signature="sig-2"),
        tool_use_reply([("toolu_3", "edit", edit)], thinking="Change it.", signature="sig-3"),
        text_reply("x is 2 now.", thinking="Done.", signature="sig-4"),
    )
    async with spawn_tiller(None, tmp_path, "--provider", "anthropic", "--model",
                            "claude-opus-5-5", "--thinking", "high", "--permission-mode", "auto",
                            env=anthropic_env(fake_anthropic, tmp_path / "data")) as tiller:
        result = await tiller.request("agent/prompt", {"message": "make x 2"})
        messages = (await tiller.request("agent/getMessages"))["messages"]

    assert result["stopReason"] == "stop", result.get("errorMessage")
    assert (tmp_path / "app.py").read_text() == "x = 2\n"
    bodies = fake_anthropic.requests
    assert len(bodies) == 4 and len(fake_anthropic.models_requests) == 1  # its facts, once
    for body in bodies:  # the endpoint says adaptive: no budget was ever sent
        assert body["model"] == "claude-opus-5-5"
        assert body["thinking"] == {"type": "adaptive", "display": "summarized"}
        assert body["output_config"] == {"effort": "high"}
    # each turn's signed thinking goes back, in order, before its tool call
    last = bodies[-1]["messages"]
    assistant = [m["content"] for m in last if m["role"] == "assistant"]
    assert [blocks[0] for blocks in assistant] == [
        {"type": "thinking", "thinking": t, "signature": s}
        for t, s in [("Look first.", "sig-1"), ("Read it.", "sig-2"), ("Change it.", "sig-3")]]
    assert [blocks[1]["name"] for blocks in assistant] == ["bash", "read", "edit"]
    results = [b for m in last if m["role"] == "user" for b in m["content"]
               if b["type"] == "tool_result"]
    assert [r["tool_use_id"] for r in results] == ["toolu_1", "toolu_2", "toolu_3"]
    assert not any(r.get("is_error") for r in results)
    assert messages[-1]["content"][0] == {"type": "thinking", "thinking": "Done.",
                                          "signature": "sig-4"}


async def test_twenty_calls_read_most_of_their_input_from_the_cache(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """19 tool calls and a final answer in one run: every call after the first reads the
    prefix the one before it wrote; usage counts and prices reads and writes."""
    calls = [tool_use_reply([(f"toolu_{n}", "bash", {"command": f"echo step {n}; seq 40"})])
             for n in range(19)]
    fake_anthropic.enqueue(*calls, text_reply("All steps done."))
    async with spawn_tiller(None, tmp_path, "--provider", "anthropic", "--permission-mode",
                            "auto", env=anthropic_env(fake_anthropic, tmp_path / "data")) as tiller:
        result = await tiller.request("agent/prompt", {"message": "run the 19 steps"})

    assert result["stopReason"] == "stop", result.get("errorMessage")
    usages = fake_anthropic.usages
    assert len(usages) == 20
    assert all(b["model"] == "claude-sonnet-5-5" for b in fake_anthropic.requests)  # default
    usage = result["usage"]
    assert usage["cacheReadTokens"] == sum(u.cache_read for u in usages)
    assert usage["cacheWriteTokens"] == sum(u.cache_write for u in usages)
    assert usage["inputTokens"] == sum(u.input_tokens for u in usages)
    billed_input = usage["inputTokens"] + usage["cacheReadTokens"] + usage["cacheWriteTokens"]
    assert usage["cacheReadTokens"] / billed_input >= 0.8
    cost = price("claude-sonnet-5-5")
    expected = (usage["inputTokens"] * cost.input + usage["outputTokens"] * cost.output
                + usage["cacheReadTokens"] * cost.cache_read
                + usage["cacheWriteTokens"] * cost.cache_write) / 1_000_000
    assert usage["cost"] == pytest.approx(expected)


async def test_a_retired_model_named_explicitly_fails_saying_so(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    async with spawn_tiller(None, tmp_path, "--provider", "anthropic", "--model",
                            "claude-sonnet-4-20250514",
                            env=anthropic_env(fake_anthropic, tmp_path / "data")) as tiller:
        result = await tiller.request("agent/prompt", {"message": "hello"})
        state = await tiller.request("agent/getState")

    assert result["stopReason"] == "error"
    error = result["errorMessage"]
    assert "model claude-sonnet-4-20250514 is retired since 2026-06-15" in error
    assert "claude-sonnet-5-5" in error and "claude-opus-4-5" in error  # what can be used
    assert "claude-sonnet-4-5," not in error  # retired ones are not offered
    assert fake_anthropic.requests == []  # nothing was sent to a model that cannot answer
    assert state["model"] == "claude-sonnet-4-20250514"


async def test_a_retired_model_that_the_api_no_longer_knows_is_explained(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """The cached list still said active; the API's 404 gets the list asked again."""
    fake_anthropic.models = [anthropic_model("claude-old-1", line="sonnet"),
                             anthropic_model("claude-new-2", line="sonnet")]
    async with spawn_tiller(None, tmp_path, "--provider", "anthropic", "--model",
                            "claude-old-1",
                            env=anthropic_env(fake_anthropic, tmp_path / "data")) as tiller:
        fake_anthropic.enqueue(text_reply("one"))
        assert (await tiller.request("agent/prompt", {"message": "one"}))["stopReason"] == "stop"
        fake_anthropic.models = [
            anthropic_model("claude-old-1", line="sonnet", lifecycle="retired",
                            deprecated_at="2026-10-01", retires_at="2026-12-01"),
            anthropic_model("claude-new-2", line="sonnet")]
        result = await tiller.request("agent/prompt", {"message": "two"})

    assert result["stopReason"] == "error"
    assert "claude-old-1 is retired since 2026-12-01" in result["errorMessage"]
    assert "claude-new-2" in result["errorMessage"]
    assert len(fake_anthropic.models_requests) == 2  # once before the runs, once on the 404


async def test_a_retired_default_model_is_replaced_by_the_newest_of_its_line(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[providers.anthropic]\ndefault_model = "claude-sonnet-4-20250514"\n')
    fake_anthropic.enqueue(text_reply("Hi from the successor."))
    async with spawn_tiller(None, tmp_path, "--provider", "anthropic", "--config", str(config),
                            env=anthropic_env(fake_anthropic, tmp_path / "data")) as tiller:
        result = await tiller.request("agent/prompt", {"message": "hello"})
        state = await tiller.request("agent/getState")
        kinds = [event["type"] for event in tiller.events]
        [notice] = events_of(tiller, "notice")

    assert result["stopReason"] == "stop"
    assert notice["level"] == "info"
    assert notice["message"] == (
        "claude-sonnet-4-20250514, the default model, is retired since 2026-06-15: using "
        "claude-sonnet-5-5, the newest active sonnet model")
    assert kinds.index("notice") < kinds.index("agent_start")
    [body] = fake_anthropic.requests
    assert body["model"] == "claude-sonnet-5-5" and state["model"] == "claude-sonnet-5-5"


async def test_a_deprecated_model_warns_with_its_retirement_date(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.enqueue(text_reply("still here"), text_reply("again"))
    async with spawn_tiller(None, tmp_path, "--provider", "anthropic", "--model",
                            "claude-opus-4-5",
                            env=anthropic_env(fake_anthropic, tmp_path / "data")) as tiller:
        await tiller.request("agent/prompt", {"message": "one"})
        await tiller.request("agent/prompt", {"message": "two"})
        notices = events_of(tiller, "notice")
        switched = await tiller.request("agent/setModel", {"provider": "anthropic",
                                                           "model": "claude-opus-4-5"})

    assert [n["level"] for n in notices] == ["warning"]  # once per session
    assert notices[0]["message"] == (
        "claude-opus-4-5 is deprecated since 2026-11-23 and is scheduled to retire on "
        "2027-01-22: switch to another model (the newest active opus model is claude-opus-5-5)")
    assert switched["notice"] == notices[0]["message"]
    assert len(fake_anthropic.requests) == 2  # a deprecated model still answers


async def test_thinking_levels_a_model_lacks_are_said_not_accepted_silently(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.models += [
        anthropic_model("claude-sonnet-4-6", line="sonnet",
                        efforts=("low", "medium", "high", "max")),
        anthropic_model("claude-plain", thinking=(), efforts=()),
    ]
    fake_anthropic.enqueue(text_reply("plain"), text_reply("thought"))
    async with spawn_tiller(None, tmp_path, "--provider", "anthropic", "--model", "claude-plain",
                            env=anthropic_env(fake_anthropic, tmp_path / "data")) as tiller:
        await tiller.request("models/list")  # the facts, before the level is chosen
        plain = await tiller.request("agent/setThinkingLevel", {"level": "high"})
        await tiller.request("agent/prompt", {"message": "one"})
        await tiller.request("agent/setModel", {"provider": "anthropic",
                                                "model": "claude-sonnet-4-6"})
        state = await tiller.request("agent/getState")
        xhigh = await tiller.request("agent/setThinkingLevel", {"level": "xhigh"})
        await tiller.request("agent/prompt", {"message": "two"})
        notices = events_of(tiller, "notice")

    assert plain == {"level": "high", "effective": "off",
                     "note": "claude-plain does not think: thinking level high has no effect on it"}
    assert state["thinkingLevel"] == "high" and state["effectiveThinkingLevel"] == "high"
    assert xhigh["effective"] == "high" and "has no xhigh thinking level" in xhigh["note"]
    assert notices == []  # the results said it: no notice repeats it
    first, second = fake_anthropic.requests
    assert "output_config" not in first and "thinking" not in first
    assert second["output_config"] == {"effort": "high"}


async def test_models_list_is_the_endpoints_merged_with_the_config_and_cached(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.models.insert(0, anthropic_model("claude-preview-6", display_name="Preview",
                                                    line="opus", created_at="2026-12-01"))
    config = tmp_path / "config.toml"
    config.write_text(
        '[[models]]\nprovider = "anthropic"\nid = "claude-sonnet-5-5"\n'
        "cost = { input = 1.5, output = 7.5 }\n"
        '[[models]]\nprovider = "anthropic"\nid = "team-proxy-model"\ncontext_window = 50000\n')
    env = anthropic_env(fake_anthropic, tmp_path / "data")
    args = ("--provider", "anthropic", "--config", str(config))
    async with spawn_tiller(None, tmp_path, *args, env=env) as tiller:
        listed = await tiller.request("models/list")
    async with spawn_tiller(None, tmp_path, *args, env=env) as tiller:  # a new process
        again = await tiller.request("models/list")

    providers = {p["name"]: p for p in listed["providers"]}
    assert providers["anthropic"]["modelsFetchedAt"] > 0
    assert "modelsError" not in providers["anthropic"]
    models = {m["id"]: m for m in listed["models"] if m["provider"] == "anthropic"}
    assert list(models)[0] == "claude-preview-6"  # as the endpoint lists: newest first
    assert models["claude-preview-6"]["source"] == "provider"
    assert models["claude-preview-6"]["displayName"] == "Preview"
    assert "cost" not in models["claude-preview-6"]  # not in the catalog: no price known
    sonnet = models["claude-sonnet-5-5"]
    assert (sonnet["cost"]["input"], sonnet["source"]) == (1.5, "config")  # the config wins
    assert sonnet["contextWindow"] == 1_000_000  # the endpoint's fact
    assert sonnet["thinkingLevels"] == ["off", "low", "medium", "high", "xhigh", "max"]
    assert models["claude-opus-4-5"]["lifecycle"] == "deprecated"
    assert models["claude-opus-4-5"]["retiresAt"] == "2027-01-22"
    assert "claude-sonnet-4-20250514" not in models  # retired: not offered
    assert models["team-proxy-model"]["contextWindow"] == 50000  # config only
    assert models["claude-fable-5-2"]["cost"]["cacheWrite1h"] == 16
    assert again == listed  # the second process read the cached list
    assert len(fake_anthropic.models_requests) == 1
    assert KEY not in str(listed)
