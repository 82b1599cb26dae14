"""The general path's engine: one per process, transactions with retries, and
the fast writes on the engine's own connections.

* One SQLAlchemy engine per process, created lazily on first use. After
  ``os.fork`` the child never touches the parent's engine or connections (a
  fork hook drops them, and a pid check backs it up); the parent's objects are
  kept referenced in the child so garbage collection cannot close sockets or
  SQLite handles the parent still uses.
* Connections are configured by :mod:`hayata_py.store._connect` (SQLite: WAL,
  ``synchronous=FULL``, the busy timeout, ``BEGIN IMMEDIATE`` for writes;
  PostgreSQL via psycopg 3, each connection naming its process). On SQLite the
  fast writes (:meth:`EngineHolder.write_all`) use one connection per thread
  kept out of the pool, since a pool checkout and return cost more than the
  statement; it commits with ``NORMAL`` and syncs after the lock
  (:mod:`hayata_py.store._fast.walsync`).
* PostgreSQL: a pooled connection idle for
  :data:`PG_PING_AFTER_IDLE_S` or longer is pinged before reuse (and replaced
  if dead), so a server restart between bursts goes unnoticed; connections
  in steady use skip the ping's round trip (SQLAlchemy's ``pool_pre_ping``
  would pay it on every transaction). A connection that dies mid-burst fails
  that one call (nothing of it was written, or it is reported as an error;
  a read is made once more on a new connection) and SQLAlchemy then replaces
  every pooled connection.
* The fast writes' transaction is
  :func:`~hayata_py.store._fast.transaction.write_transaction`, shared with the
  edge's task writer; migrations are :mod:`.migrate`'s.
"""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine

from hayata_py._errors import StoreError
from hayata_py.store import _connect
from hayata_py.store._fast.statements import Statements
from hayata_py.store._fast.transaction import write_transaction
from hayata_py.store._fast.walsync import defer_sync
from hayata_py.store._fast.writequeue import queue_for

__all__ = ["EngineHolder"]

T = TypeVar("T")

PG_PING_AFTER_IDLE_S = 1.0
"""A pooled PostgreSQL connection idle this long is pinged before reuse."""
_ABANDONED: list[Engine] = []  # parents' engines, kept alive in forked children
_HOLDERS: weakref.WeakSet[EngineHolder] = weakref.WeakSet()


def _sqlite_on_begin(conn: Connection) -> None:
    mode = conn.get_execution_options().get("hayata_begin", "DEFERRED")
    # Straight to the driver: exec_driver_sql would run SQLAlchemy's whole
    # execution path (events, result setup) for a statement with no result.
    # Errors are wrapped as exec_driver_sql would, so run() still retries
    # "database is locked".
    statement = f"BEGIN {mode}"
    try:
        conn.connection.driver_connection.execute(statement)  # type: ignore[union-attr]
    except sqlite3.Error as exc:
        raise sa.exc.DBAPIError.instance(statement, (), exc, sqlite3.Error) from exc


def _pg_on_checkin(_dbapi_conn: Any, record: Any) -> None:
    record.info["hayata_idle_since"] = time.monotonic()


def _pg_ping_if_idle(engine: Engine) -> Callable[[Any, Any, Any], None]:
    def on_checkout(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        idle_since = record.info.get("hayata_idle_since")
        if idle_since is None or time.monotonic() - idle_since < PG_PING_AFTER_IDLE_S:
            return  # just connected, or used moments ago
        try:
            engine.dialect.do_ping(dbapi_conn)
        except engine.dialect.loaded_dbapi.Error as exc:
            raise sa.exc.DisconnectionError(str(exc)) from exc  # the pool reconnects

    return on_checkout


def _pg_name_process(url: URL) -> Callable[[Any, Any, Any, dict[str, Any]], None]:
    def on_connect(_dialect: Any, _record: Any, _cargs: Any, cparams: dict[str, Any]) -> None:
        cparams.update(_connect.pg_application_name(url))  # the connecting process, after any fork

    return on_connect


def create_engine(url: URL) -> Engine:
    """Create an engine configured as described in the module docs."""
    if url.get_backend_name() == "sqlite":
        engine = sa.create_engine(url, connect_args={"timeout": _connect.SQLITE_BUSY_TIMEOUT_S})
        sa.event.listen(engine, "connect", _connect.sqlite_on_connect)
        sa.event.listen(engine, "begin", _sqlite_on_begin)
        return engine
    engine = sa.create_engine(url)
    sa.event.listen(engine, "do_connect", _pg_name_process(url))
    sa.event.listen(engine, "checkin", _pg_on_checkin)
    sa.event.listen(engine, "checkout", _pg_ping_if_idle(engine))
    return engine


def _close_quietly(conn: Any) -> None:
    with contextlib.suppress(Exception):  # already broken or closed: nothing to release
        conn.close()


def _is_retryable(exc: sa.exc.DBAPIError) -> bool:
    text = str(exc.orig).lower()
    if "database is locked" in text or "database table is locked" in text:
        return True
    sqlstate = getattr(exc.orig, "sqlstate", None)
    return sqlstate in ("40001", "40P01")  # serialization failure, deadlock


class EngineHolder:
    """Owns this process's engine for one URL and runs retried transactions."""

    def __init__(self, url: URL, *, retry_seconds: float = 60.0) -> None:
        self.url = url
        self.is_sqlite = url.get_backend_name() == "sqlite"
        self.retry_seconds = retry_seconds
        file = url.database if self.is_sqlite and url.database not in (None, "", ":memory:") \
            and not url.query else None
        self._queue = None if file is None else queue_for(file)
        self._engine: Engine | None = None
        self._pid = os.getpid()
        self._lock = threading.Lock()
        # SQLite fast writes: one connection per thread, detached from the pool
        # (checkout + return cost more than the statement). Tracked so dispose
        # can close them and connections of exited threads get closed.
        self._pinned = threading.local()
        self._pinned_all: list[tuple[weakref.ref[threading.Thread], Any]] = []
        _HOLDERS.add(self)

    def engine(self) -> Engine:
        """Return this process's engine, creating it on first use."""
        if self._pid != os.getpid():
            self._after_fork()
        engine = self._engine
        if engine is None:
            with self._lock:
                engine = self._engine
                if engine is None:
                    engine = self._engine = create_engine(self.url)
        return engine

    def _after_fork(self) -> None:
        if self._engine is not None:
            _ABANDONED.append(self._engine)
        _ABANDONED.extend(conn for _, conn in self._pinned_all)
        self._engine = None
        self._pinned = threading.local()
        self._pinned_all = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def dispose(self) -> None:
        """Close this process's connections; a later call creates a new engine."""
        with self._lock:
            engine, self._engine = self._engine, None
            pinned, self._pinned_all = self._pinned_all, []
            self._pinned = threading.local()
        if self._pid != os.getpid():
            return
        for _, conn in pinned:
            _close_quietly(conn)
        if engine is not None:
            engine.dispose()

    def _pinned_connection(self, engine: Engine) -> Any:
        """This thread's SQLite connection for fast writes (configured like pooled ones)."""
        local = self._pinned
        conn: Any = getattr(local, "conn", None)
        if conn is not None and local.engine is engine:
            return conn
        fairy = engine.raw_connection()
        conn = fairy.driver_connection
        fairy.detach()  # ours now: the pool neither counts nor resets it
        # write_all waits for the write lock itself (see write_transaction):
        # SQLite's own busy handler sleeps 1, 2, 5, 10, 15, 20, 25 ... ms.
        conn.execute("PRAGMA busy_timeout = 0")
        # Commits not synced inside the write lock; write_all syncs after each.
        local.wal = defer_sync(conn)
        local.conn, local.engine = conn, engine
        with self._lock:
            alive = []
            for ref, other in self._pinned_all:
                thread = ref()
                if thread is None or not thread.is_alive():  # its thread has exited
                    _close_quietly(other)
                else:
                    alive.append((ref, other))
            alive.append((weakref.ref(threading.current_thread()), conn))
            self._pinned_all = alive
        return conn

    def _unpin(self, conn: Any) -> None:
        self._pinned.conn = None
        with self._lock:
            self._pinned_all = [(t, c) for t, c in self._pinned_all if c is not conn]
        _close_quietly(conn)

    def write_all(self, statements: Statements, durable: bool = True) -> bool:
        """Run fenced driver-level statements as one durable write transaction.

        Returns True if each statement changed exactly one row and the
        transaction committed; otherwise it is rolled back (nothing written)
        and the result is False. Any database error before the commit also
        returns False: the caller then takes the general path (:meth:`run`),
        which retries lock contention and reports errors as SQLAlchemy
        exceptions. Bypassing SQLAlchemy's execution layer saves most of a
        transaction's Python overhead. The transaction is
        :func:`~hayata_py.store._fast.transaction.write_transaction`'s: on
        SQLite on a connection this thread keeps for fast writes (configured
        like the pooled ones, closed by :meth:`dispose`), on PostgreSQL on a
        pooled connection (one statement alone in autocommit mode).
        ``durable=False``: on SQLite in WAL mode, committed but not synced on
        its own (the next synced commit carries it,
        :mod:`~hayata_py.store._fast.walsync`).
        """
        engine = self.engine()
        db_error: type[Exception] = engine.dialect.loaded_dbapi.Error
        if not self.is_sqlite:
            raw = engine.raw_connection()
            try:
                return write_transaction(raw.driver_connection, statements, sqlite=False,
                                         db_error=db_error, discard=raw.invalidate)
            finally:
                raw.close()
        conn = self._pinned_connection(engine)
        return write_transaction(conn, statements, sqlite=True, db_error=db_error,
                                 discard=lambda: self._unpin(conn), queue=self._queue,
                                 wal=self._pinned.wal if durable else None)

    def run(self, fn: Callable[[Connection], T], *, write: bool) -> T:
        """Run ``fn`` in one transaction and commit; retry on lock contention.

        Writes on SQLite begin with ``BEGIN IMMEDIATE`` (the write lock is taken
        up front, so the checks ``fn`` makes stay true until commit). Retries
        only errors raised before anything was committed (busy/locked,
        serialization failure, deadlock) for up to ``retry_seconds``.
        """
        deadline = time.monotonic() + self.retry_seconds
        delay = 0.002
        reconnected = False
        while True:
            try:
                with self.engine().connect() as conn:
                    if write and self.is_sqlite:
                        conn.execution_options(hayata_begin="IMMEDIATE")
                    with conn.begin():
                        return fn(conn)
            except sa.exc.DBAPIError as exc:
                if not write and exc.connection_invalidated and not reconnected:
                    # A read on a pooled connection the server had closed (it
                    # restarted, or ended the session): nothing was written, and
                    # SQLAlchemy has replaced the pool; read once more on a new one.
                    reconnected = True
                    continue
                if not _is_retryable(exc):
                    raise
                if time.monotonic() > deadline:
                    raise StoreError(
                        f"database stayed locked for {self.retry_seconds:g} s: {exc.orig}",
                        code="store_unavailable",
                    ) from exc
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.1)


def _reset_after_fork() -> None:
    for holder in list(_HOLDERS):
        holder._after_fork()


os.register_at_fork(after_in_child=_reset_after_fork)
