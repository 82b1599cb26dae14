"""What ``recover()`` makes of an interrupted step, from its task records: pure
decisions, no store, no actor (a map step's item by item, :func:`resume_map`);
what a dead edge's recorded end says (:func:`recorded_outcome`); and the
refusals of a recovery that cannot go on yet.

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
from hayata_py._invocation.compensation import compensation_execution_id
from hayata_py._policy import RetryPolicy
from hayata_py.store._classify import TaskClass, classify_execution, classify_map
from hayata_py.store._records import ActiveExecution, InvocationRecord, TaskRecord, task_id_for

__all__ = ["recorded_failures", "recorded_outcome", "resolvable_execution", "resume_map",
           "resume_step", "uncertain_compensations", "waiting_node", "waiting_refusal"]

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


def resume_map(record: InvocationRecord, active: ActiveExecution,
               records: Sequence[TaskRecord], idempotent_nodes: Set[str],
               policy: RetryPolicy | None, now: float) -> Resume | RecoveryRejected:
    """Classify an interrupted map step per item, as parallel branches are: reuse
    completed items, run not-started ones, refuse uncertain ones (re-run them if
    the node is idempotent); a recorded failure ends the invocation, unless the
    node's retry ``policy`` retries it (what is left of its backoff, from ``now``
    in wall-clock seconds, is waited)."""
    node_id = active.node_ids[0]
    items = list(active.input)
    task_ids = [task_id_for(record.invocation_id, active.step, node_id, item=i)
                for i in range(len(items))]
    found = classify_map(task_ids, records, idempotent=node_id in idempotent_nodes)
    failed, retries = recorded_failures(
        [(i, found.records[i], policy) for i in found.failed_items], now)
    if found.has_uncertain and failed is None:
        return RecoveryRejected(
            f"task(s) {list(found.uncertain_task_ids)} of items {list(found.uncertain_items)} "
            f"of map node {node_id!r} started but recorded no result; check the external "
            "system, then resolve_task(), abandon(), or declare the node idempotent",
            code="task_execution_uncertain", invocation_id=record.invocation_id,
            task_ids=list(found.uncertain_task_ids), node_ids=[node_id],
            items=list(found.uncertain_items))
    runs = {i: found.records[i].attempt + 1 if found.classes[i] is TaskClass.RERUN else 1
            for i in found.to_run}
    return Resume(active.execution_id, (node_id,), items, False, failed=failed, map=True,
                  reduce=active.reduce, items_to_run=runs, items_reused=dict(found.reuse),
                  items_retry={} if failed else retries)


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


def waiting_refusal(record: InvocationRecord, early: Resume, unplaced: Mapping[str, str]
                    ) -> RecoveryRejected | None:
    """``waiting_for_placement`` if the recovered step would run a node no system
    can run now (``unplaced``: node id -> why); None if it can go on."""
    waiting = waiting_node(early, unplaced)
    if waiting is None:
        return None
    node_id, why = waiting
    return RecoveryRejected(
        f"node {node_id!r} of the interrupted step has no system to run on ({why}); the "
        "invocation is kept: call recover() again once a system that satisfies the "
        "node's placement has joined", code="waiting_for_placement",
        invocation_id=record.invocation_id, node_id=node_id, reason=why)


def uncertain_compensations(record: InvocationRecord, tasks: Sequence[TaskRecord]
                            ) -> RecoveryRejected:
    """The refusal to go on with a failing invocation whose compensations ``tasks``
    started without a recorded outcome."""
    task_ids = [t.task_id for t in tasks]
    return RecoveryRejected(
        f"invocation {record.invocation_id} was running its compensations and "
        f"{len(task_ids)} of them started without a recorded outcome (they may have "
        "undone their task, or not): check the external system, then resolve_task() "
        "each, or abandon()", code="task_execution_uncertain",
        invocation_id=record.invocation_id, task_ids=task_ids,
        node_ids=[t.node_id for t in tasks], compensations=True)


def resolvable_execution(record: InvocationRecord) -> str | None:
    """The execution whose uncertain tasks ``resolve_task`` may settle: the
    interrupted step's, or the compensations' of a failing invocation."""
    if record.failing is not None:
        return compensation_execution_id(record.invocation_id)
    active = record.active_execution
    return None if active is None else active.execution_id
