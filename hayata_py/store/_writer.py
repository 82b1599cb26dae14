"""The edge's store client: a task's ``started``/``completed``/``failed`` writes
on one plain driver connection, without an SQLAlchemy engine.

An edge process writes nothing but its tasks' records. Building an engine,
its pool, dialect and compiled-statement cache costs 5-7 MB of private memory
in each edge process (measured in forked children, ``docs/guide/performance.md``),
for three statements. :class:`TaskWriter` runs the same single-statement fast
writes as :class:`SqlTaskStore` (the texts of :mod:`hayata_py.store._fast`,
the same parameters, the same transaction shape as
:meth:`EngineHolder.write_one`) on a ``sqlite3`` or psycopg connection of its
own. The fencing check is part of each statement, so a write with a stale
token changes nothing.

When a statement changes no row (a stale token, a replayed start, a task
that is not in the expected state) or the driver fails, nothing was written,
and the writer hands the call to the full :class:`SqlTaskStore` (opened on
first need), which re-checks everything in a fresh transaction and raises the
precise error or applies the write. So every outcome, and every error code,
is exactly the store's; only the common case skips the engine. On SQLite a
start is synced after its commit, outside the write lock, and a task's end
is not synced on its own (:mod:`~hayata_py.store._walsync`). One writer
per process and URL (``hayata_py._actors.durable.writer_for``); not for use
from several threads at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from hayata_py._codec import encode
from hayata_py.store import _fast, _sqlitetx
from hayata_py.store._contract import TaskStore
from hayata_py.store._engine import _sqlite_on_connect, normalize_url, pg_application_name
from hayata_py.store._records import InvocationRecord, TaskRecord
from hayata_py.store._rows import task_values
from hayata_py.store._sqlitetx import sqlite_transaction
from hayata_py.store._tasks import _checkpoint_of
from hayata_py.store._walsync import defer_sync
from hayata_py.store._writequeue import queue_for

__all__ = ["TaskWriter"]


class _Unchanged(Exception):
    """A statement of a multi-statement write changed no row: roll it all back."""

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


class TaskWriter:
    """``mark_started`` / ``mark_completed`` / ``mark_failed`` of :class:`TaskStore`,
    with the same arguments, effects and errors, for one store URL."""

    def __init__(self, url: str, *, clock: Callable[[], float] = time.time) -> None:
        self.url = url
        self.clock = clock
        parsed = normalize_url(url)
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
        self._wal: str | None = None  # SQLite: the WAL this writer syncs (_walsync)
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
            statements = self._start_statements(task_id, token, system_instance, attempt,
                                                first, checkpoint, now)
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
        statements: list[tuple[_fast.Stmt, tuple[Any, ...]]] = []
        for start in starts:
            task = _first_start(start["task_id"], start.get("task"), start["attempt"],
                                start.get("retry"))
            if task is None:
                return False
            statements += self._start_statements(
                start["task_id"], start["token"], start["system_instance"], start["attempt"],
                task, start.get("checkpoint"), now)
        return bool(statements) and self._write_all(statements)

    @staticmethod
    def _start_statements(task_id: str, token: int, system_instance: str | None,
                          attempt: int, task: TaskRecord, checkpoint: InvocationRecord | None,
                          now: float) -> list[tuple[_fast.Stmt, tuple[Any, ...]]]:
        """The fenced statements of a first start (the step's checkpoint first: both
        or neither), after the same checks as the store's."""
        saved = None if checkpoint is None else _checkpoint_of(task_id, task, checkpoint)
        row = task_values(task)
        params = (task_id, row["invocation_id"], row["execution_id"], row["step"],
                  row["node_id"], row["branch_index"], row["input"], row["result"],
                  row["error"], attempt, now, system_instance, False,
                  row["invocation_id"], token)
        statements = [(_fast.START_NEW_TASK, params)]
        if saved is not None:
            statements.insert(0, (_fast.CHECKPOINT, (
                now, *saved.values(), row["invocation_id"], token)))
        return statements

    def mark_completed(self, task_id: str, *, token: int, result: Any) -> None:
        end = _end_statement(task_id, token, True, result, float(self.clock()))
        if not self._write_all([end], durable=False):
            self._full().mark_completed(task_id, token=token, result=result)

    def mark_failed(self, task_id: str, *, token: int, error: dict[str, Any]) -> None:
        end = _end_statement(task_id, token, False, error, float(self.clock()))
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
        statements = [_end_statement(task_id, token, ok, value, now)]
        statements += self._start_statements(
            start["task_id"], start["token"], start["system_instance"], start["attempt"],
            task, start.get("checkpoint"), now)
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
            statements = [_end_statement(task_id, token, ok, value, now)
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
            from hayata_py.store._sqlalchemy import SqlTaskStore

            self._store = SqlTaskStore(self.url, clock=self.clock)
        return self._store

    def _connect(self) -> tuple[Any, type[Exception]]:
        """A new driver connection and the driver's error class."""
        if self.is_sqlite:
            conn = sqlite3.connect(self._target, timeout=_sqlitetx.SQLITE_BUSY_TIMEOUT_S,
                                   check_same_thread=False)
            try:
                _sqlite_on_connect(conn, None)  # the pooled connections' settings
                conn.execute("PRAGMA busy_timeout = 0")  # _begin_immediate polls instead
                conn.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KIB}")
                self._wal = defer_sync(conn)  # starts synced after the commit, ends not
            except BaseException:
                conn.close()
                raise
            return conn, sqlite3.Error
        import psycopg

        return (psycopg.connect(self._target, autocommit=True,
                                **pg_application_name(normalize_url(self.url))), psycopg.Error)

    def _write_all(self, statements: list[tuple[_fast.Stmt, tuple[Any, ...]]], *,
                   durable: bool = True) -> bool:
        """Fenced statements as one committed transaction: True if each changed
        exactly one row and it committed; False if nothing was written (a row
        unchanged, or a driver error before the commit). The same shape as
        :meth:`EngineHolder.write_all`. ``durable=False`` (a task's end): on
        SQLite, not synced on its own; the next synced commit of the database
        carries it to disk (:mod:`~hayata_py.store._walsync`)."""
        if not self._plain:
            return False
        if self._conn is None:
            try:
                self._conn, self._error = self._connect()
            except Exception:  # noqa: BLE001 - cannot connect: the full store reports it
                return False
        if self.is_sqlite:
            return self._write_sqlite([(stmt.sqlite, params) for stmt, params in statements],
                                      self._wal if durable else None)
        if len(statements) == 1:
            stmt, params = statements[0]
            try:
                with self._conn.cursor() as cursor:
                    # Autocommit: the single statement is atomic, so its fencing check
                    # and write commit together; zero rows changed means nothing written.
                    cursor.execute(stmt.postgresql, params)
                    return bool(cursor.rowcount == 1)
            except self._error:
                self._drop()  # broken or in an unknown state: reconnect next time
                return False
            except BaseException:
                self._drop()
                raise
        return self._write_pg_transaction(statements)

    def _write_pg_transaction(self, statements: list[tuple[_fast.Stmt, tuple[Any, ...]]]
                              ) -> bool:
        conn = self._conn
        try:
            with conn.transaction(), conn.cursor() as cursor:
                for stmt, params in statements:
                    cursor.execute(stmt.postgresql, params)
                    if cursor.rowcount != 1:
                        raise _Unchanged
            return True
        except _Unchanged:
            return False  # rolled back by the transaction block
        except self._error:
            self._drop()
            return False
        except BaseException:
            self._drop()
            raise

    def _write_sqlite(self, statements: list[tuple[str, tuple[Any, ...]]],
                      wal: str | None) -> bool:
        return sqlite_transaction(self._conn, statements, sqlite3.Error, self._drop,
                                  queue_for(self._target), wal)

    def _drop(self) -> None:
        """Never reuse a connection whose state is unknown (the rollback of an
        open transaction happens when it closes)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()


def _end_statement(task_id: str, token: int, ok: bool, value: Any, now: float
                   ) -> tuple[_fast.Stmt, tuple[Any, ...]]:
    """The fenced statement of a task's end: completed with ``value`` as its
    result, or failed with ``value`` as its error dict."""
    return ((_fast.COMPLETE_TASK if ok else _fast.FAIL_TASK),
            (now, encode(value, key="result" if ok else "error"), task_id, token))
