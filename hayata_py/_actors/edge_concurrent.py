"""An edge that runs several tasks at once: the main thread's side.

An edge of an ``async def`` node with ``capacity`` > 1 (``edge_concurrency``)
runs up to that many tasks at once on an event loop in a thread of its own
(:mod:`~hayata_py._actors.edge_loop`). The main thread still does every
durable write and every send: ``started`` before it hands the task to the
loop, ``completed``/``failed`` when the loop reports its end, then the
:class:`Outcome`. Each task keeps its own records and Outcome. Cancelling
one task (:class:`CancelRun`) cancels its coroutine only; its record stays
``started`` (uncertain, as a killed edge leaves it) and no Outcome is sent. A
coroutine that has not ended ``CANCEL_GRACE`` seconds after its cancel (it
blocks the loop, or ignores the cancellation) makes the edge exit at once,
which ends all its tasks as an edge's death does.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from hayata_py import _telemetry as telemetry
from hayata_py._actor_messages import CancelRun, Outcome, RunTask
from hayata_py._actors._calls import checked, failure
from hayata_py._actors.edge_loop import Ended, LoopTasks, PartialOut
from hayata_py._actors.edge_records import TaskRecords
from hayata_py._actors.edge_reports import EdgeName, Reports, Streamer, context
from hayata_py._callables import resolve_callable
from hayata_py._errors import ErrorInfo

CANCEL_GRACE = 2.0
"""Seconds a cancelled coroutine of a shared edge has to end before the edge exits."""
CANCEL_EXIT = 75
"""Exit status of an edge whose cancelled coroutine did not end in time."""


@dataclass(frozen=True)
class _Active:
    """A task running on the loop: what its end is reported with."""

    execute: RunTask
    span: telemetry.Span
    streamer: Streamer | None


class ConcurrentRuns:
    """The tasks of an edge running on its loop thread (see the module docs)."""

    def __init__(self, name: EdgeName, records: TaskRecords, reports: Reports,
                 run_alone: Callable[[RunTask], None], send: Callable[[Any, Any], None],
                 wakeup: Callable[[timedelta], None], log: Any) -> None:
        self.name = name
        self.records = records
        self.reports = reports
        self.run_alone = run_alone  # a compensation: on the one-task path
        self.send = send
        self.wakeup = wakeup
        self.log = log
        self.loop = LoopTasks()
        self.runs = itertools.count(1)  # each start's own number, even for the same task
        self.running: dict[str, int] = {}  # task id -> its run
        self.active: dict[int, _Active] = {}  # run -> what it reports to
        self.cancelling: dict[int, float] = {}  # run -> monotonic time it must end by
        self.timer_at: float | None = None

    def start(self, tasks: list[RunTask]) -> None:
        """Record ``started`` of each (those that came together in one transaction),
        then hand the calls to the loop (they run beside the others). A
        compensation runs here, one at a time, after them."""
        loop = self.loop
        fresh: dict[str, RunTask] = {}
        for execute in tasks:
            if not execute.function and not self._runs_here(execute):
                fresh.setdefault(execute.task_id, execute)  # else a duplicate
        starting = list(fresh.values())
        refused: list[tuple[Any, Outcome]] = []
        for execute, error in zip(starting, self.records.starts(starting), strict=True):
            span = self.reports.span(execute)
            if error is not None:
                refused.append((execute.agent,
                                self.reports.outcome(execute, span, None, error, None)))
                continue
            run = next(self.runs)
            streamer = Streamer(
                self.name.edge_id, execute, _running_check(self.running, execute.task_id, run),
                _poster(loop, run)) if execute.stream else None
            self.running[execute.task_id] = run
            self.active[run] = _Active(execute, span, streamer)
            loop.start(run, resolve_callable(self.name.function), context(execute, streamer))
        self.reports.send_all(refused)
        for execute in tasks:
            if execute.function:
                self.run_alone(execute)

    def _runs_here(self, execute: RunTask) -> bool:
        """This very attempt of the task runs here already (a duplicate). Another
        attempt of it (a restarted agent recovered the invocation: a new token,
        the next attempt) is not: it runs beside the old one, whose end the store
        will refuse, and whose Outcome goes to the agent that is gone."""
        run = self.running.get(execute.task_id)
        found = None if run is None else self.active.get(run)
        return found is not None and (found.execute.token, found.execute.attempt) == (
            execute.token, execute.attempt)

    def drain(self) -> None:
        """What the loop reported: send partials; record each ended task, then its Outcome."""
        ended: list[tuple[_Active, Any, ErrorInfo | None]] = []
        for event in self.loop.drain():
            found = self.active.get(event.run)
            if isinstance(event, PartialOut):
                if found is not None:
                    if ended:  # its task's earlier ends first: partials stay in order
                        self._record_ends(ended)
                        ended = []
                    self.send(found.execute.agent, event.partial)
                continue
            if self.cancelling.pop(event.run, None) is not None or found is None:
                continue  # cancelled: its record stays "started", no Outcome
            del self.active[event.run]
            if self.running.get(found.execute.task_id) == event.run:  # not a newer attempt
                del self.running[found.execute.task_id]
            result, error = _ended(found.execute, event)
            ended.append((found, result, error))
        self._record_ends(ended)

    def _record_ends(self, ended: list[tuple[_Active, Any, ErrorInfo | None]]) -> None:
        """Record the ends of the tasks that ended together in one transaction,
        then send each its Outcome: none is told before its record is committed
        (on SQLite the next synced commit carries it to disk, ``store/_walsync.py``)."""
        if not ended:
            return
        refused = self.records.ends([(found.execute, result, error)
                                     for found, result, error in ended])
        self.reports.send_all([
            (found.execute.agent,
             self.reports.outcome(found.execute, found.span, result, late or error,
                                  found.streamer))
            for (found, result, error), late in zip(ended, refused, strict=True)])

    def cancel(self, cancel: CancelRun) -> None:
        """Cancel one task's coroutine; the edge exits if it has not ended in time."""
        run = self.running.pop(cancel.task_id, None)
        found = self.active.pop(run, None) if run is not None else None
        if run is None or found is None:
            return  # ended already (its Outcome is on its way), or unknown here
        telemetry.span_stop(found.span, "failed", metadata={"error_code": cancel.reason.value})
        self.log.info("task_cancelled", task_id=cancel.task_id, reason=cancel.reason.value)
        self.cancelling[run] = time.monotonic() + CANCEL_GRACE
        self.loop.cancel(run)
        self._arm(CANCEL_GRACE)

    def _arm(self, seconds: float) -> None:
        at = time.monotonic() + seconds
        if self.timer_at is None or at < self.timer_at:
            self.timer_at = at
            self.wakeup(timedelta(seconds=seconds))

    def on_timer(self) -> None:
        self.timer_at = None
        self.drain()  # an end the loop reported meanwhile counts
        if not self.cancelling:
            return
        now = time.monotonic()
        late = [run for run, by in self.cancelling.items() if by <= now]
        if late:
            self.log.error("cancel_not_honoured", runs=len(late), running=len(self.active))
            os._exit(CANCEL_EXIT)  # ends every task here, as an edge's death does
        self._arm(max(0.01, min(self.cancelling.values()) - now))


def _ended(execute: RunTask, event: Ended) -> tuple[Any, ErrorInfo | None]:
    if event.ok:
        return checked(execute.node_id, event.value)
    # No exception and not cancelled by us: the coroutine cancelled itself.
    return None, failure(event.error or asyncio.CancelledError(), execute)


def _running_check(running: dict[str, int], task_id: str, run: int) -> Callable[[], bool]:
    return lambda: running.get(task_id) == run


def _poster(loop: LoopTasks, run: int) -> Callable[[Any], None]:
    return lambda p: loop.post(PartialOut(run, p))
