"""A chain: the items of one map step the agent sent a one-task edge together
(:class:`~hayata_py._actor_messages.RunTasks`, see
:class:`~hayata_py._rules.edge_pool.EdgePool`).

They run one after another, each on the edge's one-task path
(:class:`~hayata_py._actors.edge.OneTask`); each item's end is recorded in the
transaction of the next item's start
(:meth:`~hayata_py.store._fast.writer.TaskWriter.end_and_start`: one commit per
item instead of two), so an item still runs only after its own ``started``
record is durable, and a SIGKILLed edge leaves at most one item started
without a result and the items it had not begun without any record. The
Outcomes go together, once the last end is committed; an edge that dies first
leaves the ends it recorded for the agent to read
(:meth:`~hayata_py._actors.node_watch.NodeWatch.on_edge_lost`).
"""

from __future__ import annotations

from typing import Protocol

from hayata_py._actor_messages import RunTask
from hayata_py._actors.edge_records import TaskRecords
from hayata_py._actors.edge_reports import Ran, Reports
from hayata_py._errors import ErrorInfo

__all__ = ["Chain", "OneTaskPath"]


class OneTaskPath(Protocol):
    """What a chain runs each item with: the edge's one-task path."""

    def run(self, execute: RunTask) -> None:
        """One task on its own: ``started``, the call, its end, its Outcome."""

    def call_recorded(self, execute: RunTask, error: ErrorInfo | None) -> Ran | None:
        """Call ``execute`` whose start was recorded (``error``: refused)."""

    def finish(self, ended: Ran) -> None:
        """Record ``ended``'s end on its own, then report its Outcome."""


class Chain:
    """Runs the chains of a one-task edge (see the module docs)."""

    def __init__(self, one: OneTaskPath, records: TaskRecords, reports: Reports) -> None:
        self.one = one
        self.records = records
        self.reports = reports

    def run(self, tasks: list[RunTask]) -> None:
        """Tasks sent together, one after another; each one's end is recorded in
        the transaction of the next one's start (one commit per task, not two). A
        task still runs only after its own ``started`` record is durable. The
        Outcomes go together once the last end is committed (one message: the agent
        sends this edge nothing more before; an edge that dies first leaves the
        ends it recorded for the agent to read)."""
        with self.reports.together():
            ended: Ran | None = None
            for execute in tasks:
                if execute.function or not execute.store_url or ended is None \
                        or ended.execute.store_url != execute.store_url:
                    if ended is not None:
                        self.one.finish(ended)
                        ended = None
                    if execute.function or not execute.store_url:
                        self.one.run(execute)
                        continue
                    error = self.records.start(execute)
                else:
                    error = self._start_after(ended, execute)
                    ended = None
                ended = self.one.call_recorded(execute, error)
            if ended is not None:
                self.one.finish(ended)

    def _start_after(self, ended: Ran, execute: RunTask) -> ErrorInfo | None:
        """Record ``ended``'s end and ``execute``'s start in one transaction (each on
        its own if that cannot be); ``ended``'s Outcome is ready. ``execute``'s
        start refusal, if any."""
        if not self.records.end_and_start((ended.execute, ended.result, ended.error),
                                          execute):
            self.one.finish(ended)
            return self.records.start(execute)
        self.reports.report(ended.execute, ended.span, ended.result, ended.error,
                            ended.streamer)
        return None
