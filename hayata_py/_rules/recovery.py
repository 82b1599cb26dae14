"""What ``recover()`` makes of an interrupted sequential or parallel step, from
its task records: pure decisions, no store, no actor (a map step's, item by
item, are in :mod:`hayata_py._actors.maps`).

Completed tasks are reused, not-started ones run, uncertain ones of idempotent
nodes run again (attempt + 1); a recorded failure retries if the node's retry
policy allows, else it ends the step; any other uncertain task refuses the
recovery, unless a recorded final failure has decided the step already.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from typing import TypeVar

from hayata_py._actor_messages import Outcome, RunTask
from hayata_py._errors import ErrorInfo, RecoveryRejected
from hayata_py._invocation import Resume, RetryPlan, retry
from hayata_py._policy import RetryPolicy
from hayata_py.store._classify import TaskClass, classify_execution
from hayata_py.store._records import ActiveExecution, InvocationRecord, TaskRecord

__all__ = ["recorded_failures", "recorded_outcome", "resume_step", "waiting_node"]

K = TypeVar("K")


def recorded_outcome(task: RunTask, record: TaskRecord | None, edge_id: str
                     ) -> Outcome | None:
    """What the dead edge ``edge_id`` would have reported for ``task``, read from
    its durable record: its end if this attempt's end is recorded (completed,
    or failed with a readable error); else None (the task fails as lost)."""
    if record is None or record.attempt != task.attempt:
        return None
    if record.status == "completed":
        return Outcome(task.execution_id, task.task_id, task.node_id, edge_id, True,
                       record.result, item=task.item)
    error = record.error
    if record.status != "failed" or not isinstance(error, dict) \
            or not {"code", "message"} <= error.keys():
        return None
    return Outcome(task.execution_id, task.task_id, task.node_id, edge_id, False,
                   error=ErrorInfo.from_dict(error), item=task.item)


def resume_step(record: InvocationRecord, active: ActiveExecution,
                records: Sequence[TaskRecord], idempotent: Set[str],
                policies: Mapping[str, RetryPolicy], now: float
                ) -> RecoveryRejected | Resume:
    """The :class:`Resume` of the step ``active`` of ``record``, or why not."""
    tasks = {t.node_id: t for t in records}
    classes = classify_execution(active.node_ids, records, idempotent)
    failed, retries = recorded_failures(
        [(n, tasks[n], policies.get(n)) for n in classes.failed_node_ids], now)
    if classes.has_uncertain and failed is None:
        return RecoveryRejected(
            f"task(s) {list(classes.uncertain_task_ids)} of node(s) "
            f"{list(classes.uncertain_node_ids)} started but recorded no result; "
            "check the external system, then resolve_task(), abandon(), or declare "
            "the node idempotent", code="task_execution_uncertain",
            invocation_id=record.invocation_id,
            task_ids=list(classes.uncertain_task_ids),
            node_ids=list(classes.uncertain_node_ids))
    to_run = {n: tasks[n].attempt + 1 if classes.classes[n] is TaskClass.RERUN else 1
              for n in classes.to_run}
    return Resume(active.execution_id, tuple(active.node_ids), active.input,
                  active.parallel, to_run, dict(classes.reuse), failed,
                  retry={} if failed else retries)


def recorded_failures(failures: Iterable[tuple[K, TaskRecord, RetryPolicy | None]],
                      now: float) -> tuple[ErrorInfo | None, dict[K, RetryPlan]]:
    """Of the recorded failures of a step (key: node id, or a map step's item):
    the first that ends it (no retry left), and those whose retry is due (what is
    left of their backoff)."""
    failed: ErrorInfo | None = None
    retries: dict[K, RetryPlan] = {}
    for key, task, policy in failures:
        error = ErrorInfo.from_dict(task.error or {
            "code": "node_failed", "message": "recorded as failed"})
        plan = retry.after_recovery(policy, error, task.attempt, task.task_id,
                                    task.finished_at, now)
        if plan is not None:
            retries[key] = plan
        elif failed is None:
            failed = error
    return failed, retries


def waiting_node(resume: Resume, unplaced: Mapping[str, str]) -> tuple[str, str] | None:
    """A node the recovered step would run (or retry) that no system can run now
    (``unplaced``: node id -> why), with the reason; None if there is none."""
    if resume.failed is not None:
        return None  # the step ends with its recorded failure: nothing runs
    if resume.map:
        wanted = list(resume.nodes) if resume.items_to_run or resume.items_retry else []
    else:
        wanted = [n for n in resume.nodes if n in resume.to_run or n in resume.retry]
    return next(((n, unplaced[n]) for n in wanted if n in unplaced), None)
