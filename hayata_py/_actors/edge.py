"""The edge: runs node function calls (edge tasks) of one node, in its own process.

User code runs only here. The agent sends :class:`RunTask` straight to an
edge its node published (a step is two hops: agent -> edge -> agent). The
edge records ``started`` before the function runs and ``completed``/``failed``
after it, and only then sends the agent the :class:`Outcome`
(:mod:`~hayata_py._actors.edge_records`). Nothing the
function raises reaches Thespian (which would run it a second time). An edge
is reused for the next task of its node; cancelling a task means its node
killing the edge process (the only way to stop arbitrary Python code).

The edge is composed of parts: the one-task path (:class:`OneTask`, here),
the chains of a map step's items run on it
(:class:`~hayata_py._actors.edge_chain.Chain`), the tasks of an edge that runs
several at once (:class:`~hayata_py._actors.edge_concurrent.ConcurrentRuns`),
the durable records (:class:`~hayata_py._actors.edge_records.TaskRecords`) and
the Outcomes sent (:class:`~hayata_py._actors.edge_reports.Reports`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from thespian.actors import WakeupMessage, WatchMessage

from hayata_py._actor_messages import (
    CancelRun,
    EdgeInit,
    EdgeReady,
    EdgeStarted,
    RunTask,
    RunTasks,
)
from hayata_py._actors._calls import call_node, checked, failure
from hayata_py._actors._wellformed import drop_malformed
from hayata_py._actors.edge_chain import Chain
from hayata_py._actors.edge_concurrent import ConcurrentRuns
from hayata_py._actors.edge_records import TaskRecords
from hayata_py._actors.edge_reports import EdgeName, Ran, Reports, Streamer, context
from hayata_py._callables import resolve_callable
from hayata_py._errors import ErrorInfo
from hayata_py._policy import NodeContext
from supervisors import SupervisedActor, host_id

PUSH_WAIT = 1.0
"""Seconds a partial result may wait to be written to its agent before the node
goes on (the agent reads the one before; it goes later, in order)."""


class OneTask:
    """The one-task path: ``started`` recorded, the call (it blocks the edge),
    its end recorded, then its Outcome.

    The call blocks the edge's loop, and Thespian sends an agent one message at
    a time (the next once the agent has acknowledged the one before, which only
    the loop reads): so each partial result is sent with ``send_now``
    (:meth:`supervisors.SupervisedActor.send_now`: it goes out at once), or the
    agent would get all but the first when the node returns. Once one could not
    go out in ``PUSH_WAIT`` seconds (the agent does not read), the task's later
    partials are only sent; so is one published from another thread (only the
    main thread can turn the edge's transport)."""

    def __init__(self, name: EdgeName, records: TaskRecords, reports: Reports,
                 send: Callable[[Any, Any], None],
                 send_now: Callable[[Any, Any, float], bool]) -> None:
        self.name = name
        self.records = records
        self.reports = reports
        self.send = send
        self.send_now = send_now
        self.current: RunTask | None = None
        """The task being called (its streamer publishes only while it is)."""

    def run(self, execute: RunTask) -> None:
        """One task: ``started``, the call, its end, then its Outcome."""
        ended = self.call_recorded(execute, self.records.start(execute))
        if ended is not None:
            self.finish(ended)

    def call_recorded(self, execute: RunTask, error: ErrorInfo | None) -> Ran | None:
        """Run ``execute`` whose start was recorded (``error``: it was refused, and
        its Outcome is sent now); what it ended with, its end not yet recorded."""
        streamer = Streamer(self.name.edge_id, execute, lambda: self.current is execute,
                            self._publisher(execute.agent)) if execute.stream else None
        span = self.reports.span(execute)
        if error is not None:
            self.reports.report(execute, span, None, error, streamer)
            return None
        self.current = execute
        try:
            result, error = self._call(context(execute, streamer), execute)
        finally:
            self.current = None
        return Ran(execute, span, result, error, streamer)

    def _publisher(self, agent: Any) -> Callable[[Any], None]:
        """Send a partial to ``agent`` now (until one could not go out in time)."""
        pushing = True

        def publish(partial: Any) -> None:
            nonlocal pushing
            if pushing and threading.current_thread() is threading.main_thread():
                pushing = self.send_now(agent, partial, PUSH_WAIT)
            else:  # from a thread the node started: it goes when the node returns
                self.send(agent, partial)

        return publish

    def finish(self, ended: Ran) -> None:
        """Record ``ended``'s end on its own, then send its Outcome."""
        error = self.records.end(ended.execute, ended.result, ended.error) or ended.error
        self.reports.report(ended.execute, ended.span, ended.result, error, ended.streamer)

    def _call(self, ctx: NodeContext, execute: RunTask) -> tuple[Any, ErrorInfo | None]:
        try:
            result = call_node(resolve_callable(execute.function or self.name.function), ctx)
        except BaseException as exc:  # noqa: BLE001 - user code must never reach Thespian
            return None, failure(exc, execute)
        return checked(ctx.node_id, result)


class EdgeActor(SupervisedActor):
    """Runs edge tasks for one node; started by the node, dies with it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.name = EdgeName()
        self.records = TaskRecords(self.log)
        self.reports = Reports(self.name, self.send)
        self.one = OneTask(self.name, self.records, self.reports, self.send, self.send_now)
        self.chain = Chain(self.one, self.records, self.reports)
        self.loop: ConcurrentRuns | None = None
        """The tasks on the event loop thread of an edge that runs several at once."""

    def on_receive(self, message: Any, sender: Any) -> None:
        if drop_malformed(self.log, message):
            return
        if isinstance(message, RunTask):
            if self.loop is None or message.function:
                self.one.run(message)
            else:
                self.loop.start([message])
        elif isinstance(message, RunTasks):
            if self.loop is None:
                self.chain.run(list(message.tasks))
            else:
                self.loop.start(list(message.tasks))
        elif isinstance(message, WatchMessage):
            if self.loop is not None:
                self.loop.drain()
        elif isinstance(message, CancelRun):
            if self.loop is not None:
                self.loop.cancel(message)
        elif isinstance(message, WakeupMessage):
            if self.loop is not None:
                self.loop.on_timer()
        elif isinstance(message, EdgeInit):
            self.name.node_id, self.name.edge_id, self.name.function = (
                message.node_id, message.edge_id, message.function)
            if message.capacity > 1 and self.loop is None:
                self.loop = ConcurrentRuns(self.name, self.records, self.reports,
                                           self.one.run, self.send, self.wakeupAfter,
                                           self.log)
                self.watch_fds = (self.loop.loop.wake_fd,)
            self.send(sender, EdgeReady(message.edge_id, os.getpid()))
            if message.watcher is not None:
                self.send(message.watcher,
                          EdgeStarted(message.node_id, message.edge_id, os.getpid(),
                                      host_id()))
