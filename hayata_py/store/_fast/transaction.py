"""The fast writes' one transaction helper: fenced statements on a plain driver
connection, committed only if each changed exactly one row.

:func:`write_transaction` is shared by the two writers of fast statements:
:meth:`~hayata_py.store._sql.engine.EngineHolder.write_all` (on the store's
own connections) and the edge's :class:`~hayata_py.store._fast.writer.TaskWriter`
(on a connection of its own). Either way:

* SQLite: ``BEGIN IMMEDIATE``, the statements, ``COMMIT`` (or ``ROLLBACK`` if
  a statement did not change exactly one row), after waiting for the
  database's writers' queue (:mod:`.writequeue`), then the WAL is synced
  outside the lock when the write must be durable (:mod:`.walsync`).
  ``BEGIN IMMEDIATE`` is polled while another writer holds the lock, up to
  :data:`~hayata_py.store._connect.SQLITE_BUSY_TIMEOUT_S`.
* PostgreSQL: one statement runs alone in autocommit mode - a single
  statement is atomic, so its fencing check and its write commit together,
  and zero changed rows means nothing was written; this saves the ``BEGIN``
  and ``COMMIT`` round trips. Several run in one transaction.

A driver error before the commit rolls back and returns False (nothing was
written); the connection is discarded (never reused) when the rollback fails
too, or when the call is interrupted mid-transaction (its state unknown).
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from hayata_py.store import _connect
from hayata_py.store._fast.statements import Statements
from hayata_py.store._fast.walsync import sync_wal
from hayata_py.store._fast.writequeue import WriteQueue

__all__ = ["write_transaction"]


def write_transaction(conn: Any, statements: Statements, *, sqlite: bool,
                      db_error: type[Exception], discard: Callable[[], None],
                      queue: WriteQueue | None = None, wal: str | None = None) -> bool:
    """Run ``statements`` as one committed transaction on ``conn``: True if each
    changed exactly one row and it committed; else nothing was written and False.

    ``conn``: a ``sqlite3`` connection (``sqlite``; configured by
    :func:`~hayata_py.store._connect.sqlite_on_connect`, ``busy_timeout = 0``)
    or a psycopg one not in a transaction, with autocommit off. ``db_error``:
    the driver's error class. ``discard`` is called when the connection's state
    is unknown (interrupted, a failed rollback or commit): it must never be
    reused. SQLite only: ``queue``, the database's writers' queue, waited for
    first; ``wal``, the WAL file to sync once the commit is done and the queue
    free (an ``OSError`` if it cannot); None: nothing after the commit (a
    ``FULL`` connection synced it, or a deferred write).
    """
    if not sqlite:
        return _postgresql(conn, statements, db_error, discard)
    if queue is None:
        done = _sqlite(conn, statements, db_error, discard)
    else:
        with queue.hold():
            done = _sqlite(conn, statements, db_error, discard)
    if done and wal is not None:
        sync_wal(wal)
    return done


def _postgresql(conn: Any, statements: Statements, db_error: type[Exception],
                discard: Callable[[], None]) -> bool:
    try:
        if len(statements) == 1:
            stmt, params = statements[0]
            conn.autocommit = True
            try:
                with conn.cursor() as cursor:
                    cursor.execute(stmt.postgresql, params)
                    return bool(cursor.rowcount == 1)
            finally:
                conn.autocommit = False
        with conn.cursor() as cursor:
            for stmt, params in statements:
                cursor.execute(stmt.postgresql, params)
                if cursor.rowcount != 1:
                    conn.rollback()
                    return False
        conn.commit()
    except db_error:
        _rollback_or_discard(conn, db_error, discard)
        return False
    except BaseException:
        discard()  # interrupted mid-transaction: never reuse it
        raise
    return True


def _rollback_or_discard(conn: Any, db_error: type[Exception],
                         discard: Callable[[], None]) -> None:
    try:
        conn.rollback()
    except db_error:  # a broken connection
        discard()


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
    After :data:`~hayata_py.store._connect.SQLITE_BUSY_TIMEOUT_S` the error is
    raised (the caller then takes the general path, which waits again with
    SQLite's handler).
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
                deadline = now + _connect.SQLITE_BUSY_TIMEOUT_S
            elif now > deadline:
                raise
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 1.5, 0.002)


def _sqlite(conn: Any, statements: Statements, db_error: type[Exception],
            discard: Callable[[], None]) -> bool:
    try:
        cursor = conn.cursor()
        try:
            _begin_immediate(cursor)
            changed = True
            for stmt, params in statements:
                cursor.execute(stmt.sqlite, params)
                if cursor.rowcount != 1:
                    changed = False
                    break
        finally:
            cursor.close()
    except db_error:
        _rollback_or_discard(conn, db_error, discard)
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
