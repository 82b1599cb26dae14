"""The agent's and edges' access to the durable store (one store per process and URL)."""

from __future__ import annotations

import os

from hayata_py._errors import StoreError
from hayata_py.store import TaskStore

_STORES: dict[tuple[int, str], TaskStore] = {}


def store_for(url: str) -> TaskStore:
    """The store at ``url`` for this process (opened once; processes are forked,
    so the cache is keyed by pid too)."""
    key = (os.getpid(), url)
    store = _STORES.get(key)
    if store is None:
        from hayata_py.store import open_store

        store = _STORES[key] = open_store(url)
    return store


def as_store_error(exc: Exception) -> StoreError:
    """A store failure as a :class:`StoreError` with a code: store errors keep
    theirs; anything else (a driver error: disk full, server gone) becomes
    ``store_unavailable``, so the runtime reports it instead of crashing."""
    if isinstance(exc, StoreError):
        return exc
    return StoreError(f"the store failed: {type(exc).__name__}: {exc}",
                      code="store_unavailable")
