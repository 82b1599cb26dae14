"""The agent's two deadlines (the execution's and the lease renewal) on few timers.

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
        self.execution: tuple[str, float] | None = None  # execution id, when
        self.renew_at = math.inf

    def arm(self, at: float) -> None:
        """Make sure a wakeup fires by ``at``."""
        if any(t <= at + 0.01 for t in self._pending):
            return
        self._pending.append(at)
        self._wakeup(timedelta(seconds=max(0.0, at - time.monotonic())), at)

    def arm_execution(self, execution_id: str, seconds: float) -> None:
        self.execution = (execution_id, time.monotonic() + seconds)
        self.arm(self.execution[1])

    def renew_in(self, seconds: float) -> None:
        self.renew_at = time.monotonic() + seconds
        self.arm(self.renew_at)

    def clear(self) -> None:
        self.execution, self.renew_at = None, math.inf

    def fired(self, payload: Any) -> None:
        if payload in self._pending:
            self._pending.remove(payload)

    def renewal_due(self) -> bool:
        return time.monotonic() >= self.renew_at

    def execution_passed(self) -> str | None:
        """The id of the execution whose deadline has passed (once), or None."""
        if self.execution is None or time.monotonic() < self.execution[1]:
            return None
        execution_id, self.execution = self.execution[0], None
        return execution_id

    def rearm(self) -> None:
        self.arm(min(self.renew_at, self.execution[1] if self.execution else math.inf))
