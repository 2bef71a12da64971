"""The user as a session's MCP servers reach them (``ClientUser``, a tiller.mcp.elicit
``McpUser``): through the client's ``client/elicit`` and ``client/openUrl``, as far as it
declared it answers them in ``initialize``.

An elicitation in a mode the client did not declare is refused to the server with a message
saying so (nobody was asked); no answer within the timeout is ``cancel`` (the user did not
choose); an error answer is refused with the client's reason. A URL to open goes through
``client/openUrl``, else a URL-mode ``client/elicit`` (accepted: shown), else nowhere (the
caller logs it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tiller.gate.editor import ClientRequest, describe_error
from tiller.mcp.elicit import Elicitation, ElicitationAnswer, ElicitationUnavailable

__all__ = ["ClientUser"]

log = logging.getLogger(__name__)

ACTIONS = ("accept", "decline", "cancel")


@dataclass
class ClientUser:
    """``McpUser`` over ``request`` for session ``session_id``: ``modes`` the elicitation modes
    the client declared, ``opens_urls`` its ``openUrl``; ``asking(tool_call_id)`` is called
    while a question about a tool call waits."""

    request: ClientRequest
    session_id: str
    modes: frozenset[str] = frozenset()
    opens_urls: bool = False
    timeout: float = 300.0
    asking: Callable[[str], None] = field(default=lambda _call_id: None)

    async def elicit(self, request: Elicitation) -> ElicitationAnswer:
        if request.mode not in self.modes:
            declared = " or ".join(sorted(self.modes)) or "none"
            raise ElicitationUnavailable(
                f"Tiller's client cannot show MCP elicitation requests in {request.mode} mode "
                f"(it declared: {declared}): the user was not asked")
        params: dict[str, Any] = {"sessionId": self.session_id, "server": request.server,
                                  "mode": request.mode, "message": request.message}
        if request.tool_call_id is not None:
            params["toolCallId"] = request.tool_call_id
            self.asking(request.tool_call_id)
        if request.mode == "form":
            params["requestedSchema"] = request.requested_schema or {"type": "object",
                                                                     "properties": {}}
        else:
            params["url"] = request.url or ""
            if request.elicitation_id is not None:
                params["elicitationId"] = request.elicitation_id
        try:
            result = await self.request("client/elicit", params, self.timeout)
        except TimeoutError:
            return ElicitationAnswer("cancel")
        except Exception as exc:
            raise ElicitationUnavailable(
                f"the client failed to ask the user: {describe_error(exc)}") from exc
        action = result.get("action") if isinstance(result, dict) else None
        if action not in ACTIONS:
            raise ElicitationUnavailable(f"the client answered with an unknown action {action!r}")
        content = result.get("content")
        if action != "accept" or request.mode != "form":
            return ElicitationAnswer(action)
        if not isinstance(content, dict):
            raise ElicitationUnavailable("the client accepted the form without its content")
        return ElicitationAnswer("accept", content)

    async def open_url(self, server: str, url: str, reason: str) -> bool:
        if self.opens_urls:
            params = {"sessionId": self.session_id, "server": server, "url": url,
                      "reason": reason}
            try:
                await self.request("client/openUrl", params, 30.0)
                return True
            except Exception as exc:
                log.warning("client/openUrl for MCP server %s failed: %s", server,
                            describe_error(exc))
                return False
        if "url" in self.modes:
            try:
                answer = await self.elicit(Elicitation(server=server, mode="url", message=reason,
                                                       url=url))
            except ElicitationUnavailable as exc:
                log.warning("showing the sign-in URL of MCP server %s failed: %s", server, exc)
                return False
            return answer.action == "accept"
        return False
