"""The edge: runs node function calls (edge tasks) of one node, in its own process.

User code runs only here. The agent sends :class:`RunTask` straight to an
edge its node published (a step is two hops: agent -> edge -> agent). The
edge records ``started`` before the function runs and ``completed``/``failed``
after it, and only then sends the agent the :class:`Outcome`; it writes
through the light :class:`~hayata_py.store._writer.TaskWriter` (one driver
connection, the store's own fenced statements), so an edge process holds no
SQLAlchemy engine. Nothing the
function raises reaches Thespian (which would run it a second time). An edge
is reused for the next task of its node; cancelling a task means its node
killing the edge process (the only way to stop arbitrary Python code).

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

from thespian.actors import WakeupMessage, WatchMessage

from hayata_py import _telemetry as telemetry
from hayata_py._actor_messages import (
    CancelRun,
    EdgeInit,
    EdgeReady,
    EdgeStarted,
    Outcome,
    Outcomes,
    RunTask,
    RunTasks,
)
from hayata_py._actors._calls import call_node, matches
from hayata_py._actors._wellformed import drop_malformed
from hayata_py._actors.durable import as_store_error, writer_for
from hayata_py._actors.edge_chain import ChainRuns, Streamer, context, start_args
from hayata_py._actors.edge_loop import Ended, LoopTasks, PartialOut
from hayata_py._callables import resolve_callable
from hayata_py._codec import check_encodable
from hayata_py._errors import (
    EncodingError,
    ErrorInfo,
)
from hayata_py._policy import NodeContext
from supervisors import SupervisedActor, host_id

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


def _failure(exc: BaseException, execute: RunTask) -> ErrorInfo:
    """A node function that raised: ``node_failed``, retryable if its policy says so."""
    name = type(exc).__name__
    return ErrorInfo("node_failed", f"{name}: {exc}", {
        "node_id": execute.node_id, "type": name, "attempt": execute.attempt,
        "attempts": [*execute.history, name], "retryable": matches(exc, execute.retry_on)})


def _checked(node_id: str, result: Any) -> tuple[Any, ErrorInfo | None]:
    """A node's return value, or why it is no result (not a dict, not storable)."""
    if not isinstance(result, dict):
        return None, ErrorInfo(
            "invalid_node_result",
            f"node {node_id!r} returned {type(result).__name__}; a node must return a dict",
            {"node_id": node_id, "returned": type(result).__name__})
    try:
        check_encodable(result, "result")
    except EncodingError as exc:
        return None, ErrorInfo("invalid_node_result",
                               f"node {node_id!r} returned a value that cannot be "
                               f"stored: {exc}", {"node_id": node_id, **exc.details})
    return result, None


class EdgeActor(ChainRuns, SupervisedActor):
    """Runs edge tasks for one node; started by the node, dies with it."""

    current: RunTask | None = None
    edge_id = ""
    loop: LoopTasks | None = None
    """The event loop thread of an edge that runs several tasks at once."""

    def on_receive(self, message: Any, sender: Any) -> None:
        if drop_malformed(self.log, message):
            return
        if isinstance(message, RunTask):
            if self.loop is None or message.function:
                self._run(message)
            else:
                self._start_many([message], self.loop)
        elif isinstance(message, RunTasks):
            if self.loop is None:
                self._run_chain(list(message.tasks))
            else:
                self._start_many(list(message.tasks), self.loop)
        elif isinstance(message, WatchMessage):
            self._drain()
        elif isinstance(message, CancelRun):
            self._cancel(message)
        elif isinstance(message, WakeupMessage):
            self._on_timer()
        elif isinstance(message, EdgeInit):
            self.node_id, self.edge_id, self.function = (
                message.node_id, message.edge_id, message.function)
            if message.capacity > 1 and self.loop is None:
                self._open_loop()
            self.send(sender, EdgeReady(message.edge_id, os.getpid()))
            if message.watcher is not None:
                self.send(message.watcher,
                          EdgeStarted(message.node_id, message.edge_id, os.getpid(),
                                      host_id()))

    # -- one task at a time: the call blocks the edge ------------------------------

    def _run(self, execute: RunTask) -> None:
        """One task: ``started``, the call, its end, then its Outcome."""
        ended = self._call_recorded(execute, self._record_start(execute))
        if ended is not None:
            self._finish(ended)

    def _span(self, execute: RunTask) -> telemetry.Span:
        return telemetry.span_start(telemetry.EDGE, {
            "agent_id": execute.agent_id, "node_id": execute.node_id,
            "execution_id": execute.execution_id, "edge_id": self.edge_id,
            **({} if execute.item is None else {"item": execute.item})})

    def _report(self, execute: RunTask, span: telemetry.Span, result: Any,
                error: ErrorInfo | None, streamer: Streamer | None) -> None:
        """Close the task's span and send its Outcome (recorded before, by the
        caller); in a chain, keep it for the chain's end."""
        outcome = self._outcome(execute, span, result, error, streamer)
        if self.reports is not None:
            self.reports.append((execute.agent, outcome))
        else:
            self.send(execute.agent, outcome)

    def _send_outcomes(self, outcomes: list[tuple[Any, Outcome]]) -> None:
        """Send (agent, Outcome) pairs: those for one agent as one message."""
        by_agent: dict[Any, tuple[Any, list[Outcome]]] = {}  # ActorAddress: unhashable
        for agent, outcome in outcomes:
            by_agent.setdefault(agent.addressDetails, (agent, []))[1].append(outcome)
        for agent, mine in by_agent.values():
            self.send(agent, mine[0] if len(mine) == 1 else Outcomes(tuple(mine)))

    def _outcome(self, execute: RunTask, span: telemetry.Span, result: Any,
                 error: ErrorInfo | None, streamer: Streamer | None) -> Outcome:
        """Close the task's span; its Outcome."""
        if error is None:
            telemetry.span_stop(span, "completed")
        elif error.code == "node_failed" and "type" in error.details:
            telemetry.span_exception(span, str(error.details["type"]),
                                     metadata={"error_code": error.code})
        else:
            telemetry.span_stop(span, "failed", metadata={"error_code": error.code})
        partials = streamer.count if streamer else 0
        return Outcome(execute.execution_id, execute.task_id, execute.node_id, self.edge_id,
                       error is None, result, error, partials, execute.item)

    # -- several tasks at once, on the loop thread ---------------------------------

    def _open_loop(self) -> None:
        self.loop = LoopTasks()
        self.watch_fds = (self.loop.wake_fd,)
        self.runs = itertools.count(1)  # each start's own number, even for the same task
        self.running: dict[str, int] = {}  # task id -> its run
        self.active: dict[int, _Active] = {}  # run -> what it reports to
        self.cancelling: dict[int, float] = {}  # run -> monotonic time it must end by
        self.timer_at: float | None = None

    def _start_many(self, tasks: list[RunTask], loop: LoopTasks) -> None:
        """Record ``started`` of each (those that came together in one transaction),
        then hand the calls to the loop (they run beside the others). A
        compensation runs here, one at a time, after them."""
        fresh: dict[str, RunTask] = {}
        for execute in tasks:
            if not execute.function and not self._runs_here(execute):
                fresh.setdefault(execute.task_id, execute)  # else a duplicate
        starting = list(fresh.values())
        refused: list[tuple[Any, Outcome]] = []
        for execute, error in zip(starting, self._record_starts(starting), strict=True):
            span = self._span(execute)
            if error is not None:
                refused.append((execute.agent,
                                self._outcome(execute, span, None, error, None)))
                continue
            run = next(self.runs)
            streamer = Streamer(
                self.edge_id, execute, _running_check(self.running, execute.task_id, run),
                _poster(loop, run)) if execute.stream else None
            self.running[execute.task_id] = run
            self.active[run] = _Active(execute, span, streamer)
            loop.start(run, resolve_callable(self.function), context(execute, streamer))
        self._send_outcomes(refused)
        for execute in tasks:
            if execute.function:
                self._run(execute)

    def _runs_here(self, execute: RunTask) -> bool:
        """This very attempt of the task runs here already (a duplicate). Another
        attempt of it (a restarted agent recovered the invocation: a new token,
        the next attempt) is not: it runs beside the old one, whose end the store
        will refuse, and whose Outcome goes to the agent that is gone."""
        run = self.running.get(execute.task_id)
        found = None if run is None else self.active.get(run)
        return found is not None and (found.execute.token, found.execute.attempt) == (
            execute.token, execute.attempt)

    def _drain(self) -> None:
        """What the loop reported: send partials; record each ended task, then its Outcome."""
        if self.loop is None:
            return
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
            result, error = self._ended(found.execute, event)
            ended.append((found, result, error))
        self._record_ends(ended)

    def _record_ends(self, ended: list[tuple[_Active, Any, ErrorInfo | None]]) -> None:
        """Record the ends of the tasks that ended together in one transaction,
        then send each its Outcome: none is told before its record is committed
        (on SQLite the next synced commit carries it to disk, ``store/_walsync.py``)."""
        if not ended:
            return
        url = ended[0][0].execute.store_url
        refused: list[ErrorInfo | None] = [None] * len(ended)
        if url:
            outcomes = writer_for(url).finish_many([
                (found.execute.task_id, found.execute.token, error is None,
                 result if error is None else error.to_dict())
                for found, result, error in ended])
            refused = [None if raw is None else self._refused_end(found.execute, raw)
                       for (found, _result, _error), raw in zip(ended, outcomes, strict=True)]
        self._send_outcomes([
            (found.execute.agent,
             self._outcome(found.execute, found.span, result, late or error, found.streamer))
            for (found, result, error), late in zip(ended, refused, strict=True)])

    @staticmethod
    def _ended(execute: RunTask, event: Ended) -> tuple[Any, ErrorInfo | None]:
        if event.ok:
            return _checked(execute.node_id, event.value)
        # No exception and not cancelled by us: the coroutine cancelled itself.
        return None, _failure(event.error or asyncio.CancelledError(), execute)

    def _cancel(self, cancel: CancelRun) -> None:
        """Cancel one task's coroutine; the edge exits if it has not ended in time."""
        if self.loop is None:
            return
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
            self.wakeupAfter(timedelta(seconds=seconds))

    def _on_timer(self) -> None:
        if self.loop is None:
            return
        self.timer_at = None
        self._drain()  # an end the loop reported meanwhile counts
        if not self.cancelling:
            return
        now = time.monotonic()
        late = [run for run, by in self.cancelling.items() if by <= now]
        if late:
            self.log.error("cancel_not_honoured", runs=len(late), running=len(self.active))
            os._exit(CANCEL_EXIT)  # ends every task here, as an edge's death does
        self._arm(max(0.01, min(self.cancelling.values()) - now))

    # -- durable records -----------------------------------------------------------

    def _record_starts(self, tasks: list[RunTask]) -> list[ErrorInfo | None]:
        """:meth:`_record_start` of each; those of one store in one transaction
        when every one of them lands as the usual first start (one fsync)."""
        if len(tasks) < 2 or len({t.store_url for t in tasks}) != 1 or not tasks[0].store_url:
            return [self._record_start(t) for t in tasks]
        try:
            together = writer_for(tasks[0].store_url).start_many(
                [start_args(t) for t in tasks])
        except Exception:  # noqa: BLE001 - one by one below: each refusal is named
            together = False
        if together:
            return [None] * len(tasks)
        return [self._record_start(t) for t in tasks]  # one by one: each refusal named

    def _record_start(self, execute: RunTask) -> ErrorInfo | None:
        """Record ``started`` durably before the node function runs (with the
        step's checkpoint, in the same transaction, when the agent sent one).

        A refusal (a newer owner fenced this writer out, the invocation is
        over) means the function must not run at all."""
        if not execute.store_url:
            return None
        try:
            writer_for(execute.store_url).mark_started(**start_args(execute))
        except Exception as raw:  # noqa: BLE001 - any store failure is reported
            exc = as_store_error(raw)
            self.log.warning("task_start_refused", task_id=execute.task_id, code=exc.code)
            return ErrorInfo(exc.code, f"task {execute.task_id} not started: {exc}",
                             {"node_id": execute.node_id, "task_id": execute.task_id})
        return None

    def _record_end(self, execute: RunTask, result: Any, error: ErrorInfo | None
                    ) -> ErrorInfo | None:
        """Record the outcome before anyone hears of it (committed; on SQLite the
        next synced commit carries it to disk, ``store/_walsync.py``)."""
        if not execute.store_url:
            return None
        store = writer_for(execute.store_url)
        try:
            if error is None:
                store.mark_completed(execute.task_id, token=execute.token, result=result)
            else:
                store.mark_failed(execute.task_id, token=execute.token, error=error.to_dict())
        except Exception as raw:  # noqa: BLE001 - any store failure is reported
            return self._refused_end(execute, raw)
        return None

    def _refused_end(self, execute: RunTask, raw: Exception) -> ErrorInfo:
        exc = as_store_error(raw)
        self.log.warning("task_result_refused", task_id=execute.task_id, code=exc.code)
        return ErrorInfo(exc.code, f"result of task {execute.task_id} not recorded: {exc}",
                         {"node_id": execute.node_id, "task_id": execute.task_id})

    def _call(self, ctx: NodeContext, execute: RunTask) -> tuple[Any, ErrorInfo | None]:
        try:
            result = call_node(resolve_callable(execute.function or self.function), ctx)
        except BaseException as exc:  # noqa: BLE001 - user code must never reach Thespian
            return None, _failure(exc, execute)
        return _checked(ctx.node_id, result)


def _running_check(running: dict[str, int], task_id: str, run: int) -> Callable[[], bool]:
    return lambda: running.get(task_id) == run


def _poster(loop: LoopTasks, run: int) -> Callable[[Any], None]:
    return lambda p: loop.post(PartialOut(run, p))
