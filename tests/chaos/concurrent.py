"""The concurrent mode of the chaos campaign: each fault hits 8-32 invocations in
flight on one service agent (``max_invocations`` 40, ``tests/chaos/nodes.py``
``SERVICE``).

Per fault the campaign starts the invocations: a few threads (``thread=``),
each with a first run and 0-2 runs enqueued behind it (``multitask="enqueue"``),
one of them the *carried* thread, whose state goes on across every fault of
the campaign; and runs without a thread. Each runs a plan of its own (a
sequence, a parallel step with the ``async def`` node, a map) ending with the
thread's counter. When the side-effect files hold a random number of lines,
one fault of the usual kinds (``faults.py``, ``disk.py``, ``takeover.py``)
hits; then every invocation is driven to its end, in the order they were made
(a thread's enqueued runs after the one before them):

- wait for it; a dead system is started again with ``auto_recover=True`` (the
  records and side-effect files of every invocation are read while it is
  dead: the state "at the fault");
- an invocation interrupted or left for recovery is looked up in
  ``unfinished()``: ``recoverable`` ones are ``recover(invocation_id)``-ed
  (unless auto_recover got there first), ``uncertain`` ones are refused by
  ``recover()`` (which must name the tasks ``unfinished()`` named), then
  resolved or abandoned by the campaign's rng;

then :func:`invariants.check` holds for every invocation, and
:func:`invariants.check_thread` for every thread. The first run of the system
is without ``auto_recover`` (an agent killed alone is recovered by hand);
every restart after a whole-system kill has it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hayata_py as hy
from hayata_py.store import TaskClass, classify_task, open_store
from tests.chaos.campaign import (
    EXECUTION_TIMEOUT,
    LEASE_SECONDS,
    WAIT_S,
    Campaign,
    CampaignError,
    Outcome,
    Run,
    _alive,
    _parents,
    line_count,
    logged,
    poll,
    read_effects,
    reading,
)
from tests.chaos.invariants import (
    Effects,
    Observation,
    Recovery,
    Task,
    ThreadObservation,
    ThreadRun,
    Violation,
    check,
    check_thread,
)
from tests.chaos.nodes import SERVICE, ServiceGraph, Step
from tests.helpers import eventually

AGENT = "svc"
CARRIED = "carried"  # the thread whose state goes on across every fault
IN_FLIGHT = (8, 32)
WAIT_CHUNK_S = 5.0  # a wait that long without an answer: the campaign asks the store
UNFINISHED_POLL_S = 0.02  # unfinished() is an ask that reads the store: not every 2 ms


@dataclass
class Member:
    """One invocation of a concurrent fault, and what the campaign saw of it."""

    invocation: str
    effects: Path
    thread: str | None
    enqueued: bool
    plan: tuple[Step, ...]
    at_fault: tuple[tuple[Task, ...], Effects, str | None] | None = None
    terminal: int = 0
    recovery: Recovery = Recovery.NONE
    refused: tuple[str, ...] = ()
    at_refusal: Effects | None = None
    extra: list[Violation] = field(default_factory=list)
    outcome: str = ""


@dataclass(frozen=True)
class Snapshot:
    tasks: tuple[Task, ...]
    effects: Effects
    active: str | None
    status: str | None


def snapshot(store: Any, graph: ServiceGraph, inv: str, effects: Path) -> Snapshot:
    """An invocation's records (classified as recovery would: an idempotent node's
    started task is a re-run, not uncertain), then its side-effect file."""
    record = reading(lambda: store.get_invocation(inv))
    active = record.active_execution.execution_id \
        if record is not None and record.active_execution else None
    rows = reading(lambda: store.get_tasks(inv)) if record is not None else []
    tasks = tuple(Task(t.task_id, t.node_id, t.status, t.attempt,
                       classify_task(t, idempotent=t.node_id in graph.idempotent), t.result,
                       t.execution_id, t.resolved, t.system_instance, t.started_at,
                       t.finished_at) for t in rows)
    return Snapshot(tasks, read_effects(effects), active,
                    record.status if record is not None else None)


class ConcurrentCampaign(Campaign):
    """One store, one system, one service agent; :meth:`many` per fault."""

    def __init__(self, workdir: Path, store_url: str, store_name: str, seed: int,
                 in_flight: tuple[int, int] = IN_FLIGHT, busy_timeout: float = 0.2) -> None:
        self.service = SERVICE
        self.auto_recover = False
        self.in_flight = in_flight
        self.members: list[Member] = []
        self.dead: dict[str, Snapshot] | None = None
        self.threads: dict[str, list[Member]] = {}  # every run per thread, in order
        self.ended_runs: dict[str, ThreadRun] = {}
        self.thread_violations: set[str] = set()
        self.queued_at_launch = 0
        self.concurrent = True
        self.faults = 0
        super().__init__(workdir, store_url, store_name, seed, graphs=(),
                         busy_timeout=busy_timeout)
        self.graphs = {AGENT: self.service}  # type: ignore[dict-item]

    # -- the system ------------------------------------------------------------------

    def start(self) -> None:
        if self.system is not None and self.members:
            self._read_dead()
            self.auto_recover = True
        self.system = hy.AgentSystem(self.data, store_url=self.store_url)
        self.system.start_agent(self.service.config(
            AGENT, execution_timeout=EXECUTION_TIMEOUT, lease_seconds=LEASE_SECONDS,
            auto_recover=self.auto_recover))

    def _read_dead(self) -> None:
        """The records and effects of every invocation of the fault while no process
        of the system runs (the first death of the fault only)."""
        if self.dead is not None:
            return
        store = open_store(self.store_url)
        try:
            self.dead = {m.invocation: snapshot(store, self.service, m.invocation, m.effects)
                         for m in self.members}
        finally:
            store.close()

    # -- one fault ---------------------------------------------------------------------

    def many(self, kind: str, inject: Any) -> Outcome:
        """Start 8-32 invocations, hit them with ``inject``, drive each to its end,
        check the invariants per invocation and per thread."""
        began = time.monotonic()
        self.count += 1
        self.dead = None
        self.handover = None
        agent = self.agent(AGENT)
        try:
            self.members = self._launch(agent)
        except hy.HayataError as exc:
            return self._record(kind, AGENT, "-", "refused new run", [Violation(
                "no_new_runs", f"run refused: {exc.code}: {exc}")], began)
        total = sum(2 * self.service.tasks(m.plan) for m in self.members)
        moment = self.rng.randrange(0, max(1, total // 2))
        try:
            poll(lambda: self._lines() >= moment or self._all_ended(), WAIT_S,
                 f"{moment} side-effect lines")
        except CampaignError as exc:
            # The runs made no progress before any fault: a violation of its own;
            # a restart and the settling go on from there, with no fault.
            run = self._target()
            violations = [Violation("campaign_stuck",
                                    f"{exc}; {_sessions(self.store_url)}"[:2000])]
            self.restarts += 1
            self.restart()
            return self._finished(kind, "-", violations + self._settle(run), began)
        run = self._target()
        target = inject(self, run)
        try:
            if target == "agent":
                # The agent alone died or froze: its nodes and edges live on, finish
                # the tasks they ran and record them (the classes recovery sees are
                # final only then; ``tests/runtime/test_recovery_refusals.py``).
                try:
                    poll(self._orphans_done, WAIT_S, "the agent's live edges ended their tasks")
                except CampaignError as exc:
                    raise CampaignError(f"{exc}; {self._orphans_report()}") from None
            violations = self._settle(run)
        except CampaignError as exc:
            # The system did not come back whole (or a wait hung): a violation of its
            # own; a restart (auto_recover) and a second settling go on from there.
            violations = [Violation("campaign_stuck", str(exc)[:2000])]
            self.restarts += 1
            self.restart()
            violations += self._settle(run)
        return self._finished(kind, target, violations, began)

    def _finished(self, kind: str, target: str, violations: list[Violation], began: float
                  ) -> Outcome:
        """The fault's record: its violations and how each invocation ended."""
        outcomes = Counter(m.outcome for m in self.members)
        outcomes["(queued behind a run at launch)"] = self.queued_at_launch
        low = 8 * (len(self.members) // 8)
        rec = self._record(kind, AGENT, target, f"{low}-{low + 7} in flight", violations,
                           began)
        rec.invocations = outcomes
        return rec

    def _orphans_done(self) -> bool:
        """Every task that a live edge started (the side-effect files name its pid)
        has its end recorded. Its record, not its ``end`` line: a task the agent
        cancelled on a live ``async def`` edge (its run stopped, say, after a
        freeze) ends without one, and is recorded ``failed``."""
        for member in self.members:
            live = {task for task, pid in _started_in(member.effects).items()
                    if _alive(pid)}
            if not live:
                continue
            records = reading(lambda m=member: {
                t.task_id: t.status for t in self.sys.store.get_tasks(m.invocation)})
            if any(records.get(task) == "started" for task in live):
                return False
        return True

    def _orphans_report(self) -> str:
        """What :meth:`_orphans_done` waits for, to say why it did not come: each
        task of a live edge still recorded ``started`` (its node, its edge's pid and
        state), and the system's log lines that name its invocation or task."""
        stuck: list[tuple[str, str, str, int]] = []
        for member in self.members:
            with contextlib.suppress(Exception):
                records = {t.task_id: t for t in self.sys.store.get_tasks(member.invocation)}
                for task, pid in _started_in(member.effects).items():
                    record = records.get(task)
                    if _alive(pid) and record is not None and record.status == "started":
                        stuck.append((member.invocation, task, record.node_id, pid))
        parts = []
        for invocation, task, node, pid in stuck:
            parts.append(f"task {task} (node {node}, invocation {invocation}) on edge pid "
                         f"{pid} ({_process_state(pid)})")
        ids = {i for i, *_ in stuck} | {t for _, t, *_ in stuck}
        lines = [line.strip() for line in _log_lines(self.data) if any(i in line for i in ids)]
        return "; ".join(parts) + f"; {_sessions(self.store_url)}; log: " + " | ".join(lines[-12:])

    def _launch(self, agent: hy.AgentRef) -> list[Member]:
        rng = self.rng
        n = rng.randint(*self.in_flight)
        threads = [CARRIED] + [f"f{self.count}-t{i}" for i in range(rng.randint(1, 4))]
        behind = {t: rng.randint(0, 2) for t in threads}
        behind[rng.choice(threads)] = max(1, behind[threads[0]])  # at least one enqueued
        free = max(0, n - len(threads) - sum(behind.values()))
        # The threads' first runs, then the runs enqueued behind them (while the
        # first ones run), then the runs without a thread.
        order: list[tuple[str | None, bool]] = [(t, False) for t in threads]
        order += [(t, True) for t in threads for _ in range(behind[t])]
        order += [(None, False)] * free
        members = []
        self.queued_at_launch = -1
        for k, (thread, enqueued) in enumerate(order):
            if k == len(threads) + sum(behind.values()):
                self.queued_at_launch = sum(len(agent.thread(t).queued) for t in threads)
            effects = self.workdir / f"effects-{self.count}-{k}.log"
            plan = rng.choice(self.service.plans)
            data = self.service.input(str(effects), plan, rng.choice((0.0, 0.002, 0.01)),
                                      rng.choice((0.0, 0.05, 0.2)))
            if thread is None:
                inv = agent.run(data)
            else:
                inv = agent.run(data, thread=thread, multitask="enqueue")
            member = Member(inv, effects, thread, enqueued, plan)
            members.append(member)
            if thread is not None:
                self.threads.setdefault(thread, []).append(member)
        if self.queued_at_launch < 0:
            self.queued_at_launch = sum(len(agent.thread(t).queued) for t in threads)
        return members

    def _lines(self) -> int:
        return sum(line_count(m.effects) for m in self.members)

    def _all_ended(self) -> bool:
        with contextlib.suppress(Exception):
            store = self.sys.store
            return all((r := store.get_invocation(m.invocation)) is not None
                       and r.status != "running" for m in self.members)
        return False

    def _target(self) -> Run:
        """The invocation the fault names (an edge in the middle of one of its tasks
        for the frozen edge, the one a takeover takes over): one still running,
        one with a task open if there is."""
        running = [m for m in self.members if self._running(m.invocation)]
        open_ = [m for m in running if _open_task(m.effects)]
        chosen = self.rng.choice(open_ or running or self.members)
        return Run(AGENT, self.service, chosen.invocation, chosen.effects)  # type: ignore[arg-type]

    def _running(self, inv: str) -> bool:
        with contextlib.suppress(Exception):
            record = self.sys.store.get_invocation(inv)
            return record is not None and record.status == "running"
        return False

    # -- after the fault ---------------------------------------------------------------

    def _settle(self, run: Run) -> list[Violation]:
        handover = self.handover
        self.wait_whole()
        for member in self.members:
            if handover is not None and member.invocation == run.invocation:
                self._taken_over(member, handover)
            else:
                self._drive(member)
        self.wait_whole()
        out: list[Violation] = []
        first = True
        for member in self.members:
            obs = self._observe(member, handover if member.invocation == run.invocation
                                else None, first)
            first = False
            out.extend(Violation(v.rule, f"{member.invocation}: {v.detail}")
                       for v in check(obs) + member.extra)
        for thread in sorted({m.thread for m in self.members if m.thread}):
            # The carried thread is checked whole after every fault: a violation in
            # its history is counted once, by the fault that made it.
            found = [v for v in check_thread(self._thread(thread))
                     if str(v) not in self.thread_violations]
            self.thread_violations.update(str(v) for v in found)
            out.extend(found)
        return out

    def _wait(self, member: Member) -> hy.AgentResult | str:
        """A wait on the member: its result, or the code that says why none came
        (``unanswered``: the store ended it and the agent does not say so;
        ``orphaned``: the store runs it under a lease nobody renews, and this
        agent does not list it)."""
        deadline = time.monotonic() + WAIT_S
        while True:
            agent = self.agent(AGENT)
            try:
                return agent.wait(member.invocation, WAIT_CHUNK_S)
            except hy.HayataError as exc:
                if exc.code == "no_system":
                    self.restarts += 1
                    self.restart()
                    self.wait_whole()
                    continue
                if exc.code in ("recovery_required", "not_found"):
                    return exc.code
                if exc.code != "timeout":
                    raise
            record = self._record_of(member)
            if record is not None and record.status != "running":
                return "unanswered"
            if record is not None and self._orphaned(member):
                return "orphaned"
            if time.monotonic() > deadline:
                return "timeout"

    def _orphaned(self, member: Member) -> bool:
        """Its lease ran out long ago (no owner renews it) and ``unfinished()`` does
        not list it: nothing will ever run it."""
        from tests.chaos.takeover import _scalar

        expires = _scalar(self, "select lease_expires_at from hayata_invocations "
                                "where invocation_id = :i", i=member.invocation)
        if expires is None or float(expires) > time.time() - 4 * LEASE_SECONDS:
            return False
        listed = {u.invocation_id for u in self.agent(AGENT).unfinished()}
        return member.invocation not in listed

    def _drive(self, member: Member) -> None:
        """Wait for ``member``; recover it, resolve or abandon it as it needs; until the
        store ends it and one terminal result came."""
        for _ in range(8):
            got = self._wait(member)
            record = self._record_of(member)
            status = record.status if record is not None else None
            if isinstance(got, hy.AgentResult) and not (
                    got.error is not None and got.error.details.get("recoverable")):
                member.terminal += 1
                self._at_fault(member)
                if status in ("completed", "failed"):
                    if got.ok != (status == "completed"):
                        member.terminal += 1  # a result that is not the store's
                    member.outcome = member.outcome if member.recovery is not Recovery.NONE \
                        or member.outcome.startswith("wait") else (
                        "completed" if got.ok else f"failed ({got.error and got.error.code})")
                    if member.recovery is Recovery.NONE and self._was_interrupted(member) \
                            and not member.outcome.startswith("wait"):
                        member.outcome = "auto-recovered"
                    return
                # A terminal result for a run the store still runs (store_unavailable,
                # found by the single campaign): the violation is counted; a restart
                # makes the agent see it, so the campaign goes on.
                self.restarts += 1
                self.restart()
                self.wait_whole()
                continue
            if got in ("timeout", "not_found", "unanswered", "orphaned"):
                code = (record.error or {}).get("code") if record is not None else None
                member.extra.append(Violation(f"wait_{got}", f"store status {status} ({code}), "
                                              f"thread {member.thread}, enqueued "
                                              f"{member.enqueued}; the agent's wait gave no "
                                              "result"))
                member.outcome = f"wait {got}"
                # The violation is counted; a restart makes a new agent read the store
                # (it lists what nobody runs), so the campaign can go on.
                self.restarts += 1
                self.restart()
                self.wait_whole()
                continue
            if status in ("completed", "failed"):
                # The agent says it needs recovery, the store has ended it: an answer
                # that is not the store's.
                member.terminal += 1
                member.outcome = "stale answer"
                self._at_fault(member)
                return
            self._at_fault(member)
            self._recover_member(member)
        raise CampaignError(f"{member.invocation} not settled after 8 rounds")

    def _was_interrupted(self, member: Member) -> bool:
        snap = self.dead.get(member.invocation) if self.dead else None
        return snap is not None and snap.status == "running"

    def _record_of(self, member: Member) -> Any:
        return reading(lambda: self.sys.store.get_invocation(member.invocation))

    def _at_fault(self, member: Member) -> None:
        """The member's state at the fault: read while the system was dead if it died,
        else now (the run stopped: it ended, or waits for recovery)."""
        if member.at_fault is not None:
            return
        snap = self.dead.get(member.invocation) if self.dead else None
        if snap is None or snap.status is None:
            snap = snapshot(self.sys.store, self.service, member.invocation, member.effects)
        member.at_fault = (snap.tasks, snap.effects, snap.active)

    def _listed(self, member: Member) -> hy.Unfinished | None:
        """The member in ``unfinished()`` once it is listed with a class recovery can
        act on (None: the store ended it meanwhile, or it runs again)."""
        agent = self.agent(AGENT)

        def probe() -> Any:
            entry = next((u for u in agent.unfinished() if u.invocation_id == member.invocation),
                         None)
            if entry is not None and entry.recovery not in ("busy", "waiting_for_placement"):
                return entry
            record = self._record_of(member)
            if record is None or record.status != "running":
                return "ended"
            if entry is None and agent.get_result(member.invocation) is not None:
                return "ended"
            return None

        found = eventually(probe, WAIT_S, UNFINISHED_POLL_S,
                           f"{member.invocation} listed by unfinished()", CampaignError)
        return found if isinstance(found, hy.Unfinished) else None

    def _recover_member(self, member: Member) -> None:
        agent = self.agent(AGENT)
        entry = self._listed(member)
        if entry is None:
            return
        try:
            agent.recover(member.invocation)
        except hy.RecoveryRejected as exc:
            if exc.code in ("nothing_to_recover", "invocation_busy"):
                return  # auto_recover (or the lease's owner) runs it: wait again
            if exc.code != "task_execution_uncertain":
                raise
            self._uncertain(member, entry, tuple(exc.details["task_ids"]))
            return
        if entry.recovery == "uncertain":
            member.extra.append(Violation("unfinished_wrong_class", "listed uncertain "
                                          f"({list(entry.task_ids)}), recover() ran it"))
        if member.recovery is Recovery.NONE:
            member.recovery = Recovery.RECOVERED
            member.outcome = "recovered"

    def _uncertain(self, member: Member, entry: hy.Unfinished, refused: tuple[str, ...]) -> None:
        agent = self.agent(AGENT)
        if entry.recovery != "uncertain" or set(entry.task_ids) != set(refused):
            member.extra.append(Violation("unfinished_wrong_tasks", f"unfinished() listed "
                                          f"{entry.recovery} {list(entry.task_ids)}, recover() "
                                          f"refused {list(refused)}"))
        member.refused = refused
        member.at_refusal = read_effects(member.effects)
        if self.rng.random() < 0.5:
            agent.abandon(member.invocation)
            member.recovery, member.outcome = Recovery.ABANDONED, "uncertain, abandoned"
            return
        for task_id in refused:
            agent.resolve_task(task_id, result={"resolved": task_id})
        agent.recover(member.invocation)
        member.recovery, member.outcome = Recovery.RESOLVED, "uncertain, resolved"

    def _taken_over(self, member: Member, handover: Any) -> None:
        """The taken-over invocation on the first system, thawed: it may only report the
        store's result (``takeover.settle``'s rule, per invocation)."""
        got = self._wait(member)
        record = self._record_of(member)
        member.terminal = handover.terminal
        member.recovery = handover.recovery
        member.refused, member.at_refusal = handover.refused, handover.at_refusal
        # takeover.py classifies as a max_invocations=1 campaign does (no idempotent
        # nodes there): an idempotent node's started task is a re-run, not uncertain.
        tasks = tuple(dataclasses.replace(t, klass=TaskClass.RERUN)
                      if t.klass is TaskClass.UNCERTAIN and t.node_id in self.service.idempotent
                      else t for t in handover.tasks_at_fault)
        member.at_fault = (tasks, handover.effects_at_fault, handover.active_at_fault)
        member.outcome = f"taken over, {handover.recovery.value}"
        if not isinstance(got, hy.AgentResult) or record is None \
                or got.ok != (record.status == "completed"):
            member.terminal += 1  # it still claims the run, or a result of its own

    def _thread_run(self, m: Member) -> ThreadRun:
        """One run of a thread (a terminal one from an earlier fault: as it was)."""
        if m.invocation in self.ended_runs:
            return self.ended_runs[m.invocation]
        snap = snapshot(self.sys.store, self.service, m.invocation, m.effects)
        counted = any(t.node_id == "count" and t.status == "completed" and not t.resolved
                      for t in snap.tasks)
        starts = [t.started_at for t in snap.tasks if t.started_at is not None]
        ends = [t.finished_at for t in snap.tasks if t.finished_at is not None]
        run = ThreadRun(m.invocation, snap.status or "lost", counted,
                        min(starts) if starts else None, max(ends) if ends else None)
        if run.status in ("completed", "failed"):
            self.ended_runs[m.invocation] = run
        return run

    def _observe(self, member: Member, handover: Any, first: bool) -> Observation:
        final = snapshot(self.sys.store, self.service, member.invocation, member.effects)
        record = self._record_of(member)
        at = member.at_fault or (final.tasks, final.effects, final.active)
        extra: dict[str, Any] = {}
        if handover is not None:
            from tests.chaos.takeover import _lines

            after = _lines(Run(AGENT, self.service, member.invocation,  # type: ignore[arg-type]
                               member.effects))[handover.lines_at_takeover:]
            extra = dict(
                replaced_instance=handover.old_instance, replaced_at=handover.replaced_at,
                tasks_at_takeover=handover.tasks_at_takeover, replaced_pids=handover.old_pids,
                effects_after_takeover=tuple((p[0], p[1], int(p[3])) for p in
                                             (line.split() for line in after) if len(p) == 4))
        return Observation(
            member.invocation, at[0], at[1], final.tasks, final.effects, member.recovery,
            member.terminal, final.status or "lost", at[2], member.refused, member.at_refusal,
            _parents(self.sys) if first else {}, self.sys.admin_pid,
            final_error=record.error.get("code") if record is not None and record.error
            else None, events=logged(self.sys, member.invocation), **extra)

    def _thread(self, thread: str) -> ThreadObservation:
        info = self.agent(AGENT).thread(thread)
        runs = [self._thread_run(m) for m in self.threads[thread]]
        return ThreadObservation(thread, tuple(runs), info.version, info.state, info.status,
                                 tuple(info.queued), tuple(info.invocations))


def _process_state(pid: int) -> str:
    """A process's state as ``ps`` shows it (running, sleeping, stopped, zombie)."""
    import psutil

    try:
        return str(psutil.Process(pid).status())
    except psutil.Error as exc:
        return type(exc).__name__


def _sessions(store_url: str) -> str:
    """PostgreSQL's sessions that are not idle (which process, since when in its
    transaction, what it waits for, its statement): who holds what a stuck wait
    waits for. Nothing for SQLite."""
    if not store_url.startswith("postgresql"):
        return "sessions: (not PostgreSQL)"
    import sqlalchemy as sa

    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT application_name, state, wait_event_type, wait_event,"
                " round(extract(epoch FROM now() - xact_start)::numeric, 1),"
                " left(query, 120) FROM pg_stat_activity"
                " WHERE state <> 'idle' AND pid <> pg_backend_pid()")).all()
    except sa.exc.SQLAlchemyError as exc:
        return f"sessions: unknown ({type(exc).__name__})"
    finally:
        engine.dispose()
    return "sessions: " + (" | ".join(
        f"{app} {state} waits {kind}/{event} in transaction {age} s: {query}"
        for app, state, kind, event, age, query in rows) or "none busy")


def _log_lines(data: Path) -> list[str]:
    """The system's log (``hayata.log.jsonl`` in its data directory), or none."""
    try:
        return (data / "hayata.log.jsonl").read_text(errors="replace").splitlines()
    except OSError:
        return []


def _started_in(effects: Path) -> dict[str, int]:
    """The tasks a side-effect file shows started, with the pid of their edge."""
    started: dict[str, int] = {}
    if effects.exists():
        for line in effects.read_text().splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[0] == "start":
                started[parts[1]] = int(parts[3])
    return started


def _open_task(effects: Path) -> bool:
    """Has a task of this side-effect file started and not ended?"""
    from tests.chaos.faults import running_edge_pid

    return running_edge_pid(Run("", None, "", effects)) is not None  # type: ignore[arg-type]
