"""Shared pytest fixtures: the anyio backend and a strict loopback fake of the OpenAI API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fake_anthropic import FakeAnthropic
from fake_openai import FakeOpenAI


@pytest.fixture
def anyio_backend() -> str:
    """Run ``@pytest.mark.anyio`` tests on asyncio only (Tiller runs on asyncio)."""
    return "asyncio"


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A started FakeOpenAI; at teardown it is closed, then every scripted reply must have been
    used and no request may have gone unscripted (see ``FakeOpenAI.assert_script_complete``)."""
    with FakeOpenAI() as fake:
        yield fake
    fake.assert_script_complete()


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    """A started FakeAnthropic; at teardown it is closed, then every scripted reply must have
    been used and no request may have gone unscripted (``FakeAnthropic.assert_script_complete``)."""
    with FakeAnthropic() as fake:
        yield fake
    fake.assert_script_complete()
