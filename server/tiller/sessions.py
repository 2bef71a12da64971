"""Live sessions of one server process: each an Agent with its own queues, run and event seq.

A session is created by ``session/new`` or, for the default session, on first use by any
``agent/*`` method without a ``sessionId``. Persistence comes later (see the sessions issue);
today sessions live in memory.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from tiller.agent import Agent, AgentConfig
from tiller.config import ServerConfig, default_system_prompt
from tiller.errors import UnknownSessionError
from tiller.protocol import EVENT_METHOD, SessionNewParams
from tiller.providers import DEFAULT_MODELS, Provider, create_provider
from tiller.tools import default_tools
from tiller.types import AgentEvent

__all__ = ["Session", "SessionManager"]

log = logging.getLogger(__name__)

Notify = Callable[[str, Any], None]


@dataclass
class Session:
    id: str
    cwd: Path
    provider: str
    model: str | None
    agent: Agent = field(init=False)
    seq: int = 0


class SessionManager:
    """Creates, finds and shuts down sessions; routes each session's events to ``notify``."""

    def __init__(self, config: ServerConfig, notify: Notify) -> None:
        self.config = config
        self.notify = notify
        self.sessions: dict[str, Session] = {}
        self.default_id: str | None = None

    def create(self, params: SessionNewParams, *, validate: bool = True) -> Session:
        """A new session; with ``validate`` its provider is built now, so a missing key or an
        unknown provider fails here (ProviderNotConfiguredError) rather than at the first prompt."""
        cwd = Path(params.cwd).expanduser().resolve() if params.cwd else self.config.cwd
        provider = params.provider or self.config.provider
        model = params.model or self.config.model or DEFAULT_MODELS.get(provider)
        base_url = self.config.base_url if provider == self.config.provider else None
        env = self.config.env

        def provider_factory() -> Provider:
            return create_provider(provider, model=model, base_url=base_url, env=env)

        session_id = uuid.uuid4().hex
        agent_config = AgentConfig(
            provider_factory=provider_factory,
            tools=default_tools(),
            system_prompt=params.system_prompt or default_system_prompt(cwd),
            cwd=cwd,
            max_turns=self.config.max_turns,
        )
        session = Session(session_id, cwd, provider, model)
        session.agent = Agent(agent_config, self._emitter(session))
        if validate:
            _ = session.agent.provider
        self.sessions[session_id] = session
        return session

    def get(self, session_id: str | None) -> Session:
        """The session with that id, or the default session (created on first use)."""
        if session_id is None:
            if self.default_id is None or self.default_id not in self.sessions:
                self.default_id = self.create(SessionNewParams(), validate=False).id
            return self.sessions[self.default_id]
        session = self.sessions.get(session_id)
        if session is None:
            raise UnknownSessionError(f"unknown session {session_id!r}")
        return session

    def _emitter(self, session: Session) -> Callable[[AgentEvent], None]:
        def emit(event: AgentEvent) -> None:
            session.seq += 1
            self.notify(EVENT_METHOD, {"sessionId": session.id, "seq": session.seq, **event.dump()})

        return emit

    async def shutdown(self, grace: float = 10.0) -> None:
        """Abort every active run and wait (bounded) for them to wind down."""
        running = [s.agent for s in self.sessions.values() if s.agent.is_running]
        for agent in running:
            agent.abort()
        with anyio.move_on_after(grace):
            for agent in running:
                await agent.wait_idle()
