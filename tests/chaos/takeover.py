"""The takeover fault (a ``sigstop`` variant): a second system takes the invocation
over from a frozen first one; the first, thawed, must write nothing more (fencing).

The first system's agent is SIGSTOPped past its lease, at a moment it holds no
open transaction (a process frozen inside one keeps SQLite's write lock, or a
PostgreSQL row lock, and then nobody can write: that is no fencing question).
Its edges are left running until they are quiet (no task started without an
end, every ended task recorded), which is what the fault observes "at fault".
A second :class:`~hayata_py.AgentSystem` (its own name, instance and data
directory; the same store) starts the agent, whose ``recover()`` waits out the
lease (``invocation_busy``) and claims the invocation; a refusal
(``task_execution_uncertain``) is resolved or abandoned by the campaign's rng.
The second system runs the invocation to its end, then the first is thawed and
the second shut down. :func:`settle` then checks the first system: it may only
report the store's result, and no task record or side-effect line may come
from it after the takeover (invariant ``replaced_instance_wrote``).
"""

from __future__ import annotations

import contextlib
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
    poll,
    read_effects,
    reading,
    tasks_of,
)
from tests.chaos.faults import role_pids
from tests.chaos.invariants import Effects, Observation, Recovery, Task

QUIET_S = 2.0     # how long the first system's edges may take to finish what they run
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
    """Freeze the first system's agent (and the edge running a task of the run, if
    one does), let a second system take the invocation over and finish it, thaw
    the first (see the module docs)."""
    pid = _agent_pid(campaign, run)
    if pid is None or not _running(campaign, run):
        return "takeover (nothing running)"
    old_pids = frozenset(_parents(campaign.sys))
    frozen: list[int] = []
    try:
        frozen = _freeze_outside_transaction(campaign, run, pid, old_pids)
        if not _running(campaign, run):
            return "takeover (finished before the freeze)"
        _quiet(campaign, run, frozen)
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
            _thaw(frozen)
            second.shutdown()
    finally:
        _thaw(frozen)  # no-op when thawed already
    campaign.handover = Handover(
        campaign.sys.instance, old_pids, at_fault, effects, active, replaced_at,
        tasks_at_takeover, len(lines), recovery, refused, at_refusal, 1)
    return "takeover, agent and edge" if len(frozen) > 1 else "takeover, agent"


def _thaw(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


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
        effects_after_takeover=late)
    return obs, f"taken over, {handover.recovery.value}"


def _recover(campaign: Campaign, run: Run, agent: hy.AgentRef
             ) -> tuple[Recovery, tuple[str, ...], Effects | None, float]:
    """recover() on the second system until it claims; (how, refused task ids,
    effects at the refusal, a store time at or after the claim)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            agent.recover()
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
                agent.recover()
                return Recovery.RESOLVED, refused, at_refusal, claimed
            if exc.code != "invocation_busy" or time.monotonic() > deadline:
                raise
        time.sleep(POLL_S)  # polling period while the first system's lease runs out


def _agent_pid(campaign: Campaign, run: Run) -> int | None:
    """The agent's pid, from the last tree if that process still runs (asking the
    tree takes longer than many a run)."""
    known = _AGENTS.get((id(campaign), run.graph))
    if known is not None and known in _parents(campaign.sys):
        return known
    pids = role_pids(campaign, run)["agent"]
    if pids:
        _AGENTS[(id(campaign), run.graph)] = pids[0]
    return pids[0] if pids else None


_AGENTS: dict[tuple[int, str], int] = {}


def _running(campaign: Campaign, run: Run) -> bool:
    record = reading(lambda: campaign.sys.store.get_invocation(run.invocation))
    return record is not None and record.status == "running"


def _lines(run: Run) -> list[str]:
    """The side-effect file's complete lines."""
    text = run.effects.read_text() if run.effects.exists() else ""
    return text.splitlines()[: text.count("\n")]


def _quiet(campaign: Campaign, run: Run, frozen: list[int]) -> None:
    """Wait (a while) until the first system's edges that are not frozen are done:
    every task they started has ended, and every ended task has its record."""

    def quiet() -> bool:
        if any(pid not in frozen for pid in _open(run).values()):
            return False
        done = {t.task_id for t in tasks_of(campaign.sys, run.invocation)
                if t.status in ("completed", "failed")}
        return all(tid in done for (event, tid) in read_effects(run.effects) if event == "end")

    deadline = time.monotonic() + QUIET_S
    while not quiet() and time.monotonic() < deadline:
        time.sleep(POLL_S)  # polling period: an edge finishing its task


def _freeze_outside_transaction(campaign: Campaign, run: Run, agent: int,
                                old_pids: frozenset[int]) -> list[int]:
    """SIGSTOP the agent, and the edge running a task of ``run`` if any, at a
    moment neither holds an open store transaction (tried again after the
    agent's next lease renewal otherwise); the pids frozen."""
    for _ in range(FREEZE_TRIES):
        edges = [pid for pid in _open(run).values() if pid in old_pids][:1]
        frozen = [agent, *edges]
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        if not any(_busy(campaign, pid) for pid in frozen):
            return frozen
        _thaw(frozen)
        _next_renewal(campaign, run)
    raise CampaignError(f"agent pid {agent} was inside a transaction at {FREEZE_TRIES} freezes")


def _open(run: Run) -> dict[str, int]:
    """task id -> pid of the tasks of ``run`` started and not ended (side-effect file)."""
    out: dict[str, int] = {}
    for line in _lines(run):
        parts = line.split()
        if len(parts) == 4 and parts[0] == "start":
            out[parts[1]] = int(parts[3])
        elif len(parts) == 4 and parts[0] == "end":
            out.pop(parts[1], None)
    return out


def _next_renewal(campaign: Campaign, run: Run) -> None:
    seen = _expiry(campaign, run)
    poll(lambda: _expiry(campaign, run) != seen or not _running(campaign, run), WAIT_S,
         "a lease renewal")


def _expiry(campaign: Campaign, run: Run) -> Any:
    return _scalar(campaign, "select lease_expires_at from hayata_invocations "
                             "where invocation_id = :i", i=run.invocation)


def _scalar(campaign: Campaign, sql: str, **params: Any) -> Any:
    """One value read with the campaign's own store connection."""
    import sqlalchemy as sa

    engine = campaign.sys.store._db.engine()  # type: ignore[attr-defined]

    def read() -> Any:
        with engine.connect() as conn:
            return conn.execute(sa.text(sql), params).scalar()

    return reading(read)


def _busy(campaign: Campaign, pid: int) -> bool:
    """Does (frozen) ``pid`` hold a store transaction open? On SQLite: does anyone
    hold the write lock (the frozen process, or another for a moment)."""
    import psutil

    url = campaign.store_url
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=0,
                               isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            return False
        except sqlite3.OperationalError:
            return True
        finally:
            conn.close()
    try:
        ports = [c.laddr.port for c in psutil.Process(pid).net_connections("tcp")
                 if c.raddr and c.raddr.port == _pg_port(url)]
    except psutil.NoSuchProcess:
        return False
    return bool(ports) and bool(_scalar(
        campaign, "select count(*) from pg_stat_activity where client_port = any(:ports) "
                  "and state <> 'idle'", ports=ports))


def _pg_port(url: str) -> int:
    import sqlalchemy as sa

    return int(sa.make_url(url).port or 5432)
