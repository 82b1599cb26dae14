"""SQLite write transactions on a plain ``sqlite3`` connection: the fast path
of every task and invocation record.

:func:`sqlite_transaction` runs ``BEGIN IMMEDIATE``, the statements and
``COMMIT`` (or rolls back if a statement did not change exactly one row),
waits for the database's writers' queue first (:mod:`._writequeue`) and
syncs the WAL after the commit (:mod:`._walsync`). ``BEGIN IMMEDIATE`` is
polled while another writer holds the lock, up to
:data:`SQLITE_BUSY_TIMEOUT_S`, which is also the busy timeout every SQLite
connection of this package is opened with (:mod:`._engine`).
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any

from hayata_py.store._walsync import sync_wal
from hayata_py.store._writequeue import WriteQueue

__all__ = ["SQLITE_BUSY_TIMEOUT_S", "sqlite_transaction"]

SQLITE_BUSY_TIMEOUT_S = 30.0
"""How long a writer waits for SQLite's write lock before it reports an error."""


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return bool(code & 0xFF == sqlite3.SQLITE_BUSY)
    return "database is locked" in str(exc).lower()


def _begin_immediate(cursor: Any) -> None:
    """``BEGIN IMMEDIATE`` on a connection with ``busy_timeout = 0``, retried
    while another writer holds the lock.

    Concurrent writers (parallel edges recording their tasks) each hold the
    lock for about one commit (0.1-0.5 ms). SQLite's own busy handler sleeps
    1, 2, 5, 10, 15, 20, 25 ... ms between tries, so the eighth of eight
    writers waited tens of milliseconds for a lock that was free most of the
    time; this polls every 0.1-2 ms instead. ``BEGIN IMMEDIATE`` takes the lock
    before anything is read or written, so a busy attempt changed nothing.
    After :data:`SQLITE_BUSY_TIMEOUT_S` the error is raised (the caller then
    takes the general path, which waits again with SQLite's handler).
    """
    deadline = 0.0
    delay = 0.0001
    while True:
        try:
            cursor.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc):
                raise
            now = time.monotonic()
            if not deadline:
                deadline = now + SQLITE_BUSY_TIMEOUT_S
            elif now > deadline:
                raise
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 1.5, 0.002)


def sqlite_transaction(conn: Any, statements: Sequence[tuple[str, Sequence[Any]]],
                       db_error: type[Exception], discard: Callable[[], None],
                       queue: WriteQueue | None = None, wal: str | None = None) -> bool:
    """``BEGIN IMMEDIATE``, ``statements``, ``COMMIT`` on a plain sqlite3
    connection: True if each changed exactly one row and it committed; else
    rolled back and False (a driver error too). ``discard`` is called when the
    connection's state is unknown (interrupted, a failed rollback or commit):
    it must never be reused. ``queue``: the database's writers' queue, waited
    for first (:mod:`~hayata_py.store._writequeue`). ``wal``: the WAL file to
    sync once the commit is done and the queue free (:mod:`~hayata_py.store._walsync`;
    an ``OSError`` if it cannot); None: nothing after the commit (a ``FULL``
    connection synced it, or a deferred write). Shared by
    :meth:`~hayata_py.store._engine.EngineHolder.write_all` and the edge's light
    writer (``_writer.py``)."""
    if queue is None:
        done = _transaction(conn, statements, db_error, discard)
    else:
        with queue.hold():
            done = _transaction(conn, statements, db_error, discard)
    if done and wal is not None:
        sync_wal(wal)
    return done


def _transaction(conn: Any, statements: Sequence[tuple[str, Sequence[Any]]],
                 db_error: type[Exception], discard: Callable[[], None]) -> bool:
    try:
        cursor = conn.cursor()
        try:
            _begin_immediate(cursor)
            changed = True
            for sql, params in statements:
                cursor.execute(sql, params)
                if cursor.rowcount != 1:
                    changed = False
                    break
        finally:
            cursor.close()
    except db_error:
        try:
            conn.rollback()
        except db_error:
            discard()
        return False
    except BaseException:
        discard()  # interrupted mid-transaction: never reuse it
        raise
    try:
        if not changed:
            conn.rollback()
            return False
        conn.commit()
    except BaseException:
        discard()  # state unknown: never reuse it
        raise
    return True
