"""The edge's store client: a task's ``started``/``completed``/``failed`` writes
on one plain driver connection, without an SQLAlchemy engine.

An edge process writes nothing but its tasks' records. Building an engine,
its pool, dialect and compiled-statement cache costs 5-7 MB of private memory
in each edge process (measured in forked children, ``docs/guide/performance.md``),
for three statements. :class:`TaskWriter` runs the same single-statement fast
writes as :class:`SqlTaskStore` (built by the same builders of
:mod:`~hayata_py.store._fast.statements`, run by the same
:func:`~hayata_py.store._fast.transaction.write_transaction`) on a
``sqlite3`` or psycopg connection of its own. The fencing check is part of
each statement, so a write with a stale token changes nothing.

When a statement changes no row (a stale token, a replayed start, a task
that is not in the expected state) or the driver fails, nothing was written,
and the writer hands the call to the full :class:`SqlTaskStore` (opened on
first need), which re-checks everything in a fresh transaction and raises the
precise error or applies the write. So every outcome, and every error code,
is exactly the store's; only the common case skips the engine. On SQLite a
start is synced after its commit, outside the write lock, and a task's end
is not synced on its own (:mod:`~hayata_py.store._fast.walsync`). One writer
per process and URL (``hayata_py._actors.store_access.writer_for``); not for use
from several threads at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from hayata_py.store import _connect
from hayata_py.store._contract import TaskStore
from hayata_py.store._fast.statements import Statements, end_statement, start_statements
from hayata_py.store._fast.transaction import write_transaction
from hayata_py.store._fast.walsync import defer_sync
from hayata_py.store._fast.writequeue import WriteQueue, queue_for
from hayata_py.store._records import InvocationRecord, TaskRecord
from hayata_py.store._rows import start_checkpoint_values, task_values

__all__ = ["TaskWriter"]


SQLITE_CACHE_KIB = 256
"""SQLite page cache of the writer's connection (SQLite's default: 2,000 KiB).
A single-row write needs a few pages; a bigger cache only fills up with the
tasks table's pages as it grows (about 1 KB of private memory more per task,
up to the limit, in every edge process) and gains nothing: in WAL mode every
other writer's commit empties it anyway."""


def _first_start(task_id: str, task: TaskRecord | None, attempt: int, retry: bool | None
                 ) -> TaskRecord | None:
    """The task's record if this start is a plain first one, which the fast
    statements write (its record in hand, not a retry of a failed row); None
    otherwise: every other start goes to the full store."""
    plain = task is not None and attempt >= 1 and task.task_id == task_id and not retry
    return task if plain else None


def _first_start_statements(task: TaskRecord, token: int, system_instance: str | None,
                            attempt: int, checkpoint: InvocationRecord | None, now: float
                            ) -> Statements:
    """The statements of a plain first start, after the store's checks of the
    checkpoint it carries (``invalid_argument``)."""
    saved = (None if checkpoint is None
             else start_checkpoint_values(task.task_id, task, checkpoint))
    return start_statements(task_values(task), token=token, attempt=attempt,
                            system_instance=system_instance, now=now, checkpoint=saved)


class TaskWriter:
    """``mark_started`` / ``mark_completed`` / ``mark_failed`` of :class:`TaskStore`,
    with the same arguments, effects and errors, for one store URL."""

    def __init__(self, url: str, *, clock: Callable[[], float] = time.time) -> None:
        self.url = url
        self.clock = clock
        parsed = _connect.normalize_url(url)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        # Anything but a plain file or server URL (driver options, an in-memory
        # database) goes to the full store, which knows how to open it.
        self._plain = (parsed.drivername in ("sqlite", "sqlite+pysqlite") and not parsed.query
                       and bool(parsed.database) and parsed.database != ":memory:") or (
                       parsed.drivername == "postgresql+psycopg")
        self._target: str = ((parsed.database or "") if self.is_sqlite
                        else parsed.set(drivername="postgresql").render_as_string(
                            hide_password=False))
        self._conn: Any = None
        self._wal: str | None = None  # SQLite: the WAL this writer syncs (walsync)
        self._queue: WriteQueue | None = None  # SQLite: the database's writers' queue
        self._error: type[Exception] = Exception
        self._store: TaskStore | None = None

    # -- the three writes --------------------------------------------------------

    def mark_started(self, task_id: str, *, token: int, system_instance: str | None,
                     attempt: int, task: TaskRecord | None = None,
                     checkpoint: InvocationRecord | None = None,
                     retry: bool = False) -> TaskRecord:
        first = _first_start(task_id, task, attempt, retry)
        if first is not None:
            now = float(self.clock())
            statements = _first_start_statements(first, token, system_instance, attempt,
                                                 checkpoint, now)
            if self._write_all(statements):
                return dataclasses.replace(first, status="started", attempt=attempt,
                                           started_at=now, finished_at=None,
                                           system_instance=system_instance, resolved=False)
        # A retry (its failed row exists) and every other case: the full store.
        return self._full().mark_started(task_id, token=token, system_instance=system_instance,
                                         attempt=attempt, task=task, checkpoint=checkpoint,
                                         retry=retry)

    def start_many(self, starts: list[dict[str, Any]]) -> bool:
        """Several first starts (each the keyword arguments of :meth:`mark_started`)
        in ONE transaction (one fsync for all): True if all were recorded; False
        if nothing was written (one of them is not a plain first start, or would
        be refused): the caller then records each on its own, which names each
        refusal."""
        now = float(self.clock())
        statements: Statements = []
        for start in starts:
            task = _first_start(start["task_id"], start.get("task"), start["attempt"],
                                start.get("retry"))
            if task is None:
                return False
            statements += _first_start_statements(
                task, start["token"], start["system_instance"], start["attempt"],
                start.get("checkpoint"), now)
        return bool(statements) and self._write_all(statements)

    def mark_completed(self, task_id: str, *, token: int, result: Any) -> None:
        end = end_statement(task_id, token, True, result, float(self.clock()))
        if not self._write_all([end], durable=False):
            self._full().mark_completed(task_id, token=token, result=result)

    def mark_failed(self, task_id: str, *, token: int, error: dict[str, Any]) -> None:
        end = end_statement(task_id, token, False, error, float(self.clock()))
        if not self._write_all([end], durable=False):
            self._full().mark_failed(task_id, token=token, error=error)

    def end_and_start(self, end: tuple[str, int, bool, Any], start: dict[str, Any]) -> bool:
        """One task's end (task id, token, completed?, result or error dict) and
        the next task's first start (the keyword arguments of :meth:`mark_started`)
        in ONE transaction: True if both were recorded; False if nothing was
        written (either would not land as the happy path): the caller then
        records each on its own, which names each refusal."""
        task_id, token, ok, value = end
        task = _first_start(start["task_id"], start.get("task"), start["attempt"],
                            start.get("retry"))
        if task is None:
            return False
        now = float(self.clock())
        statements = [end_statement(task_id, token, ok, value, now)]
        statements += _first_start_statements(
            task, start["token"], start["system_instance"], start["attempt"],
            start.get("checkpoint"), now)
        return self._write_all(statements)

    def finish_many(self, ends: list[tuple[str, int, bool, Any]]
                    ) -> list[Exception | None]:
        """Record several tasks' ends (task id, token, completed?, result or error
        dict) in ONE transaction (group commit: one fsync for all); each as
        :meth:`mark_completed`/:meth:`mark_failed` would, with the same errors,
        returned per task (None: recorded). If any of them would not land as the
        happy path, nothing of the batch is written and each is recorded on its
        own, so a refusal names its task and the others still land."""
        if len(ends) > 1:
            now = float(self.clock())
            statements = [end_statement(task_id, token, ok, value, now)
                          for task_id, token, ok, value in ends]
            if self._write_all(statements, durable=False):
                return [None] * len(ends)
        out: list[Exception | None] = []
        for task_id, token, ok, value in ends:
            try:
                if ok:
                    self.mark_completed(task_id, token=token, result=value)
                else:
                    self.mark_failed(task_id, token=token, error=value)
            except Exception as exc:  # noqa: BLE001 - returned to the caller, per task
                out.append(exc)
            else:
                out.append(None)
        return out

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
        store, self._store = self._store, None
        if store is not None:
            store.close()

    # -- internals ----------------------------------------------------------------

    def _full(self) -> TaskStore:
        if self._store is None:
            from hayata_py.store._sql.store import SqlTaskStore

            self._store = SqlTaskStore(self.url, clock=self.clock)
        return self._store

    def _connect(self) -> tuple[Any, type[Exception]]:
        """A new driver connection (configured as the store's, autocommit off) and
        the driver's error class."""
        if self.is_sqlite:
            conn = sqlite3.connect(self._target, timeout=_connect.SQLITE_BUSY_TIMEOUT_S,
                                   check_same_thread=False)
            try:
                _connect.sqlite_on_connect(conn, None)  # the pooled connections' settings
                conn.execute("PRAGMA busy_timeout = 0")  # write_transaction polls instead
                conn.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KIB}")
                self._wal = defer_sync(conn)  # starts synced after the commit, ends not
            except BaseException:
                conn.close()
                raise
            self._queue = queue_for(self._target)
            return conn, sqlite3.Error
        import psycopg

        return (psycopg.connect(self._target,
                                **_connect.pg_application_name(_connect.normalize_url(self.url))),
                psycopg.Error)

    def _write_all(self, statements: Statements, *, durable: bool = True) -> bool:
        """Fenced statements as one committed transaction
        (:func:`~hayata_py.store._fast.transaction.write_transaction`): True if
        each changed exactly one row and it committed; False if nothing was
        written (a row unchanged, or a driver error before the commit).
        ``durable=False`` (a task's end): on SQLite, not synced on its own; the
        next synced commit of the database carries it to disk
        (:mod:`~hayata_py.store._fast.walsync`)."""
        if not self._plain:
            return False
        if self._conn is None:
            try:
                self._conn, self._error = self._connect()
            except Exception:  # noqa: BLE001 - cannot connect: the full store reports it
                return False
        return write_transaction(self._conn, statements, sqlite=self.is_sqlite,
                                 db_error=self._error, discard=self._drop, queue=self._queue,
                                 wal=self._wal if durable else None)

    def _drop(self) -> None:
        """Never reuse a connection whose state is unknown (the rollback of an
        open transaction happens when it closes)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
