"""The providers' own model lists: ``GET /v1/models`` over ``tiller.providers.http``.

``fetch_models`` asks one provider and returns what it says as ``ModelInfo`` entries with
``source="provider"``. Anthropic's ``ModelInfo`` carries the context window, the output limit,
the thinking and effort capabilities, the model line and the lifecycle (active, deprecated and
retired models are asked for, so that a retired model can be named as such); OpenAI-compatible
servers give ids only (from OpenAI's own API, the ids of models that cannot chat, such as
embeddings and speech, are left out). A field the provider did not give stays None; in
particular ``thinking_levels`` None means "capabilities not given". Failures raise (the caller,
``tiller.providers.directory``, records them). What they need is imported here, on first use.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from tiller.modes import THINKING_LEVELS, ThinkingLevel
from tiller.providers.base import ModelInfo

if TYPE_CHECKING:
    from tiller.providers.registry import ProviderSettings

__all__ = ["anthropic_model", "fetch_models"]

_NOT_CHAT = ("embedding", "tts", "whisper", "dall-e", "davinci", "babbage", "moderation",
             "image", "realtime", "audio", "transcribe", "sora", "search")
"""Words in the ids of OpenAI's models that do not chat (filtered from api.openai.com only)."""


async def fetch_models(
    settings: ProviderSettings, *, base_url: str | None, api_key: str, timeout: float,
    http_client: Any = None,
) -> list[ModelInfo]:
    """The models ``settings``'s provider lists, newest first as it sends them."""
    from tiller.providers.http import HttpEndpoint

    if settings.type == "anthropic":
        from tiller.providers.anthropic import DEFAULT_BASE_URL as ANTHROPIC_URL
        from tiller.providers.anthropic import api_headers as anthropic_headers

        endpoint = HttpEndpoint(base_url or ANTHROPIC_URL, timeout=timeout,
                                headers=anthropic_headers(settings.headers, api_key),
                                http_client=http_client)
        try:
            return [anthropic_model(settings.name, item)
                    async for item in _anthropic_pages(endpoint)]
        finally:
            await endpoint.aclose()
    from tiller.providers.openai import DEFAULT_BASE_URL, api_headers

    endpoint = HttpEndpoint(base_url or DEFAULT_BASE_URL, timeout=timeout,
                            headers=api_headers(settings.headers, api_key),
                            http_client=http_client)
    try:
        listed = await endpoint.get_json("/models")
    finally:
        await endpoint.aclose()
    data = listed.get("data") if isinstance(listed, dict) else None
    if not isinstance(data, list):
        raise ValueError("the models list is not shaped like OpenAI's ({\"data\": [...]})")
    ids = [(str(item["id"]), item.get("created")) for item in data
           if isinstance(item, dict) and "id" in item]
    vendor = base_url is None
    return [
        ModelInfo(settings.name, model_id, reasoning=True, source="provider",
                  created=_date_of_epoch(created))
        for model_id, created in ids
        if not (vendor and any(word in model_id for word in _NOT_CHAT))
    ]


async def _anthropic_pages(endpoint: Any) -> AsyncIterator[Mapping[str, Any]]:
    """Every model Anthropic's ``GET /v1/models`` lists, active, deprecated and retired, page by
    page (``after_id``)."""
    query: dict[str, Any] = {"limit": 1000, "lifecycle[]": ["active", "deprecated", "retired"]}
    while True:
        page = await endpoint.get_json("/v1/models", query)
        data = page.get("data") if isinstance(page, dict) else None
        if not isinstance(data, list):
            raise ValueError("the models list is not shaped like Anthropic's ({\"data\": [...]})")
        for item in data:
            if isinstance(item, dict) and "id" in item:
                yield item
        if not (page.get("has_more") and page.get("last_id")):
            return
        query["after_id"] = page["last_id"]


def anthropic_model(provider: str, raw: Mapping[str, Any]) -> ModelInfo:
    """One entry of Anthropic's ``GET /v1/models`` (a ``ModelInfo`` as JSON) as Tiller's."""
    reasoning, levels, shape = _thinking(raw.get("capabilities"))
    lifecycle = raw.get("lifecycle")
    return ModelInfo(
        provider, str(raw["id"]),
        context_window=_int(raw.get("max_input_tokens")),
        max_output_tokens=_int(raw.get("max_tokens")),
        reasoning=reasoning, thinking_levels=levels, thinking_shape=shape,
        display_name=raw.get("display_name") or None, line=raw.get("line") or None,
        created=_date(raw.get("created_at")),
        lifecycle=lifecycle if lifecycle in ("active", "deprecated", "retired") else None,
        deprecated_at=_date(raw.get("deprecated_at")), retires_at=_date(raw.get("retires_at")),
        source="provider",
    )


def _thinking(
    capabilities: Any,
) -> tuple[bool, tuple[ThinkingLevel, ...] | None, Any]:
    """(reasoning, thinking levels, shape) from Anthropic's ``capabilities``; levels None when
    they are not given. Adaptive thinking wins where both shapes are accepted (``enabled`` is
    deprecated on those models)."""
    if not isinstance(capabilities, Mapping) or not isinstance(
            capabilities.get("thinking"), Mapping):
        return True, None, None
    thinking = capabilities["thinking"]
    types = thinking.get("types") if isinstance(thinking.get("types"), Mapping) else {}

    def accepts(table: Any, key: str) -> bool:
        entry = table.get(key) if isinstance(table, Mapping) else None
        return isinstance(entry, Mapping) and entry.get("supported") is True

    if not thinking.get("supported"):
        return False, ("off",), None
    effort = capabilities.get("effort")
    on: list[ThinkingLevel]
    if accepts(types, "adaptive"):
        shape = "adaptive"
        efforts = isinstance(effort, Mapping) and effort.get("supported") is True
        on = [level for level in THINKING_LEVELS[1:] if accepts(effort, level)] if efforts \
            else ["high"]
    elif accepts(types, "enabled"):
        shape, on = "budget", list(THINKING_LEVELS[1:])
    else:
        return False, ("off",), None
    off: list[ThinkingLevel] = ["off"] if accepts(types, "disabled") else []
    return True, tuple(off + on) or ("off",), shape


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _date(value: Any) -> str | None:
    """``YYYY-MM-DD`` of an RFC 3339 timestamp; None for none, or the epoch ("unknown")."""
    if not isinstance(value, str) or len(value) < 10 or value.startswith("1970-01-01"):
        return None
    return value[:10]


def _date_of_epoch(value: Any) -> str | None:
    if not isinstance(value, int) or value <= 0:
        return None
    import datetime

    return datetime.datetime.fromtimestamp(value, datetime.UTC).date().isoformat()
