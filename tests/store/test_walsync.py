"""When SQLite's fast writes reach the disk (``store/_fast/walsync.py``).

A start (and every ``EngineHolder.write_all``) is synced by its writer after
its commit and before the call returns, outside the write lock; a task's end
is not synced on its own, yet survives the death of its writer's process,
and the next synced commit of any writer carries it to disk. A failed sync
is an error, never a silent success. A database not in WAL mode keeps
``synchronous=FULL``."""

from __future__ import annotations

import os
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hayata_py.store import SqlTaskStore
from hayata_py.store._connect import normalize_url
from hayata_py.store._fast.statements import Stmt
from hayata_py.store._fast.walsync import defer_sync, sync_wal
from hayata_py.store._fast.writequeue import queue_for
from hayata_py.store._fast.writer import TaskWriter
from hayata_py.store._sql.engine import EngineHolder
from tests.store.util import invocation, start_child, task

pytestmark = pytest.mark.timeout(60)


class Syncs:
    """Every ``fdatasync`` of this process: the file it synced, and whether the
    writers' queue of ``db`` was held at that moment (by anyone)."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.calls: list[tuple[str, bool]] = []

    def record(self, real: Any) -> Any:
        def fdatasync(fd: int) -> None:
            held = _queue_taken(self.db)
            self.calls.append((os.readlink(f"/proc/self/fd/{fd}"), held))
            real(fd)
        return fdatasync

    def of_wal(self) -> list[bool]:
        return [held for path, held in self.calls if path == f"{self.db}-wal"]


def _queue_taken(db: Path) -> bool:
    import fcntl

    fd = os.open(queue_for(str(db)).path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "w.db"


@pytest.fixture
def store(db: Path) -> Iterator[SqlTaskStore]:
    opened = SqlTaskStore(f"sqlite:///{db}")
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def syncs(db: Path, monkeypatch: pytest.MonkeyPatch) -> Syncs:
    recorder = Syncs(db)
    monkeypatch.setattr(os, "fdatasync", recorder.record(os.fdatasync))
    return recorder


def _synchronous(conn: Any) -> int:
    return int(conn.execute("PRAGMA synchronous").fetchone()[0])


def test_a_start_is_synced_after_its_commit_outside_the_queue(
        db: Path, store: SqlTaskStore, syncs: Syncs) -> None:
    token = store.create_invocation(invocation(), owner="o1")
    writer = TaskWriter(f"sqlite:///{db}")
    try:
        a = task("a")
        syncs.calls.clear()
        writer.mark_started(a.task_id, token=token, system_instance="s", attempt=1, task=a)
        # One sync of the WAL before mark_started returned, the queue already free.
        assert syncs.of_wal() == [False]
        assert _synchronous(writer._conn) == 1  # NORMAL: nothing synced inside the commit
    finally:
        writer.close()


def test_ends_are_not_synced_on_their_own_and_the_next_start_carries_them(
        db: Path, store: SqlTaskStore, syncs: Syncs) -> None:
    token = store.create_invocation(invocation(), owner="o1")
    writer = TaskWriter(f"sqlite:///{db}")
    try:
        a, b, c, d, e = (task(n) for n in "abcde")
        for t in (a, b, c, d):
            writer.mark_started(t.task_id, token=token, system_instance="s", attempt=1, task=t)
        syncs.calls.clear()
        writer.mark_completed(a.task_id, token=token, result={"r": 1})
        writer.mark_failed(b.task_id, token=token,
                           error={"code": "x", "message": "m", "details": {}})
        assert writer.finish_many([(c.task_id, token, True, {"r": 3}),
                                   (d.task_id, token, True, {"r": 4})]) == [None, None]
        assert syncs.of_wal() == []
        # Written all the same: another connection reads them at once.
        assert [store.get_task(t.task_id).status for t in (a, b, c, d)] == [  # type: ignore[union-attr]
            "completed", "failed", "completed", "completed"]
        writer.mark_started(e.task_id, token=token, system_instance="s", attempt=1, task=e)
        assert syncs.of_wal() == [False]  # this sync flushes the WAL: the ends with it
    finally:
        writer.close()


def test_a_create_not_durable_is_committed_unsynced_and_the_first_start_carries_it(
        db: Path, store: SqlTaskStore, syncs: Syncs) -> None:
    """``AgentRef.invoke``'s create: readable at once, not synced on its own;
    its first task's start, synced before the function runs, flushes it."""
    syncs.calls.clear()
    token = store.create_invocation(invocation(), owner="o1", durable=False)
    batch = store.create_invocations([(invocation("inv-2"), None), (invocation("inv-3"), None)],
                                     owner="o1", max_running=None, durable=False)
    assert syncs.of_wal() == []
    assert batch == [1, 1]
    assert [store.get_invocation(i).status for i in ("inv-1", "inv-2", "inv-3")] == [  # type: ignore[union-attr]
        "running"] * 3
    writer = TaskWriter(f"sqlite:///{db}")
    try:
        a = task("a")
        writer.mark_started(a.task_id, token=token, system_instance="s", attempt=1, task=a)
        assert syncs.of_wal() == [False]
    finally:
        writer.close()
    syncs.calls.clear()
    store.create_invocation(invocation("inv-4"), owner="o1", max_running=None)
    assert syncs.of_wal() == [False]  # the default stays durable


def test_an_ended_task_survives_its_writers_sigkill(db: Path, store: SqlTaskStore) -> None:
    """The end is committed before the edge sends its Outcome: a process crash
    right after (no sync ever came) leaves it for every later reader."""
    token = store.create_invocation(invocation(), owner="o1")
    a = task("a")
    child = start_child("""
        import os, sys, time
        from hayata_py.store._fast.writer import TaskWriter
        from tests.store.util import task
        a = task("a")
        w = TaskWriter(sys.argv[1])
        w.mark_started(a.task_id, token=int(sys.argv[2]), system_instance="s", attempt=1, task=a)
        w.mark_completed(a.task_id, token=int(sys.argv[2]), result={"r": 7})
        print("ended", flush=True)
        time.sleep(60)
    """, f"sqlite:///{db}", str(token))
    try:
        assert child.stdout is not None and child.stdout.readline() == "ended\n"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    reopened = SqlTaskStore(f"sqlite:///{db}")
    try:
        got = reopened.get_task(a.task_id)
        assert got is not None and (got.status, got.result) == ("completed", {"r": 7})
    finally:
        reopened.close()


def test_engine_write_all_is_synced_before_it_returns(db: Path, store: SqlTaskStore,
                                                      syncs: Syncs) -> None:
    holder = EngineHolder(normalize_url(f"sqlite:///{db}"))
    try:
        with sqlite3.connect(db) as setup:
            setup.execute("CREATE TABLE t (x INTEGER)")
        syncs.calls.clear()
        assert holder.write_all([(Stmt("INSERT INTO t (x) VALUES (?)"), (1,))]) is True
        assert holder.write_all([(Stmt("UPDATE t SET x = 2 WHERE x = 5"), ())]) is False
        assert syncs.of_wal() == [False]  # the commit synced after; the rollback not
        assert _synchronous(holder._pinned.conn) == 1
    finally:
        holder.dispose()


def test_a_failed_sync_is_an_error_not_a_durable_start(
        db: Path, store: SqlTaskStore, monkeypatch: pytest.MonkeyPatch) -> None:
    token = store.create_invocation(invocation(), owner="o1")
    writer = TaskWriter(f"sqlite:///{db}")

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", broken)
    try:
        a = task("a")
        with pytest.raises(OSError, match="Input/output error"):
            writer.mark_started(a.task_id, token=token, system_instance="s", attempt=1, task=a)
    finally:
        writer.close()


def test_a_database_not_in_wal_mode_keeps_full_sync(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "d.db")
    try:
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("PRAGMA synchronous = FULL")
        assert defer_sync(conn) is None
        assert _synchronous(conn) == 2
    finally:
        conn.close()
    memory = sqlite3.connect(":memory:")
    try:
        assert defer_sync(memory) is None
    finally:
        memory.close()


def test_wal_mode_defers_and_names_the_wal_file(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        assert defer_sync(conn) == f"{db}-wal"
        assert _synchronous(conn) == 1
        conn.execute("CREATE TABLE t (x INTEGER)")
        sync_wal(f"{db}-wal")  # the file exists while a connection is open
    finally:
        conn.close()
    with pytest.raises(OSError):
        sync_wal(f"{db}-wal")  # the last connection closed: SQLite removed it
