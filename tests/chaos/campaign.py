"""The chaos campaign: one system, many faults, an :class:`Observation` per fault.

Shared by the short CI campaign (``tests/chaos/``) and the long one
(``benchmarks/chaos.py``, ``make chaos``). Everything random comes from one
``random.Random(seed)``: a seed names a campaign (the moments of the faults
still depend on the machine's timing). Nothing sleeps to wait: the fault's
moment is a number of side-effect lines reached, every wait polls a
condition with a deadline.

Per fault: run an invocation of a random graph, wait until its side-effect
file has a random number of lines, inject the fault (``faults.py``), drive
the invocation to its end (wait; restart a dead system; recover, or on
``task_execution_uncertain`` resolve or abandon), then observe the store,
the side-effect file and the processes for :func:`invariants.check`. A
takeover fault (``takeover.py``) drives the invocation to its end on a second
system itself and leaves a ``handover`` for its own settling.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hayata_py as hy
from hayata_py.store import _connect, classify_task
from tests.chaos.invariants import (
    Effects,
    Observation,
    Recovery,
    Task,
    Violation,
    check,
    parse_effects,
)
from tests.chaos.nodes import GRAPHS, Graph
from tests.helpers import eventually

WAIT_S = 60.0          # the longest any one invocation may take to settle
POLL_S = 0.002         # polling period of the condition waits
EXECUTION_TIMEOUT = 1.0  # short, so a frozen edge passes it quickly
LEASE_SECONDS = 0.5


class CampaignError(AssertionError):
    """The campaign could not drive the system (a hang or an unexpected answer)."""


def poll(probe: Callable[[], Any], timeout: float, what: str) -> Any:
    """``probe()`` once it is truthy; :class:`CampaignError` after ``timeout`` s."""
    return eventually(probe, timeout, POLL_S, what, CampaignError)


@dataclass
class Outcome:
    """One fault's record in the figures."""

    kind: str
    store: str
    graph: str
    target: str
    outcome: str
    violations: list[Violation]
    seconds: float
    invocations: Counter[str] = field(default_factory=Counter)
    """The concurrent mode: how each invocation in flight ended (``concurrent.py``)."""


@dataclass
class Figures:
    """Counts per fault kind and store: outcomes and violations."""

    outcomes: list[Outcome] = field(default_factory=list)

    def add(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)

    def table(self) -> dict[str, dict[str, Any]]:
        rows: dict[str, dict[str, Any]] = {}
        for o in self.outcomes:
            row = rows.setdefault(f"{o.kind}/{o.store}", {
                "kind": o.kind, "store": o.store, "runs": 0, "violations": 0,
                "outcomes": Counter(), "targets": Counter(), "seconds": 0.0,
                "invocations": Counter()})
            row["runs"] += 1
            row["violations"] += len(o.violations)
            row["outcomes"][o.outcome] += 1
            row["targets"][o.target] += 1
            row["seconds"] += o.seconds
            row["invocations"].update(o.invocations)
        return rows

    def violations(self) -> list[str]:
        return [f"{o.kind}/{o.store} {o.graph} {o.target}: {v}"
                for o in self.outcomes for v in o.violations]


def reading(read: Callable[[], Any]) -> Any:
    """``read()``, tried again while the database is away (a restarted server
    fails the first call on each dead pooled connection)."""
    import sqlalchemy.exc

    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            return read()
        except sqlalchemy.exc.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(POLL_S)  # polling period while the server comes back


def tasks_of(system: hy.AgentSystem, invocation_id: str) -> tuple[Task, ...]:
    return tuple(Task(t.task_id, t.node_id, t.status, t.attempt, classify_task(t), t.result,
                      t.execution_id, t.resolved, t.system_instance, t.started_at,
                      t.finished_at)
                 for t in reading(lambda: system.store.get_tasks(invocation_id)))


def logged(system: hy.AgentSystem, invocation_id: str) -> tuple[tuple[int, str, Any], ...]:
    """The invocation's stored event log: (sequence, type, data) in order."""
    return tuple((e.sequence, e.type, e.data)
                 for e in reading(lambda: system.store.get_events(invocation_id)))


def live(inbox: Any, invocation_id: str) -> tuple[tuple[int, str, Any], ...]:
    """The events its CALLER subscriber received (in sequence order, up to the
    first one missing: what a reader of the stream would have seen)."""
    out = []
    with contextlib.suppress(hy.HayataError):
        while inbox is not None and (message := inbox.take(invocation_id)) is not None:
            if not isinstance(message, hy.AgentEvent):
                break
            out.append((message.sequence, message.type, message.data))
    return tuple(out)


def read_effects(path: Path) -> Effects:
    return parse_effects(path.read_text()) if path.exists() else Counter()


def line_count(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


class Campaign:
    """One store, one system (restarted when a fault kills it), one agent per graph."""

    def __init__(self, workdir: Path, store_url: str, store_name: str, seed: int,
                 graphs: tuple[str, ...] = tuple(GRAPHS), busy_timeout: float = 0.2) -> None:
        # Inherited by every actor process (each is forked from this one's admin):
        # a lock held longer than this is a fault the store must survive.
        _connect.SQLITE_BUSY_TIMEOUT_S = busy_timeout
        self.workdir = workdir
        self.data = workdir / "data"
        self.store_url = store_url
        self.store_name = store_name
        self.rng = random.Random(seed)
        self.seed = seed
        self.graphs = {name: GRAPHS[name] for name in graphs}
        self.figures = Figures()
        self.count = 0
        self.restarts = 0
        self.last_result: Any = None
        self.system: hy.AgentSystem | None = None
        self.handover: Any = None  # set by the takeover fault (tests/chaos/takeover.py)
        self.start()

    # -- the system ------------------------------------------------------------------

    def start(self) -> None:
        self.system = hy.AgentSystem(self.data, store_url=self.store_url)
        for name, graph in self.graphs.items():
            self.system.start_agent(graph.config(
                name, execution_timeout=EXECUTION_TIMEOUT, lease_seconds=LEASE_SECONDS))

    def restart(self) -> None:
        """Kill what is left of the system and start it again on the same store
        (this process's connections of the old one closed: nothing keeps the
        database open that the read-only fault needs closed)."""
        if self.system is not None:
            self.system.kill()
            self.system.store.close()
        self.start()

    def close(self) -> None:
        if self.system is not None:
            self.system.shutdown()
            self.system = None

    @property
    def sys(self) -> hy.AgentSystem:
        assert self.system is not None
        return self.system

    def agent(self, graph: str) -> hy.AgentRef:
        return hy.AgentRef(self.sys, graph)

    def whole(self) -> bool:
        """Every supervised process runs: the process table (cheap, no asks, which a
        dead actor answers only at their timeout) has each kind of actor as many
        times as the agents need, and no process lacks a parent in the system."""
        procs = _procs(self.sys)
        kinds = Counter(_kind(p) for p in procs)
        agents, nodes = len(self.graphs), sum(len(g.nodes) for g in self.graphs.values())
        want = {"MultiProcAdmin": 1, "logger": 1, "TopSupervisor": 1, "AgentSupervisor": agents,
                "NodeSupervisor": agents, "EdgeWatcher": agents, "AgentActor": agents,
                "NodeActor": nodes}
        if any(kinds[k] != n for k, n in want.items()) or kinds["EdgeActor"] < nodes:
            return False
        parents = _parents(self.sys)
        return all(pid == self.sys.admin_pid or ppid in parents for pid, ppid in parents.items())

    def wait_whole(self) -> None:
        """Wait for a whole tree; a system that lost its admin or its top
        supervisor (nothing restarts either) is started again."""

        def whole_or_restarted() -> bool:
            if not _alive(self.sys.admin_pid) or not self._has_root():
                self.restarts += 1
                self.restart()
            return self.whole()

        try:
            poll(whole_or_restarted, WAIT_S, "a whole supervision tree")
        except CampaignError as exc:
            table = sorted((p.pid, ppid, _kind(p)) for p in _procs(self.sys)
                           if (ppid := _parents(self.sys).get(p.pid)) is not None)
            raise CampaignError(f"{exc}; processes (pid, ppid, kind): {table}") from None

    # -- one fault ---------------------------------------------------------------------

    def one(self, kind: str, inject: Callable[[Campaign, Run], str]) -> Outcome:
        """Run one invocation, hit it with ``inject`` (returns the target's name),
        drive it to its end, check the invariants."""
        began = time.monotonic()
        self.count += 1
        name = self.rng.choice(sorted(self.graphs))
        graph = self.graphs[name]
        effects = self.workdir / f"effects-{self.count}.log"
        delay = self.rng.choice((0.0, 0.002, 0.01))
        inbox = self.sys._inbox  # its live subscriber: this process (invariant 11)
        try:
            inv = self.agent(name).run(graph.input(str(effects), delay), subscriber=hy.CALLER,
                                       stream=True)
        except hy.HayataError as exc:
            return self._record(kind, name, "-", "refused new run", [Violation(
                "no_new_runs", f"run refused: {exc.code}: {exc}")], began)
        moment = self.rng.randrange(0, 2 * len(graph.nodes))
        poll(lambda: line_count(effects) >= moment or self._finished(inv), WAIT_S,
             f"{moment} side-effect lines")
        run = Run(name, graph, inv, effects, inbox)
        self.handover = None
        target = inject(self, run)
        if self.handover is not None:
            from tests.chaos import takeover

            obs, outcome = takeover.settle(self, run, self.handover)
        else:
            obs, outcome = self.settle(run)
        return self._record(kind, name, target, outcome, check(obs), began)

    def _record(self, kind: str, graph: str, target: str, outcome: str,
                violations: list[Violation], began: float) -> Outcome:
        rec = Outcome(kind, self.store_name, graph, target, outcome, violations,
                      time.monotonic() - began)
        self.figures.add(rec)
        return rec

    def _has_root(self) -> bool:
        return any(_kind(p) == "TopSupervisor" for p in _procs(self.sys))

    def _finished(self, inv: str) -> bool:
        with contextlib.suppress(Exception):
            record = self.sys.store.get_invocation(inv)
            return record is not None and record.status != "running"
        return False

    def settle(self, run: Run) -> tuple[Observation, str]:
        """Drive ``run``'s invocation to its end; what was seen on the way."""
        self.wait_whole()
        agent = self.agent(run.graph)
        terminal = 0
        interrupted = False
        try:
            result = agent.wait(run.invocation, WAIT_S)
            self.last_result = result
            if result.error is not None and result.error.details.get("recoverable"):
                interrupted = True
            else:
                terminal += 1
        except hy.HayataError as exc:
            if exc.code == "no_system":
                self.restart()
                self.wait_whole()
                agent = self.agent(run.graph)
            elif exc.code != "recovery_required":
                raise
            interrupted = True
        record = reading(lambda: self.sys.store.get_invocation(run.invocation))
        assert record is not None, run
        active = record.active_execution.execution_id if record.active_execution else None
        at_fault = tasks_of(self.sys, run.invocation)
        effects_at_fault = read_effects(run.effects)
        recovery, refused, at_refusal = Recovery.NONE, (), None
        outcome = "completed through the fault" if record.status == "completed" \
            else f"failed by the fault ({(record.error or {}).get('code', '?')})"
        if interrupted or agent.status() == "recovery_required":
            recovery, refused, at_refusal, outcome = self._recover(agent, run)
            terminal += 1
        final = reading(lambda: self.sys.store.get_invocation(run.invocation))
        assert final is not None
        if final.status == "running" and recovery is Recovery.NONE:
            # A terminal AgentResult for an invocation the store still runs (found by
            # the campaign: store_unavailable); the violation is recorded by check().
            # A restart makes the agent see it (recovery_required), so the campaign
            # can go on.
            self.restart()
            self.wait_whole()
            self._recover(self.agent(run.graph), run)
        self.wait_whole()
        processes = _parents(self.sys)
        obs = Observation(
            run.invocation, at_fault, effects_at_fault, tasks_of(self.sys, run.invocation),
            read_effects(run.effects), recovery, terminal, final.status, active, refused,
            at_refusal, processes, self.sys.admin_pid,
            final_error=final.error.get("code") if final.error else None,
            events=logged(self.sys, run.invocation), live_events=live(run.inbox, run.invocation))
        return obs, outcome

    def _recover(self, agent: hy.AgentRef, run: Run
                 ) -> tuple[Recovery, tuple[str, ...], Effects | None, str]:
        poll(lambda: agent.status() == "recovery_required", WAIT_S, "recovery_required")
        try:
            agent.recover()
        except hy.RecoveryRejected as exc:
            if exc.code != "task_execution_uncertain":
                raise
            refused = tuple(exc.details["task_ids"])
            at_refusal = read_effects(run.effects)
            if self.rng.random() < 0.5:
                agent.abandon(run.invocation)
                return Recovery.ABANDONED, refused, at_refusal, "uncertain, abandoned"
            for task_id in refused:
                agent.resolve_task(task_id, result={"resolved": task_id})
            agent.recover()
            agent.wait(run.invocation, WAIT_S)
            return Recovery.RESOLVED, refused, at_refusal, "uncertain, resolved"
        agent.wait(run.invocation, WAIT_S)
        return Recovery.RECOVERED, (), None, "recovered"


@dataclass(frozen=True)
class Run:
    """The invocation a fault hits."""

    graph: str
    spec: Graph
    invocation: str
    effects: Path
    inbox: Any = None
    """The CALLER inbox of the system that started it: what its subscriber got."""


def _walk(tree: dict[str, Any]) -> Any:
    yield tree
    for child in tree.get("children", []):
        yield from _walk(child)


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _parents(system: hy.AgentSystem) -> dict[int, int]:
    """pid -> parent pid of the system's live processes (one may die meanwhile)."""
    import psutil

    out = {}
    for proc in _procs(system):
        with contextlib.suppress(psutil.Error):
            out[proc.pid] = proc.ppid()
    return out


def _kind(proc: Any) -> str:
    """The actor class (or ``logger``) a process's title names."""
    import psutil

    with contextlib.suppress(psutil.NoSuchProcess, IndexError):
        return str(" ".join(proc.cmdline()).split()[0])
    return ""


def _procs(system: hy.AgentSystem) -> list[Any]:
    import psutil

    out = []
    for p in system.processes():
        with contextlib.suppress(psutil.NoSuchProcess):
            if p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
    return out
