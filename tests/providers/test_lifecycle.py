"""Providers are closed when their session closes, when a model switch replaces them, and at
shutdown: a provider holds an SDK client (HTTP connection pool, TLS context) that is otherwise
never released (about 70 kB per session).

The providers are spies built through the seam the session registry builds every provider
with (its ``providers`` factory); they count their ``aclose`` calls.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from support.scripted import ScriptedProvider, reply_text
from tiller.config import ServerConfig
from tiller.providers.base import Provider
from tiller.session.registry import SessionRegistry, SessionSpec

pytestmark = pytest.mark.anyio


class SpyProvider(ScriptedProvider):
    """Answers every model call with one text reply; counts ``aclose`` calls."""

    def __init__(self, label: str) -> None:
        super().__init__()
        self.label = label
        self.closes = 0

    def used(self) -> bool:
        return bool(self.requests)

    async def aclose(self) -> None:
        self.closes += 1


class SpyingManager(SessionRegistry):
    """A session registry whose providers are spies, kept in ``built``."""

    def __init__(self, cwd: Path) -> None:
        super().__init__(ServerConfig(cwd=cwd), providers=self.spy_factory)
        self.built: list[SpyProvider] = []

    def spy_factory(
        self, _config: ServerConfig, provider: str, model: str
    ) -> Callable[[], Provider]:
        def build() -> Provider:
            spy = SpyProvider(f"{provider}/{model}#{len(self.built)}")
            spy.enqueue(*[reply_text("ok")] * 5)
            self.built.append(spy)
            return spy

        return build

    def used(self) -> list[SpyProvider]:
        return [spy for spy in self.built if spy.used()]


def closes(spies: list[SpyProvider]) -> dict[str, int]:
    return {spy.label: spy.closes for spy in spies}


async def test_closing_a_session_closes_its_provider(tmp_path: Path) -> None:
    manager = SpyingManager(tmp_path)
    session = manager.create(SessionSpec())
    await session.agent.prompt("hi")
    [spy] = manager.used()
    assert spy.closes == 0

    await manager.close(session.id)

    assert spy.closes == 1


async def test_a_model_switch_closes_the_replaced_provider(tmp_path: Path) -> None:
    manager = SpyingManager(tmp_path)
    session = manager.create(SessionSpec())
    await session.agent.prompt("hi")
    await session.set_model("openai", "gpt-4o")
    await session.agent.prompt("and now?")
    first, second = manager.used()
    assert (first.closes, second.closes) == (1, 0)

    await manager.close(session.id)

    assert closes(manager.used()) == {first.label: 1, second.label: 1}


async def test_shutdown_closes_every_live_sessions_provider(tmp_path: Path) -> None:
    manager = SpyingManager(tmp_path)
    for _ in range(3):
        await manager.create(SessionSpec()).agent.prompt("hi")

    await manager.shutdown()

    assert len(manager.used()) == 3
    assert all(spy.closes == 1 for spy in manager.used())


async def test_a_closed_session_reloads_with_a_new_provider(tmp_path: Path) -> None:
    """Closing is not final for the manager: another session still gets a working provider."""
    manager = SpyingManager(tmp_path)
    first = manager.create(SessionSpec())
    await first.agent.prompt("hi")
    await manager.close(first.id)
    second = manager.create(SessionSpec())
    result = await second.agent.prompt("hi again")

    assert result.stop_reason == "stop"
    assert [spy.closes for spy in manager.used()] == [1, 0]
