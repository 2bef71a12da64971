"""``ModelWatch``: what a session knows of its model, checked before each run (the Agent's
``ModelGuard``).

Before a run it looks the model up (``ModelDirectory.lookup``: for an Anthropic provider that
may ask ``GET /v1/models`` when the cached list is older than a day) and then:

* a **retired** model that is the provider's default (no one chose it) is replaced by the
  newest active model of its line, and an ``info`` notice says so; one chosen explicitly
  makes every model call of the run fail, without a request, with an error that names it,
  says it is retired (and since when, when known) and lists the models that can be used;
* a **deprecated** model gets a ``warning`` notice with its retirement date, once per session;
* a thinking level the model lacks gets an ``info`` notice naming the level it runs at, once
  per session, model and level (``agent/setThinkingLevel``'s result says it too).

After a failed call whose error is a 404 naming the model, the provider's list is asked again
and the error says "retired" or "not offered" with the models that are (``explain``).
"""

from __future__ import annotations

import logging
from typing import Literal, Protocol

from tiller.agent.agent import Agent
from tiller.modes import ThinkingLevel
from tiller.providers.base import ModelInfo
from tiller.providers.directory import ModelDirectory, names_of
from tiller.providers.levels import EffectiveLevel, effective_level
from tiller.types import AgentEvent, AssistantMessage, Notice

__all__ = ["ModelWatch", "WatchedSession", "deprecation_notice", "retired_error"]


class WatchedSession(Protocol):
    """What ``ModelWatch`` reads and changes of its session (``tiller.session.Session``)."""

    id: str
    provider: str
    model: str
    model_default: bool
    directory: ModelDirectory
    agent: Agent

    @property
    def thinking(self) -> ThinkingLevel: ...

    def publish(self, event: AgentEvent) -> None: ...

    async def switch_model(self, provider: str, model: str, info: ModelInfo | None, *,
                           default: bool) -> None: ...

log = logging.getLogger(__name__)


def retired_error(provider: str, info: ModelInfo, available: list[ModelInfo]) -> str:
    """The error of a run on a retired model."""
    since = f" since {info.retires_at}" if info.retires_at else ""
    choices = f": {names_of(available)}" if available else ""
    return (f"{provider}: model {info.id} is retired{since} and can no longer be used; choose "
            f"another model (agent/setModel){choices}")


def deprecation_notice(info: ModelInfo, successor: ModelInfo | None) -> str:
    """The warning for a deprecated model."""
    since = f" since {info.deprecated_at}" if info.deprecated_at else ""
    until = f" and is scheduled to retire on {info.retires_at}" if info.retires_at else ""
    instead = (f" (the newest active {info.line} model is {successor.id})"
               if successor is not None and info.line else "")
    return f"{info.id} is deprecated{since}{until}: switch to another model{instead}"


class ModelWatch:
    """The model checks of one session (see the module docstring)."""

    def __init__(self, session: WatchedSession) -> None:
        self.session = session
        self._noticed: set[tuple[str, ...]] = set()
        self._refusal: str | None = None

    def notify(self, key: tuple[str, ...], level: Literal["info", "warning"],
               message: str) -> None:
        """Publish a notice unless one with ``key`` went out already."""
        if key not in self._noticed:
            self._noticed.add(key)
            self.session.publish(Notice(level=level, message=message))

    def mark(self, *key: str) -> None:
        """Count ``key``'s notice as given (a method's result said it)."""
        self._noticed.add(key)

    def thinking(self) -> EffectiveLevel:
        """The level the session's thinking level runs at on its model."""
        session = self.session
        return effective_level(session.thinking, session.agent.model_info)

    def lifecycle_notice(self, info: ModelInfo | None) -> str | None:
        """The warning a deprecated ``info`` gets, or None."""
        if info is None or info.lifecycle != "deprecated":
            return None
        successor = self.session.directory.successor(self.session.provider, info)
        return deprecation_notice(info, successor)

    async def before_run(self) -> None:
        session = self.session
        try:
            info = await session.directory.lookup(session.provider, session.model)
            self._refusal = None
            if info is not None and info.lifecycle == "retired":
                info = await self._retired(info)
            session.agent.model_info = info
            if warning := self.lifecycle_notice(info):
                self.notify(("lifecycle", session.model), "warning", warning)
            effective = self.thinking()
            if effective.note:
                self.notify(("thinking", session.model, session.thinking), "info",
                            effective.note)
        except Exception:  # a guard must not raise: the run goes ahead as before
            log.exception("checking the model of session %s failed", session.id)

    async def _retired(self, info: ModelInfo) -> ModelInfo | None:
        """A retired default model replaced (returns the successor), else the refusal set."""
        session = self.session
        successor = (session.directory.successor(session.provider, info)
                     if session.model_default else None)
        if successor is None:
            available = [m for m in session.directory.models(session.provider)
                         if m.lifecycle != "retired"]
            self._refusal = retired_error(session.provider, info, available)
            return info
        old = session.model
        await session.switch_model(session.provider, successor.id, successor, default=True)
        since = f" since {info.retires_at}" if info.retires_at else ""
        self.notify(("replaced", old), "info",
                    f"{old}, the default model, is retired{since}: using {successor.id}, the "
                    f"newest active {info.line} model")
        return successor

    def refusal(self) -> str | None:
        return self._refusal

    async def explain(self, message: AssistantMessage) -> AssistantMessage:
        session = self.session
        text = message.error_message or ""
        if " 404 " not in f" {text}" or session.model not in text:
            return message
        try:
            listing = await session.directory.refresh(session.provider, force=True)
            info = session.directory.info(session.provider, session.model)
            available = [m for m in session.directory.models(session.provider)
                         if m.lifecycle != "retired"]
            if info is not None and info.lifecycle == "retired":
                better = retired_error(session.provider, info, available)
            elif listing is not None and listing.models and all(
                    m.id != session.model for m in listing.models):
                better = (f"{text}; {session.provider} lists no model {session.model}: "
                          f"available: {names_of(available)}")
            else:
                return message
        except Exception:
            log.exception("explaining a failed call of session %s failed", session.id)
            return message
        return message.model_copy(update={"error_message": better})
