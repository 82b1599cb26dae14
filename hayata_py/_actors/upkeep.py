"""An agent's timers: task deadlines and retry backoffs coming due, lease
renewal, idle edges retired, and the look at invocations run elsewhere; a
mixin of :class:`~hayata_py._actors.agent.AgentActor`, whose one wakeup
(:class:`~hayata_py._actors.timers.Deadlines`) serves them all.

Each invocation is held under a lease owned by the system's name; one timer
renews them all every third of ``spec.lease_seconds`` (sooner after a renewal
the store could not answer), and a refused renewal stops that run
(``ownership_lost``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from hayata_py import _invocation as m
from hayata_py._actors.edges import EdgePool
from hayata_py._actors.eventlog import EventLog
from hayata_py._actors.ledger import Ledger
from hayata_py._actors.running import Running
from hayata_py._actors.timers import Deadlines, Due
from hayata_py._config import AgentSpec

ELSEWHERE_CHECK = 1.0
"""Seconds between two looks at the store for waited-for invocations that this
agent does not run (queued ones, ones another system took over)."""


class Upkeep:
    """The agent's timers: what comes due, renewals, retirements."""

    spec: AgentSpec
    ledger: Ledger
    deadlines: Deadlines
    events: EventLog
    pool: EdgePool
    running: dict[str, Running]
    _feed: Callable[[Running, m.Event], None]
    _running: Callable[[str], Running | None]
    _sends: Callable[[list[tuple[Any, Any]]], None]

    elsewhere_at = math.inf
    """When the waits on invocations run elsewhere are checked next (monotonic)."""

    def _on_timer(self, at: Any) -> None:
        self.deadlines.fired(at)
        self.events.due()
        if self.deadlines.renewal_due() and self.running:
            self._renew()
        for kind, (execution_id, key) in self.deadlines.pop_due():
            run = self._running(execution_id)
            if run is not None:
                self._feed(run, m.DeadlinePassed(execution_id, key) if kind is Due.DEADLINE
                           else m.RetryDue(execution_id, key))
        self._sends(self.pool.retire_due(time.monotonic()))
        if time.monotonic() >= self.elsewhere_at:
            self.elsewhere_at = math.inf
            self.ledger.check_elsewhere(self.running)
            if self.ledger.elsewhere:
                self._arm_elsewhere()
        if not self.running:
            self.deadlines.renew_at = float("inf")
        retire = self.pool.next_retire(time.monotonic())
        self.deadlines.rearm(min(retire if retire is not None else math.inf,
                                 self.events.flush_at))

    def _arm_elsewhere(self) -> None:
        if self.elsewhere_at == math.inf:
            self.elsewhere_at = time.monotonic() + ELSEWHERE_CHECK
            self.deadlines.arm(self.elsewhere_at)

    def _arm_retire(self) -> None:
        """A wakeup for the next idle edge to retire (edges go idle as tasks end)."""
        retire = self.pool.next_retire(time.monotonic())
        if retire is not None:
            self.deadlines.arm(retire)

    def _renew(self) -> None:
        renewed = self.ledger.renew({iid: run.token for iid, run in self.running.items()})
        hiccup = any(ok is None for ok in renewed.values())
        for invocation_id, ok in renewed.items():
            run = self.running.get(invocation_id)
            if ok is False and run is not None:
                self._feed(run, m.LeaseLost())
        lease = self.spec.lease_seconds
        self.deadlines.renew_in(min(1.0, lease / 6) if hiccup else lease / 3)
