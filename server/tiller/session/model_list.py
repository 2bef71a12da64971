"""``models/list``'s answer: the providers Tiller knows and their models, as the providers list
them (``tiller.providers.directory``), merged with the catalog and the config file.

Every provider that can be asked (a key is set, or none is needed) is asked at once, unless its
list is less than a day old; one that does not answer in time or fails keeps its last list, or
the catalog's, and says why in ``modelsError``. Retired models are not listed.
"""

from __future__ import annotations

import anyio

from tiller.config import ServerConfig
from tiller.protocol.models import ModelCostModel, ModelEntry, ModelsListResult, ProviderEntry
from tiller.providers.base import ModelInfo
from tiller.providers.directory import ModelDirectory

__all__ = ["model_entry", "models_list"]


def model_entry(info: ModelInfo) -> ModelEntry:
    """One model as ``models/list`` shows it."""
    cost = info.cost
    return ModelEntry(
        provider=info.provider, id=info.id, display_name=info.display_name,
        context_window=info.context_window, max_output_tokens=info.max_output_tokens,
        cost=ModelCostModel.model_validate({
            "input": cost.input, "output": cost.output, "cacheRead": cost.cache_read,
            "cacheWrite": cost.cache_write, "cacheWrite1h": cost.cache_write_1h,
        }) if cost else None,
        reasoning=info.reasoning or bool(info.thinking_levels and info.thinking_levels != ("off",)),
        thinking_levels=list(levels) if (levels := info.levels()) is not None else None,
        line=info.line, lifecycle=info.lifecycle, deprecated_at=info.deprecated_at,
        retires_at=info.retires_at, source=info.source, checked=info.checked,
    )


async def models_list(config: ServerConfig,
                      directory: ModelDirectory | None = None) -> ModelsListResult:
    """The answer to ``models/list`` (see the module docstring)."""
    directory = directory or ModelDirectory(config)
    names = sorted(config.providers)
    async with anyio.create_task_group() as group:
        for name in names:
            group.start_soon(directory.refresh, name)
    providers = []
    for name in names:
        settings = config.providers[name]
        override = config.base_url if name == config.provider else None
        listing = directory.listing(name)
        fetched = int(listing.fetched_at * 1000) if listing and not listing.error else None
        providers.append(ProviderEntry(
            name=settings.name, type=settings.type,
            base_url=settings.resolve_base_url(config.env, override),
            api_key_env=settings.api_key_env,
            configured=settings.configured(config.env, override),
            models_fetched_at=fetched, models_error=listing.error if listing else None,
        ))
    models = [model_entry(info) for name in names for info in directory.models(name)]
    return ModelsListResult(providers=providers, models=models)
