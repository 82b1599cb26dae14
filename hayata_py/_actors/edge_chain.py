"""A one-task edge's runs: one task, or a chain of a map step's items.

A chain is the items of one map step the agent sent a one-task edge together
(:class:`~hayata_py._actor_messages.RunTasks`, see
:class:`~hayata_py._rules.edge_pool.EdgePool`). They run one after another;
each item's end is recorded in the transaction of the next item's start
(:meth:`~hayata_py.store._writer.TaskWriter.end_and_start`: one commit per
item instead of two), so an item still runs only after its own ``started``
record is durable, and a SIGKILLed edge leaves at most one item started
without a result and the items it had not begun without any record. The
Outcomes go together, once the last end is committed; an edge that dies first
leaves the ends it recorded for the agent to read
(``AgentActor._on_edge_lost``). Mixed into
:class:`~hayata_py._actors.edge.EdgeActor`, which supplies the single-task
steps (recording a start or an end, calling the function, reporting).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from hayata_py import _telemetry as telemetry
from hayata_py._actor_messages import Outcome, Partial, RunTask
from hayata_py._actors.durable import writer_for
from hayata_py._codec import check_encodable
from hayata_py._errors import ErrorInfo, InvalidPartialResult, StaleExecution
from hayata_py._policy import NodeContext
from hayata_py.store import TaskRecord

__all__ = ["ChainRuns", "Ran", "Streamer", "context", "start_args"]


class Streamer:
    """``ctx.streamer``: publishes a partial result while its task is still the
    edge's (``current()``); ``publish`` sends it (or hands it to the main thread)."""

    def __init__(self, edge_id: str, run: RunTask, current: Callable[[], bool],
                 publish: Callable[[Partial], None]) -> None:
        self._edge_id, self._run = edge_id, run
        self._current, self._publish = current, publish
        self.count = 0

    def __call__(self, partial: dict[str, Any]) -> None:
        execute = self._run
        if not self._current():
            raise StaleExecution(
                f"execution {execute.execution_id} of node {execute.node_id!r} has ended; "
                "its streamer can no longer publish",
                execution_id=execute.execution_id)
        if not isinstance(partial, dict):
            raise InvalidPartialResult(
                f"streamer takes a dict, got {type(partial).__name__}")
        check_encodable(partial, "partial")
        self.count += 1
        self._publish(Partial(execute.execution_id, execute.node_id, self._edge_id,
                              self.count, dict(partial), execute.item))


def context(execute: RunTask, streamer: Streamer | None) -> NodeContext:
    return NodeContext(
        input=execute.input, state=MappingProxyType(execute.state), node_id=execute.node_id,
        invocation_id=execute.invocation_id, execution_id=execute.execution_id,
        task_id=execute.task_id, idempotency_key=execute.idempotency_key,
        streamer=streamer, item=execute.item, attempt=execute.attempt,
        thread=execute.thread)


@dataclass(frozen=True)
class Ran:
    """A task of a chain that ran; its end is not recorded yet."""

    execute: RunTask
    span: telemetry.Span
    result: Any
    error: ErrorInfo | None
    streamer: Streamer | None


class ChainRuns:
    """The chain steps of an edge (see the module docs)."""

    current: RunTask | None
    reports: list[tuple[Any, Outcome]] | None = None
    """While a chain runs: its Outcomes, sent together at its end."""
    edge_id: str
    send: Callable[[Any, Any], None]
    _run: Callable[[RunTask], None]
    _span: Callable[[RunTask], telemetry.Span]
    _call: Callable[[NodeContext, RunTask], tuple[Any, ErrorInfo | None]]
    _record_start: Callable[[RunTask], ErrorInfo | None]
    _record_end: Callable[[RunTask, Any, ErrorInfo | None], ErrorInfo | None]
    _report: Callable[[RunTask, telemetry.Span, Any, ErrorInfo | None, Streamer | None], None]
    _send_outcomes: Callable[[list[tuple[Any, Outcome]]], None]

    def _run_chain(self, tasks: list[RunTask]) -> None:
        """Tasks sent together, one after another; each one's end is recorded in
        the transaction of the next one's start (one commit per task, not two). A
        task still runs only after its own ``started`` record is durable. The
        Outcomes go together once the last end is committed (one message: the agent
        sends this edge nothing more before; an edge that dies first leaves the
        ends it recorded for the agent to read, ``AgentActor._on_edge_lost``)."""
        self.reports = []
        try:
            ended: Ran | None = None
            for execute in tasks:
                if execute.function or not execute.store_url or ended is None \
                        or ended.execute.store_url != execute.store_url:
                    if ended is not None:
                        self._finish(ended)
                        ended = None
                    if execute.function or not execute.store_url:
                        self._run(execute)
                        continue
                    error = self._record_start(execute)
                else:
                    error = self._chain_start(ended, execute)
                    ended = None
                ended = self._call_recorded(execute, error)
            if ended is not None:
                self._finish(ended)
        finally:
            reports, self.reports = self.reports, None
            self._send_outcomes(reports)

    def _chain_start(self, ended: Ran, execute: RunTask) -> ErrorInfo | None:
        """Record ``ended``'s end and ``execute``'s start in one transaction (each on
        its own if that cannot be); ``ended``'s Outcome is ready. ``execute``'s
        start refusal, if any."""
        done = ended.execute
        together = False
        try:
            together = writer_for(done.store_url).end_and_start(
                (done.task_id, done.token, ended.error is None,
                 ended.result if ended.error is None else ended.error.to_dict()),
                start_args(execute))
        except Exception:  # noqa: BLE001 - each on its own below: each refusal is named
            together = False
        if not together:
            self._finish(ended)
            return self._record_start(execute)
        self._report(done, ended.span, ended.result, ended.error, ended.streamer)
        return None

    def _call_recorded(self, execute: RunTask, error: ErrorInfo | None) -> Ran | None:
        """Run ``execute`` whose start was recorded (``error``: it was refused, and
        its Outcome is sent now); what it ended with, its end not yet recorded."""
        streamer = Streamer(self.edge_id, execute, lambda: self.current is execute,
                             lambda p: self.send(execute.agent, p)) if execute.stream else None
        span = self._span(execute)
        if error is not None:
            self._report(execute, span, None, error, streamer)
            return None
        self.current = execute
        try:
            result, error = self._call(context(execute, streamer), execute)
        finally:
            self.current = None
        return Ran(execute, span, result, error, streamer)

    def _finish(self, ended: Ran) -> None:
        """Record ``ended``'s end on its own, then send its Outcome."""
        error = self._record_end(ended.execute, ended.result, ended.error) or ended.error
        self._report(ended.execute, ended.span, ended.result, error, ended.streamer)


def start_args(execute: RunTask) -> dict[str, Any]:
    """The arguments of the task's ``mark_started``."""
    task = TaskRecord(
        task_id=execute.task_id, invocation_id=execute.invocation_id,
        execution_id=execute.execution_id, step=execute.step, node_id=execute.node_id,
        branch_index=execute.branch_index, input=execute.input)
    return {"task_id": execute.task_id, "token": execute.token,
            "system_instance": execute.instance, "attempt": execute.attempt, "task": task,
            "checkpoint": execute.checkpoint, "retry": execute.retry or bool(execute.history)}
