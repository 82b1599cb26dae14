"""How every connection of the store is opened: URLs, SQLite's settings, the
busy timeout, PostgreSQL's process names.

Shared by both write paths, so a connection of the general path (a pooled
SQLAlchemy one, :mod:`._sql.engine`) and one of the fast path (the edge's
:class:`~hayata_py.store._fast.writer.TaskWriter`) behave alike:

* URLs: plain ``postgresql://`` selects the psycopg 3 driver.
* SQLite: WAL, ``synchronous=FULL`` (a commit is on disk when it returns; the
  fast writes' connections then commit with ``NORMAL`` and sync after the lock,
  :mod:`._fast.walsync`), ``busy_timeout`` :data:`SQLITE_BUSY_TIMEOUT_S`,
  foreign keys on, and pysqlite's own transaction handling switched off (the
  SQLAlchemy-documented recipe), so writes start with ``BEGIN IMMEDIATE`` and
  reads with ``BEGIN``.
* PostgreSQL: each connection names its process in
  ``pg_stat_activity.application_name`` (``hayata_py pid N``, unless the URL
  sets ``application_name``), so an operator sees which process holds a lock.
"""

from __future__ import annotations

import os
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL

__all__ = ["SQLITE_BUSY_TIMEOUT_S", "normalize_url", "pg_application_name", "sqlite_on_connect"]

SQLITE_BUSY_TIMEOUT_S = 30.0
"""How long a writer waits for SQLite's write lock before it reports an error
(read at each use: a process may lower it before it forks, as the chaos drills do)."""


def normalize_url(url: str | URL) -> URL:
    """Parse ``url``; plain ``postgresql`` selects the psycopg 3 driver."""
    parsed = sa.make_url(url)
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def sqlite_on_connect(dbapi_conn: Any, _record: Any) -> None:
    """Configure a new ``sqlite3`` connection as the module docs say."""
    dbapi_conn.isolation_level = None  # we emit BEGIN ourselves
    cursor = dbapi_conn.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = FULL")
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def pg_application_name(url: URL) -> dict[str, Any]:
    """The connect argument naming this process in ``pg_stat_activity`` (none if
    the URL names the application itself)."""
    if "application_name" in url.query:
        return {}
    return {"application_name": f"hayata_py pid {os.getpid()}"}
