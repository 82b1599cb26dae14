"""Task records of :class:`~hayata_py.store._sql.store.SqlTaskStore`: the
"task records" section of the contract.

A task's first start, its end and its completion from the cache try the fast
statements first (:mod:`hayata_py.store._fast.statements`, the builders every
writer uses); the general path runs :func:`task_write`: one transaction that
locks the task's invocation, checks the writer's token, then writes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from hayata_py._codec import decode, encode
from hayata_py._errors import StoreError
from hayata_py.store._fast.statements import end_statement, start_statements
from hayata_py.store._records import FINISHED_TASK_STATUSES, InvocationRecord, TaskRecord
from hayata_py.store._rows import (
    start_checkpoint_values,
    task_error,
    task_from_row,
    task_values,
)
from hayata_py.store._sql.base import SqlBase, fence
from hayata_py.store._sql.engine import EngineHolder
from hayata_py.store._sql.schema import invocations as inv
from hayata_py.store._sql.schema import tasks as tk

__all__ = ["TaskRecords", "task_write", "update_task"]

# Statements built once: SQLAlchemy then reuses their cache keys and compiled form.
TASK_ROW = sa.select(tk).where(tk.c.task_id == sa.bindparam("tid"))
_TASK_ROW_LOCKED = TASK_ROW.with_for_update()
_TASK_UPDATE = tk.update().where(tk.c.task_id == sa.bindparam("b_task_id"))


def task_write(
    db: EngineHolder,
    task_id: str,
    token: int,
    apply: Callable[[Connection, Any], Any],
    *,
    invocation_id: str | None = None,
    running: bool = False,
) -> Any:
    """Lock the task's invocation, fence, then ``apply(conn, task_row)``, in one
    transaction of ``db``'s general path."""

    def write(conn: Connection) -> Any:
        # SQLite: BEGIN IMMEDIATE already holds the write lock, so the first
        # read stays valid. PostgreSQL: re-read after locking the invocation,
        # since task rows only change under that lock.
        params = {"tid": task_id}
        row = conn.execute(TASK_ROW, params).first()
        iid = invocation_id
        if iid is None:
            if row is None:
                raise task_error(task_id, "task_not_found", "no such task")
            iid = row.invocation_id
        fence(conn, iid, token, running=running)
        if not db.is_sqlite:
            row = conn.execute(_TASK_ROW_LOCKED, params).first()
        if row is not None:
            task_from_row(row)  # a corrupt row is refused, never written over
        return apply(conn, row)

    return db.run(write, write=True)


def update_task(conn: Connection, task_id: str, **values: Any) -> None:
    """Overwrite columns of the task's row (inside a :func:`task_write`)."""
    conn.execute(_TASK_UPDATE, {"b_task_id": task_id, **values})


class TaskRecords(SqlBase):
    """Scheduled, started, completed or failed, and resolved task records."""

    def schedule_tasks(self, tasks: Sequence[TaskRecord], *, token: int) -> None:
        if not tasks:
            return
        iids = {t.invocation_id for t in tasks}
        if len(iids) != 1:
            raise StoreError(
                f"schedule_tasks got tasks of several invocations: {sorted(iids)}",
                code="invalid_argument",
            )
        (iid,) = iids
        rows = [
            task_values(t)
            | {"status": "scheduled", "attempt": 0, "started_at": None, "finished_at": None}
            for t in tasks
        ]

        def write(conn: Connection) -> None:
            fence(conn, iid, token, running=True)
            dialect = sqlite if self._db.is_sqlite else postgresql
            stmt = dialect.insert(tk).on_conflict_do_nothing(index_elements=["task_id"])
            conn.execute(stmt, rows)

        self._db.run(write, write=True)

    def mark_started(
        self,
        task_id: str,
        *,
        token: int,
        system_instance: str | None,
        attempt: int,
        task: TaskRecord | None = None,
        checkpoint: InvocationRecord | None = None,
        retry: bool = False,
    ) -> TaskRecord:
        if attempt < 1:
            raise task_error(task_id, "invalid_argument", f"attempt must be >= 1, got {attempt}")
        if task is not None and task.task_id != task_id:
            raise task_error(task_id, "invalid_argument", f"task record is {task.task_id}")
        saved = None if checkpoint is None else start_checkpoint_values(task_id, task, checkpoint)
        checkpoint_iid = None if checkpoint is None else checkpoint.invocation_id
        new_row = None if task is None else task_values(task)
        if new_row is not None:
            # Happy path: create the started row, fenced, in one statement (after
            # the checkpoint's, in the same transaction, when one rides along).
            now = float(self.clock())
            statements = start_statements(new_row, token=token, attempt=attempt,
                                          system_instance=system_instance, now=now,
                                          checkpoint=saved)
            if self._db.write_all(statements):
                return task_from_row(
                    SimpleNamespace(
                        **new_row
                        | {
                            "status": "started",
                            "attempt": attempt,
                            "started_at": now,
                            "finished_at": None,
                            "system_instance": system_instance,
                            "resolved": False,
                        }
                    )
                )

        def apply(conn: Connection, row: Any) -> TaskRecord:
            if saved is not None:  # rolled back with the rest if anything below raises
                conn.execute(inv.update().where(inv.c.invocation_id == checkpoint_iid)
                             .values(updated_at=self.clock(), **saved))
            started = {
                "status": "started",
                "attempt": attempt,
                "system_instance": system_instance,
                "started_at": self.clock(),
                "finished_at": None,
            }
            if row is None:
                if new_row is None:
                    raise task_error(task_id, "task_not_found", "no such task")
                conn.execute(tk.insert(), new_row | started | {"resolved": False})
            elif retry and row.status == "failed" and attempt > row.attempt:
                # The next attempt after a recorded failure (a retry): its error goes.
                update_task(conn, task_id, **started, error=encode(None, key="error"))
            elif row.status in FINISHED_TASK_STATUSES:
                raise task_error(task_id, "task_finished", f"already {row.status}")
            elif row.status == "started" and attempt <= row.attempt:
                if attempt == row.attempt and system_instance == row.system_instance:
                    return task_from_row(row)
                raise task_error(
                    task_id,
                    "attempt_not_increasing",
                    f"attempt {attempt} does not follow started attempt {row.attempt}",
                    attempt=attempt,
                    stored_attempt=row.attempt,
                )
            else:
                update_task(conn, task_id, **started)
            return task_from_row(conn.execute(TASK_ROW, {"tid": task_id}).one())

        iid = None if task is None else task.invocation_id
        result: TaskRecord = task_write(
            self._db, task_id, token, apply, invocation_id=iid, running=True
        )
        return result

    def _finish(self, task_id: str, token: int, status: str, column: str, value: Any) -> None:
        if self._db.write_all([end_statement(task_id, token, status == "completed", value,
                                             float(self.clock()))]):
            return
        data = encode(value, key=column)
        where = f"task {task_id}"

        def apply(conn: Connection, row: Any) -> None:
            if row is None:
                raise task_error(task_id, "task_not_found", "no such task")
            if row.status in FINISHED_TASK_STATUSES:
                same = (
                    row.status == status
                    and not row.resolved
                    and decode(getattr(row, column), record=where, column=column) == value
                )
                if same:
                    return
                raise task_error(task_id, "task_finished", f"already {row.status}")
            if status == "completed" and row.status != "started":
                raise task_error(task_id, "task_not_started", f"is {row.status}, not started")
            update_task(conn, task_id, status=status, finished_at=self.clock(), **{column: data})

        task_write(self._db, task_id, token, apply, running=True)

    def mark_completed(self, task_id: str, *, token: int, result: Any) -> None:
        self._finish(task_id, token, "completed", "result", result)

    def mark_failed(self, task_id: str, *, token: int, error: dict[str, Any]) -> None:
        self._finish(task_id, token, "failed", "error", error)

    def resolve_task(self, task_id: str, *, result: Any, token: int) -> None:
        data = encode(result, key="result")
        where = f"task {task_id}"

        def apply(conn: Connection, row: Any) -> None:
            if row is None:
                raise task_error(task_id, "task_not_found", "no such task")
            if (
                row.status == "completed"
                and row.resolved
                and decode(row.result, record=where, column="result") == result
            ):
                return
            if row.status != "started":
                raise task_error(
                    task_id,
                    "task_not_uncertain",
                    f"is {row.status}; only a started (uncertain) task can be resolved",
                    status=row.status,
                )
            update_task(
                conn,
                task_id,
                status="completed",
                result=data,
                resolved=True,
                finished_at=self.clock(),
            )

        task_write(self._db, task_id, token, apply)

    def get_tasks(
        self, invocation_id: str, *, execution_id: str | None = None, step: int | None = None
    ) -> list[TaskRecord]:
        query = sa.select(tk).where(tk.c.invocation_id == invocation_id)
        if execution_id is not None:
            query = query.where(tk.c.execution_id == execution_id)
        if step is not None:
            query = query.where(tk.c.step == step)
        query = query.order_by(tk.c.step, tk.c.branch_index, tk.c.task_id)
        rows = self._db.run(lambda conn: conn.execute(query).all(), write=False)
        return [task_from_row(r) for r in rows]

    def get_task(self, task_id: str) -> TaskRecord | None:
        query = sa.select(tk).where(tk.c.task_id == task_id)
        row = self._db.run(lambda conn: conn.execute(query).first(), write=False)
        return None if row is None else task_from_row(row)
