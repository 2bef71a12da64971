"""How the OpenAI provider reads failures: an HTTP error's details, whether it is a missing
route (no Responses API) or a lasting refusal, whether a retry may pass, and the message a user
reads (``openai: <status> <phrase>: <the server's message> (<what to do>)``).

The failures are ``tiller.errors``'s HttpCallError subtree, as ``tiller.providers.http`` raises
them.
"""

from __future__ import annotations

import re
from http import HTTPStatus

from tiller.errors import HttpCallError, HttpStatusError
from tiller.providers.base import RETRY_HINT, retry_after_seconds

__all__ = ["SERVER_REFUSALS", "is_transient", "retry_after", "route_missing", "status_details",
           "status_error_message", "supported_values"]

_ERROR_HINTS = {
    401: "check OPENAI_API_KEY",
    403: "check OPENAI_API_KEY and the model's access rights",
    404: "check the model name and the base URL",
    408: RETRY_HINT,
    409: RETRY_HINT,
    429: f"rate limited; {RETRY_HINT}",
}
SERVER_REFUSALS = {
    "Automatic streaming tool choice is not supported": (
        "llama-cpp-python's server cannot stream tool calls; use a server that does, such as "
        "Ollama or llama.cpp's llama-server (started with --jinja)"
    ),
    "tools param requires --jinja flag": "llama.cpp's llama-server needs --jinja for tools",
    "Cannot use tools with stream": (
        "this llama.cpp server is too old to stream tool calls: update it (llama-server --jinja)"
    ),
}
"""Refusals of local servers that no retry fixes (a 500 each): the text, and what to do."""


def status_details(exc: Exception) -> tuple[int | None, str, str | None]:
    """An HTTP error's status, its message and its ``param`` (None, "", None otherwise)."""
    if not isinstance(exc, HttpStatusError):
        return None, "", None
    body = exc.body
    error = body.get("error", body) if isinstance(body, dict) else None
    fallback = f"Error code: {exc.status}"
    if isinstance(error, dict):
        message = error.get("message")
        param = error.get("param")
        return (exc.status, message if isinstance(message, str) else fallback,
                param if isinstance(param, str) else None)
    text = body.strip() if isinstance(body, str) else fallback
    return exc.status, text, None


def route_missing(exc: Exception) -> bool:
    """A 405, or a 404 that is not about the model: the server has no such route."""
    status, message, param = status_details(exc)
    if status == 405:
        return True
    return status == 404 and param != "model" and "model" not in message.lower()


_SUPPORTED = re.compile(r"Supported values are:(.*)", re.IGNORECASE | re.DOTALL)


def supported_values(message: str) -> tuple[str, ...]:
    """The values an ``unsupported_value`` error lists (``Supported values are: 'low', ...``)."""
    found = _SUPPORTED.search(message)
    return tuple(re.findall(r"'([a-z]+)'", found.group(1))) if found else ()


def is_transient(exc: Exception) -> bool:
    """Whether retrying the same request may succeed: rate limits, server errors, timeouts,
    broken connections and errors reported mid-stream; not a server's lasting refusal
    (``SERVER_REFUSALS``), nor malformed chunks."""
    if isinstance(exc, HttpStatusError):
        if any(text in status_details(exc)[1] for text in SERVER_REFUSALS):
            return False
        return exc.status in (408, 409, 429) or exc.status >= 500
    return isinstance(exc, HttpCallError)  # timeouts, connection errors, mid-stream errors


def retry_after(exc: Exception) -> float | None:
    """Seconds from the failed response's ``retry-after-ms`` or ``retry-after`` header."""
    return retry_after_seconds(exc.headers if isinstance(exc, HttpStatusError) else None)


def status_error_message(
    status: int, body: object, fallback: str, hint: str | None = None
) -> str:
    """``openai: 401 Unauthorized: <provider's message> (<hint>)`` from an HTTP error; ``hint``
    replaces the status's own."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "HTTP error"
    detail = fallback
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            detail = inner["message"]
        elif isinstance(inner, str):
            detail = inner
        elif isinstance(body.get("detail"), str):  # FastAPI's servers: {"detail": "Not Found"}
            detail = body["detail"]
    elif isinstance(body, str) and body.strip():
        detail = body.strip()[:500]
    refusal = next((fix for text, fix in SERVER_REFUSALS.items() if text in detail), None)
    hint = hint or refusal or _ERROR_HINTS.get(status) or (
        f"provider failure; {RETRY_HINT}" if status >= 500 else "")
    message = f"openai: {status} {phrase}: {detail}"
    return f"{message} ({hint})" if hint else message
