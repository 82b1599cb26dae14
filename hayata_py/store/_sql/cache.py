"""Node result caching in :class:`~hayata_py.store._sql.store.SqlTaskStore`:
the "node result cache" section of the contract. The ``hayata_cache`` table,
and the task records of tasks completed from it (``hayata_tasks.cached``).

A cache entry is agent-wide (shared by every invocation and thread of the
agent) and durable like every record; it is not fenced (it belongs to no
invocation). A task completed from the cache is recorded, fenced like any
task write, in one transaction with the step's checkpoint when one rides
along (as an edge's ``started`` record carries it).
"""

from __future__ import annotations

import math
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from hayata_py._codec import decode, encode
from hayata_py._errors import StoreError
from hayata_py.store._records import CachedResult, InvocationRecord, TaskRecord
from hayata_py.store._rows import start_checkpoint_values, task_error, task_from_row, task_values
from hayata_py.store._sql.base import SqlBase
from hayata_py.store._sql.schema import cache as ch
from hayata_py.store._sql.schema import invocations as inv
from hayata_py.store._sql.schema import tasks as tk
from hayata_py.store._sql.tasks import TASK_ROW, task_write, update_task

__all__ = ["NodeCache"]

_GET = sa.select(ch).where(ch.c.agent_id == sa.bindparam("a"), ch.c.node_id == sa.bindparam("n"),
                           ch.c.key == sa.bindparam("k"), ch.c.expires_at > sa.bindparam("now"))


class NodeCache(SqlBase):
    """Cached node results (``AgentConfig.cache``) and tasks completed from them."""

    def cache_get(self, agent_id: str, node_id: str, key: str) -> CachedResult | None:
        params = {"a": agent_id, "n": node_id, "k": key, "now": float(self.clock())}
        row = self._db.run(lambda conn: conn.execute(_GET, params).first(), write=False)
        if row is None:
            return None
        where = f"cache entry {key} of node {node_id!r} of agent {agent_id!r}"
        return CachedResult(agent_id, node_id, key,
                            decode(row.result, record=where, column="result"),
                            row.created_at, row.expires_at)

    def cache_put(self, agent_id: str, node_id: str, key: str, result: Any, *,
                  ttl: float) -> None:
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) \
                or not math.isfinite(ttl) or ttl <= 0:
            raise StoreError(f"cache_put: ttl must be a finite number > 0, got {ttl!r}",
                             code="invalid_argument")
        data = encode(result, key="result")
        now = float(self.clock())
        values = {"agent_id": agent_id, "node_id": node_id, "key": key, "result": data,
                  "created_at": now, "expires_at": now + float(ttl)}

        def write(conn: Connection) -> None:
            # Lazy expiry: the node's expired entries go with each put (its PK prefix).
            conn.execute(ch.delete().where(ch.c.agent_id == agent_id, ch.c.node_id == node_id,
                                           ch.c.expires_at <= now))
            dialect = sqlite if self._db.is_sqlite else postgresql
            stmt = dialect.insert(ch).values(**values)
            conn.execute(stmt.on_conflict_do_update(
                index_elements=["agent_id", "node_id", "key"],
                set_={"result": data, "created_at": now, "expires_at": values["expires_at"]}))

        self._db.run(write, write=True)

    def clear_cache(self, agent_id: str, *, node_id: str | None = None,
                    expired_only: bool = False) -> int:
        stmt = ch.delete().where(ch.c.agent_id == agent_id)
        if node_id is not None:
            stmt = stmt.where(ch.c.node_id == node_id)
        if expired_only:
            stmt = stmt.where(ch.c.expires_at <= float(self.clock()))
        count: int = self._db.run(lambda conn: conn.execute(stmt).rowcount, write=True)
        return count

    def complete_cached(
        self,
        task: TaskRecord,
        *,
        token: int,
        result: Any,
        attempt: int,
        system_instance: str | None,
        checkpoint: InvocationRecord | None = None,
        retry: bool = False,
    ) -> TaskRecord:
        task_id = task.task_id
        if attempt < 1:
            raise task_error(task_id, "invalid_argument", f"attempt must be >= 1, got {attempt}")
        saved = None if checkpoint is None else start_checkpoint_values(task_id, task, checkpoint)
        data = encode(result, key="result")
        new_row = task_values(task)

        def apply(conn: Connection, row: Any) -> TaskRecord:
            now = self.clock()
            if saved is not None:  # rolled back with the rest if anything below raises
                conn.execute(inv.update().where(inv.c.invocation_id == task.invocation_id)
                             .values(updated_at=now, **saved))
            done = {"status": "completed", "attempt": attempt, "result": data,
                    "error": encode(None, key="error"), "system_instance": system_instance,
                    "started_at": now, "finished_at": now, "resolved": False, "cached": True}
            if row is None:
                conn.execute(tk.insert(), new_row | done)
            elif retry and row.status == "failed" and attempt > row.attempt:
                update_task(conn, task_id, **done)
            elif row.status in ("completed", "failed"):
                raise task_error(task_id, "task_finished", f"already {row.status}")
            elif row.status == "started" and attempt <= row.attempt:
                raise task_error(
                    task_id, "attempt_not_increasing",
                    f"attempt {attempt} does not follow started attempt {row.attempt}",
                    attempt=attempt, stored_attempt=row.attempt)
            else:
                update_task(conn, task_id, **done)
            return task_from_row(conn.execute(TASK_ROW, {"tid": task_id}).one())

        done: TaskRecord = task_write(self._db, task_id, token, apply,
                                      invocation_id=task.invocation_id, running=True)
        return done
