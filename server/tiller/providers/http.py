"""The HTTP under the providers: a JSON POST whose answer streams server-sent events (and a
JSON GET), on httpx2, each failure an ``HttpCallError`` (``tiller.errors``); the headers every
call sends (``request_headers``) and what a provider over it needs besides (``HttpProvider``).

Why not the vendors' SDKs (``openai``, ``anthropic``), which carried these calls until issue 33:
Tiller already built the request bodies (``openai_request``, ``anthropic_request``) and read the
events as plain dicts (``openai_stream``, ``openai_responses``, ``anthropic_stream``); what an SDK
added was a client object, one POST, an SSE decoder and a few exception classes, and importing
one was half of a first prompt's cold start and a third of an idle server's memory (README,
"Performance"). httpx2 is the HTTP library both SDKs are built on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, cast

from tiller.errors import HttpCallError, HttpConnectionError, HttpStatusError, HttpTimeoutError
from tiller.providers.base import Provider, display_url, redact, tls_context
from tiller.providers.httplib import load

if TYPE_CHECKING:
    import httpx2

__all__ = ["DRAIN_SECONDS", "FAST_READ", "MAX_ERROR_BODY", "MAX_EVENT", "HttpEndpoint",
           "HttpProvider", "drain", "request_headers", "sse_events", "warm_up"]

MAX_ERROR_BODY = 1 << 20
"""Bytes of an error answer read (its message is in the first few hundred)."""
MAX_EVENT = 16 << 20
"""Bytes one server-sent event may take; a longer one is a malformed stream (ValueError)."""
DRAIN_SECONDS = 1.0
"""How long ``drain`` waits for the end of a stream whose message is complete."""
FAST_READ = 4096
"""Bytes: a read that brings at least this much (some 16 events of a token each) is followed at
once, not a window later: the stream is fast, each wake-up already reads many events, and
waiting would only make the reply later."""

log = logging.getLogger(__name__)


def request_headers(given: Mapping[str, str] | None, defaults: Mapping[str, str]) -> dict[str, str]:
    """What a provider sends with every call: ``defaults`` (a ``user-agent`` naming Tiller
    first) under ``given``, the config's. Names are case-insensitive, so all are lower-cased:
    a credential header of the config's wins over the default one and goes once."""
    from tiller import __version__

    sent = {"user-agent": f"Tiller/{__version__}", **defaults}
    sent.update((name.lower(), value) for name, value in (given or {}).items())
    return sent


class HttpEndpoint:
    """One server: its base URL, the headers every call sends (credentials among them), and an
    HTTP client created on first use (with the process's one TLS context), or an injected one
    that ``aclose`` leaves to its owner."""

    def __init__(self, base_url: str, *, headers: Mapping[str, str], timeout: float,
                 http_client: Any = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = {"accept": "application/json", **headers}
        self._timeout = timeout
        self._injected = http_client
        self._client: httpx2.AsyncClient | None = http_client

    def client(self) -> httpx2.AsyncClient:
        """The HTTP client (created now if need be). For an ``https`` server it verifies with
        the process's TLS context and follows redirects; for a plain ``http`` one (a local
        server) it has no TLS at all and follows none, so it never opens a connection it does
        not verify (building a TLS context loads the system's CA store: ~100 ms)."""
        if self._client is None:
            load()
            import httpx2

            secure = not self.base_url.startswith("http://")
            limits = httpx2.Limits(max_connections=100, max_keepalive_connections=20)
            transport = httpx2.AsyncHTTPTransport(
                verify=tls_context() if secure else False, limits=limits)
            self._client = httpx2.AsyncClient(
                transport=_lighter(transport), follow_redirects=secure, limits=limits,
                timeout=httpx2.Timeout(self._timeout, connect=min(self._timeout, 10.0)),
            )
        return self._client

    async def open_stream(self, path: str, body: Mapping[str, Any]) -> httpx2.Response:
        """POST ``body`` as JSON to ``path``; the answer, its status a success and its body
        still to read (``sse_events``; close it with ``aclose``). An error status raises
        HttpStatusError with the body read; timeouts and broken connections raise theirs."""
        client = self.client()
        request = client.build_request("POST", self.base_url + path, json=body,
                                       headers=self._headers)
        with _mapped():
            response = await client.send(request, stream=True)
            if response.is_success:
                return response
            try:
                raise await _status_error(response)
            finally:
                await response.aclose()
        raise AssertionError("unreachable")

    async def get_json(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        """GET ``path`` with the query ``params`` (a list value repeats its name): the answer's
        JSON; an error status raises HttpStatusError, an answer that is not JSON a ValueError."""
        with _mapped():
            response = await self.client().get(self.base_url + path, headers=self._headers,
                                               params=params)
            if not response.is_success:
                raise await _status_error(response)
            return response.json()

    async def aclose(self) -> None:
        """Close the HTTP client, unless it was injected."""
        if self._client is not None and self._injected is None:
            await self._client.aclose()
        self._client = self._injected


class HttpProvider(Provider):
    """What the providers that call an ``HttpEndpoint`` share: its client created in a worker
    thread ahead of the first call (``prepare``) and closed (``aclose``), its base URL, and the
    credential (``_secret``) kept out of every message. A subclass sets ``_endpoint``,
    ``_secret`` and ``_request_timeout`` in its ``__init__``."""

    _endpoint: HttpEndpoint
    _secret: str | None = None
    _request_timeout: float

    @property
    def base_url(self) -> str:
        """The base URL calls go to."""
        return self._endpoint.base_url

    async def prepare(self) -> None:
        """Import the HTTP library and create the client in a worker thread."""
        import anyio

        try:
            await anyio.to_thread.run_sync(self._endpoint.client, abandon_on_cancel=True)
        except Exception:
            log.debug("preparing %s failed; its stream will say why", self.name, exc_info=True)

    async def aclose(self) -> None:
        await self._endpoint.aclose()

    def _display_url(self) -> str:
        """The base URL for messages, without credentials in it."""
        return display_url(self._endpoint.base_url)

    def _redact(self, text: str) -> str:
        return redact(text, self._secret)


async def sse_events(
    response: httpx2.Response, window: float = 0.0
) -> AsyncIterator[tuple[str, str]]:
    """The server-sent events of ``response`` as (event name, data) pairs (name ``""`` when the
    event has none; data lines joined by newlines); comments and events without data are left out,
    and so is an event the stream ended in the middle of (no blank line after it), as the SSE
    standard says. Lines end in LF or CRLF. A read timeout raises HttpTimeoutError, a broken
    connection HttpConnectionError, an event over ``MAX_EVENT`` bytes ValueError.

    ``window`` (seconds, ``ModelRequest.delta_window``): the connection is read at most once
    per window (``_light_backend``); what the server sends meanwhile waits in the socket and
    comes with the next read. A stream of one small event every few milliseconds then costs one
    wake-up per window, not one per event. The first read, a read after a longer silence and
    the read after one of ``FAST_READ`` bytes or more are not delayed. 0: every chunk as it
    arrives."""
    paced = _paced(response)
    if paced is not None:
        paced.pace(window)
    try:
        async for event in _events(response):
            yield event
    finally:
        if paced is not None:
            paced.pace(0.0)


def _paced(response: httpx2.Response) -> Any:
    """The connection ``response`` is read from, if it can pace its reads (``pace``)."""
    stream = response.extensions.get("network_stream")
    return stream if hasattr(stream, "pace") else None


async def _events(response: httpx2.Response) -> AsyncIterator[tuple[str, str]]:
    buffer = b""
    name, data, size = "", list[str](), 0
    with _mapped():
        async for chunk in response.aiter_bytes():
            buffer += chunk
            if b"\n" not in chunk:
                if len(buffer) + size > MAX_EVENT:
                    raise ValueError(f"a server-sent event over {MAX_EVENT} bytes")
                continue
            *lines, buffer = buffer.split(b"\n")
            for raw in lines:
                line = raw.decode(errors="replace")  # as the SSE standard decodes
                if line.endswith("\r"):
                    line = line[:-1]
                if not line:
                    if data:
                        yield name, "\n".join(data)
                    name, data, size = "", [], 0
                    continue
                field, _, value = line.partition(":")
                if value.startswith(" "):
                    value = value[1:]
                if field == "data":
                    data.append(value)
                    size += len(raw)
                    if size > MAX_EVENT:
                        raise ValueError(f"a server-sent event over {MAX_EVENT} bytes")
                elif field == "event":
                    name = value


async def drain(events: AsyncIterator[Any], response: httpx2.Response) -> None:
    """Read and drop what is left of ``events`` (``response``'s, a stream whose message is
    complete: after ``[DONE]`` or ``response.completed`` the body ends), unpaced, for at most
    ``DRAIN_SECONDS``, so its HTTP/1.1 connection goes back to the pool: a closed one costs the
    next model call a new connection and TLS handshake. Whatever fails here is ignored (the
    message is complete)."""
    import anyio

    paced = _paced(response)
    if paced is not None:
        paced.pace(0.0)
    with anyio.move_on_after(DRAIN_SECONDS):
        try:
            async for _ in events:
                pass
        except Exception:
            pass


def warm_up(base_url: str, path: str, body: Mapping[str, Any],
            read: Callable[[Any], AsyncIterator[Any]], answer: bytes) -> None:
    """What a provider's first call to ``base_url`` needs but the network, done ahead
    (``registry.prepare_ahead``, in a worker thread: it runs its own event loop): the HTTP
    library and the parts it imports on first use, the TLS context unless the server is plain
    ``http``, and ``body`` POSTed to ``path`` of a transport that answers ``answer`` (an event
    stream) itself, read with ``read``."""
    load()
    import h11  # noqa: F401  (httpcore2's HTTP/1.1, imported on the first connection)
    import httpx2

    if not base_url.startswith("http://"):
        tls_context()

    async def call() -> None:
        transport = httpx2.MockTransport(lambda _: httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=answer))
        async with httpx2.AsyncClient(transport=transport) as client:
            endpoint = HttpEndpoint("http://warm-up", headers={}, timeout=5, http_client=client)
            response = await endpoint.open_stream(path, body)
            async for _ in read(response):
                pass
            await response.aclose()

    asyncio.run(call())


class _mapped:
    """Turns httpx2's timeouts and transport errors raised inside it into ours."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> Literal[False]:
        if exc is None or isinstance(exc, HttpCallError):
            return False
        import httpx2

        if isinstance(exc, httpx2.TimeoutException):
            raise HttpTimeoutError(str(exc) or type(exc).__name__) from exc
        if isinstance(exc, (httpx2.TransportError, OSError)):
            raise HttpConnectionError(str(exc) or type(exc).__name__) from exc
        return False


async def _status_error(response: httpx2.Response) -> HttpStatusError:
    """The error status of ``response`` with its body (JSON, else text; at most
    ``MAX_ERROR_BODY`` bytes)."""
    raw = b""
    try:
        async for chunk in response.aiter_bytes():
            raw += chunk
            if len(raw) >= MAX_ERROR_BODY:
                break
    except Exception:
        pass  # what arrived is what there is to say
    text = raw[:MAX_ERROR_BODY].decode(errors="replace")
    body: Any = text or None
    if text:
        from tiller import jsontext

        try:
            body = jsontext.loads(text)
        except ValueError:
            pass
    headers = {name.lower(): value for name, value in response.headers.items()}
    return HttpStatusError(response.status_code, body, headers)


def _lighter(transport: Any) -> Any:
    """``transport`` reading its connections through ``_LightBackend``, when its connection pool
    is the one this code knows (httpx2 2.x's ``AsyncHTTPTransport._pool``); else as it is."""
    import httpcore2

    pool = getattr(transport, "_pool", None)
    if isinstance(pool, httpcore2.AsyncConnectionPool) and hasattr(pool, "_network_backend"):
        pool._network_backend = _light_backend()
    return transport


def _light_backend() -> Any:
    """httpcore2's anyio backend whose streams read without a cancel scope and a generator
    context manager per chunk (a quarter of the server's CPU per streamed token at 100 tokens/s
    went there): the read timeout is an ``asyncio.timeout``, the errors mapped by hand. Its
    streams also pace their reads (``pace``, called by ``sse_events``): at the socket, so
    the events of one read, however many HTTP chunks they are, come without waiting."""
    import anyio
    import httpcore2
    from httpcore2._backends.anyio import AnyIOBackend, AnyIOStream

    class LightStream(AnyIOStream):
        read_window = 0.0
        _due = 0.0

        def pace(self, window: float) -> None:
            """From now on (``sse_events``: for a response's body), read no sooner than
            ``window`` seconds after the last read that returned data, unless that one brought
            ``FAST_READ`` bytes or filled ``max_bytes`` (the stream is fast); the next read is
            not delayed. 0: no pacing."""
            self.read_window, self._due = window, 0.0

        async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            window = self.read_window
            if window > 0 and (wait := self._due - asyncio.get_running_loop().time()) > 0:
                await asyncio.sleep(wait)
            try:
                if timeout is None:
                    data = await self._stream.receive(max_bytes=max_bytes)
                else:
                    async with asyncio.timeout(timeout):
                        data = await self._stream.receive(max_bytes=max_bytes)
            except anyio.EndOfStream:
                return b""
            except TimeoutError as exc:
                raise httpcore2.ReadTimeout(exc) from exc
            except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                raise httpcore2.ReadError(exc) from exc
            if window > 0:
                fast = len(data) >= min(max_bytes, FAST_READ)
                self._due = 0.0 if fast else asyncio.get_running_loop().time() + window
            return data

        async def start_tls(self, *args: Any, **kwargs: Any) -> Any:
            secured = cast(AnyIOStream, await super().start_tls(*args, **kwargs))
            return LightStream(secured._stream)

    class LightBackend(AnyIOBackend):
        async def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
            plain = cast(AnyIOStream, await super().connect_tcp(*args, **kwargs))
            return LightStream(plain._stream)

    return LightBackend()
