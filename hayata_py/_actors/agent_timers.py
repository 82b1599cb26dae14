"""An agent's timers: task deadlines (armed once an edge gets the task) and
retry backoffs coming due, lease renewal, idle edges retired, and the look at
invocations run elsewhere; a part of
:class:`~hayata_py._actors.agent.AgentActor`, whose one wakeup
(:class:`~hayata_py._rules.deadlines.Deadlines`) serves them all.

Each invocation is held under a lease owned by the system's name; one timer
renews them all every third of ``spec.lease_seconds`` (sooner after a renewal
the store could not answer), and a refused renewal stops that run
(``ownership_lost``).
"""

from __future__ import annotations

import math
import time
from typing import Any

from hayata_py import _actor_messages as p
from hayata_py import _invocation as m
from hayata_py._actors.eventlog import EventLog
from hayata_py._actors.in_flight import AgentHost, InFlight
from hayata_py._actors.ledger import Ledger
from hayata_py._config import AgentSpec
from hayata_py._rules.deadlines import Deadlines, Due, invocation_of
from hayata_py._rules.edge_pool import EdgePool
from hayata_py.store import task_id_for

ELSEWHERE_CHECK = 1.0
"""Seconds between two looks at the store for waited-for invocations that this
agent does not run (queued ones, ones another system took over)."""


class AgentTimers:
    """The agent's timers: what comes due, renewals, retirements."""

    def __init__(self, host: AgentHost, running: dict[str, InFlight], spec: AgentSpec,
                 ledger: Ledger, deadlines: Deadlines, events: EventLog,
                 pool: EdgePool) -> None:
        self.host = host
        self.running = running
        self.spec = spec
        self.ledger = ledger
        self.deadlines = deadlines
        self.events = events
        self.pool = pool
        # Deadlines of tasks that wait for a free edge: armed when they are sent.
        self.deferred: dict[str, dict[str, m.ArmDeadline]] = {}
        self.elsewhere_at = math.inf
        """When the waits on invocations run elsewhere are checked next (monotonic)."""

    def arm_deadline(self, run: InFlight, cmd: m.ArmDeadline) -> None:
        """A task's deadline runs from the moment an edge gets it: one that waits for
        a free edge (behind other invocations' tasks) is armed when it is sent."""
        key = cmd.key
        if key is not None and not self.ledger.single:
            step = int(cmd.execution_id.rpartition(":")[2])
            task_id = task_id_for(run.inv.id, step, key.node_id, key.item)
            if self.pool.waiting(key.node_id, task_id):
                self.deferred.setdefault(run.inv.id, {})[task_id] = cmd
                # A safety net until then: a task never waits for an edge for ever.
                self.deadlines.arm_execution(cmd.execution_id,
                                             cmd.seconds + max(60.0, 10 * cmd.seconds), key)
                return
        self.deadlines.arm_execution(cmd.execution_id, cmd.seconds, key)

    def sent(self, message: Any) -> None:
        """``message`` goes to its edge now: a deferred deadline of its task starts."""
        if self.deferred and isinstance(message, p.RunTask):
            waited = self.deferred.get(message.invocation_id, {}).pop(message.task_id, None)
            if waited is not None:
                self.deadlines.arm_execution(waited.execution_id, waited.seconds,
                                             waited.key)

    def forget(self, invocation_id: str) -> None:
        """The invocation ended: none of its deadlines or retries fires."""
        self.deadlines.forget(invocation_id)
        self.deferred.pop(invocation_id, None)

    def on_timer(self, at: Any) -> None:
        self.deadlines.fired(at)
        self.events.due()
        if self.deadlines.renewal_due() and self.running:
            self.renew()
        for kind, (execution_id, key) in self.deadlines.pop_due():
            run = self.running.get(invocation_of(execution_id))
            if run is not None:
                self.host.feed(run, m.DeadlinePassed(execution_id, key) if kind is Due.DEADLINE
                           else m.RetryDue(execution_id, key))
        self.host.sends(self.pool.retire_due(time.monotonic()))
        if time.monotonic() >= self.elsewhere_at:
            self.elsewhere_at = math.inf
            self.ledger.results.check_elsewhere(self.running)
            if self.ledger.results.elsewhere:
                self.arm_elsewhere()
        if not self.running:
            self.deadlines.renew_at = float("inf")
        retire = self.pool.next_retire(time.monotonic())
        self.deadlines.rearm(min(retire if retire is not None else math.inf,
                                 self.events.flush_at))

    def arm_elsewhere(self) -> None:
        if self.elsewhere_at == math.inf:
            self.elsewhere_at = time.monotonic() + ELSEWHERE_CHECK
            self.deadlines.arm(self.elsewhere_at)

    def arm_retire(self) -> None:
        """A wakeup for the next idle edge to retire (edges go idle as tasks end)."""
        retire = self.pool.next_retire(time.monotonic())
        if retire is not None:
            self.deadlines.arm(retire)

    def renew(self) -> None:
        renewed = self.ledger.renew({iid: run.token for iid, run in self.running.items()})
        hiccup = any(ok is None for ok in renewed.values())
        for invocation_id, ok in renewed.items():
            run = self.running.get(invocation_id)
            if ok is False and run is not None:
                self.host.feed(run, m.LeaseLost())
        lease = self.spec.lease_seconds
        self.deadlines.renew_in(min(1.0, lease / 6) if hiccup else lease / 3)
