"""The agent's deadlines (each running task's, each retry's backoff, the lease
renewal) in one heap, on few timers.

An agent serving many invocations holds a deadline per task in flight, so a
wakeup must cost O(log n), not a scan: entries live in a heap keyed by due
time, and re-arming or dropping an entry only replaces or forgets its current
due time (a stale heap entry is skipped when it comes up). Thespian stalls
replies when many timers are pending, so a new wakeup is set only when no
pending one fires early enough: at most two or three are ever pending. No
Thespian here: ``wakeup(delay, payload)`` sets one, and time comes from
``clock`` (monotonic seconds), so tests pass their own.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import math
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any


class Due(enum.Enum):
    DEADLINE = "deadline"
    """A task's (or a map step's) deadline: ``DeadlinePassed``."""
    RETRY = "retry"
    """A task's retry backoff is over: ``RetryDue``."""


Key = tuple[str, Any]
"""(execution id, task key)."""


def invocation_of(execution_id: str) -> str:
    """The invocation an execution id belongs to (``<invocation>:<step>``)."""
    return execution_id.rpartition(":")[0]


class Deadlines:
    """The deadlines, retries and lease renewal of all of an agent's invocations."""

    def __init__(self, wakeup: Callable[[timedelta, Any], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._wakeup = wakeup
        self._clock = clock
        self._pending: list[float] = []  # when the pending wakeups fire (monotonic)
        self._heap: list[tuple[float, int, Due, Key]] = []
        self._due: dict[tuple[Due, Key], float] = {}  # the current due time of each entry
        self._keys: dict[str, set[tuple[Due, Key]]] = {}  # invocation id -> its entries
        self._current: dict[str, str] = {}  # invocation id -> its execution with deadlines
        self._seq = itertools.count()
        self.renew_at = math.inf

    def arm(self, at: float) -> None:
        """Make sure a wakeup fires by ``at``."""
        if any(t <= at + 0.01 for t in self._pending):
            return
        self._pending.append(at)
        self._wakeup(timedelta(seconds=max(0.0, at - self._clock())), at)

    def _put(self, kind: Due, key: Key, seconds: float) -> None:
        at = self._clock() + seconds
        entry = (kind, key)
        self._due[entry] = at
        self._keys.setdefault(invocation_of(key[0]), set()).add(entry)
        heapq.heappush(self._heap, (at, next(self._seq), kind, key))
        self.arm(at)

    def arm_execution(self, execution_id: str, seconds: float, key: Any = None) -> None:
        """The deadline of task ``key`` of ``execution_id`` (replaces its earlier one;
        those of the invocation's earlier executions are dropped)."""
        iid = invocation_of(execution_id)
        if self._current.get(iid) != execution_id:
            self._current[iid] = execution_id
            for entry in [e for e in self._keys.get(iid, ()) if e[0] is Due.DEADLINE]:
                self._drop(iid, entry)
        self._put(Due.DEADLINE, (execution_id, key), seconds)

    def arm_retry(self, execution_id: str, key: Any, seconds: float) -> None:
        self._put(Due.RETRY, (execution_id, key), seconds)

    def _drop(self, iid: str, entry: tuple[Due, Key]) -> None:
        self._due.pop(entry, None)
        keys = self._keys.get(iid)
        if keys is not None:
            keys.discard(entry)

    def forget(self, invocation_id: str) -> None:
        """The invocation ended: none of its deadlines or retries fires."""
        for entry in self._keys.pop(invocation_id, ()):
            self._due.pop(entry, None)
        self._current.pop(invocation_id, None)

    def renew_in(self, seconds: float) -> None:
        self.renew_at = self._clock() + seconds
        self.arm(self.renew_at)

    def fired(self, payload: Any) -> None:
        if payload in self._pending:
            self._pending.remove(payload)

    def renewal_due(self) -> bool:
        return self._clock() >= self.renew_at

    def pop_due(self) -> list[tuple[Due, Key]]:
        """The deadlines and retries whose time has come (each once), in due order."""
        now = self._clock()
        out: list[tuple[Due, Key]] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            at, _seq, kind, key = heapq.heappop(heap)
            entry = (kind, key)
            if self._due.get(entry) != at:
                continue  # re-armed later, or dropped
            self._drop(invocation_of(key[0]), entry)
            out.append(entry)
        return out

    def next_at(self) -> float:
        """When the next entry is due (math.inf: none)."""
        heap = self._heap
        while heap and self._due.get((heap[0][2], heap[0][3])) != heap[0][0]:
            heapq.heappop(heap)  # stale
        return heap[0][0] if heap else math.inf

    def rearm(self, also: float = math.inf) -> None:
        """A wakeup by the next due entry, the renewal or ``also`` (monotonic)."""
        at = min(self.renew_at, self.next_at(), also)
        if at < math.inf:
            self.arm(at)

    def __len__(self) -> int:
        return len(self._due)
