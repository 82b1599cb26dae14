"""The single-statement happy paths: taken when they apply, exact when they don't.

The hot writes first try one fenced driver-level statement
(:mod:`hayata_py.store._fast.statements`); on zero changed rows they fall back to the
general path. These tests pin that the happy path really is taken (a silent
fallback would keep the suite green and double the cost), that what it
returns equals what a read returns, and that refusals stay precise and
write nothing.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hayata_py._errors import StaleWriter, StoreError
from hayata_py.store import SqlTaskStore, _connect
from hayata_py.store._fast.statements import Statements
from hayata_py.store._sql import engine as _engine
from hayata_py.store._sql.engine import EngineHolder
from tests.helpers import eventually
from tests.store.conftest import FakeClock
from tests.store.util import invocation, raw_execute, task


@pytest.fixture
def fast_results(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, bool]]]:
    """Record (statement head, committed?) for every fast-path attempt (every
    transaction of :meth:`EngineHolder.write_all`)."""
    seen: list[tuple[str, bool]] = []
    original = EngineHolder.write_all

    def spy(self: EngineHolder, statements: Statements,
            durable: bool = True) -> bool:
        done = original(self, statements, durable)
        seen.append((" | ".join(" ".join(stmt.sqlite.split()[:3]) for stmt, _ in statements), done))
        return done

    monkeypatch.setattr(EngineHolder, "write_all", spy)
    yield seen


def test_runtime_sequence_takes_fast_path(
    store: SqlTaskStore, clock: FakeClock, fast_results: list[tuple[str, bool]]
) -> None:
    """create, checkpoint, start/complete/fail, finish: each one committed statement."""
    token = store.create_invocation(invocation(), owner="o1", lease_seconds=30)
    store.save_checkpoint(invocation(step=1, state={"n": 2}), token=token)
    t = task("a", input={"pair": (1, 2)})
    started = store.mark_started(t.task_id, token=token, system_instance="s1", attempt=1, task=t)
    assert started == store.get_task(t.task_id)
    assert started.input == {"pair": [1, 2]}  # tuples come back as lists, as from a read
    assert (started.status, started.attempt, started.started_at) == ("started", 1, clock.now)
    store.mark_completed(t.task_id, token=token, result={"ok": True})
    f = task("b")
    store.mark_started(f.task_id, token=token, system_instance="s1", attempt=1, task=f)
    store.mark_failed(f.task_id, token=token, error={"type": "E"})
    store.finish_invocation("inv-1", token=token, status="completed", result=7, state={"n": 3})
    assert [done for _, done in fast_results] == [True] * 7
    record = store.get_invocation("inv-1")
    assert record is not None
    assert (record.status, record.step, record.state) == ("completed", 1, {"n": 3})
    assert record.result == 7
    done = store.get_task(t.task_id)
    assert done is not None and (done.status, done.result) == ("completed", {"ok": True})
    failed = store.get_task(f.task_id)
    assert failed is not None and (failed.status, failed.error) == ("failed", {"type": "E"})


def test_stale_fast_writes_fall_back_and_write_nothing(
    store: SqlTaskStore, fast_results: list[tuple[str, bool]]
) -> None:
    """A stale token makes every fast statement change nothing; the error is StaleWriter."""
    store.create_invocation(invocation(), owner="o1")
    t = task("a")
    store.mark_started(t.task_id, token=1, system_instance="s1", attempt=1, task=t)
    store.claim_invocation("inv-1", owner="o2")
    before_inv, before_task = store.get_invocation("inv-1"), store.get_task(t.task_id)
    fast_results.clear()
    new = task("b")
    writes = [
        lambda: store.save_checkpoint(invocation(step=5), token=1),
        lambda: store.mark_started(new.task_id, token=1, system_instance="s", attempt=1, task=new),
        lambda: store.mark_completed(t.task_id, token=1, result=1),
        lambda: store.mark_failed(t.task_id, token=1, error={"type": "E"}),
        lambda: store.finish_invocation("inv-1", token=1, status="completed"),
    ]
    for write in writes:
        with pytest.raises(StaleWriter):
            write()
    assert [done for _, done in fast_results] == [False] * len(writes)
    assert store.get_invocation("inv-1") == before_inv
    assert store.get_task(t.task_id) == before_task
    assert store.get_task(new.task_id) is None


def test_fast_create_refusals_are_precise(
    store: SqlTaskStore, fast_results: list[tuple[str, bool]]
) -> None:
    """An existing id and a busy agent still raise their own codes."""
    store.create_invocation(invocation("inv-1"), owner="o1")
    with pytest.raises(StoreError) as exists:
        store.create_invocation(invocation("inv-1", agent_id="agent-2"), owner="o1")
    with pytest.raises(StoreError) as busy:
        store.create_invocation(invocation("inv-2"), owner="o1")
    assert (exists.value.code, busy.value.code) == ("invocation_exists", "agent_busy")
    assert [done for _, done in fast_results] == [True, False, False]


def test_uncovered_writes_fall_back_and_apply(
    store: SqlTaskStore, fast_results: list[tuple[str, bool]]
) -> None:
    """A scheduled task's start and identical repeats go through the general path."""
    token = store.create_invocation(invocation(), owner="o1")
    t = task("a")
    store.schedule_tasks([t], token=token)
    started = store.mark_started(t.task_id, token=token, system_instance="s", attempt=1, task=t)
    assert started.status == "started" and started == store.get_task(t.task_id)
    assert store.mark_started(t.task_id, token=token, system_instance="s", attempt=1) == started
    store.mark_completed(t.task_id, token=token, result=1)
    store.mark_completed(t.task_id, token=token, result=1)  # identical repeat: no-op
    store.finish_invocation("inv-1", token=token, status="failed", error={"e": 1})
    store.finish_invocation("inv-1", token=token, status="failed", error={"e": 1})
    assert [done for _, done in fast_results] == [True, False, True, False, True, False]


@pytest.mark.postgres
@pytest.mark.parametrize("ping_after_idle", [0.0, 3600.0], ids=["pinged", "unpinged"])
def test_postgres_killed_connection_is_replaced(
    pg_database: str,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    ping_after_idle: float,
) -> None:
    """A pooled connection killed by the server does not fail the next write.

    Idle connections are pinged and replaced; a recently used one fails its
    fast statement, is dropped, and the general path runs on a new connection.
    """
    monkeypatch.setattr(_engine, "PG_PING_AFTER_IDLE_S", ping_after_idle)
    url = pg_database
    schema = "fast_kill_" + str(int(ping_after_idle))
    raw_execute(url, f'CREATE SCHEMA "{schema}"')
    store = SqlTaskStore(f"{url}?options=-csearch_path%3D{schema}", clock=clock)
    try:
        token = store.create_invocation(invocation(), owner="o1")
        raw = store._db.engine().raw_connection()
        try:
            cursor = raw.driver_connection.cursor()  # type: ignore[union-attr]
            cursor.execute("SELECT pg_backend_pid()")
            (pid,) = cursor.fetchone()
            cursor.close()
            raw.driver_connection.rollback()  # type: ignore[union-attr]
        finally:
            raw.close()
        raw_execute(url, "SELECT pg_terminate_backend(:pid)", pid=pid)
        store.save_checkpoint(invocation(step=9), token=token)
        record = store.get_invocation("inv-1")
        assert record is not None and record.step == 9
    finally:
        store.close()


@pytest.mark.postgres
def test_postgres_read_on_a_killed_connection_reads_again(
        pg_database: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read whose pooled connection the server ended (a restart, an
    administrator's terminate: the chaos campaign's new runs read their thread
    first) is made again on a new connection instead of failing the run."""
    monkeypatch.setattr(_engine, "PG_PING_AFTER_IDLE_S", 3600.0)  # no ping: it must fail
    url = pg_database
    raw_execute(url, 'CREATE SCHEMA "read_kill"')
    store = SqlTaskStore(f"{url}?options=-csearch_path%3Dread_kill", clock=clock)
    try:
        store.create_invocation(invocation(), owner="o1")
        pids = [row[0] for row in store._db.run(
            lambda conn: conn.exec_driver_sql("SELECT pg_backend_pid()").all(), write=False)]
        raw_execute(url, "SELECT pg_terminate_backend(:pid)", pid=pids[0])
        record = store.get_invocation("inv-1")
        assert record is not None and record.invocation_id == "inv-1"
    finally:
        store.close()


def test_many_threads_fast_writes(store: SqlTaskStore) -> None:
    """More threads than the pool holds write at once; exited threads' connections close."""
    n_threads = 24

    def worker(n: int) -> int:
        iid = f"inv-t{n}"
        tok = store.create_invocation(invocation(iid, agent_id=iid), owner="o")
        for i in range(5):
            t = task("x", invocation_id=iid, step=i)
            store.mark_started(t.task_id, token=tok, system_instance="s", attempt=1, task=t)
            store.mark_completed(t.task_id, token=tok, result=i)
        return sum(r.status == "completed" for r in store.get_tasks(iid))

    results: list[int] = []
    threads = [
        threading.Thread(target=lambda n=n: results.append(worker(n))) for n in range(n_threads)
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert results == [5] * n_threads
    # The main thread pins its own connection, closing those of the exited threads.
    store.create_invocation(invocation("inv-main", agent_id="main"), owner="o")
    assert len(store._db._pinned_all) <= 1


def test_close_then_reuse(store: SqlTaskStore) -> None:
    """close() releases the fast-write connections; the store reconnects on next use."""
    token = store.create_invocation(invocation(), owner="o1")
    store.close()
    assert store._db._pinned_all == []
    store.save_checkpoint(invocation(step=3), token=token)
    record = store.get_invocation("inv-1")
    assert record is not None and record.step == 3


def test_fast_writes_in_forked_child(
    store: SqlTaskStore, fast_results: list[tuple[str, bool]]
) -> None:
    """After the parent used the fast path, a forked child's fast writes work, and the parent's."""
    token = store.create_invocation(invocation(), owner="o1")
    a, b = task("a"), task("b", branch=1)
    store.mark_started(a.task_id, token=token, system_instance="p", attempt=1, task=a)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            store.mark_completed(a.task_id, token=token, result="child")
            store.mark_started(b.task_id, token=token, system_instance="c", attempt=1, task=b)
            code = 0 if all(done for _, done in fast_results) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    store.mark_completed(b.task_id, token=token, result="parent")
    assert [(t.status, t.result) for t in store.get_tasks("inv-1")] == [
        ("completed", "child"),
        ("completed", "parent"),
    ]
    assert all(done for _, done in fast_results)


@pytest.fixture
def quick_lock_store(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SqlTaskStore]:
    """A SQLite store whose busy timeout is 50 ms and which retries for 2 s."""
    monkeypatch.setattr(_connect, "SQLITE_BUSY_TIMEOUT_S", 0.05)
    opened = SqlTaskStore(f"sqlite:///{tmp_path / 'hayata.db'}", clock=clock, retry_seconds=2.0)
    try:
        yield opened
    finally:
        opened.close()


def _hold_write_lock(path: str, seconds: float) -> threading.Thread:
    locker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    locker.execute("BEGIN IMMEDIATE")

    def release() -> None:
        time.sleep(seconds)
        locker.execute("ROLLBACK")
        locker.close()

    thread = threading.Thread(target=release)
    thread.start()
    return thread


def test_sqlite_lock_contention_is_retried(quick_lock_store: SqlTaskStore) -> None:
    """Fast and general writes wait out another connection's write lock."""
    store = quick_lock_store
    token = store.create_invocation(invocation(), owner="o1")
    path = str(store.url.database)
    release = _hold_write_lock(path, 0.3)
    store.save_checkpoint(invocation(step=4), token=token)  # fast path, then general path
    release.join()
    release = _hold_write_lock(path, 0.3)
    assert store.claim_invocation("inv-1", owner="o2") == 2  # general path only
    release.join()
    record = store.get_invocation("inv-1")
    assert record is not None and record.step == 4


def test_sqlite_lock_held_too_long_is_store_unavailable(quick_lock_store: SqlTaskStore) -> None:
    """A write lock held past retry_seconds raises store_unavailable; nothing is written."""
    store = quick_lock_store
    token = store.create_invocation(invocation(), owner="o1")
    release = _hold_write_lock(str(store.url.database), 3.0)
    try:
        with pytest.raises(StoreError) as info:
            store.save_checkpoint(invocation(step=4), token=token)
        assert info.value.code == "store_unavailable"
    finally:
        release.join()
    record = store.get_invocation("inv-1")
    assert record is not None and record.step == 0


def test_no_fast_write_lands_after_a_claim(store: SqlTaskStore) -> None:
    """Old-owner writes racing a claim: those that returned are exactly those stored.

    After ``claim_invocation`` returns, the stored state must not change any
    more, and every write the old owner saw succeed must be in it.
    """
    store.create_invocation(invocation(), owner="o1")
    tasks = [task(f"n{i}", step=i) for i in range(60)]
    for t in tasks:
        store.mark_started(t.task_id, token=1, system_instance="s", attempt=1, task=t)
    done_steps: list[int] = []
    completed: list[str] = []
    go = threading.Event()

    def old_owner() -> None:
        go.wait()
        for i, t in enumerate(tasks):
            try:
                store.save_checkpoint(invocation(step=i + 1), token=1)
                done_steps.append(i + 1)
                store.mark_completed(t.task_id, token=1, result=i)
                completed.append(t.task_id)
            except StaleWriter:
                return

    writer = threading.Thread(target=old_owner)
    writer.start()
    go.set()
    # Claim once the old owner is writing, so the claim races its writes.
    eventually(lambda: bool(done_steps), timeout=30, message="old owner writing")
    assert store.claim_invocation("inv-1", owner="o2") == 2
    at_claim = store.get_invocation("inv-1")
    tasks_at_claim = store.get_tasks("inv-1")
    writer.join(timeout=60)
    assert store.get_invocation("inv-1") == at_claim
    assert store.get_tasks("inv-1") == tasks_at_claim
    assert at_claim is not None and at_claim.step == (done_steps[-1] if done_steps else 0)
    assert {t.task_id for t in tasks_at_claim if t.status == "completed"} == set(completed)
