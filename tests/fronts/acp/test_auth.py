"""ACP authentication end to end: with no key for the provider, ``initialize`` offers an
``env_var`` method naming the variable, ``session/new`` fails with ACP's auth-required -32000,
and ``authenticate`` succeeds once the configuration (re-read from the config file, with the
environment the server started with) gives the provider a key."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from acp import RequestError, spawn_agent_process, text_block

from support.acp_client import Recorder
from support.fake_openai import FakeOpenAI, text_reply
from support.helpers import clean_env

pytestmark = [pytest.mark.anyio, pytest.mark.process]


async def test_a_missing_key_is_an_auth_method_and_authenticate_rechecks(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(text_reply("hello with a key"))
    config_home = tmp_path / "config"
    env = clean_env(XDG_CONFIG_HOME=str(config_home), FAKE_PROVIDER_KEY="sk-test-123")
    # --provider: without it, an installed embedded model (the `local` extra) would be chosen.
    argv = ["-m", "tiller", "--acp", "--provider", "openai", "--cwd", str(tmp_path),
            "--session-dir", str(tmp_path / ".sessions")]
    recorder = Recorder()
    async with spawn_agent_process(
        recorder, sys.executable, *argv, env=env, cwd=tmp_path,
        transport_kwargs={"stderr": None}, observers=[recorder.observe],
    ) as (conn, _process):
        init = await conn.initialize(protocol_version=1)
        with pytest.raises(RequestError) as refused:
            await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        with pytest.raises(RequestError) as still:
            await conn.authenticate(method_id="env:OPENAI_API_KEY")
        with pytest.raises(RequestError) as unknown:
            await conn.authenticate(method_id="oauth")

        (config_home / "tiller").mkdir(parents=True)
        (config_home / "tiller" / "config.toml").write_text(
            f'[providers.openai]\nbase_url = "{fake_openai.url}"\n'
            'api_key_env = "FAKE_PROVIDER_KEY"\ndefault_model = "fake-model"\n'
        )
        await conn.authenticate(method_id="env:OPENAI_API_KEY")
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        result = await conn.prompt(session_id=session.session_id, prompt=[text_block("hi")])
        again = await conn.initialize(protocol_version=1)
    assert not recorder.wire.problems, "\n".join(recorder.wire.problems)

    [method] = [m.model_dump(by_alias=True, exclude_none=True) for m in init.auth_methods or []]
    assert method["type"] == "env_var" and method["id"] == "env:OPENAI_API_KEY"
    assert [var["name"] for var in method["vars"]] == ["OPENAI_API_KEY"]
    assert refused.value.code == -32000 and "OPENAI_API_KEY" in str(refused.value)
    assert still.value.code == -32000
    assert unknown.value.code == -32602
    assert result.stop_reason == "end_turn" and len(fake_openai.requests) == 1
    assert not again.auth_methods  # the provider has its key now
