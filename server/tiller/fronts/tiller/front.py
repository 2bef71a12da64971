"""Tiller's front: protocol.md's methods, served on a ``tiller.wire.jsonrpc.Front``.

``initialize`` is answered here without pydantic, the protocol's models or the session
machinery, and so is ``session/load`` of a saved session: its answer is the log's messages as
saved (``tiller.store.saved.open_saved``), and the session goes live (its messages validated,
the models and the session machinery imported) right after the answer is written. Every other
method of ``tiller.protocol.names`` is registered lazily, its handler in
``tiller.fronts.tiller.handlers`` (imported, with the models, on the first such call), and waits
until no session is on its way to going live (and, the first time, for the model a
``--base-url`` server serves: ``SessionRegistry.ready``). A session's events go out as
``agent/event`` notifications (``tiller.fronts.tiller.events.EventNotifier``, its deltas
coalesced within the ``initialize`` ``deltaWindowMs``).
"""

from __future__ import annotations

import gc
import json
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

import anyio

from tiller import PROTOCOL_VERSION
from tiller.config import ServerConfig
from tiller.errors import InvalidParams, RequestError
from tiller.fronts.tiller.hello import Initialize, initialize_result, speaks_our_version
from tiller.frozen import frozen
from tiller.protocol.names import METHODS
from tiller.wire.endpoint import SerializedResult
from tiller.wire.jsonrpc import Front, Handler, Method

if TYPE_CHECKING:  # the session machinery is imported on first use, not for initialize
    from tiller.fronts.tiller.handlers import Methods
    from tiller.protocol.models import SessionIdParams
    from tiller.session.registry import SessionRegistry
    from tiller.session.session import Session
    from tiller.store.saved import SavedSession

__all__ = ["LAZY", "OWN", "SessionId", "TillerFront"]

log = logging.getLogger(__name__)

OWN = ("initialize", "session/load")
"""The methods served here, without pydantic; ``tiller.fronts.tiller.handlers.Methods`` serves
the rest of ``tiller.protocol.names.METHODS`` (and ``session/load`` of a live session)."""
LAZY = tuple(name for name in METHODS if name not in OWN)
"""The methods whose handlers (and models) are imported on the first call of one of them."""


@frozen
class SessionId:
    """``session/load``'s params: ``{"sessionId": "..."}`` read as is, anything else through
    the params model of its row in ``tiller.protocol.methods`` (coerced, or -32602)."""

    session_id: str

    @classmethod
    def model_validate(cls, raw: dict[str, Any]) -> SessionId:
        if raw.keys() == {"sessionId"} and type(raw["sessionId"]) is str:
            return cls(raw["sessionId"])
        from tiller.protocol.methods import METHODS as ROWS

        params = cast("SessionIdParams", ROWS["session/load"].params.model_validate(raw))
        return cls(params.session_id)


class _Loads:
    """The ``session/load`` in progress (there is one at a time), from opening the log until
    the session is live or has failed to go live; ``settled()`` returns once there is none."""

    def __init__(self) -> None:
        self._done: anyio.Event | None = None

    def enter(self) -> None:
        self._done = anyio.Event()

    def leave(self) -> None:
        done, self._done = self._done, None
        if done is not None:
            done.set()

    async def settled(self) -> None:
        while self._done is not None:
            await self._done.wait()


class TillerFront:
    """protocol.md's methods over one session registry, served by ``front``."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.delta_window_ms: float | None = None
        self._registry: SessionRegistry | None = None
        self._capabilities: dict[str, Any] | None = None
        self.front = Front(self._shutdown)
        self._loads = _Loads()
        self._handlers: Methods | None = None
        self._closed = False
        self._warming: anyio.Event | None = None
        self.front.register("initialize", Initialize, self.initialize)
        self.front.register("session/load", SessionId, self.session_load)
        self.front.register_lazy(LAZY, self._methods)

    @property
    def sessions(self) -> SessionRegistry:
        """The session registry, built (its modules imported) when first needed."""
        if self._registry is None:
            from tiller.session.registry import SessionRegistry

            self._registry = SessionRegistry(self.config, self._attach)
            self._connect_client()
        return self._registry

    @property
    def handlers(self) -> Methods:
        """The methods' handlers (``tiller.fronts.tiller.handlers``), imported when first needed."""
        if self._handlers is None:
            from tiller.fronts.tiller.handlers import Methods

            self._handlers = Methods(self.front, self.config, lambda: self.sessions)
        return self._handlers

    async def warm(self, imported: Callable[[], object] = lambda: None) -> None:
        """Get ready for the first prompt once ``initialize`` is answered: import what it needs in
        a worker thread (``tiller.session.warm``; the event loop goes on serving; requests wait
        for this part only), then call ``imported()`` and build the handlers; then, whenever no
        request is being handled (one that is builds what it needs itself), build the models and
        the tools' schemas and prepare the provider (its HTTP library) in the thread; then learn
        the served model (``SessionRegistry.ready``). Runs once; never raises; ``imported()`` is
        called even if it fails or is cancelled."""
        if self._warming is not None or self._closed:
            imported()
            return
        self._warming = anyio.Event()
        try:
            from tiller.session.warm import build_models, import_modules, prepare_provider

            took, _ = await anyio.to_thread.run_sync(
                import_modules, ("tiller.fronts.tiller.handlers", "tiller.fronts.tiller.events"))
            gc.freeze()  # the modules live as long as the process: no collection walks them
            self._warming.set()
            imported()
            self.handlers  # noqa: B018 (built now, not by the first request)
            idle = self.front.endpoint.wait_idle
            took += await anyio.to_thread.run_sync(
                build_models, ("tiller.protocol.models",), idle)
            took += await anyio.to_thread.run_sync(prepare_provider, self.config, idle)
            await self.sessions.ready()
            log.debug("warmed up for the first prompt (imports: %.0f ms)", took * 1000)
        except Exception:
            log.debug("warming up failed; the first request does it", exc_info=True)
        finally:
            if not self._warming.is_set():
                self._warming.set()
                imported()

    async def _methods(self) -> Mapping[str, Method]:
        """The lazily registered methods, each waiting for a load in progress (``_Loads``);
        imported after the warm-up's, if one runs (so two threads never import them)."""
        if self._warming is not None:
            await self._warming.wait()
        return {name: (params, self._after_loads(fn))
                for name, (params, fn) in self.handlers.table(LAZY).items()}

    def _after_loads(self, fn: Handler[Any]) -> Handler[Any]:
        async def handle(params: Any) -> Any:
            await self._loads.settled()
            await self.sessions.ready()
            return await fn(params)

        return handle

    async def session_load(self, params: SessionId) -> Any:
        """A live session's history, or a saved session's as its log has it: answered at once,
        the session made live right after (``_go_live``). One load at a time."""
        await self._loads.settled()
        live = self._registry.lookup(params.session_id) if self._registry is not None else None
        if live is not None:
            return self.handlers.history(live)
        from pydantic_core import to_json

        from tiller.store.saved import open_saved

        self._loads.enter()
        try:
            saved = await anyio.to_thread.run_sync(
                open_saved, self.config.session_dir, params.session_id)
            try:
                result = SerializedResult(to_json(saved.history(self.config)))
            except BaseException:  # it cannot be sent (a lone surrogate in a message)
                saved.close()
                raise
        except BaseException:
            self._loads.leave()
            raise
        result.then = lambda: self._go_live(saved)
        return result

    async def _go_live(self, saved: SavedSession) -> None:
        """Make a session whose ``session/load`` was answered live. If its messages are not
        valid, requests for it get the error (``SessionRegistry.adopt``)."""
        try:
            if self._warming is not None:  # its imports first: one thread imports them
                await self._warming.wait()
            if self._closed:
                saved.close()
            else:
                await self.sessions.adopt(saved)
        except RequestError as exc:  # SessionLogError: a message in the log is not valid
            log.warning("session %s could not go live: %s", saved.id, exc.message)
        except Exception:
            log.exception("session %s could not go live", saved.id)
        finally:
            self._loads.leave()

    def _connect_client(self) -> None:
        """Hand what the client declared in ``initialize`` to the sessions, if both exist."""
        if self._registry is not None and self._capabilities is not None:
            from tiller.session.session import EditorClient

            self._registry.set_client(EditorClient(self.front.client_request, self._capabilities))

    async def _shutdown(self) -> None:
        """Let a session going live finish (bounded), then shut the sessions down."""
        self._closed = True
        with anyio.move_on_after(10):
            await self._loads.settled()
        if self._registry is not None:
            await self._registry.shutdown()

    def _attach(self, session: Session) -> None:
        """Send the session's events as ``agent/event`` notifications."""
        from tiller.fronts.tiller.events import DEFAULT_DELTA_WINDOW, EventNotifier

        def window() -> float:
            ms = self.delta_window_ms
            return DEFAULT_DELTA_WINDOW if ms is None else ms / 1000

        link = session.task_link
        session.set_delta_window(window())
        session.subscribe(EventNotifier(session.id, self.front.write_message, window,
                                        link.wire() if link is not None else None))

    async def initialize(self, params: Initialize) -> SerializedResult:
        """Take the client's capabilities; a ``protocolVersion`` other than ours is refused."""
        if not speaks_our_version(params):
            raise InvalidParams(
                f"Invalid params: protocolVersion: this server speaks Tiller protocol version "
                f"{PROTOCOL_VERSION}, not {params.protocol_version}"
            )
        self.accept(params)
        result = SerializedResult(
            json.dumps(initialize_result(self.config), separators=(",", ":")).encode())
        result.then = self.warm
        return result

    def accept(self, params: Initialize) -> None:
        """Take what an ``initialize`` answered (here, or before this front existed:
        ``tiller.fronts.tiller.early``) declared."""
        self._capabilities = params.capabilities
        self._connect_client()
        if params.delta_window_ms is not None:
            self.delta_window_ms = params.delta_window_ms
