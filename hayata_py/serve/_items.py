"""The API's store (``/store/items``): JSON values under a namespace and a key,
in the store's database (``hayata_serve_store_items``)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from hayata_py.store._sql.engine import EngineHolder

__all__ = ["Items"]

items = sa.Table(
    "hayata_serve_store_items", sa.MetaData(),
    sa.Column("namespace", sa.String(), primary_key=True),
    sa.Column("key", sa.String(), primary_key=True),
    sa.Column("value", sa.Text(), nullable=False),
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.Column("updated_at", sa.Double(), nullable=False),
)


def _item(row: Any) -> dict[str, Any]:
    return {"namespace": row.namespace.split("."), "key": row.key,
            "value": json.loads(row.value), "created_at": row.created_at,
            "updated_at": row.updated_at}


def _under(prefix: Sequence[str]) -> Any:
    joined = ".".join(prefix)
    if not joined:
        return sa.true()
    return sa.or_(items.c.namespace == joined,
                  items.c.namespace.startswith(joined + ".", autoescape=True))


class Items:
    """Put, get, delete, search and list namespaces (labels have no periods)."""

    def __init__(self, holder: EngineHolder) -> None:
        self.holder = holder

    def put(self, namespace: Sequence[str], key: str, value: dict[str, Any]) -> None:
        joined, now = ".".join(namespace), time.time()

        def write(conn: Connection) -> None:
            where = (items.c.namespace == joined) & (items.c.key == key)
            if conn.execute(items.update().where(where).values(
                    value=json.dumps(value), updated_at=now)).rowcount == 0:
                conn.execute(items.insert().values(namespace=joined, key=key,
                                                   value=json.dumps(value), created_at=now,
                                                   updated_at=now))
        self.holder.run(write, write=True)

    def get(self, namespace: Sequence[str], key: str) -> dict[str, Any] | None:
        def read(conn: Connection) -> dict[str, Any] | None:
            row = conn.execute(items.select().where(items.c.namespace == ".".join(namespace),
                                                    items.c.key == key)).first()
            return _item(row) if row is not None else None
        return self.holder.run(read, write=False)

    def delete(self, namespace: Sequence[str], key: str) -> None:
        def write(conn: Connection) -> None:
            conn.execute(items.delete().where(items.c.namespace == ".".join(namespace),
                                              items.c.key == key))
        self.holder.run(write, write=True)

    def search(self, prefix: Sequence[str], filter: dict[str, Any] | None, limit: int,
               offset: int) -> list[dict[str, Any]]:
        """Items under ``prefix`` whose value has ``filter``'s fields, newest first."""
        def read(conn: Connection) -> list[dict[str, Any]]:
            rows = conn.execute(items.select().where(_under(prefix)).order_by(
                items.c.updated_at.desc(), items.c.namespace, items.c.key))
            found = [_item(r) for r in rows]
            return [{**i, "score": None} for i in found
                    if all(i["value"].get(k) == v for k, v in (filter or {}).items())]
        return self.holder.run(read, write=False)[offset:offset + limit]

    def namespaces(self, prefix: Sequence[str], suffix: Sequence[str], max_depth: int | None,
                   limit: int, offset: int) -> list[list[str]]:
        def read(conn: Connection) -> list[str]:
            return [r.namespace for r in conn.execute(
                sa.select(items.c.namespace).where(_under(prefix)).distinct())]
        found: set[tuple[str, ...]] = set()
        for joined in self.holder.run(read, write=False):
            labels = tuple(joined.split("."))
            if suffix and labels[-len(suffix):] != tuple(suffix):
                continue
            found.add(labels[:max_depth] if max_depth else labels)
        return [list(n) for n in sorted(found)][offset:offset + limit]
