"""The model an OpenAI-compatible server serves, asked of its ``GET /models``.

For a user who pointed Tiller at a server (``--base-url``) and named no model: llama.cpp's and
llama-cpp-python's servers serve one model, Ollama the ones pulled, so the session shows (and
asks for) what is really there, not OpenAI's default. Only the standard library is used (in a
worker thread): nothing heavy is imported before the first model call.
"""

from __future__ import annotations

import json
import logging
import urllib.request
from typing import Any

import anyio

__all__ = ["served_model"]

log = logging.getLogger(__name__)


async def served_model(
    base_url: str, api_key: str | None, preferred: str, timeout: float = 5.0
) -> str | None:
    """``preferred`` if the server at ``base_url`` lists it, else the first model it lists;
    None (logged) when it cannot say: no answer within ``timeout`` seconds, an error, a body
    that is not OpenAI's list, no model."""
    url = base_url.rstrip("/") + "/models"

    def fetch() -> Any:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        request = urllib.request.Request(url, headers=headers)
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.load(response)

    try:
        listed = await anyio.to_thread.run_sync(fetch)
    except (OSError, ValueError) as exc:
        log.warning("cannot list the models of %s (%s): keeping %s", base_url, exc, preferred)
        return None
    data = listed.get("data") if isinstance(listed, dict) else None
    ids = [str(item["id"]) for item in data or [] if isinstance(item, dict) and item.get("id")]
    if not ids:
        log.warning("%s lists no models: keeping %s", url, preferred)
        return None
    return preferred if preferred in ids else ids[0]
