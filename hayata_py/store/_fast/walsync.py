"""When a fast SQLite write is on disk: its writer syncs the WAL itself, after
the write lock is free, and only for the writes that must be durable.

With ``synchronous=FULL`` SQLite syncs the WAL inside the commit, holding the
database's one write lock for the whole ``fdatasync`` (~0.2 ms here). Eight
parallel branches record their starts one after another: sixteen commits,
each with its sync, in a row. The fast writers (the edge's
:class:`~hayata_py.store._fast.writer.TaskWriter` and
:meth:`~hayata_py.store._sql.engine.EngineHolder.write_all`) instead commit with
``synchronous=NORMAL`` (:func:`defer_sync`; WAL mode only) and then:

- a write that must be durable before its writer goes on (a task's
  ``started`` record before its function runs, an invocation's record before
  ``RunAccepted``, its end before the result is sent, events before a
  subscriber sees them: every :meth:`EngineHolder.write_all`) calls
  :func:`sync_wal` after its commit, outside the lock. The next writer
  commits meanwhile, and concurrent syncs of one file share the disk's flush
  (the filesystem's journal commits them together): group commit, each
  writer still waiting for its own record to be on disk;
- a task's end (``completed``/``failed``, written by its edge before it sends
  the ``Outcome``) is not synced on its own. A process crash does not lose it
  (it is in the WAL file, in the kernel's cache). A power loss can, only
  until the next synced commit of any writer of the database: the WAL is one
  file written in commit order, and ``fdatasync`` flushes all of it (while
  the invocation runs, its agent's lease renewal commits every
  ``lease_seconds / 3`` at the latest). Anything
  that depends on the end reaches disk after it: the next task's ``started``,
  the invocation's end, the events a subscriber sees. What recovery finds
  after a power loss is therefore the database as it was at an instant when
  nothing outside had seen the end; the task is then ``uncertain`` (started,
  no result), as a crash just before its end was written leaves it, and is
  never re-run silently.

PostgreSQL is unchanged: each commit waits for its own flush, and the server
groups concurrent ones.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["defer_sync", "sync_wal"]


def defer_sync(conn: Any) -> str | None:
    """Make ``conn`` (a ``sqlite3`` connection already set to WAL, e.g. by
    ``sqlite_on_connect``) commit without syncing, and return the path of its
    WAL file, which the writer syncs itself (:func:`sync_wal`) after each
    commit that must be durable. None, and the connection left as it was
    (``FULL``: every commit synced inside), unless the database is a file in
    WAL mode."""
    mode = conn.execute("PRAGMA journal_mode").fetchone()
    if not mode or str(mode[0]).lower() != "wal":
        return None
    file = ""
    for _seq, name, path in conn.execute("PRAGMA database_list").fetchall():
        if name == "main":
            file = path or ""
    if not file:  # in memory or temporary: nothing to sync
        return None
    conn.execute("PRAGMA synchronous = NORMAL")
    return f"{file}-wal"


def sync_wal(wal: str) -> None:
    """``fdatasync`` the WAL file ``wal``: every commit written to it so far, by
    any process, is on disk when this returns. Raises ``OSError`` if it cannot:
    the caller reports a store error and does not act on the write (a task's
    function does not run, ``RunAccepted`` is not sent). The commit is visible
    all the same, as a process killed between its commit and its next step
    leaves it (a ``started`` task that never ran: ``uncertain``; an
    invocation nobody was told of: listed by ``unfinished()``).

    Opened by path every time: SQLite deletes the WAL when the last connection
    to the database closes (after copying it into the database file and
    syncing that), and a new one is another file. The caller's connection is
    open, so the WAL that holds its commit is the one at this path; a
    checkpoint that copied the commit into the database file meanwhile synced
    the WAL before and the database file after (SQLite does both in
    ``NORMAL``)."""
    fd = os.open(wal, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)
