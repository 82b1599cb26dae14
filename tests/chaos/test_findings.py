"""Runtime faults the concurrent chaos campaign found, each shown on its own by a
small drill on real processes (the campaign finds them at random moments;
these reproduce them every time)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import hayata_py as hy
from tests.chaos.nodes import SERVICE
from tests.chaos.plan import STOP_EDGE_S
from tests.helpers import eventually, freeze, group_members, stopped

pytestmark = pytest.mark.timeout(120)

LEASE_S = 0.5


def _write_locked(db: Path) -> bool:
    """Does some process hold SQLite's write lock (an open write transaction)?"""
    conn = sqlite3.connect(db, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        conn.close()


@contextlib.contextmanager
def frozen(system: hy.AgentSystem, db: Path) -> Iterator[None]:
    """The whole ``system`` (its process group) SIGSTOPped at a moment none of it
    holds the store's write lock; thawed at the end."""
    group = os.getpgid(system.admin_pid)

    def stopped_outside_a_transaction() -> bool:
        os.killpg(group, signal.SIGSTOP)
        # Look at the lock once every process has stopped, not at kill().
        eventually(lambda: stopped(group_members(group)), 30, message=f"group {group} stopped")
        if not _write_locked(db):
            return True
        os.killpg(group, signal.SIGCONT)
        return False

    eventually(stopped_outside_a_transaction, 30, 0.05, "frozen outside a transaction")
    try:
        yield
    finally:
        os.killpg(group, signal.SIGCONT)


def test_a_wait_on_an_enqueued_run_that_another_system_started_gets_its_result(
        tmp_path: Path) -> None:
    """Found by the concurrent campaign's takeover: system A accepts run Y enqueued
    behind X on thread t; A freezes past its lease; system B takes X over
    (``recover(X)``: uncertain, so ``abandon(X)``), which starts Y on B (the store
    starts a thread's next run in the transaction that ends the one before it); Y
    completes on B. A, thawed, still holds Y in its in-memory table of enqueued
    runs, so ``A.wait(Y)`` is held as if Y were still waiting for X, and never
    answered, although the store has Y completed (the campaign saw the same with
    Y failed ``agent_stopped`` when B shut down)."""
    db = tmp_path / "hayata.db"
    url = f"sqlite:///{db}"
    effects = tmp_path / "effects.log"
    config = SERVICE.config("svc", execution_timeout=30.0, lease_seconds=LEASE_S)
    with hy.AgentSystem(tmp_path / "a", store_url=url, name="a") as first:
        agent = first.start_agent(config)
        held = agent.run(SERVICE.input(str(effects), ("a",), delay=3.0), thread="t")
        queued = agent.run(SERVICE.input(str(effects), ("count",)), thread="t",
                           multitask="enqueue")
        assert agent.thread("t").queued == (queued,)
        eventually(lambda: effects.exists() and "start" in effects.read_text(), 30,
                   message="X's task started")
        with frozen(first, db), hy.AgentSystem(tmp_path / "b", store_url=url,
                                               name="b") as second:
            other = second.start_agent(config)

            def claimed() -> bool:
                try:
                    other.recover(held)
                except hy.RecoveryRejected as exc:
                    if exc.code == "invocation_busy":
                        return False  # A's lease has not run out yet
                    assert exc.code == "task_execution_uncertain", exc
                    return True
                raise AssertionError("recover() ran X's started task again")

            eventually(claimed, 30, 0.05, "X claimed by the second system")
            other.abandon(held)
            done = other.wait(queued, timeout=30)
            assert done.ok and done.result is not None
        record = first.store.get_invocation(queued)
        assert record is not None and record.status == "completed"
        began = time.monotonic()
        try:
            result = agent.wait(queued, timeout=10)
        except hy.HayataError as exc:
            pytest.fail(f"A's wait on Y ({exc.code}) after {time.monotonic() - began:.1f}s; "
                        f"the store has Y {record.status}")
        assert result.ok and result.result == done.result


def test_a_frozen_async_edge_writes_nothing_after_its_invocations_timed_out(
        tmp_path: Path) -> None:
    """Found by the concurrent campaign's frozen edge (``thread_overlap``: a
    thread's next run started before the run before it had ended): an ``async
    def`` edge running 8 invocations' tasks (each awaiting 0.2 s) is SIGSTOPped
    for 1.3 s, past their ``execution_timeout`` (1 s); the agent fails the 8
    invocations (``execution_timeout``). Thawed, the edge finishes the tasks and the store
    records them ``completed``, after their invocations ended: a late write from
    an edge the agent gave up on lands (the store's task record contradicts its
    invocation's end, and on a thread its time overlaps the thread's next run).
    A race between the edge's loop (the awaits ran out while frozen) and the
    cancels: lost by the cancels in most rounds, so three rounds."""
    # One llm edge: the marker task of each round runs on the edge that was frozen.
    config = dataclasses.replace(
        SERVICE.config("svc", execution_timeout=1.0, lease_seconds=LEASE_S),
        node_concurrency={"llm": 1})
    with hy.AgentSystem(tmp_path / "data") as system:
        agent = system.start_agent(config)
        late = [_freeze_an_async_edge(system, agent, tmp_path / f"round-{n}")
                for n in range(ROUNDS)]
    assert late == [[]] * ROUNDS, "task records written after their invocation failed " \
                                  "(task, status, seconds after), per round"


ROUNDS = 3  # the edge's loop finishes the tasks before it sees the cancels in most rounds


def _freeze_an_async_edge(system: hy.AgentSystem, agent: hy.AgentRef, where: Path
                          ) -> list[tuple[str, str, float]]:
    """One round: 8 tasks on one async edge, frozen past their deadline, thawed;
    the task records written after their invocation failed."""
    where.mkdir()
    effects = [where / f"effects-{n}.log" for n in range(8)]
    runs = [agent.run(SERVICE.input(str(e), ("llm",), wait=0.2)) for e in effects]
    # A whole line each (the file exists a moment before its line is written).
    eventually(lambda: all(e.exists() and e.read_text().endswith("\n") for e in effects), 30,
               message="8 tasks started")
    (edge,) = {int(e.read_text().split()[3]) for e in effects}
    freeze(edge)
    try:
        time.sleep(STOP_EDGE_S)  # the fault's duration: frozen past the deadline
    finally:
        os.kill(edge, signal.SIGCONT)
    for inv in runs:
        result = agent.wait(inv, timeout=30)
        assert result.error is not None and result.error.code == "execution_timeout"
    # The thawed edge finished or dropped its tasks' coroutines at once (their
    # awaits ran out while it was frozen) and wrote what it wrote: a task it is
    # sent now (the node's only edge) ends after that.
    marker = where / "marker.log"
    assert agent.wait(agent.run(SERVICE.input(str(marker), ("llm",))), timeout=30).ok
    late: list[tuple[str, str, float]] = []
    for inv in runs:
        ended = system.store.get_invocation(inv)
        assert ended is not None
        late += [(t.task_id, t.status, round(t.finished_at - ended.updated_at, 3))
                 for t in system.store.get_tasks(inv)
                 if t.finished_at is not None and t.finished_at > ended.updated_at]
    return late
