"""The agent's deadlines (each running task's, the lease renewal) on few timers.

Thespian stalls replies when many timers are pending, so a new wakeup is set
only when no pending one fires early enough: at most two or three are ever
pending. No Thespian here: ``wakeup(delay, payload)`` sets one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any


class Deadlines:
    def __init__(self, wakeup: Callable[[timedelta, Any], None]) -> None:
        self._wakeup = wakeup
        self._pending: list[float] = []  # when the pending wakeups fire (monotonic)
        self.tasks: dict[tuple[str, Any], float] = {}  # (execution id, task key) -> when
        self.renew_at = math.inf
        self.retries: dict[tuple[str, Any], float] = {}  # (execution id, task key) -> due

    def arm(self, at: float) -> None:
        """Make sure a wakeup fires by ``at``."""
        if any(t <= at + 0.01 for t in self._pending):
            return
        self._pending.append(at)
        self._wakeup(timedelta(seconds=max(0.0, at - time.monotonic())), at)

    def arm_execution(self, execution_id: str, seconds: float, key: Any = None) -> None:
        """The deadline of task ``key`` of ``execution_id`` (replaces its earlier one;
        those of other executions are dropped)."""
        self.tasks = {k: v for k, v in self.tasks.items() if k[0] == execution_id}
        at = self.tasks[(execution_id, key)] = time.monotonic() + seconds
        self.arm(at)

    def renew_in(self, seconds: float) -> None:
        self.renew_at = time.monotonic() + seconds
        self.arm(self.renew_at)

    def clear(self) -> None:
        self.tasks, self.retries, self.renew_at = {}, {}, math.inf

    def fired(self, payload: Any) -> None:
        if payload in self._pending:
            self._pending.remove(payload)

    def renewal_due(self) -> bool:
        return time.monotonic() >= self.renew_at

    def execution_passed(self) -> list[tuple[str, Any]]:
        """The (execution id, task key) whose deadlines have passed (each once)."""
        now = time.monotonic()
        passed = [k for k, at in self.tasks.items() if now >= at]
        for k in passed:
            del self.tasks[k]
        return passed

    def arm_retry(self, execution_id: str, key: Any, seconds: float) -> None:
        at = self.retries[(execution_id, key)] = time.monotonic() + seconds
        self.arm(at)

    def retries_due(self) -> list[tuple[str, Any]]:
        """The (execution id, task key) whose backoff is over (each once)."""
        now = time.monotonic()
        due = [k for k, at in self.retries.items() if now >= at]
        for k in due:
            del self.retries[k]
        return due

    def rearm(self) -> None:
        self.arm(min([self.renew_at, *self.tasks.values(), *self.retries.values()]))
