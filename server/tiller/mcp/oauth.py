"""OAuth for HTTP and SSE MCP servers, through the ``mcp`` SDK's ``OAuthClientProvider``
(discovery of the protected resource's and the authorization server's metadata, dynamic client
registration or a client ID metadata document, PKCE, the token exchange, refresh on expiry).

What Tiller adds around it:

* ``TokenFile``: the SDK's ``TokenStorage`` as one JSON file per server URL in
  ``<data folder>/mcp-oauth/`` (the folder 0700, the file 0600, replaced atomically): the
  tokens, when the access token expires (an absolute time, so a restart knows an old token is
  stale and refreshes it before use), the client registration, and the authorization server's
  revocation endpoint once known.
* ``CallbackListener``: the loopback redirect target (``http://127.0.0.1:PORT/callback``), a
  one-shot HTTP listener that takes the authorization server's redirect and answers the browser
  with a short page. The port of a registration is kept (the authorization server compares
  redirect URIs exactly): ``redirect_port`` reads it back.
* ``provider``: the SDK's provider for one server, its expiry primed from the file.
* ``revoke``: RFC 7009 revocation of stored tokens, best effort (``mcp/logout``).

How the browser step is reached is the caller's (tiller.mcp.client): the provider's
``on_redirect(url)`` and ``on_callback()``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc

if TYPE_CHECKING:  # the SDK is imported when a server starts
    import httpx2
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthToken

    from tiller.mcp.config import McpServerConfig

__all__ = ["CallbackListener", "LoginRefused", "TokenFile", "provider", "revoke"]

log = logging.getLogger(__name__)

CALLBACK_PATH = "/callback"
_PAGE = ("<!doctype html><meta charset=utf-8><title>Tiller</title>"
         "<body style='font-family:sans-serif'><p>{text}</p><p>You can close this tab.</p>")
_MAX_REQUEST = 16 * 1024
"""Bytes of a browser's request the callback listener reads (its request line and headers)."""


class LoginRefused(Exception):
    """The authorization server redirected back with an error (the user refused, or the
    request was invalid); the message is its ``error`` and ``error_description``."""


class TokenFile:
    """The OAuth state of one server URL, kept in ``directory`` (see the module docstring).
    Reads never raise: a missing or unreadable file is an empty record (logged)."""

    def __init__(self, directory: Path, server_url: str) -> None:
        self.directory = directory
        self.server_url = server_url
        digest = hashlib.sha256(server_url.encode()).hexdigest()[:32]
        self.path = directory / f"{digest}.json"

    # ------------------------------------------------------------------ the record

    def load(self) -> dict[str, Any]:
        try:
            record = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("OAuth tokens of %s: %s is unreadable (%s)", self.server_url,
                        self.path, exc)
            return {}
        if not isinstance(record, dict) or record.get("serverUrl") != self.server_url:
            return {}
        return record

    def save(self, record: dict[str, Any]) -> None:
        """Write ``record`` (0600, atomically: a crash leaves the old file or the new one)."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.directory, 0o700)
        record = {**record, "serverUrl": self.server_url}
        fd, temporary = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                json.dump(record, file, indent=1)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    def update(self, **changes: Any) -> None:
        """Change some fields of the record (None removes one)."""
        record = self.load()
        for key, value in changes.items():
            if value is None:
                record.pop(key, None)
            else:
                record[key] = value
        self.save(record)

    def expires_at(self) -> float | None:
        """When the stored access token expires (seconds since the epoch); None: unknown."""
        value = self.load().get("expiresAt")
        return float(value) if isinstance(value, (int, float)) else None

    def has_tokens(self) -> bool:
        return isinstance(self.load().get("tokens"), dict)

    def redirect_port(self) -> int | None:
        """The loopback port of the stored registration's redirect URI, if any."""
        client = self.load().get("clientInfo")
        uris = client.get("redirect_uris") if isinstance(client, dict) else None
        if not isinstance(uris, list) or not uris:
            return None
        return urlsplit(str(uris[0])).port

    def forget_tokens(self) -> None:
        self.update(tokens=None, expiresAt=None)

    def forget_client(self) -> None:
        self.update(clientInfo=None)

    # ------------------------------------------------------------------ the SDK's TokenStorage

    async def get_tokens(self) -> OAuthToken | None:
        from mcp.shared.auth import OAuthToken

        tokens = (await anyio.to_thread.run_sync(self.load)).get("tokens")
        return OAuthToken.model_validate(tokens) if isinstance(tokens, dict) else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        dumped = tokens.model_dump(mode="json", exclude_none=True)
        await anyio.to_thread.run_sync(lambda: self.update(tokens=dumped, expiresAt=expires))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        from mcp.shared.auth import OAuthClientInformationFull

        client = (await anyio.to_thread.run_sync(self.load)).get("clientInfo")
        return OAuthClientInformationFull.model_validate(client) if isinstance(client, dict) \
            else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        dumped = client_info.model_dump(mode="json", exclude_none=True)
        await anyio.to_thread.run_sync(lambda: self.update(clientInfo=dumped))


def free_port() -> int:
    """A loopback port nothing listens on now (for a registration made before a login)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def redirect_uri(port: int) -> str:
    return f"http://127.0.0.1:{port}{CALLBACK_PATH}"


class CallbackListener:
    """The authorization server's redirect target on 127.0.0.1 (see the module docstring).
    ``open`` binds it; ``wait`` returns the first redirect's code and state (other requests, a
    browser's ``/favicon.ico``, get a 404); ``close`` ends it."""

    def __init__(self, listener: anyio.abc.SocketListener, port: int) -> None:
        self._listener = listener
        self.port = port
        self.redirect_uri = redirect_uri(port)

    @classmethod
    async def open(cls, port: int | None) -> CallbackListener:
        """Listen on ``port`` (0 or None: a free one); OSError when it is taken."""
        listeners = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port or 0)
        [listener] = listeners.listeners  # one address: 127.0.0.1
        assert isinstance(listener, anyio.abc.SocketListener)
        return cls(listener, int(listener.extra(anyio.abc.SocketAttribute.local_port)))

    async def close(self) -> None:
        await self._listener.aclose()

    async def wait(self) -> AuthorizationCodeResult:
        """The redirect's ``code``, ``state`` and ``iss``; LoginRefused for an error redirect."""
        from mcp.shared.auth import AuthorizationCodeResult

        while True:
            stream = await self._listener.accept()
            async with stream:
                query = await _read_callback(stream)
                if query is None:
                    await _answer(stream, 404, "Not the authorization callback.")
                    continue
                if "error" in query:
                    why = query["error"] + (f": {query['error_description']}"
                                            if query.get("error_description") else "")
                    await _answer(stream, 400, f"Authorization failed: {why}")
                    raise LoginRefused(f"the authorization server said {why}")
                if not query.get("code"):
                    await _answer(stream, 400, "The redirect carried no authorization code.")
                    continue
                await _answer(stream, 200, "Tiller is signed in.")
                return AuthorizationCodeResult(code=query["code"], state=query.get("state"),
                                               iss=query.get("iss"))


async def _read_callback(stream: anyio.abc.SocketStream) -> dict[str, str] | None:
    """The query of a ``GET /callback`` request on ``stream``; None for any other request."""
    data = b""
    with anyio.move_on_after(10):
        while b"\r\n\r\n" not in data and len(data) < _MAX_REQUEST:
            try:
                chunk = await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                break
            data += chunk
    line = data.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    if len(parts) != 3 or parts[0] != "GET":
        return None
    target = urlsplit(parts[1])
    if target.path != CALLBACK_PATH:
        return None
    return {key: values[0] for key, values in parse_qs(target.query).items()}


async def _answer(stream: anyio.abc.SocketStream, status: int, text: str) -> None:
    body = _PAGE.format(text=text).encode()
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
    head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await stream.send(head + body)


def provider(
    config: McpServerConfig, store: TokenFile, *, port: int,
    on_redirect: Callable[[str], Awaitable[None]],
    on_callback: Callable[[], Awaitable[AuthorizationCodeResult]],
    on_error: Callable[[BaseException], None],
) -> OAuthClientProvider:
    """The SDK's OAuth provider for ``config``'s server, its tokens in ``store``, redirecting to
    the loopback ``port``; the access token's expiry is primed from the file, so a stale
    token is refreshed before it is sent. A failure of the flow is handed to ``on_error``
    first (the transport would only log it: the request it was for would never be
    answered)."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata

    class Provider(OAuthClientProvider):
        async def async_auth_flow(
            self, request: httpx2.Request
        ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
            flow = super().async_auth_flow(request)
            try:
                outgoing = await flow.__anext__()
                while True:
                    response = yield outgoing
                    outgoing = await flow.asend(response)
            except StopAsyncIteration:
                return
            except Exception as exc:
                on_error(exc)
                raise
            finally:
                await flow.aclose()

    assert config.url is not None
    metadata = OAuthClientMetadata(
        client_name="Tiller", redirect_uris=[redirect_uri(port)],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"], response_types=["code"],
        token_endpoint_auth_method="none",
    )
    built = Provider(
        server_url=config.url, client_metadata=metadata, storage=store,
        redirect_handler=on_redirect, callback_handler=on_callback,
        client_metadata_url=config.oauth_client_metadata_url,
    )
    built.context.token_expiry_time = store.expires_at()
    return built


async def revoke(store: TokenFile, endpoint: str | None) -> None:
    """Revoke the stored tokens at ``endpoint`` (RFC 7009: the refresh token, then the access
    token), then forget them. Never raises: a failed revocation is logged, the tokens are
    forgotten anyway."""
    record = await anyio.to_thread.run_sync(store.load)
    tokens: dict[str, Any] = record["tokens"] if isinstance(record.get("tokens"), dict) else {}
    client: dict[str, Any] = (record["clientInfo"] if isinstance(record.get("clientInfo"), dict)
                              else {})
    if endpoint and tokens:
        import httpx2

        client_id, secret = client.get("client_id"), client.get("client_secret")
        basic = (isinstance(client_id, str) and isinstance(secret, str)
                 and client.get("token_endpoint_auth_method") == "client_secret_basic")
        try:
            async with httpx2.AsyncClient(timeout=10) as http:
                for hint in ("refresh_token", "access_token"):
                    token = tokens.get(hint)
                    if not isinstance(token, str):
                        continue
                    form = {"token": token, "token_type_hint": hint}
                    if isinstance(client_id, str):
                        form["client_id"] = client_id
                    if isinstance(secret, str) and not basic:  # a confidential client's
                        form["client_secret"] = secret
                    response = await http.post(
                        endpoint, data=form,
                        auth=(client_id, secret) if basic else None)  # type: ignore[arg-type]
                    if response.status_code != 200:
                        log.info("revoking the %s of %s: HTTP %s", hint, store.server_url,
                                 response.status_code)
        except Exception as exc:
            log.warning("revoking the tokens of %s failed: %s", store.server_url, exc)
    await anyio.to_thread.run_sync(store.forget_tokens)
