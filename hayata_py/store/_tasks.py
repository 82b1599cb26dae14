"""Fencing helpers and the task-record writes of :class:`SqlTaskStore`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from hayata_py._codec import decode, encode
from hayata_py._errors import StaleWriter, StoreError
from hayata_py.store import _fast
from hayata_py.store._engine import EngineHolder
from hayata_py.store._records import (
    FINISHED_TASK_STATUSES,
    TERMINAL_INVOCATION_STATUSES,
    InvocationRecord,
    TaskRecord,
)
from hayata_py.store._rows import check_control, checkpoint_values, task_from_row, task_values
from hayata_py.store._schema import invocations as inv
from hayata_py.store._schema import tasks as tk

__all__ = ["TaskWrites", "fence", "lock_invocation"]

# Statements built once: SQLAlchemy then reuses their cache keys and compiled form.
_LOCK_INVOCATION = (
    sa.select(inv.c.token, inv.c.status, inv.c.owner, inv.c.lease_expires_at,
              inv.c.format_version, inv.c.agent_id, inv.c.thread_id)
    .where(inv.c.invocation_id == sa.bindparam("iid"))
    .with_for_update()
)
_TASK_ROW = sa.select(tk).where(tk.c.task_id == sa.bindparam("tid"))
_TASK_ROW_LOCKED = _TASK_ROW.with_for_update()
_TASK_UPDATE = tk.update().where(tk.c.task_id == sa.bindparam("b_task_id"))


def lock_invocation(conn: Connection, invocation_id: str) -> Any:
    """Lock the invocation row for this transaction and return its control columns.

    Refuses a row of a newer value format (:class:`SchemaTooNew`) or with an
    unknown status (:class:`CorruptRecord`): nothing is written to it.
    """
    row = conn.execute(_LOCK_INVOCATION, {"iid": invocation_id}).first()
    if row is None:
        raise StoreError(
            f"invocation {invocation_id} does not exist",
            code="invocation_not_found",
            invocation_id=invocation_id,
        )
    check_control(row, f"invocation {invocation_id}")
    return row


def fence(conn: Connection, invocation_id: str, token: int, *, running: bool = False) -> Any:
    """Lock the invocation; raise StaleWriter unless ``token`` is current.

    With ``running=True`` also raise ``invocation_finished`` if it is terminal.
    """
    row = lock_invocation(conn, invocation_id)
    if row.token != token:
        raise StaleWriter(
            f"invocation {invocation_id}: token {token} is not the current token "
            f"{row.token} (another owner has claimed it); nothing was written",
            invocation_id=invocation_id,
            token=token,
            current_token=row.token,
        )
    if running and row.status in TERMINAL_INVOCATION_STATUSES:
        raise StoreError(
            f"invocation {invocation_id} is {row.status}; it cannot be changed",
            code="invocation_finished",
            invocation_id=invocation_id,
            status=row.status,
        )
    return row


def _task_error(task_id: str, code: str, message: str, **details: Any) -> StoreError:
    return StoreError(f"task {task_id}: {message}", code=code, task_id=task_id, **details)


def _checkpoint_of(task_id: str, task: TaskRecord | None, record: InvocationRecord
                   ) -> dict[str, Any]:
    """The encoded checkpoint columns of ``record`` for ``mark_started(checkpoint=...)``,
    checked before anything is written."""
    if task is None:
        raise _task_error(task_id, "invalid_argument",
                          "a checkpoint can only be saved with the task record it names")
    if record.invocation_id != task.invocation_id or record.status != "running":
        raise _task_error(
            task_id, "invalid_argument",
            f"the checkpoint must be of the task's running invocation {task.invocation_id}, "
            f"got {record.invocation_id} ({record.status})")
    active = record.active_execution
    if active is None or active.execution_id != task.execution_id \
            or task.node_id not in active.node_ids:
        raise _task_error(task_id, "invalid_argument",
                          f"the checkpoint must name the task's execution {task.execution_id} "
                          f"and node {task.node_id!r}")
    return checkpoint_values(record)


class TaskWrites:
    """Task-record writes; mixed into SqlTaskStore (which provides ``_db``, ``clock``)."""

    _db: EngineHolder
    clock: Callable[[], float]

    def _task_write(
        self,
        task_id: str,
        token: int,
        apply: Callable[[Connection, Any], Any],
        *,
        invocation_id: str | None = None,
        running: bool = False,
    ) -> Any:
        """Lock the task's invocation, fence, then ``apply(conn, task_row)``."""

        def write(conn: Connection) -> Any:
            # SQLite: BEGIN IMMEDIATE already holds the write lock, so the first
            # read stays valid. PostgreSQL: re-read after locking the invocation,
            # since task rows only change under that lock.
            params = {"tid": task_id}
            row = conn.execute(_TASK_ROW, params).first()
            iid = invocation_id
            if iid is None:
                if row is None:
                    raise _task_error(task_id, "task_not_found", "no such task")
                iid = row.invocation_id
            fence(conn, iid, token, running=running)
            if not self._db.is_sqlite:
                row = conn.execute(_TASK_ROW_LOCKED, params).first()
            if row is not None:
                task_from_row(row)  # a corrupt row is refused, never written over
            return apply(conn, row)

        return self._db.run(write, write=True)

    def _update(self, conn: Connection, task_id: str, **values: Any) -> None:
        conn.execute(_TASK_UPDATE, {"b_task_id": task_id, **values})

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
            raise _task_error(task_id, "invalid_argument", f"attempt must be >= 1, got {attempt}")
        if task is not None and task.task_id != task_id:
            raise _task_error(task_id, "invalid_argument", f"task record is {task.task_id}")
        saved = None if checkpoint is None else _checkpoint_of(task_id, task, checkpoint)
        checkpoint_iid = None if checkpoint is None else checkpoint.invocation_id
        new_row = None if task is None else task_values(task)
        if new_row is not None:
            # Happy path: create the started row, fenced, in one statement (after
            # the checkpoint's, in the same transaction, when one rides along).
            now = float(self.clock())
            params = (
                task_id,
                new_row["invocation_id"],
                new_row["execution_id"],
                new_row["step"],
                new_row["node_id"],
                new_row["branch_index"],
                new_row["input"],
                new_row["result"],
                new_row["error"],
                attempt,
                now,
                system_instance,
                False,
                new_row["invocation_id"],
                token,
            )
            statements: list[tuple[str, Sequence[Any]]] = [
                (_fast.START_NEW_TASK.text(self._db.is_sqlite), params)]
            if saved is not None:
                # The checkpoint first, in the same transaction: both or neither.
                statements.insert(0, (_fast.CHECKPOINT.text(self._db.is_sqlite), (
                    now, *saved.values(), new_row["invocation_id"], token)))
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
                    raise _task_error(task_id, "task_not_found", "no such task")
                conn.execute(tk.insert(), new_row | started | {"resolved": False})
            elif retry and row.status == "failed" and attempt > row.attempt:
                # The next attempt after a recorded failure (a retry): its error goes.
                self._update(conn, task_id, **started, error=encode(None, key="error"))
            elif row.status in FINISHED_TASK_STATUSES:
                raise _task_error(task_id, "task_finished", f"already {row.status}")
            elif row.status == "started" and attempt <= row.attempt:
                if attempt == row.attempt and system_instance == row.system_instance:
                    return task_from_row(row)
                raise _task_error(
                    task_id,
                    "attempt_not_increasing",
                    f"attempt {attempt} does not follow started attempt {row.attempt}",
                    attempt=attempt,
                    stored_attempt=row.attempt,
                )
            else:
                self._update(conn, task_id, **started)
            return task_from_row(conn.execute(_TASK_ROW, {"tid": task_id}).one())

        iid = None if task is None else task.invocation_id
        result: TaskRecord = self._task_write(
            task_id, token, apply, invocation_id=iid, running=True
        )
        return result

    def _finish(self, task_id: str, token: int, status: str, column: str, value: Any) -> None:
        data = encode(value, key=column)
        fast = _fast.COMPLETE_TASK if status == "completed" else _fast.FAIL_TASK
        params = (float(self.clock()), data, task_id, token)
        if self._db.write_one(fast.text(self._db.is_sqlite), params):
            return
        where = f"task {task_id}"

        def apply(conn: Connection, row: Any) -> None:
            if row is None:
                raise _task_error(task_id, "task_not_found", "no such task")
            if row.status in FINISHED_TASK_STATUSES:
                same = (
                    row.status == status
                    and not row.resolved
                    and decode(getattr(row, column), record=where, column=column) == value
                )
                if same:
                    return
                raise _task_error(task_id, "task_finished", f"already {row.status}")
            if status == "completed" and row.status != "started":
                raise _task_error(task_id, "task_not_started", f"is {row.status}, not started")
            self._update(conn, task_id, status=status, finished_at=self.clock(), **{column: data})

        self._task_write(task_id, token, apply, running=True)

    def mark_completed(self, task_id: str, *, token: int, result: Any) -> None:
        self._finish(task_id, token, "completed", "result", result)

    def mark_failed(self, task_id: str, *, token: int, error: dict[str, Any]) -> None:
        self._finish(task_id, token, "failed", "error", error)

    def resolve_task(self, task_id: str, *, result: Any, token: int) -> None:
        data = encode(result, key="result")
        where = f"task {task_id}"

        def apply(conn: Connection, row: Any) -> None:
            if row is None:
                raise _task_error(task_id, "task_not_found", "no such task")
            if (
                row.status == "completed"
                and row.resolved
                and decode(row.result, record=where, column="result") == result
            ):
                return
            if row.status != "started":
                raise _task_error(
                    task_id,
                    "task_not_uncertain",
                    f"is {row.status}; only a started (uncertain) task can be resolved",
                    status=row.status,
                )
            self._update(
                conn,
                task_id,
                status="completed",
                result=data,
                resolved=True,
                finished_at=self.clock(),
            )

        self._task_write(task_id, token, apply)
