"""LangGraph's store (``get_store()``, ``runtime.store``) for graphs run by hayata.

A graph's nodes run in other processes than the caller, so the store a graph
is compiled with must be rebuilt in each of them and reach the same items:

- :class:`HayataStore`: a ``BaseStore`` over hayata's own database (table
  ``hayata_serve_store_items``, the one ``hayata serve``'s ``/store/items``
  reads and writes), so every node process, every run and the HTTP store see
  the same items. It pickles as its database URL.
- any other ``BaseStore`` that pickles (each process unpickles its own copy,
  so it must keep its items outside the process), or a
  ``"package.module:name"`` path to a store or to a function returning one,
  imported once per process.

An ``InMemoryStore`` is refused: each process would have its own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime
import json
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from langgraph.store.base.embed import (
    EmbeddingsLambda,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
)
from langgraph.store.memory import (
    InMemoryStore,
    _compare_values,
    _cosine_similarity,
    _does_match,
)
from sqlalchemy.engine import Connection

from hayata_py._api import AgentSystem
from hayata_py._errors import ConfigError
from hayata_py.langgraph._graphref import resolve
from hayata_py.langgraph._snapshot import dump_value, load_value
from hayata_py.store._sql.engine import EngineHolder

__all__ = ["HayataStore", "load_store", "store_spec"]

items = sa.Table(
    "hayata_serve_store_items", sa.MetaData(),
    sa.Column("namespace", sa.String(), primary_key=True),
    sa.Column("key", sa.String(), primary_key=True),
    sa.Column("value", sa.Text(), nullable=False),
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.Column("updated_at", sa.Double(), nullable=False),
    sa.Column("index_fields", sa.Text(), nullable=True),
)
"""The items (migrations ``0005_serve``, ``0007_store_index``): a namespace's
labels joined by ``.`` (LangGraph refuses labels with a period), the value as
JSON, epoch seconds, and the fields semantic search embeds as the item's
``put(..., index=)`` gave them (NULL: the store's own, JSON ``false``: none,
a JSON list: those paths)."""

_NO_QUERY = ("semantic search (query=...) needs an embedding index, and this HayataStore "
             "has none: make it with HayataStore(..., index={'embed': function, 'dims': n, "
             "'fields': [...]}) as LangGraph's stores take it, or search with filter= "
             "instead")

VECTORS_KEPT = 10_000
"""Embeddings of item texts a :class:`HayataStore` keeps per process (by text)."""


def _joined(namespace: Sequence[str]) -> str:
    for label in namespace:
        if not isinstance(label, str) or "." in label:
            raise InvalidNamespaceError(
                f"namespace labels must be strings without periods, got {namespace!r}")
    return ".".join(namespace)


def _labels(joined: str) -> tuple[str, ...]:
    return tuple(joined.split(".")) if joined else ()


def _when(epoch: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC)


def _item(row: Any) -> Item:
    return Item(value=json.loads(row.value), key=row.key, namespace=_labels(row.namespace),
                created_at=_when(row.created_at), updated_at=_when(row.updated_at))


def _index_fields(index: Any) -> str | None:
    """A put's ``index=`` as the items table keeps it; ConfigError naming
    ``index`` if it is not None, False or a list of field paths."""
    if index is None:
        return None
    if index is False:
        return "false"
    if isinstance(index, (list, tuple)) and all(isinstance(f, str) and f for f in index):
        for path in index:
            if path != "$":
                try:
                    tokenize_path(path)
                except Exception as exc:
                    raise ConfigError("index", f"{path!r} is not a field path: {exc}") from exc
        return json.dumps(list(index))
    raise ConfigError("index", "must be False (keep the item out of semantic search), a list "
                      f"of field paths to embed, or None (the store's own), got {index!r:.80}")


def _run_coroutine(coroutine: Any) -> Any:
    """The result of ``coroutine``, run on a loop of its own (on another
    thread if this one is running a loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _under(prefix: Sequence[str]) -> Any:
    joined = _joined(prefix)
    if not joined:
        return sa.true()
    return sa.or_(items.c.namespace == joined,
                  items.c.namespace.startswith(joined + ".", autoescape=True))


class HayataStore(BaseStore):
    """A LangGraph ``BaseStore`` in hayata's database, durable and shared by
    every process of the system and by ``hayata serve``'s ``/store/items``.

    ``HayataStore(system)`` (an :class:`~hayata_py.AgentSystem`: its store's
    database) or ``HayataStore(url)`` (a SQLAlchemy URL of a hayata store).
    Values are JSON objects. ``search`` without a query gives items newest
    updated first (as LangGraph's ``PostgresStore``); ``filter`` matches as
    LangGraph's stores do (``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``,
    ``$lte``). No TTL. Each process connects on first use.

    ``index`` (LangGraph's ``IndexConfig``: ``embed``, a function of a list of
    texts (sync or ``async``), LangChain ``Embeddings`` or a
    ``"provider:model"`` name LangChain's ``init_embeddings`` knows; ``dims``;
    ``fields``, default the whole value) lets ``search(..., query=...)`` rank
    items by cosine similarity as ``InMemoryStore`` does, each item at the
    fields its ``put(..., index=)`` named (``False``: not embedded, ranked
    after the others with score None). The texts of the items under the
    prefix are embedded at search time (each text once per process, up to
    :data:`VECTORS_KEPT`), nothing is stored. Without an index a ``query`` is
    refused (``ConfigError("query")``)."""

    supports_ttl = False

    def __init__(self, source: AgentSystem | str, *, index: IndexConfig | None = None,
                 holder: EngineHolder | None = None) -> None:
        if isinstance(source, AgentSystem):
            source = source.store_url
        if not isinstance(source, str) or not source:
            raise ConfigError("store", "HayataStore takes an AgentSystem or the URL of its "
                              f"store's database, got {type(source).__name__}")
        self.url = source
        self._holder = holder
        self.index: IndexConfig | None = None
        self._embeddings: Any = None
        self._fields: list[tuple[str, Any]] = []
        self._vectors: OrderedDict[str, list[float]] = OrderedDict()
        if index:
            if not isinstance(index, dict) or index.get("embed") is None:
                raise ConfigError("index", "needs 'embed': a function of a list of texts "
                                  "returning their vectors, or LangChain Embeddings")
            self.index = IndexConfig(**index)
            try:
                self._embeddings = ensure_embeddings(index["embed"])
            except Exception as exc:
                raise ConfigError("index", f"'embed' {index['embed']!r:.80} gives no "
                                  f"embeddings: {type(exc).__name__}: {exc}") from exc
            self._fields = [(p, tokenize_path(p)) if p != "$" else (p, p)
                            for p in (index.get("fields") or ["$"])]

    @classmethod
    def over(cls, holder: EngineHolder, *, index: IndexConfig | None = None) -> HayataStore:
        """The store through an engine holder the caller already has."""
        return cls(holder.url.render_as_string(hide_password=False), index=index,
                   holder=holder)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuilt, (self.url, self.index))

    def __repr__(self) -> str:
        return f"HayataStore({sa.engine.make_url(self.url).render_as_string()!r})"

    @property
    def holder(self) -> EngineHolder:
        if self._holder is None:
            self._holder = EngineHolder(sa.engine.make_url(self.url))
        return self._holder

    def close(self) -> None:
        """Close this process's connections (the store opens them again on use)."""
        if self._holder is not None:
            self._holder.dispose()

    # -- BaseStore -------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """The operations in order, in one transaction."""
        todo = list(ops)
        for op in todo:
            if isinstance(op, SearchOp) and op.query and self._embeddings is None:
                raise ConfigError("query", _NO_QUERY)
            if isinstance(op, PutOp):
                _index_fields(op.index)
            if not isinstance(op, (GetOp, SearchOp, PutOp, ListNamespacesOp)):
                raise ValueError(f"unknown store operation {type(op).__name__}")
        writes = any(isinstance(op, PutOp) for op in todo)

        def run(conn: Connection) -> list[Any]:
            return [self._one(conn, op, time.time()) for op in todo]
        results = self.holder.run(run, write=writes)
        # searches are paged (and ranked) out of the transaction: embedding takes time
        return [self._page(op, found) if isinstance(op, SearchOp) else found
                for op, found in zip(todo, results, strict=True)]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` on a thread."""
        return await asyncio.to_thread(self.batch, list(ops))

    def _one(self, conn: Connection, op: Op, now: float) -> Any:
        if isinstance(op, GetOp):
            row = conn.execute(items.select().where(items.c.namespace == _joined(op.namespace),
                                                    items.c.key == op.key)).first()
            return _item(row) if row is not None else None
        if isinstance(op, PutOp):
            self._put(conn, op, now)
            return None
        if isinstance(op, SearchOp):
            return self._search(conn, op)
        assert isinstance(op, ListNamespacesOp)
        return self._namespaces(conn, op)

    @staticmethod
    def _put(conn: Connection, op: PutOp, now: float) -> None:
        joined = _joined(op.namespace)
        where = (items.c.namespace == joined) & (items.c.key == op.key)
        if op.value is None:
            conn.execute(items.delete().where(where))
            return
        value = json.dumps(dict(op.value))
        fields = _index_fields(op.index)
        if conn.execute(items.update().where(where).values(
                value=value, updated_at=now, index_fields=fields)).rowcount == 0:
            conn.execute(items.insert().values(namespace=joined, key=op.key, value=value,
                                               created_at=now, updated_at=now,
                                               index_fields=fields))

    @staticmethod
    def _search(conn: Connection, op: SearchOp) -> list[tuple[Item, str | None]]:
        """The items under the prefix that pass the filter, newest updated
        first, each with the fields it is embedded at."""
        rows = conn.execute(items.select().where(_under(op.namespace_prefix)).order_by(
            items.c.updated_at.desc(), items.c.namespace, items.c.key))
        found = [(_item(row), row.index_fields) for row in rows]
        if op.filter:
            found = [(i, f) for i, f in found if all(_compare_values(i.value.get(k), v)
                                                     for k, v in op.filter.items())]
        return found

    def _page(self, op: SearchOp, found: list[tuple[Item, str | None]]) -> list[SearchItem]:
        if not op.query or self._embeddings is None:
            return [SearchItem(i.namespace, i.key, i.value, i.created_at, i.updated_at)
                    for i, _ in found[op.offset:op.offset + op.limit]]
        return self._ranked(op, found)

    def _ranked(self, op: SearchOp, found: list[tuple[Item, str | None]]) -> list[SearchItem]:
        """``found`` by cosine similarity to the query, an item scored by its
        best text, as ``InMemoryStore`` ranks them; items with no text to
        embed fill a page's room after the others (score None)."""
        assert op.query is not None
        texts = {id(i): self._texts(i.value, fields) for i, fields in found}
        vectors = self._embed([t for item_texts in texts.values() for t in item_texts])
        query = self._query_vector(op.query)
        flat_items: list[Item] = []
        flat_vectors: list[list[float]] = []
        scoreless: list[Item] = []
        for item, _ in found:
            for text in texts[id(item)]:
                flat_items.append(item)
                flat_vectors.append(vectors[text])
            if not texts[id(item)]:
                scoreless.append(item)
        scores = _cosine_similarity(query, flat_vectors)
        ranked = sorted(zip(scores, flat_items, strict=True), key=lambda x: x[0], reverse=True)
        seen: set[tuple[tuple[str, ...], str]] = set()
        kept: list[tuple[float | None, Item]] = []
        for score, item in ranked:
            if (item.namespace, item.key) in seen:
                continue
            seen.add((item.namespace, item.key))
            if len(seen) > op.offset + op.limit:
                break
            if len(seen) > op.offset:
                kept.append((score, item))
        if scoreless and len(kept) < op.limit:
            kept.extend((None, item) for item in scoreless[:op.limit - len(kept)])
        return [SearchItem(i.namespace, i.key, i.value, i.created_at, i.updated_at,
                           score=float(score) if score is not None else None)
                for score, i in kept]

    def _texts(self, value: dict[str, Any], index_fields: str | None) -> list[str]:
        """The texts of ``value`` at the fields it is embedded at (the index's
        unless its put named others), as LangGraph picks them."""
        if index_fields is None:
            fields = self._fields
        elif index_fields == "false":
            return []
        else:
            fields = [(p, tokenize_path(p)) if p != "$" else (p, p)
                      for p in json.loads(index_fields)]
        return [text for _, field in fields for text in get_text_at_path(value, field)]

    def _async_only(self) -> bool:
        """Whether the index's ``embed`` is an ``async`` function (LangGraph's
        wrapper of one answers only its async methods)."""
        return isinstance(self._embeddings, EmbeddingsLambda) \
            and getattr(self._embeddings, "func", None) is None

    def _query_vector(self, query: str) -> list[float]:
        if self._async_only():
            return list(_run_coroutine(self._embeddings.aembed_query(query)))
        return list(self._embeddings.embed_query(query))

    def _documents(self, texts: list[str]) -> list[list[float]]:
        if self._async_only():
            return [list(v) for v in _run_coroutine(self._embeddings.aembed_documents(texts))]
        return [list(v) for v in self._embeddings.embed_documents(texts)]

    def _embed(self, texts: list[str]) -> dict[str, list[float]]:
        """The vectors of ``texts``: those not kept yet embedded in one call,
        the newest :data:`VECTORS_KEPT` kept."""
        found = {t: v for t in texts if (v := self._vectors.get(t)) is not None}
        missing = list(dict.fromkeys(t for t in texts if t not in found))
        if missing:
            found.update(zip(missing, self._documents(missing), strict=True))
        for text, vector in found.items():
            self._vectors[text] = vector
            self._vectors.move_to_end(text)
        while len(self._vectors) > VECTORS_KEPT:
            self._vectors.popitem(last=False)
        return found

    @staticmethod
    def _namespaces(conn: Connection, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        names = [_labels(row.namespace) for row in conn.execute(
            sa.select(items.c.namespace).distinct())]
        if op.match_conditions:
            names = [n for n in names if all(_does_match(c, n) for c in op.match_conditions)]
        if op.max_depth is not None:
            names = sorted({n[:op.max_depth] for n in names})
        else:
            names = sorted(names)
        return names[op.offset:op.offset + op.limit]


def _rebuilt(url: str, index: IndexConfig | None) -> HayataStore:
    """A :class:`HayataStore` unpickled: its URL and index, no connection."""
    return HayataStore(url, index=index)


# -- a graph's store, rebuilt in every process --------------------------------------------

@dataclass(frozen=True)
class _Imported:
    """A store named by its import path: each process imports it."""

    path: str


_LOADED: dict[bytes, BaseStore] = {}
"""The stores this process rebuilt, by what the runs carry."""

_IN_MEMORY = ("an InMemoryStore keeps its items in one process, and a graph's nodes run in "
              "other processes, so they would not share them: pass "
              "hayata_py.langgraph.HayataStore(system) (durable, in hayata's database, "
              "shared by every node and by `hayata serve`'s /store/items), or a "
              "'package.module:name' path to a store (or a function returning one) that "
              "every process can build")


def store_spec(store: Any) -> bytes | None:
    """What a run carries of ``compile(..., store=...)`` for its processes to
    rebuild the store from; a clear error for a store they cannot rebuild."""
    if store is None:
        return None
    if isinstance(store, str):
        module, sep, attr = store.partition(":")
        if not sep or not module or not attr:
            raise ConfigError("store", f"{store!r} is not 'package.module:name'")
        try:
            found = resolve(store)
        except Exception as exc:
            raise ConfigError("store", f"{store!r} does not import: {type(exc).__name__}: "
                              f"{exc}; node processes import the store by this path") from exc
        if isinstance(found, InMemoryStore):
            raise ConfigError("store", _IN_MEMORY)
        if not isinstance(found, BaseStore) and not callable(found):
            raise ConfigError("store", f"{store!r} is a {type(found).__name__}, not a "
                              "LangGraph BaseStore nor a function returning one")
        return dump_value(_Imported(store))
    if isinstance(store, InMemoryStore):
        raise ConfigError("store", _IN_MEMORY)
    if not isinstance(store, BaseStore):
        raise ConfigError("store", f"expected a LangGraph BaseStore (e.g. "
                          f"hayata_py.langgraph.HayataStore(system)) or a "
                          f"'package.module:name' path, got {type(store).__name__}")
    try:
        return dump_value(store)
    except Exception as exc:
        raise ConfigError("store", f"the {type(store).__name__} cannot be pickled "
                          f"({type(exc).__name__}: {exc}), and each node process rebuilds "
                          "the store from it: pass a 'package.module:name' path to it (or "
                          "to a function returning it) instead") from exc


def load_store(spec: bytes | None) -> BaseStore | None:
    """The store ``spec`` names, built once per process."""
    if spec is None:
        return None
    store = _LOADED.get(spec)
    if store is None:
        found = load_value(spec)
        if isinstance(found, _Imported):
            path = found.path
            found = resolve(path)
            if not isinstance(found, BaseStore):
                found = found()
            if not isinstance(found, BaseStore) or isinstance(found, InMemoryStore):
                raise ConfigError("store", f"{path!r} gave a {type(found).__name__}, not a "
                                  "LangGraph BaseStore every process can build")
        store = _LOADED[spec] = found
    return store
