"""An MCP server asking the user (``elicitation/create``), and the user as MCP servers reach
them (``McpUser``): the session gives its servers one, which forwards to the client.

``Elicitation`` is one request, in form mode (a message and a flat JSON schema of the fields to
fill) or URL mode (a message and a URL to open), with the server's name and, when known, the
tool call it came during. ``McpUser.elicit`` answers it (accept with the content, decline,
cancel) or raises ``ElicitationUnavailable`` with a message for the server when nobody can be
asked (the client lacks the capability): Tiller then answers the server with that error instead
of pretending the user declined. ``open_url`` shows the user a URL (the browser step of an OAuth
login).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from tiller.frozen import frozen

__all__ = [
    "Elicitation",
    "ElicitationAnswer",
    "ElicitationUnavailable",
    "McpUser",
    "NoUser",
]

ElicitationAction = Literal["accept", "decline", "cancel"]


@frozen
class Elicitation:
    """One ``elicitation/create`` of server ``server``: ``requested_schema`` in form mode,
    ``url`` (and the server's ``elicitation_id``) in URL mode."""

    server: str
    mode: Literal["form", "url"]
    message: str
    requested_schema: dict[str, Any] | None = None
    url: str | None = None
    elicitation_id: str | None = None
    tool_call_id: str | None = None


@frozen
class ElicitationAnswer:
    """The user's answer: ``content`` (the form's values) only with ``accept`` in form mode."""

    action: ElicitationAction
    content: dict[str, Any] | None = None


class ElicitationUnavailable(Exception):
    """Nobody can answer this elicitation; the message says why, for the server."""


class McpUser(Protocol):
    """The user, as a session's MCP servers reach them."""

    async def elicit(self, request: Elicitation) -> ElicitationAnswer:
        """Ask; raises ElicitationUnavailable when the client cannot be asked."""
        ...

    async def open_url(self, server: str, url: str, reason: str) -> bool:
        """Show ``url`` to the user (``reason`` says what for); False when it could only be
        logged. Never raises."""
        ...


class NoUser:
    """The user before a client connected, or of a client that answers nothing."""

    async def elicit(self, request: Elicitation) -> ElicitationAnswer:
        raise ElicitationUnavailable(
            f"Tiller's client cannot show MCP elicitation requests ({request.mode} mode): "
            "the user was not asked")

    async def open_url(self, server: str, url: str, reason: str) -> bool:
        return False
