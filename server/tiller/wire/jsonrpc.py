"""The JSON-RPC plumbing both fronts share: typed method registration, server-to-client
requests, cancellation of pending requests, and serving stdio until the end.

A front (``tiller.fronts.tiller.front`` for protocol.md, ``tiller.fronts.acp`` for ACP) owns a
``Front`` and registers one handler per wire method. ``register`` validates params into a model
(failure: -32602 naming the field), turns ``RequestError``s into their documented codes, and never
leaks a traceback: unexpected failures are logged and answered -32603 with a one-line message.
Results go out as the JSON pydantic serializes (``SerializedResult``). ``tiller.wire.endpoint``
dispatches; the stdio framing and message validation live in ``stdio`` and ``transport``.

Nothing here imports pydantic: ``register_lazy`` names methods whose params models and handlers
are imported on their first call, so a front can answer ``initialize`` before any model exists.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import json
import logging
import resource
import signal
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio

from tiller.config import ServerConfig
from tiller.errors import (
    OUT_OF_DESCRIPTORS,
    ConfigError,
    InternalError,
    InvalidParams,
    JsonRpcError,
    RequestError,
    ResourceLimitError,
)
from tiller.procs import kill_descendants
from tiller.wire.endpoint import Endpoint, RawHandler, SerializedResult, current_id
from tiller.wire.framing import Framing
from tiller.wire.stdio import Stdio
from tiller.wire.transport import CancelFn, serve_stdio

if TYPE_CHECKING:
    from tiller.types import WireModel

__all__ = ["Front", "Handler", "Method", "ParamsModel", "Switch", "serve"]

log = logging.getLogger(__name__)

P = TypeVar("P")
P_co = TypeVar("P_co", covariant=True)


def _out_of_descriptors(exc: OSError) -> ResourceLimitError:
    """The clear error for a request that found no file descriptor free."""
    if exc.errno == errno.ENFILE:
        return ResourceLimitError("the system's table of open files is full (ENFILE): close "
                                  "programs or raise fs.file-max, then retry")
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return ResourceLimitError(
        f"the server has reached its limit of {soft} open files (EMFILE): close sessions it "
        "no longer needs (session/close) or MCP servers, or start it with a higher limit "
        "(ulimit -n), then retry")


class ParamsModel(Protocol[P_co]):
    """What validates a method's params: a pydantic model class, or anything with its
    ``model_validate`` (raising pydantic's ValidationError, or an ``InvalidParams``)."""

    def model_validate(self, obj: Any, /) -> P_co: ...


Handler = Callable[[P], Awaitable["WireModel | dict[str, Any] | SerializedResult | None"]]
"""A wire method: validated params in, a result model, a JSON-ready dict, the result already
serialized, or None (``null``) out."""
Method = tuple[ParamsModel[Any], Handler[Any]]
"""A method as ``register_lazy``'s loader hands it over: (params model, handler)."""

Switch = Callable[[dict[str, Any]], "Front | None"]
"""Given the first valid message, another front to serve the whole connection, or None."""


def _invalid_params(error: ValueError) -> InvalidParams:
    """-32602 naming each field pydantic's ValidationError (a ValueError) lists."""
    errors = getattr(error, "errors", None)
    items = errors() if callable(errors) else [{"loc": (), "msg": str(error)}]
    problems = []
    for item in items:
        where = ".".join(str(part) for part in item["loc"]) or "params"
        problems.append(f"{where}: {item['msg']}")
    return InvalidParams("Invalid params: " + "; ".join(problems))


class Front:
    """One protocol's side of a stdio connection. ``shutdown`` is awaited when serving ends;
    ``cancel_notice`` names the notification (and its id member) that tells the client we
    stopped waiting for one of our requests; ``translate`` maps a domain error to the one this
    protocol answers with (its code)."""

    def __init__(
        self,
        shutdown: Callable[[], Awaitable[None]],
        cancel_notice: tuple[str, str] = ("$/cancelRequest", "id"),
        translate: Callable[[RequestError], RequestError] = lambda error: error,
    ) -> None:
        self.endpoint = Endpoint()
        self.shutdown = shutdown
        self.cancel_notice = cancel_notice
        self.translate = translate
        self._client_ids = itertools.count(1)
        self._cancellers: dict[Any, Callable[[], None]] = {}
        self._cancelled_early: set[Any] = set()

    def notify(self, method: str, params: Any) -> None:
        self.endpoint.notify(method, params)

    def write_message(self, body: bytes) -> None:
        """Send one already-serialized JSON-RPC message (framed by the transport's writer)."""
        write = self.endpoint.write
        if write is not None:
            write(body)

    def serves(self, name: str) -> bool:
        """Whether a handler is registered for ``name``."""
        return name in self.endpoint.methods

    def add(self, name: str, handler: RawHandler) -> None:
        """Serve ``name`` with ``handler`` as is: raw params in, no validation."""
        self.endpoint.methods[name] = handler

    def register(self, name: str, params_model: ParamsModel[P], fn: Handler[P]) -> None:
        """Serve JSON-RPC method ``name`` with ``fn``, its params validated as ``params_model``."""

        async def handle(raw: Any) -> Any:
            return await self._call(name, params_model, fn, raw)

        self.add(name, handle)

    def register_lazy(
        self, names: Iterable[str], load: Callable[[], Awaitable[Mapping[str, Method]]]
    ) -> None:
        """Serve each of ``names`` with what ``load()`` maps it to; ``load`` runs once, on the
        first call of any of them (it imports the models and handlers); calls that come while
        it runs wait for it."""
        loaded: list[Mapping[str, Method]] = []
        loading = asyncio.Lock()

        def method(name: str) -> Any:
            async def handle(raw: Any) -> Any:
                if not loaded:
                    async with loading:
                        if not loaded:
                            loaded.append(await load())
                params_model, fn = loaded[0][name]
                return await self._call(name, params_model, fn, raw)

            return handle

        for name in names:
            self.add(name, method(name))

    async def _call(self, name: str, params_model: ParamsModel[P], fn: Handler[P],
                    raw: Any) -> Any:
        """Validate ``raw`` params, await ``fn``, and shape its result or error for the
        endpoint: a ``SerializedResult``, None, or a ``RequestError``."""
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise InvalidParams("Invalid params: params must be an object")
        try:
            params = params_model.model_validate(raw)
        except ValueError as exc:  # pydantic's ValidationError
            raise _invalid_params(exc) from None
        try:
            try:
                result = await fn(params)
            except OSError as exc:
                if exc.errno not in OUT_OF_DESCRIPTORS:
                    raise
                log.warning("%s failed: %s", name, exc)
                raise _out_of_descriptors(exc) from None
        except JsonRpcError:
            raise
        except RequestError as exc:
            raise self.translate(exc) from None
        except ConfigError as exc:  # a malformed entry in the params (mcpServers)
            raise InvalidParams(f"Invalid params: {exc}") from None
        except Exception as exc:
            log.exception("%s failed", name)
            raise InternalError(
                f"internal error in {name}: {type(exc).__name__}: {exc}"
            ) from None
        if result is None or isinstance(result, SerializedResult):
            return result
        if isinstance(result, dict):
            return SerializedResult(json.dumps(result, separators=(",", ":")).encode())
        return SerializedResult(result.model_dump_json(by_alias=True, exclude_none=True).encode())

    async def client_request(self, method: str, params: dict[str, Any], timeout: float) -> Any:
        """Send a server-to-client request and await the answer. An error answer raises its
        ``ClientAnswerError``; no answer within ``timeout`` raises TimeoutError; a connection
        that ends first, ``ConnectionError``. On timeout or cancellation the client is told
        with the ``cancel_notice`` notification."""
        msg_id = f"tiller-{next(self._client_ids)}"  # never one of the client's own ids
        future = self.endpoint.request(method, params, msg_id)
        try:
            with anyio.fail_after(timeout):
                return await future
        finally:
            if not future.done() or future.cancelled():  # we stopped waiting: tell the client
                self.endpoint.forget(msg_id)
                method, key = self.cancel_notice
                self.notify(method, {key: msg_id})

    @contextmanager
    def cancellable(self, on_cancel: Callable[[], None]) -> Iterator[None]:
        """While the block runs, a cancellation of the request being handled calls
        ``on_cancel``. Enter it before the handler's first ``await``."""
        msg_id = current_id()
        self._cancellers[msg_id] = on_cancel
        if msg_id in self._cancelled_early:  # cancelled before its handler began
            self._cancelled_early.discard(msg_id)
            on_cancel()
        try:
            yield
        finally:
            self._cancellers.pop(msg_id, None)

    def cancel_request(self, msg_id: Any) -> None:
        """The client cancels its request ``msg_id``: act on it if it is cancellable. A request
        whose handler has not begun yet (both arrived in one read) is remembered until it does
        or until it is answered."""
        on_cancel = self._cancellers.get(msg_id)
        if on_cancel is not None:
            on_cancel()
            return
        pending = self.endpoint.running.get(msg_id)
        if pending is not None and not pending.done():
            self._cancelled_early.add(msg_id)
            pending.add_done_callback(lambda _: self._cancelled_early.discard(msg_id))


async def serve(
    front: Front, config: ServerConfig, stdio: Stdio | None = None,
    switch: Switch | None = None, first: Any = None,
) -> None:
    """Serve ``front`` on ``stdio`` (the process's stdin/stdout by default) until end of input
    (or SIGTERM/SIGHUP), then shut it down (aborting runs), kill every process the server
    started that still runs, and return. ``switch`` may hand the connection to another front on
    its first message; that one is shut down too. ``first``: a message already read off
    ``stdio``, served first."""
    if stdio is None:
        stdio = await Stdio.open(None if config.framing == "auto" else Framing(config.framing))
    switched: list[Front] = []

    def select(first: dict[str, Any]) -> tuple[Endpoint, CancelFn] | None:
        other = switch(first) if switch is not None else None
        if other is None:
            return None
        switched.append(other)
        return other.endpoint, other.cancel_request

    try:
        async with anyio.create_task_group() as group:

            async def stop_on_signal() -> None:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
                    async for _ in signals:
                        group.cancel_scope.cancel()
                        return

            group.start_soon(stop_on_signal)
            await serve_stdio(front.endpoint, front.cancel_request, stdio,
                              select=select if switch is not None else None, first=first)
            group.cancel_scope.cancel()
    finally:
        for ended in (front, *switched):
            ended.endpoint.close()
        await front.shutdown()
        for other in switched:
            await other.shutdown()
        await kill_descendants()  # what the runs' aborts did not end (tiller.procs)
