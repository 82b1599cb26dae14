"""The edge: runs one node function call (an edge task) at a time, in its own process.

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
"""

from __future__ import annotations

import os
from types import MappingProxyType
from typing import Any

from hayata_py import _telemetry as telemetry
from hayata_py._actors._calls import call_node, matches
from hayata_py._actors._protocol import (
    EdgeInit,
    EdgeReady,
    EdgeStarted,
    Outcome,
    Partial,
    RunTask,
)
from hayata_py._actors._wellformed import drop_malformed
from hayata_py._actors.durable import as_store_error, writer_for
from hayata_py._callables import resolve_callable
from hayata_py._codec import check_encodable
from hayata_py._errors import (
    EncodingError,
    ErrorInfo,
    InvalidPartialResult,
    StaleExecution,
)
from hayata_py._policy import NodeContext
from hayata_py.store import TaskRecord
from supervisors import SupervisedActor, host_id


class _Streamer:
    """``ctx.streamer``: publishes a partial result while its task is the edge's current one."""

    def __init__(self, edge: EdgeActor, run: RunTask) -> None:
        self._edge = edge
        self._run = run
        self.count = 0

    def __call__(self, partial: dict[str, Any]) -> None:
        execute = self._run
        if self._edge.current is not self._run:
            raise StaleExecution(
                f"execution {execute.execution_id} of node {execute.node_id!r} has ended; "
                "its streamer can no longer publish",
                execution_id=execute.execution_id)
        if not isinstance(partial, dict):
            raise InvalidPartialResult(
                f"streamer takes a dict, got {type(partial).__name__}")
        check_encodable(partial, "partial")
        self.count += 1
        self._edge.send(execute.agent, Partial(execute.execution_id, execute.node_id,
                                               self._edge.edge_id, self.count, dict(partial),
                                               execute.item))


class EdgeActor(SupervisedActor):
    """Runs edge tasks for one node; started by the node, dies with it."""

    current: RunTask | None = None
    edge_id = ""

    def on_receive(self, message: Any, sender: Any) -> None:
        if drop_malformed(self.log, message):
            return
        if isinstance(message, RunTask):
            self._run(message)
        elif isinstance(message, EdgeInit):
            self.node_id, self.edge_id, self.function = (
                message.node_id, message.edge_id, message.function)
            self.send(sender, EdgeReady(message.edge_id, os.getpid()))
            if message.watcher is not None:
                self.send(message.watcher,
                          EdgeStarted(message.node_id, message.edge_id, os.getpid(),
                                      host_id()))

    def _run(self, execute: RunTask) -> None:
        streamer = _Streamer(self, execute) if execute.stream else None
        ctx = NodeContext(
            input=execute.input, state=MappingProxyType(execute.state), node_id=execute.node_id,
            invocation_id=execute.invocation_id, execution_id=execute.execution_id,
            task_id=execute.task_id, idempotency_key=execute.idempotency_key,
            streamer=streamer, item=execute.item, attempt=execute.attempt)
        span = telemetry.span_start(telemetry.EDGE, {
            "agent_id": execute.agent_id, "node_id": execute.node_id,
            "execution_id": execute.execution_id, "edge_id": self.edge_id,
            **({} if execute.item is None else {"item": execute.item})})
        result: Any = None
        error: ErrorInfo | None = self._record_start(execute)
        if error is None:
            self.current = execute
            try:
                result, error = self._call(ctx, execute)
            finally:
                self.current = None
            error = self._record_end(execute, result, error) or error
        if error is None:
            telemetry.span_stop(span, "completed")
        elif error.code == "node_failed" and "type" in error.details:
            telemetry.span_exception(span, str(error.details["type"]),
                                     metadata={"error_code": error.code})
        else:
            telemetry.span_stop(span, "failed", metadata={"error_code": error.code})
        partials = streamer.count if streamer else 0
        # Recorded above, before anyone hears of it.
        self.send(execute.agent, Outcome(execute.execution_id, execute.task_id,
                                         execute.node_id, self.edge_id, error is None, result,
                                         error, partials, execute.item))

    def _record_start(self, execute: RunTask) -> ErrorInfo | None:
        """Record ``started`` durably before the node function runs (with the
        step's checkpoint, in the same transaction, when the agent sent one).

        A refusal (a newer owner fenced this writer out, the invocation is
        over) means the function must not run at all."""
        if not execute.store_url:
            return None
        task = TaskRecord(
            task_id=execute.task_id, invocation_id=execute.invocation_id,
            execution_id=execute.execution_id, step=execute.step, node_id=execute.node_id,
            branch_index=execute.branch_index, input=execute.input)
        try:
            writer_for(execute.store_url).mark_started(
                execute.task_id, token=execute.token, system_instance=execute.instance,
                attempt=execute.attempt, task=task, checkpoint=execute.checkpoint,
                retry=bool(execute.history))
        except Exception as raw:  # noqa: BLE001 - any store failure is reported
            exc = as_store_error(raw)
            self.log.warning("task_start_refused", task_id=execute.task_id, code=exc.code)
            return ErrorInfo(exc.code, f"task {execute.task_id} not started: {exc}",
                             {"node_id": execute.node_id, "task_id": execute.task_id})
        return None

    def _record_end(self, execute: RunTask, result: Any, error: ErrorInfo | None
                    ) -> ErrorInfo | None:
        """Record the outcome durably before anyone hears of it."""
        if not execute.store_url:
            return None
        store = writer_for(execute.store_url)
        try:
            if error is None:
                store.mark_completed(execute.task_id, token=execute.token, result=result)
            else:
                store.mark_failed(execute.task_id, token=execute.token, error=error.to_dict())
        except Exception as raw:  # noqa: BLE001 - any store failure is reported
            exc = as_store_error(raw)
            self.log.warning("task_result_refused", task_id=execute.task_id, code=exc.code)
            return ErrorInfo(exc.code, f"result of task {execute.task_id} not recorded: {exc}",
                             {"node_id": execute.node_id, "task_id": execute.task_id})
        return None

    def _call(self, ctx: NodeContext, execute: RunTask) -> tuple[Any, ErrorInfo | None]:
        try:
            result = call_node(resolve_callable(self.function), ctx)
        except BaseException as exc:  # noqa: BLE001 - user code must never reach Thespian
            name = type(exc).__name__
            return None, ErrorInfo("node_failed", f"{name}: {exc}", {
                "node_id": ctx.node_id, "type": name, "attempt": execute.attempt,
                "attempts": [*execute.history, name],
                "retryable": matches(exc, execute.retry_on)})
        if not isinstance(result, dict):
            return None, ErrorInfo(
                "invalid_node_result",
                f"node {ctx.node_id!r} returned {type(result).__name__}; "
                "a node must return a dict",
                {"node_id": ctx.node_id, "returned": type(result).__name__})
        try:
            check_encodable(result, "result")
        except EncodingError as exc:
            return None, ErrorInfo("invalid_node_result",
                                   f"node {ctx.node_id!r} returned a value that cannot be "
                                   f"stored: {exc}", {"node_id": ctx.node_id, **exc.details})
        return result, None
