"""The API's store (``/store/items``): JSON values under a namespace and a key,
in the store's database (``hayata_serve_store_items``), through the same
:class:`~hayata_py.langgraph.HayataStore` the served graphs' nodes use."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.store.base import GetOp, Item, PutOp

from hayata_py.langgraph import HayataStore
from hayata_py.store._sql.engine import EngineHolder

__all__ = ["Items"]


def _dict(item: Item) -> dict[str, Any]:
    return {"namespace": list(item.namespace), "key": item.key, "value": item.value,
            "created_at": item.created_at.timestamp(),
            "updated_at": item.updated_at.timestamp()}


class Items:
    """Put, get, delete, search and list namespaces (labels have no periods),
    as the API's answers give them (the API's own checks, not LangGraph's
    ``put``'s: an empty namespace or a ``langgraph`` root label is taken)."""

    def __init__(self, holder: EngineHolder) -> None:
        self.store = HayataStore.over(holder)

    def put(self, namespace: Sequence[str], key: str, value: dict[str, Any]) -> None:
        self.store.batch([PutOp(tuple(namespace), key, value)])

    def get(self, namespace: Sequence[str], key: str) -> dict[str, Any] | None:
        item = self.store.batch([GetOp(tuple(namespace), key)])[0]
        return _dict(item) if isinstance(item, Item) else None

    def delete(self, namespace: Sequence[str], key: str) -> None:
        self.store.batch([PutOp(tuple(namespace), key, None)])

    def search(self, prefix: Sequence[str], filter: dict[str, Any] | None, limit: int,
               offset: int) -> list[dict[str, Any]]:
        """Items under ``prefix`` whose value matches ``filter``, newest first."""
        return [{**_dict(i), "score": None} for i in
                self.store.search(tuple(prefix), filter=filter, limit=limit, offset=offset)]

    def namespaces(self, prefix: Sequence[str], suffix: Sequence[str], max_depth: int | None,
                   limit: int, offset: int) -> list[list[str]]:
        found = self.store.list_namespaces(prefix=tuple(prefix) or None,
                                           suffix=tuple(suffix) or None,
                                           max_depth=max_depth, limit=limit, offset=offset)
        return [list(n) for n in found]
