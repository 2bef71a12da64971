"""``ModelDirectory``: what Tiller knows of each provider's models, never staler than a day.

Three sources, merged field by field: the provider's own list (``GET /v1/models``,
``tiller.providers.models_endpoint``), the built-in catalog (``BUILTIN_MODELS``; it applies to
every provider of the catalog entry's type, since it describes the vendor's models) and the
config file's ``[[models]]``, whose given keys win. A provider's list is kept in memory and on
disk (``<data_dir>/models/``, one JSON file per provider URL) for ``MODELS_TTL`` seconds, a
failure to get it for ``FAILED_TTL``; ``refresh`` asks again once that passed (one request at a
time per provider) and never raises: the failure is kept and reported (``Listing.error``).

Nothing here starts a request by itself: callers choose when (``models/list``, a run on an
Anthropic model, ACP's model option), never on ``initialize``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Protocol

import anyio

from tiller.frozen import frozen
from tiller.providers.base import ModelCost, ModelInfo
from tiller.providers.registry import ProviderSettings

__all__ = ["FAILED_TTL", "MODELS_TTL", "Configured", "Listing", "ListingStore", "ModelDirectory",
           "names_of", "shared_store"]

log = logging.getLogger(__name__)

MODELS_TTL = 24 * 3600.0
FAILED_TTL = 600.0
FETCH_TIMEOUT = 8.0
_VERSION = 1

Fetch = Callable[..., Awaitable[list[ModelInfo]]]


class Configured(Protocol):
    """What the directory reads of the server's configuration (``tiller.config.ServerConfig``)."""

    @property
    def provider(self) -> str: ...
    @property
    def base_url(self) -> str | None: ...
    @property
    def providers(self) -> Mapping[str, ProviderSettings]: ...
    @property
    def models(self) -> Sequence[ModelInfo]: ...
    @property
    def env(self) -> Mapping[str, str]: ...
    @property
    def data_dir(self) -> Path | None: ...


@frozen
class Listing:
    """One provider's answer: its models (none if it failed), when (epoch seconds), why not."""

    models: tuple[ModelInfo, ...] = ()
    fetched_at: float = 0.0
    error: str | None = None

    def fresh(self, now: float) -> bool:
        return now - self.fetched_at < (FAILED_TTL if self.error else MODELS_TTL)


@dataclass
class ListingStore:
    """Listings by provider URL, in memory and (with a ``folder``) on disk."""

    folder: Path | None = None
    _memory: dict[str, Listing] = field(default_factory=dict)
    _absent: set[str] = field(default_factory=set)
    """Keys whose file was looked for and not there (not looked for again until ``put``)."""
    _locks: dict[str, anyio.Lock] = field(default_factory=dict)

    def get(self, key: str) -> Listing | None:
        if key not in self._memory and key not in self._absent:
            loaded = self._read(key)
            if loaded is None:
                self._absent.add(key)
            else:
                self._memory[key] = loaded
        return self._memory.get(key)

    def put(self, key: str, listing: Listing) -> None:
        self._memory[key] = listing
        self._absent.discard(key)
        if self.folder is None:
            return
        data = {"version": _VERSION, "key": key, "fetchedAt": listing.fetched_at,
                "error": listing.error, "models": [_dump(info) for info in listing.models]}
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self._path(key)
            partial = path.with_suffix(".tmp")
            partial.write_text(json.dumps(data), encoding="utf-8")
            partial.replace(path)
        except OSError as exc:
            log.warning("cannot save the model list to %s: %s", self.folder, exc)

    def lock(self, key: str) -> anyio.Lock:
        return self._locks.setdefault(key, anyio.Lock())

    def _path(self, key: str) -> Path:
        assert self.folder is not None
        name = re.sub(r"[^A-Za-z0-9]+", "-", key.split("|")[0]).strip("-")
        return self.folder / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.json"

    def _read(self, key: str) -> Listing | None:
        if self.folder is None:
            return None
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
            if data.get("version") != _VERSION or data.get("key") != key:
                return None
            models = tuple(_load(entry) for entry in data["models"])
            return Listing(models, float(data["fetchedAt"]), data.get("error"))
        except (OSError, ValueError, KeyError, TypeError):
            return None


_SHARED: dict[Path, ListingStore] = {}


def shared_store(folder: Path | None) -> ListingStore:
    """The process's store for ``folder`` (one per folder, so every session sees one list);
    with no folder (a config built in code), a store of the caller's own."""
    if folder is None:
        return ListingStore()
    return _SHARED.setdefault(folder, ListingStore(folder))


class ModelDirectory:
    """The models of ``config``'s providers (see the module docstring). ``fetch`` replaces
    ``models_endpoint.fetch_models`` (tests)."""

    def __init__(self, config: Configured, store: ListingStore | None = None,
                 fetch: Fetch | None = None) -> None:
        self.config = config
        data_dir = config.data_dir
        self.store = store or shared_store(data_dir / "models" if data_dir else None)
        self._fetch = fetch

    # ------------------------------------------------------------------ the provider's list

    def endpoint(self, name: str) -> tuple[ProviderSettings, str | None, str] | None:
        """(settings, base URL, key) to ask ``name`` with; None when it cannot be asked (the
        embedded model, an unknown provider, a key that is needed and missing)."""
        config = self.config
        settings = config.providers.get(name)
        if settings is None or settings.type == "local":
            return None
        override = config.base_url if name == config.provider else None
        key = config.env.get(settings.api_key_env) if settings.api_key_env else None
        if not key and settings.needs_key(config.env, override):
            return None
        return settings, settings.resolve_base_url(config.env, override), key or "not-needed"

    def _key(self, name: str) -> str | None:
        found = self.endpoint(name)
        if found is None:
            return None
        settings, url, _ = found
        return f"{name}|{settings.type}|{url or 'default'}"

    def listing(self, name: str) -> Listing | None:
        """The provider's last answer (memory or disk, however old); None if never asked."""
        key = self._key(name)
        return self.store.get(key) if key else None

    async def refresh(self, name: str, *, force: bool = False) -> Listing | None:
        """Ask the provider for its models unless its answer is still fresh (``force``: ask
        anyway); the answer (or the failure) is kept. None when it cannot be asked."""
        found, key = self.endpoint(name), self._key(name)
        if found is None or key is None:
            return None
        async with self.store.lock(key):
            known = self.store.get(key)
            if known is not None and known.fresh(time.time()) and not force:
                return known
            settings, url, api_key = found
            fetch = self._fetch or _default_fetch()
            try:
                with anyio.fail_after(FETCH_TIMEOUT + 2):
                    models = await fetch(settings, base_url=url, api_key=api_key,
                                         timeout=FETCH_TIMEOUT)
                listing = Listing(tuple(models), time.time())
            except Exception as exc:  # any failure is data: the list stays what it was
                reason = f"{type(exc).__name__}: {exc}".replace(api_key, "***")
                log.info("model list of %s unavailable: %s", name, reason)
                listing = Listing(known.models if known else (), time.time(), reason[:300])
            self.store.put(key, listing)
            return listing

    # ------------------------------------------------------------------ merged facts

    def _bases(self, name: str, model: str) -> tuple[ModelInfo | None, ModelInfo | None]:
        """(catalog entry, config entry) for ``model`` of ``name`` (the catalog by type)."""
        settings = self.config.providers.get(name)
        kind = settings.type if settings else name
        catalog = config = None
        for info in self.config.models:
            if info.id != model:
                continue
            if info.source == "config" and info.provider == name:
                config = info
            elif info.source != "config" and info.provider in (name, kind):
                catalog = info if catalog is None or info.provider == name else catalog
        return catalog, config

    def info(self, name: str, model: str) -> ModelInfo | None:
        """All Tiller knows of ``model`` of ``name``, without asking anyone."""
        listing = self.listing(name)
        listed = next((m for m in listing.models if m.id == model), None) if listing else None
        catalog, config = self._bases(name, model)
        return _merge(name, listed, catalog, config)

    async def lookup(self, name: str, model: str) -> ModelInfo | None:
        """``info`` after a ``refresh`` of an Anthropic provider's list (whose facts decide the
        thinking shape and the lifecycle); other providers are not asked here."""
        settings = self.config.providers.get(name)
        if settings is not None and settings.type == "anthropic":
            await self.refresh(name)
        return self.info(name, model)

    def models(self, name: str, *, retired: bool = False) -> list[ModelInfo]:
        """``name``'s models: what its endpoint listed (retired ones only with ``retired``);
        then the catalog's, unless the endpoint is Anthropic's (whose list, every lifecycle
        included, is the whole truth: OpenAI-compatible servers list ids only, and some of them
        are proxies that list less than they serve); then config entries not listed yet."""
        listing = self.listing(name)
        ids: list[str] = []
        listed = listing is not None and bool(listing.models)
        if listing is not None and listed:
            ids = [m.id for m in listing.models if retired or m.lifecycle != "retired"]
        settings = self.config.providers.get(name)
        if not listed or settings is None or settings.type != "anthropic":
            ids += [m.id for m in self.config.models
                    if m.provider == name and m.source == "catalog"]
        ids += [m.id for m in self.config.models if m.provider == name and m.source == "config"]
        merged = [self.info(name, model_id) for model_id in dict.fromkeys(ids)]
        return [info for info in merged if info is not None]

    def successor(self, name: str, retired: ModelInfo) -> ModelInfo | None:
        """The newest active model of ``retired``'s line that the provider lists, if any."""
        listing = self.listing(name)
        if retired.line is None or listing is None:
            return None
        same = [self.info(name, m.id) for m in listing.models
                if m.line == retired.line and m.lifecycle == "active" and m.id != retired.id]
        candidates = [info for info in same if info is not None]
        return max(candidates, key=lambda m: m.created or "", default=None)

    def available(self, name: str) -> list[str]:
        """Ids of ``name``'s models that can be called (not retired), newest first."""
        return [m.id for m in self.models(name) if m.lifecycle != "retired"]


def _default_fetch() -> Fetch:
    from tiller.providers.models_endpoint import fetch_models

    return fetch_models


def _merge(name: str, listed: ModelInfo | None, catalog: ModelInfo | None,
           config: ModelInfo | None) -> ModelInfo | None:
    """One model's facts: the provider's, filled in from the catalog, then the config's keys."""
    base = listed or catalog
    if base is None:
        return config
    info = replace(base, provider=name)
    if listed is not None and catalog is not None:
        filled = {f.name: getattr(catalog, f.name) for f in fields(ModelInfo)
                  if getattr(listed, f.name) is None}
        if listed.thinking_levels is None:  # the provider gave no capabilities
            filled.update(reasoning=catalog.reasoning, thinking_levels=catalog.thinking_levels,
                          thinking_shape=catalog.thinking_shape)
        info = replace(info, **{k: v for k, v in filled.items() if k not in ("provider", "id")})
    if config is not None:
        info = replace(info, source="config", given=config.given,
                       **{key: getattr(config, key) for key in config.given})
    return info


def _dump(info: ModelInfo) -> dict[str, Any]:
    data = asdict(info)
    data["thinking_levels"] = list(info.thinking_levels) if info.thinking_levels else None
    data["given"] = sorted(info.given)
    return data


def _load(data: Mapping[str, Any]) -> ModelInfo:
    known = {f.name for f in fields(ModelInfo)}
    values = {key: value for key, value in data.items() if key in known}
    if values.get("cost") is not None:
        values["cost"] = ModelCost(**values["cost"])
    if values.get("thinking_levels") is not None:
        values["thinking_levels"] = tuple(values["thinking_levels"])
    values["given"] = frozenset(values.get("given") or ())
    return ModelInfo(**values)


def names_of(models: Sequence[ModelInfo]) -> str:
    """``a, b, c`` (at most 12, then "and N more")."""
    ids = [m.id for m in models]
    shown = ", ".join(ids[:12])
    return shown + (f" and {len(ids) - 12} more" if len(ids) > 12 else "")
