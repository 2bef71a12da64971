"""An OAuth-protected MCP server on loopback, built from the official SDK's server-side auth
pieces: ``MCPServer`` with ``AuthSettings`` serves the protected resource metadata, the
authorization server metadata, dynamic client registration (RFC 7591), ``/authorize`` with
PKCE, ``/token`` (authorization code and refresh grants) and ``/revoke`` (RFC 7009), and refuses
``/mcp`` without a valid bearer token (401 with ``WWW-Authenticate``). The provider below keeps
everything in memory and approves every authorization at once (the "user" consents): its
``/authorize`` redirects straight back to the client's ``redirect_uri`` with a code.

Test hooks (no auth): ``POST /test/revoke`` revokes every token (an administrator revoking the
grant), ``POST /test/expire`` makes every access token expired (refresh tokens stay good), and
``GET /test/log`` lists what happened (``register``, ``authorize``, ``code``, ``refresh``,
``revoke``) as JSON.

Tool: ``whoami`` answers the client id of the token that called it.

Run: ``python oauth_server.py PORT [--lifetime SECONDS]``; it prints ``listening on PORT`` on
stderr once it accepts connections.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import time

import uvicorn
from mcp.server.auth.handlers.revoke import RevocationRequest
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

# The SDK's revocation endpoint requires a `client_secret` field even from a public client
# (`str | None` without a default; RFC 7009 / 6749 §2.3: a public client sends none): give it
# its evident default, so a public client such as Tiller can revoke.
RevocationRequest.model_fields["client_secret"].default = None
RevocationRequest.model_rebuild(force=True)


class MemoryProvider:
    """An authorization server in memory that approves every request (see the docstring)."""

    def __init__(self, lifetime: int) -> None:
        self.lifetime = lifetime
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.log: list[str] = []

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info
        self.log.append("register")

    async def authorize(self, client: OAuthClientInformationFull,
                        params: AuthorizationParams) -> str:
        assert client.client_id is not None
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code, scopes=params.scopes or [], expires_at=time.time() + 300,
            client_id=client.client_id, code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        self.log.append("authorize")
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull,
                                      authorization_code: str) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        self.access[access] = AccessToken(token=access, client_id=client_id, scopes=scopes,
                                          expires_at=int(time.time()) + self.lifetime,
                                          resource=resource)
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes,
                                             resource=resource)
        return OAuthToken(access_token=access, token_type="Bearer", expires_in=self.lifetime,
                          refresh_token=refresh, scope=" ".join(scopes) or None)

    async def exchange_authorization_code(self, client: OAuthClientInformationFull,
                                          authorization_code: AuthorizationCode) -> OAuthToken:
        del self.codes[authorization_code.code]
        self.log.append("code")
        return self._issue(authorization_code.client_id, authorization_code.scopes,
                           authorization_code.resource)

    async def load_refresh_token(self, client: OAuthClientInformationFull,
                                 refresh_token: str) -> RefreshToken | None:
        token = self.refresh.get(refresh_token)
        return token if token is not None and token.client_id == client.client_id else None

    async def exchange_refresh_token(self, client: OAuthClientInformationFull,
                                     refresh_token: RefreshToken,
                                     scopes: list[str]) -> OAuthToken:
        del self.refresh[refresh_token.token]  # rotated
        self.log.append("refresh")
        return self._issue(refresh_token.client_id, scopes or refresh_token.scopes,
                           refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.access.get(token)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)
        self.log.append("revoke")

    async def exchange_identity_assertion(self, *args: object) -> OAuthToken:
        raise NotImplementedError


def build(port: int, lifetime: int) -> tuple[MCPServer, MemoryProvider]:
    base = f"http://127.0.0.1:{port}"
    provider = MemoryProvider(lifetime)
    server = MCPServer(
        "oauth-test", auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=base, resource_server_url=f"{base}/mcp", validate_token_resource=False,
            client_registration_options=ClientRegistrationOptions(enabled=True),
            revocation_options=RevocationOptions(enabled=True),
        ),
    )

    @server.tool()
    def whoami() -> str:
        """The client id of the token that called this."""
        token = get_access_token()
        return f"client {token.client_id if token else '?'}"

    @server.custom_route("/test/revoke", methods=["POST"])
    async def revoke_all(request: Request) -> Response:
        provider.access.clear()
        provider.refresh.clear()
        provider.log.append("revoke-all")
        return JSONResponse({})

    @server.custom_route("/test/expire", methods=["POST"])
    async def expire_all(request: Request) -> Response:
        for token in provider.access.values():
            token.expires_at = int(time.time()) - 1
        provider.log.append("expire-all")
        return JSONResponse({})

    @server.custom_route("/test/log", methods=["GET"])
    async def show_log(request: Request) -> Response:
        return JSONResponse(provider.log)

    return server, provider


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--lifetime", type=int, default=3600)
    args = parser.parse_args()
    server, _ = build(args.port, args.lifetime)
    app = server.streamable_http_app(host="127.0.0.1")

    class Announcing(uvicorn.Server):
        async def startup(self, sockets: object = None) -> None:
            await super().startup(sockets)  # type: ignore[arg-type]
            sys.stderr.write(f"listening on {args.port}\n")
            sys.stderr.flush()

    Announcing(uvicorn.Config(app, host="127.0.0.1", port=args.port,
                              log_level="warning")).run()


if __name__ == "__main__":
    main()
