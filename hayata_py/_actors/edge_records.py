"""An edge's durable records of its tasks: ``started`` before a node function
runs, ``completed``/``failed`` after it, before anyone hears of it.

An edge writes through the light :class:`~hayata_py.store._fast.writer.TaskWriter`
(one driver connection, the store's own fenced statements), so an edge
process holds no SQLAlchemy engine. A refused write (a newer owner fenced
this writer out, the invocation is over) comes back as the task's error.
"""

from __future__ import annotations

from typing import Any

from hayata_py._actor_messages import RunTask
from hayata_py._actors.store_access import as_store_error, writer_for
from hayata_py._errors import ErrorInfo
from hayata_py.store import TaskRecord

End = tuple[RunTask, Any, ErrorInfo | None]
"""A task that ended: the task, its result, its error."""


def start_args(execute: RunTask) -> dict[str, Any]:
    """The arguments of the task's ``mark_started``."""
    task = TaskRecord(
        task_id=execute.task_id, invocation_id=execute.invocation_id,
        execution_id=execute.execution_id, step=execute.step, node_id=execute.node_id,
        branch_index=execute.branch_index, input=execute.input)
    return {"task_id": execute.task_id, "token": execute.token,
            "system_instance": execute.instance, "attempt": execute.attempt, "task": task,
            "checkpoint": execute.checkpoint, "retry": execute.retry or bool(execute.history)}


class TaskRecords:
    """The records an edge writes of its tasks (its log names the refusals)."""

    def __init__(self, log: Any) -> None:
        self.log = log

    def start(self, execute: RunTask) -> ErrorInfo | None:
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

    def starts(self, tasks: list[RunTask]) -> list[ErrorInfo | None]:
        """:meth:`start` of each; those of one store in one transaction when every
        one of them lands as the usual first start (one fsync)."""
        if len(tasks) < 2 or len({t.store_url for t in tasks}) != 1 or not tasks[0].store_url:
            return [self.start(t) for t in tasks]
        try:
            together = writer_for(tasks[0].store_url).start_many(
                [start_args(t) for t in tasks])
        except Exception:  # noqa: BLE001 - one by one below: each refusal is named
            together = False
        if together:
            return [None] * len(tasks)
        return [self.start(t) for t in tasks]  # one by one: each refusal named

    def end(self, execute: RunTask, result: Any, error: ErrorInfo | None
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
            return self.refused_end(execute, raw)
        return None

    def ends(self, ended: list[End]) -> list[ErrorInfo | None]:
        """Record the ends of tasks that ended together (one store: the first's) in
        one transaction; per task, the refusal of its end or None."""
        url = ended[0][0].store_url if ended else ""
        if not url:
            return [None] * len(ended)
        outcomes = writer_for(url).finish_many([
            (execute.task_id, execute.token, error is None,
             result if error is None else error.to_dict())
            for execute, result, error in ended])
        return [None if raw is None else self.refused_end(execute, raw)
                for (execute, _result, _error), raw in zip(ended, outcomes, strict=True)]

    def end_and_start(self, ended: End, execute: RunTask) -> bool:
        """Record ``ended``'s end and ``execute``'s start in one transaction; False
        if that could not be (nothing of it written: record each on its own)."""
        done, result, error = ended
        try:
            return writer_for(done.store_url).end_and_start(
                (done.task_id, done.token, error is None,
                 result if error is None else error.to_dict()),
                start_args(execute))
        except Exception:  # noqa: BLE001 - each on its own then: each refusal is named
            return False

    def refused_end(self, execute: RunTask, raw: Exception) -> ErrorInfo:
        exc = as_store_error(raw)
        self.log.warning("task_result_refused", task_id=execute.task_id, code=exc.code)
        return ErrorInfo(exc.code, f"result of task {execute.task_id} not recorded: {exc}",
                         {"node_id": execute.node_id, "task_id": execute.task_id})
