"""Reading an invocation's event log from the store.

What ``AgentRef.events()``, ``AsyncAgentRef.events()`` and ``hayata events``
show. The log is the store's (``hayata_events``): any process that opens the
store reads it, whether or not it started the run, whether or not the agent
still runs (the caller that crashed, another host). An event is in the log
before any live subscriber sees it, so what a reader gets after sequence
``k`` is exactly what a subscriber saw after ``k``, with nothing skipped and
nothing twice.

``follow``: after the stored events, wait for new ones (polling the store
every :data:`POLL` seconds) until the latest run of the invocation ends
(``invocation_completed``, ``invocation_failed``, ``invocation_paused`` or
``invocation_interrupted``, with nothing after it), or the invocation is no
longer running and its log has nothing more.

:func:`run_end`: the end of one run as a ``hy.CALLER`` stream shows it, read
from the log when the agent process that ran it is gone and could not send
it (see :mod:`hayata_py._stream_end`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

from hayata_py._errors import ConfigError, ErrorInfo, HayataError, TimeoutError_
from hayata_py._invocation.pause import Hold, paused_error
from hayata_py.messages import AgentEvent, AgentResult

__all__ = ["POLL", "RUN_ENDS", "LogReader", "read_events", "run_end"]

POLL = 0.05
"""Seconds between two looks at the store while following."""
RUN_ENDS = frozenset({"invocation_completed", "invocation_failed", "invocation_paused",
                      "invocation_interrupted"})
BATCH = 500


class LogReader:
    """One reader's position in one invocation's log (no I/O of its own but the
    store's reads: the sync and the asyncio API drive it)."""

    def __init__(self, store: Any, agent_id: str, invocation_id: str, *, after: int = 0,
                 follow: bool = False, timeout: float | None = None) -> None:
        if isinstance(after, bool) or not isinstance(after, int) or after < 0:
            raise ConfigError("after", f"must be a sequence number >= 0 (the last event you "
                              f"have; 0 for all), got {after!r}")
        if timeout is not None and (isinstance(timeout, bool)
                                    or not isinstance(timeout, (int, float))
                                    or not math.isfinite(timeout) or timeout <= 0):
            raise ConfigError("timeout", f"must be a number of seconds > 0, or None to wait "
                              f"as long as the invocation runs, got {timeout!r}")
        record = store.get_invocation(invocation_id)
        if record is None or record.agent_id != agent_id:
            raise HayataError(f"agent {agent_id!r} has no invocation {invocation_id!r} in the "
                              "store (never run here, or pruned)", code="not_found",
                              invocation_id=invocation_id)
        self.store = store
        self.invocation_id = invocation_id
        self.last = after
        self.follow = follow
        self.timeout = timeout
        self._quiet_since = time.monotonic()
        at = store.get_events(invocation_id, after=after - 1, limit=1) if after else []
        self._last_type = at[0].type if at and at[0].sequence == after else None

    def poll(self) -> tuple[list[AgentEvent], bool]:
        """The events stored since the last poll, and whether reading is over."""
        stored = self.store.get_events(self.invocation_id, after=self.last, limit=BATCH)
        events = [AgentEvent(self.invocation_id, e.type, e.sequence, e.data) for e in stored]
        if events:
            self.last, self._last_type = events[-1].sequence, events[-1].type
            self._quiet_since = time.monotonic()
            more = len(events) == BATCH
            return events, not more and (not self.follow or events[-1].type in RUN_ENDS)
        if not self.follow or self._last_type in RUN_ENDS:  # its latest run ended
            return [], True
        record = self.store.get_invocation(self.invocation_id)
        if record is None or record.status != "running":
            # Ended (or pruned): whatever committed with its end is read once more.
            tail = self.store.get_events(self.invocation_id, after=self.last)
            events = [AgentEvent(self.invocation_id, e.type, e.sequence, e.data) for e in tail]
            self.last = events[-1].sequence if events else self.last
            return events, True
        if self.timeout is not None and time.monotonic() - self._quiet_since > self.timeout:
            raise TimeoutError_(f"no event of invocation {self.invocation_id} after sequence "
                                f"{self.last} within {self.timeout:g} s (it is still running)")
        return [], False


def read_events(reader: LogReader) -> Iterator[AgentEvent]:
    """The events of ``reader`` as they come, polling the store while following."""
    while True:
        events, over = reader.poll()
        yield from events
        if over:
            return
        if not events:
            time.sleep(POLL)  # the polling period of a follow, not a wait for a result


def run_end(store: Any, invocation_id: str, first: int, after: int, run: int
            ) -> tuple[list[AgentEvent], AgentResult]:
    """The events of the run whose first event is ``first`` after sequence
    ``after``, and its result, from the log, for a run that nothing runs any
    more (its agent process is gone).

    The run's events end at its terminal event, which gives the result: the
    one its agent sent with it (equal to it). Without one (the process was
    killed before it wrote its end, or the store refused the write), the log
    ends the run where it stops, or where a later run of the invocation
    begins, and the result names that last event (``last_event``): still
    running in the store, the run was interrupted and the invocation is kept
    for ``recover()``; ended, it is the stored result. Nothing is written:
    every event returned was in the log before anyone saw it.
    ``run``: the run's id, carried by what is returned."""
    events: list[AgentEvent] = []
    last = after
    while True:
        batch = store.get_events(invocation_id, after=last, limit=BATCH)
        for stored in batch:
            if stored.type == "invocation_started" and stored.sequence > first:
                return events, _unended(store, invocation_id, last, run)  # a later run's
            event = AgentEvent(invocation_id, stored.type, stored.sequence, stored.data, run)
            events.append(event)
            last = stored.sequence
            if stored.type in RUN_ENDS:
                return events, _ended(event)
        if len(batch) < BATCH:
            return events, _unended(store, invocation_id, last, run)


def _ended(event: AgentEvent) -> AgentResult:
    """The result a run's terminal event stands for."""
    data, inv = event.data, event.invocation_id
    if event.type == "invocation_completed":
        return AgentResult(inv, True, data.get("result"), run=event.run)
    if event.type == "invocation_paused":
        return AgentResult(inv, False, None, paused_error(inv, Hold.from_dict(data)),
                           status="paused", run=event.run)
    error = ErrorInfo(str(data.get("reason")), str(data.get("message")),
                      dict(data.get("details") or {}))
    return AgentResult(inv, False, None, error, run=event.run,
                       status="interrupted" if event.type == "invocation_interrupted" else "")


def _unended(store: Any, invocation_id: str, last: int, run: int) -> AgentResult:
    """The result of a run whose log has no end, after its event ``last``."""
    record = store.get_invocation(invocation_id)
    if record is not None and record.status in ("completed", "failed"):
        error = ErrorInfo.from_dict(record.error) if record.error else None
        return AgentResult(invocation_id, record.status == "completed", record.result, error,
                           run=run, last_event=last)
    error = ErrorInfo("invocation_interrupted", f"the run of invocation {invocation_id} "
                      "ended without a result: its agent process is gone; the invocation "
                      "is kept: call recover()", {"recoverable": True})
    return AgentResult(invocation_id, False, None, error, status="interrupted", run=run,
                       last_event=last)
