"""The takeover fault (a ``sigstop`` variant): a second system takes the invocation
over from a frozen first one; the first, thawed, must write nothing more (fencing).

The whole first system (the admin's process group: agent, nodes, edges, ...)
is SIGSTOPped past the lease, at a moment none of it holds an open transaction
(a process frozen inside one keeps SQLite's write lock, or a PostgreSQL row
lock, and then nobody can write: that is no fencing question); an edge may be
frozen in the middle of a task. Nothing of it is read before every one of its
processes has stopped (``tests.helpers.stopped``: a signal is delivered
asynchronously). A second :class:`~hayata_py.AgentSystem` (its
own name, instance and data directory; the same store) starts the agent, whose
``recover()`` waits out the lease (``invocation_busy``) and claims the
invocation; a refusal (``task_execution_uncertain``: the frozen edge's task) is
resolved or abandoned by the campaign's rng. The second system runs the
invocation to its end, then the first is thawed and the second shut down.
:func:`settle` then checks the first system: it may only report the store's
result, and no task record or side-effect line may come from it after the
takeover (invariant ``replaced_instance_wrote``): its edges' late writes are
refused (``stale_writer``) and a task it had not started must not run.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

import hayata_py as hy
from tests.chaos.campaign import (
    EXECUTION_TIMEOUT,
    LEASE_SECONDS,
    POLL_S,
    WAIT_S,
    Campaign,
    CampaignError,
    Run,
    _parents,
    live,
    logged,
    poll,
    read_effects,
    reading,
    tasks_of,
)
from tests.chaos.invariants import Effects, Observation, Recovery, Task
from tests.helpers import group_members, stopped

FREEZE_TRIES = 50  # freezes retried when the agent was caught inside a transaction


@dataclass(frozen=True)
class Handover:
    """What the takeover saw, for :func:`settle`."""

    old_instance: str
    old_pids: frozenset[int]
    tasks_at_fault: tuple[Task, ...]
    effects_at_fault: Effects
    active_at_fault: str | None
    replaced_at: float
    tasks_at_takeover: tuple[Task, ...]
    lines_at_takeover: int
    recovery: Recovery
    refused: tuple[str, ...]
    at_refusal: Effects | None
    terminal: int


def takeover(campaign: Campaign, run: Run) -> str:
    """Freeze the whole first system, let a second system take the invocation over
    and finish it, thaw the first (see the module docs)."""
    if not _running(campaign, run):
        return "takeover (nothing running)"
    old_pids = frozenset(_parents(campaign.sys))
    group = os.getpgid(campaign.sys.admin_pid)  # the admin's group: the whole system
    try:
        _freeze_outside_transaction(campaign, group, old_pids)
        if not _running(campaign, run):
            return "takeover (finished before the freeze)"
        record = reading(lambda: campaign.sys.store.get_invocation(run.invocation))
        active = record.active_execution.execution_id \
            if record is not None and record.active_execution else None
        at_fault, effects = tasks_of(campaign.sys, run.invocation), read_effects(run.effects)
        second = hy.AgentSystem(campaign.workdir / "takeover", store_url=campaign.store_url,
                                name="takeover")
        try:
            agent = second.start_agent(run.spec.config(
                run.graph, execution_timeout=EXECUTION_TIMEOUT, lease_seconds=LEASE_SECONDS))
            recovery, refused, at_refusal, replaced_at = _recover(campaign, run, agent)
            tasks_at_takeover = tasks_of(campaign.sys, run.invocation)
            lines = _lines(run)
            agent.wait(run.invocation, WAIT_S)
        finally:
            _thaw(group)
            second.shutdown()
    finally:
        _thaw(group)  # no-op when thawed already
    campaign.handover = Handover(
        campaign.sys.instance, old_pids, at_fault, effects, active, replaced_at,
        tasks_at_takeover, len(lines), recovery, refused, at_refusal, 1)
    return "takeover"


def _thaw(group: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGCONT)


def settle(campaign: Campaign, run: Run, handover: Handover) -> tuple[Observation, str]:
    """The first system after the takeover: it must end its run without a result of
    its own (only the store's) and accept runs again."""
    campaign.wait_whole()
    first = campaign.agent(run.graph)
    status = poll(lambda: (s := first.status()) != "running" and s, WAIT_S,
                  "the replaced agent no longer running")
    final = reading(lambda: campaign.sys.store.get_invocation(run.invocation))
    assert final is not None
    extra = 0
    if status == "recovery_required":
        extra += 1  # it still claims a run the new owner ended
    else:
        result = first.wait(run.invocation, WAIT_S)
        campaign.last_result = result
        if result.ok != (final.status == "completed"):
            extra += 1  # a result of its own, not the store's
    after = _lines(run)[handover.lines_at_takeover:]
    late = tuple((parts[0], parts[1], int(parts[3])) for parts in
                 (line.split() for line in after) if len(parts) == 4)
    obs = Observation(
        run.invocation, handover.tasks_at_fault, handover.effects_at_fault,
        tasks_of(campaign.sys, run.invocation), read_effects(run.effects), handover.recovery,
        handover.terminal + extra, final.status, handover.active_at_fault, handover.refused,
        handover.at_refusal, _parents(campaign.sys), campaign.sys.admin_pid,
        final_error=final.error.get("code") if final.error else None,
        replaced_instance=handover.old_instance, replaced_at=handover.replaced_at,
        tasks_at_takeover=handover.tasks_at_takeover, replaced_pids=handover.old_pids,
        effects_after_takeover=late, events=logged(campaign.sys, run.invocation),
        live_events=live(run.inbox, run.invocation))
    return obs, f"taken over, {handover.recovery.value}"


def _recover(campaign: Campaign, run: Run, agent: hy.AgentRef
             ) -> tuple[Recovery, tuple[str, ...], Effects | None, float]:
    """recover() on the second system until it claims; (how, refused task ids,
    effects at the refusal, a store time at or after the claim)."""
    deadline = time.monotonic() + WAIT_S
    # A service agent (the concurrent campaign) sees every invocation of the frozen
    # system unfinished: it takes over the one named.
    named = run.invocation if getattr(campaign, "concurrent", False) else None
    while True:
        try:
            agent.recover(named)
            return Recovery.RECOVERED, (), None, time.time()
        except hy.RecoveryRejected as exc:
            if exc.code == "task_execution_uncertain":
                claimed = time.time()
                refused = tuple(exc.details["task_ids"])
                at_refusal = read_effects(run.effects)
                if campaign.rng.random() < 0.5:
                    agent.abandon(run.invocation)
                    return Recovery.ABANDONED, refused, at_refusal, claimed
                for task_id in refused:
                    agent.resolve_task(task_id, result={"resolved": task_id})
                agent.recover(named)
                return Recovery.RESOLVED, refused, at_refusal, claimed
            if exc.code != "invocation_busy" or time.monotonic() > deadline:
                raise
        time.sleep(POLL_S)  # polling period while the first system's lease runs out


def _running(campaign: Campaign, run: Run) -> bool:
    record = reading(lambda: campaign.sys.store.get_invocation(run.invocation))
    return record is not None and record.status == "running"


def _lines(run: Run) -> list[str]:
    """The side-effect file's complete lines."""
    text = run.effects.read_text() if run.effects.exists() else ""
    return text.splitlines()[: text.count("\n")]


def _freeze_outside_transaction(campaign: Campaign, group: int, pids: frozenset[int]
                                ) -> None:
    """SIGSTOP the process group ``group`` (the system's processes ``pids`` among
    them: one outside the group would fail the wait for them to stop) at a moment
    none of it holds an open store transaction: caught inside one, it is thawed
    until the transactions seen open have ended, and frozen again."""
    held: frozenset[Any] = frozenset()
    for _ in range(FREEZE_TRIES):
        os.killpg(group, signal.SIGSTOP)
        # Read nothing before the whole group has stopped (helpers.stopped): an edge
        # still inside the write of its ``end`` line would change the side-effect
        # file after the fault was read (found by the concurrent campaign, seed
        # 20261201 in CI: refused_recovery_ran_code).
        poll(lambda: stopped(group_members(group) | pids), WAIT_S, f"process group {group} stopped")
        held = _held(campaign, group)
        if not held:
            return
        _thaw(group)
        seen = {h[:2] for h in held}

        def ended(seen: set[Any] = seen) -> bool:
            return not seen & {h[:2] for h in _held(campaign, group)}

        poll(ended, WAIT_S, f"the store transactions open at a freeze ending ({list(held)})")
    raise CampaignError(f"the system was inside a transaction at {FREEZE_TRIES} freezes; "
                        f"at the last: {list(held)}")


def _scalar(campaign: Campaign, sql: str, **params: Any) -> Any:
    """One value read with the campaign's own store connection."""
    import sqlalchemy as sa

    engine = campaign.sys.store._db.engine()  # type: ignore[attr-defined]

    def read() -> Any:
        with engine.connect() as conn:
            return conn.execute(sa.text(sql), params).scalar()

    return reading(read)


def _held(campaign: Campaign, group: int) -> frozenset[tuple[Any, ...]]:
    """The store transactions a process of the frozen ``group`` holds open. On
    SQLite: the write lock, if held (nobody else writes: no second system yet).
    On PostgreSQL: each not-idle connection of one of the group's processes, as
    (backend pid, transaction start, client process, state, query); this test
    process's own readers, and anyone else's, do not count (they are not
    frozen), nor does a forked child's inherited copy of its parent's socket."""
    url = campaign.store_url
    if url.startswith("sqlite:///"):
        path = url.removeprefix("sqlite:///")
        if _queue_held(path):  # a writer between its turn and SQLite's lock
            return frozenset({("the SQLite writers' queue", None)})
        conn = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            return frozenset()
        except sqlite3.OperationalError:
            return frozenset({("the SQLite write lock", None)})
        finally:
            conn.close()
    return frozenset(tuple(row) for row in _open_transactions(campaign, group))


def _queue_held(database: str) -> bool:
    """Some process holds the SQLite writers' queue (``store/_writequeue.py``)."""
    try:
        fd = os.open(f"{database}-wlock", os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # drops the probe's own hold, if it took it
    return False


def _open_transactions(campaign: Campaign, group: int) -> list[Any]:
    """The PostgreSQL backends of ``group``'s connections that are not idle:
    (backend pid, transaction start, client process, state, query). A connection
    names its process (``application_name``, see ``hayata_py.store._engine``)."""
    import sqlalchemy as sa

    names = [f"hayata_py pid {pid}" for pid in sorted(group_members(group))]
    engine = campaign.sys.store._db.engine()  # type: ignore[attr-defined]

    def read() -> list[Any]:
        with engine.connect() as conn:
            return list(conn.execute(sa.text(
                "select pid, xact_start, application_name, state, left(query, 80) "
                "from pg_stat_activity where backend_type = 'client backend' "
                "and state <> 'idle' and application_name = any(:names)"), {"names": names}))

    rows: list[Any] = reading(read)
    return rows
