"""The agent's circuit breakers: one per node with an ``AgentConfig.circuit``
entry, shared by every invocation of the agent. Pure: no Thespian, no store;
the clock is passed in (monotonic seconds), so every path is a table row.

States::

    CLOSED --``failures`` node failures within ``window``--> OPEN
    OPEN --a task after ``cool_down``--> HALF_OPEN (that task is the probe)
    HALF_OPEN --the probe succeeded--> CLOSED
    HALF_OPEN --the probe failed--> OPEN (another cool-down)

While OPEN every task is refused (:class:`Refusal`, what is left of the
cool-down); while HALF_OPEN every task but the probe is. A probe that ends
without an outcome (cancelled) frees its place, and so does one out longer
than its node's timeout (its node died: nothing reports it), so the next
task probes. A failure counts only if the node failed (``node_failed``: it
raised, or its edge died); a refusal is never one. Outcomes of tasks that
were out before the circuit opened change nothing while it is open.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from hayata_py._circuit import CIRCUIT_OPEN, CircuitBreaker, CircuitStatus
from hayata_py._errors import ErrorInfo
from hayata_py._invocation import CircuitChanged

COUNTED = frozenset({"node_failed"})
"""Error codes that count as failures of the node."""


class State(enum.Enum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True)
class Refusal:
    """A task the circuit does not let through: it fails with ``circuit_open``;
    a retry waits ``retry_after`` seconds."""

    node_id: str
    retry_after: float
    failures: int
    cool_down: float
    state: State

    def error(self, task_id: str, history: tuple[str, ...] = ()) -> ErrorInfo:
        """The task's recorded failure (``history``: the error types of its
        attempts before, unchanged: a refusal is not an attempt)."""
        return ErrorInfo(CIRCUIT_OPEN, f"the circuit of node {self.node_id!r} is "
                         f"{self.state.value.replace('_', '-')} after {self.failures} "
                         f"failure(s): task {task_id} was not run; retry after "
                         f"{self.retry_after:.3g} s",
                         {"node_id": self.node_id, "task_id": task_id,
                          "retry_after": self.retry_after, "failures": self.failures,
                          "cool_down": self.cool_down, "attempts": list(history)})


@dataclass
class Breaker:
    """One node's breaker."""

    setting: CircuitBreaker
    probe_timeout: float
    state: State = State.CLOSED
    recent: deque[float] = field(default_factory=deque)
    """When the failures counted while closed were recorded (oldest first)."""
    opened_at: float = 0.0
    opened_by: int = 0
    """Failures that opened it."""
    probe: str | None = None
    probe_at: float = 0.0


class Circuits:
    """The breakers of one agent: ask :meth:`admit` before a task is sent, tell
    :meth:`outcome` each outcome of a task, :meth:`release` each task cancelled."""

    def __init__(self, settings: Mapping[str, CircuitBreaker],
                 probe_timeout: Callable[[str], float], clock: Callable[[], float]) -> None:
        self.clock = clock
        self.breakers = {node_id: Breaker(setting, probe_timeout(node_id))
                         for node_id, setting in settings.items()}

    def admit(self, node_id: str, task_id: str) -> Refusal | None:
        """None: send the task (closed, or it is the probe); else why not."""
        breaker = self.breakers.get(node_id)
        if breaker is None or breaker.state is State.CLOSED:
            return None
        now = self.clock()
        if breaker.state is State.OPEN:
            left = breaker.opened_at + breaker.setting.cool_down - now
            if left > 0:
                return self._refusal(node_id, breaker, left)
            breaker.state = State.HALF_OPEN
            breaker.probe = None
        if breaker.probe in (None, task_id) \
                or now >= breaker.probe_at + breaker.probe_timeout:
            breaker.probe, breaker.probe_at = task_id, now
            return None
        return self._refusal(node_id, breaker, breaker.setting.cool_down)

    def outcome(self, node_id: str, task_id: str, ok: bool, code: str | None = None
                ) -> list[CircuitChanged]:
        """Task ``task_id`` of ``node_id`` ended (``code``: its error's); what changed."""
        breaker = self.breakers.get(node_id)
        if breaker is None:
            return []
        failed = not ok and code in COUNTED
        now = self.clock()
        if breaker.state is State.CLOSED:
            if not failed:
                return []
            breaker.recent.append(now)
            self._forget_old(breaker, now)
            if len(breaker.recent) < breaker.setting.failures:
                return []
            return [self._open(node_id, breaker, now, len(breaker.recent))]
        if breaker.state is State.OPEN or breaker.probe != task_id:
            return []
        if ok:
            breaker.state, breaker.probe = State.CLOSED, None
            breaker.recent.clear()
            return [CircuitChanged(node_id, False, breaker.opened_by,
                                   breaker.setting.cool_down)]
        if failed:
            return [self._open(node_id, breaker, now, 1)]
        breaker.probe = None  # it failed for another reason (its record refused): probe again
        return []

    def release(self, node_id: str, task_id: str) -> None:
        """Task ``task_id`` was cancelled: if it was the probe, the next task probes."""
        breaker = self.breakers.get(node_id)
        if breaker is not None and breaker.probe == task_id:
            breaker.probe = None

    def status(self) -> tuple[CircuitStatus, ...]:
        """Every breaker as it stands now (node id order)."""
        now = self.clock()
        out = []
        for node_id in sorted(self.breakers):
            breaker = self.breakers[node_id]
            if breaker.state is State.CLOSED:
                self._forget_old(breaker, now)
                out.append(CircuitStatus(node_id, "closed", len(breaker.recent)))
                continue
            left = breaker.opened_at + breaker.setting.cool_down - now
            open_now = breaker.state is State.OPEN and left > 0
            left = min(max(0.0, left), breaker.setting.cool_down) if open_now else 0.0
            out.append(CircuitStatus(node_id, "open" if open_now else "half_open",
                                     breaker.opened_by, left))
        return tuple(out)

    # -- helpers ----------------------------------------------------------------------

    @staticmethod
    def _forget_old(breaker: Breaker, now: float) -> None:
        while breaker.recent and breaker.recent[0] <= now - breaker.setting.window:
            breaker.recent.popleft()

    @staticmethod
    def _open(node_id: str, breaker: Breaker, now: float, failures: int) -> CircuitChanged:
        breaker.state, breaker.opened_at, breaker.opened_by = State.OPEN, now, failures
        breaker.probe = None
        breaker.recent.clear()
        return CircuitChanged(node_id, True, failures, breaker.setting.cool_down)

    @staticmethod
    def _refusal(node_id: str, breaker: Breaker, left: float) -> Refusal:
        cool_down = breaker.setting.cool_down  # (t + c) - t may exceed c by a rounding
        return Refusal(node_id, min(left, cool_down), breaker.opened_by, cool_down,
                       breaker.state)
