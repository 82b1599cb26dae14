"""The API's store (``/store/items``): JSON values under a namespace and a key,
in the store's database (``hayata_serve_store_items``), through the same
:class:`~hayata_py.langgraph.HayataStore` the served graphs' nodes use, with
the semantic-search index a ``langgraph.json`` names (``store.index``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base import GetOp, IndexConfig, Item, PutOp
from langgraph.store.base.embed import ensure_embeddings

from hayata_py._errors import ConfigError
from hayata_py.langgraph import HayataStore
from hayata_py.langgraph._graphref import resolve
from hayata_py.serve._graphs import importable, read_json

__all__ = ["Items", "config_store_index"]


def config_store_index(file: str | os.PathLike[str]) -> IndexConfig | None:
    """``store.index`` of a ``langgraph.json`` as ``HayataStore`` takes it, or
    None. ``embed`` is resolved as LangGraph's server resolves it: a
    ``"./file.py:name"`` (or ``"pkg/file.py:name"``) path relative to the
    config, imported as a module of its directory so node processes import
    it too, else a ``"provider:model"`` name for LangChain's
    ``init_embeddings``. ConfigError naming the key and the fix."""
    path, raw = read_json(file)
    store = raw.get("store") if isinstance(raw, dict) else None
    if store is None:
        return None
    if not isinstance(store, dict):
        raise ConfigError("store", f"must be an object (\"index\": {{...}}), got {store!r:.80}")
    index = store.get("index")
    if index is None:
        return None
    if not isinstance(index, dict):
        raise ConfigError("store.index", "must be an object: {\"embed\": \"./file.py:name\" "
                          f"or \"provider:model\", \"dims\": n, \"fields\": [...]}}, got "
                          f"{index!r:.80}")
    embed, dims, fields = index.get("embed"), index.get("dims"), index.get("fields")
    if not isinstance(embed, str) or ":" not in embed:
        raise ConfigError("store.index.embed", "must name the embedding function: "
                          "\"./file.py:name\" (a function of a list of texts, sync or "
                          "async, or LangChain Embeddings) or \"provider:model\" "
                          f"(e.g. \"openai:text-embedding-3-small\"), got {embed!r:.80}")
    if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
        raise ConfigError("store.index.dims", "must be the embeddings' length, a whole "
                          f"number >= 1, got {dims!r:.80}")
    if fields is not None and (not isinstance(fields, list) or not all(
            isinstance(f, str) and f for f in fields)):
        raise ConfigError("store.index.fields", "must be a list of field paths "
                          f"(\"$\" for the whole value), got {fields!r:.80}")
    config = IndexConfig(dims=dims, embed=_embeddings(embed, path.parent))
    try:
        ensure_embeddings(config["embed"])
    except Exception as exc:
        hint = (" (a \"provider:model\" name needs `pip install langchain` and the "
                "provider's package, e.g. langchain-openai)" if ".py:" not in embed else "")
        raise ConfigError("store.index.embed", f"{embed!r} gives no embeddings{hint}: "
                          f"{type(exc).__name__}: {exc}") from exc
    if fields is not None:
        config["fields"] = list(fields)
    return config


def _embeddings(embed: str, base: Path) -> Any:
    """What ``embed`` names: a function or ``Embeddings`` of a file, or the
    provider name itself (``HayataStore`` hands it to ``init_embeddings``)."""
    if ".py:" not in embed:
        return embed
    where, _, name = embed.rpartition(":")
    file_path = (base / where).resolve()
    if not file_path.is_file():
        raise ConfigError("store.index.embed", f"{file_path} does not exist")
    importable(file_path.parent)
    try:
        found = resolve(f"{file_path.stem}:{name}")
    except Exception as exc:
        raise ConfigError("store.index.embed", f"{embed!r} does not import: "
                          f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(found, Embeddings) and not callable(found):
        raise ConfigError("store.index.embed", f"{embed!r} gives no embeddings: it is a "
                          f"{type(found).__name__}, not a function of a list of texts nor "
                          "LangChain Embeddings")
    return found


def _dict(item: Item) -> dict[str, Any]:
    return {"namespace": list(item.namespace), "key": item.key, "value": item.value,
            "created_at": item.created_at.timestamp(),
            "updated_at": item.updated_at.timestamp()}


class Items:
    """Put, get, delete, search and list namespaces (labels have no periods),
    as the API's answers give them (the API's own checks, not LangGraph's
    ``put``'s: an empty namespace or a ``langgraph`` root label is taken)."""

    def __init__(self, store: HayataStore) -> None:
        self.store = store

    def put(self, namespace: Sequence[str], key: str, value: dict[str, Any],
            index: Any = None) -> None:
        self.store.batch([PutOp(tuple(namespace), key, value, index=index)])

    def get(self, namespace: Sequence[str], key: str) -> dict[str, Any] | None:
        item = self.store.batch([GetOp(tuple(namespace), key)])[0]
        return _dict(item) if isinstance(item, Item) else None

    def delete(self, namespace: Sequence[str], key: str) -> None:
        self.store.batch([PutOp(tuple(namespace), key, None)])

    @property
    def semantic(self) -> bool:
        """Whether searches rank by a ``query`` (the config names an index)."""
        return self.store.index is not None

    def search(self, prefix: Sequence[str], filter: dict[str, Any] | None, limit: int,
               offset: int, query: str | None = None) -> list[dict[str, Any]]:
        """Items under ``prefix`` whose value matches ``filter``: ranked by
        similarity to ``query`` (with their ``score``) if the store has an
        index, else newest first (``score`` null; the query is ignored, as
        LangGraph's server ignores it)."""
        query = query if self.semantic else None
        return [{**_dict(i), "score": i.score} for i in
                self.store.search(tuple(prefix), query=query, filter=filter, limit=limit,
                                  offset=offset)]

    def namespaces(self, prefix: Sequence[str], suffix: Sequence[str], max_depth: int | None,
                   limit: int, offset: int) -> list[list[str]]:
        found = self.store.list_namespaces(prefix=tuple(prefix) or None,
                                           suffix=tuple(suffix) or None,
                                           max_depth=max_depth, limit=limit, offset=offset)
        return [list(n) for n in found]
