"""What ``models/list`` answers: the providers Tiller knows and their models, as the providers
list them (``tiller.providers.directory``), merged with the catalog and the config file. Plain
data: the front turns it into the wire's models.

Every provider that can be asked (a key is set, or none is needed) is asked at once, unless its
list is less than a day old; one that does not answer in time or fails keeps its last list, or
the catalog's, and says why in ``modelsError``. Retired models are not listed.
"""

from __future__ import annotations

import anyio

from tiller.config import ServerConfig
from tiller.frozen import frozen
from tiller.providers.base import ModelInfo
from tiller.providers.directory import ModelDirectory
from tiller.providers.registry import ProviderType

__all__ = ["ModelListing", "ProviderListing", "models_list"]


@frozen
class ProviderListing:
    """One provider as ``models/list`` shows it; ``models_fetched_at`` in ms since the epoch."""

    name: str
    type: ProviderType
    base_url: str | None
    api_key_env: str | None
    configured: bool
    models_fetched_at: int | None
    models_error: str | None


@frozen
class ModelListing:
    """The providers, in name order, and every model they list (retired ones left out)."""

    providers: list[ProviderListing]
    models: list[ModelInfo]


async def models_list(config: ServerConfig,
                      directory: ModelDirectory | None = None) -> ModelListing:
    """What ``models/list`` answers (see the module docstring)."""
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
        providers.append(ProviderListing(
            name=settings.name, type=settings.type,
            base_url=settings.resolve_base_url(config.env, override),
            api_key_env=settings.api_key_env,
            configured=settings.configured(config.env, override),
            models_fetched_at=fetched, models_error=listing.error if listing else None,
        ))
    models = [info for name in names for info in directory.models(name)]
    return ModelListing(providers=providers, models=models)
