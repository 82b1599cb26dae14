"""The agent's and edges' access to the durable store (one store and one task
writer per process and URL).

The agent uses the full :class:`TaskStore`; an edge only records its tasks,
through the light :class:`TaskWriter` (a plain driver connection; no
SQLAlchemy engine in the edge process unless a write needs the store's
general path)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from hayata_py._errors import StoreError
from hayata_py.store import TaskStore

if TYPE_CHECKING:  # imported on first use: it loads SQLAlchemy (see hayata_py.store)
    from hayata_py.store._fast.writer import TaskWriter

_STORES: dict[tuple[int, str], TaskStore] = {}
_WRITERS: dict[tuple[int, str], TaskWriter] = {}


def store_for(url: str) -> TaskStore:
    """The store at ``url`` for this process (opened once; processes are forked,
    so the cache is keyed by pid too)."""
    key = (os.getpid(), url)
    store = _STORES.get(key)
    if store is None:
        from hayata_py.store import open_store

        store = _STORES[key] = open_store(url)
    return store


def writer_for(url: str) -> TaskWriter:
    """The task writer for ``url`` in this process (created once, keyed by pid
    like :func:`store_for`; it connects on first write)."""
    key = (os.getpid(), url)
    writer = _WRITERS.get(key)
    if writer is None:
        from hayata_py.store._fast.writer import TaskWriter

        writer = _WRITERS[key] = TaskWriter(url)
    return writer


def as_store_error(exc: Exception) -> StoreError:
    """A store failure as a :class:`StoreError` with a code: store errors keep
    theirs; anything else (a driver error: disk full, server gone) becomes
    ``store_unavailable``, so the runtime reports it instead of crashing."""
    if isinstance(exc, StoreError):
        return exc
    return StoreError(f"the store failed: {type(exc).__name__}: {exc}",
                      code="store_unavailable")
