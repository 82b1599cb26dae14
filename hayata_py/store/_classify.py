"""Pure recovery decisions over task records (no database access).

After a crash the runtime reloads the tasks of the active execution and asks,
for each requested node, what happened to it:

* ``COMPLETED``   - a result was recorded; reuse it, do not run again.
* ``NOT_STARTED`` - no record, or only scheduled; safe to run.
* ``UNCERTAIN``   - started but no outcome recorded; it may have had effects,
  so it must not be run again without the user's decision.
* ``RERUN``       - uncertain, but the node is declared idempotent; run again.
* ``FAILED``      - a failure was recorded.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hayata_py.store._records import TaskRecord

__all__ = ["ExecutionClassification", "MapClassification", "TaskClass", "classify_execution",
           "classify_map", "classify_task"]


class TaskClass(enum.Enum):
    """What a task record says about whether its node ran."""

    COMPLETED = "completed"
    NOT_STARTED = "not_started"
    UNCERTAIN = "uncertain"
    FAILED = "failed"
    RERUN = "rerun"


def classify_task(record: TaskRecord | None, *, idempotent: bool = False) -> TaskClass:
    """Classify one task record (``None`` = never recorded)."""
    if record is None or record.status == "scheduled":
        return TaskClass.NOT_STARTED
    if record.status == "started":
        return TaskClass.RERUN if idempotent else TaskClass.UNCERTAIN
    if record.status == "completed":
        return TaskClass.COMPLETED
    if record.status == "failed":
        return TaskClass.FAILED
    raise ValueError(f"task {record.task_id}: unknown status {record.status!r}")


@dataclass(frozen=True)
class ExecutionClassification:
    """Per-node classes of one execution and what to do with them.

    Every sequence keeps the order of the requested ``node_ids``.
    ``to_run`` holds NOT_STARTED and RERUN nodes; ``reuse`` maps COMPLETED
    nodes to their recorded results; ``uncertain_*`` name the UNCERTAIN ones.
    """

    classes: Mapping[str, TaskClass]
    to_run: tuple[str, ...]
    reuse: Mapping[str, Any]
    uncertain_node_ids: tuple[str, ...]
    uncertain_task_ids: tuple[str, ...]
    failed_node_ids: tuple[str, ...]

    @property
    def has_uncertain(self) -> bool:
        """True if any node is UNCERTAIN (recovery needs a user decision)."""
        return bool(self.uncertain_node_ids)

    @property
    def all_completed(self) -> bool:
        """True if every requested node has a recorded result."""
        return len(self.reuse) == len(self.classes)


def classify_execution(
    node_ids: Sequence[str],
    records: Iterable[TaskRecord],
    idempotent_nodes: Collection[str] = (),
) -> ExecutionClassification:
    """Classify the requested ``node_ids`` of one execution from its task ``records``.

    ``records`` are matched to nodes by ``node_id``; records of other nodes are
    ignored. Raises ``ValueError`` if ``node_ids`` repeats a node or two records
    share a requested node (records of several executions were mixed).
    """
    if len(set(node_ids)) != len(node_ids):
        raise ValueError(f"node_ids repeat a node: {list(node_ids)!r}")
    wanted = set(node_ids)
    by_node: dict[str, TaskRecord] = {}
    for rec in records:
        if rec.node_id not in wanted:
            continue
        if rec.node_id in by_node:
            raise ValueError(
                f"two task records for node {rec.node_id!r} "
                f"({by_node[rec.node_id].task_id}, {rec.task_id}); "
                "pass the records of one execution only"
            )
        by_node[rec.node_id] = rec
    classes: dict[str, TaskClass] = {}
    to_run: list[str] = []
    reuse: dict[str, Any] = {}
    uncertain_nodes: list[str] = []
    uncertain_tasks: list[str] = []
    failed: list[str] = []
    for node_id in node_ids:
        record = by_node.get(node_id)
        cls = classify_task(record, idempotent=node_id in idempotent_nodes)
        classes[node_id] = cls
        if cls in (TaskClass.NOT_STARTED, TaskClass.RERUN):
            to_run.append(node_id)
        elif cls is TaskClass.COMPLETED:
            assert record is not None
            reuse[node_id] = record.result
        elif cls is TaskClass.UNCERTAIN:
            assert record is not None
            uncertain_nodes.append(node_id)
            uncertain_tasks.append(record.task_id)
        else:
            failed.append(node_id)
    return ExecutionClassification(
        classes=classes,
        to_run=tuple(to_run),
        reuse=reuse,
        uncertain_node_ids=tuple(uncertain_nodes),
        uncertain_task_ids=tuple(uncertain_tasks),
        failed_node_ids=tuple(failed),
    )


@dataclass(frozen=True)
class MapClassification:
    """Per-item classes of one map step (items by index, in item order).

    ``to_run`` holds NOT_STARTED and RERUN items; ``reuse`` maps COMPLETED
    items to their recorded results; ``uncertain_*`` name the UNCERTAIN ones;
    ``failed_items`` the items recorded as failed."""

    classes: Mapping[int, TaskClass]
    to_run: tuple[int, ...]
    reuse: Mapping[int, Any]
    uncertain_items: tuple[int, ...]
    uncertain_task_ids: tuple[str, ...]
    failed_items: tuple[int, ...]
    records: Mapping[int, TaskRecord]

    @property
    def has_uncertain(self) -> bool:
        return bool(self.uncertain_items)


def classify_map(task_ids: Sequence[str], records: Iterable[TaskRecord],
                 idempotent: bool = False) -> MapClassification:
    """Classify the items of one map step: item ``i`` is the task ``task_ids[i]``
    (records of other tasks are ignored), exactly as parallel branches are."""
    by_id = {rec.task_id: rec for rec in records}
    classes: dict[int, TaskClass] = {}
    found: dict[int, TaskRecord] = {}
    to_run: list[int] = []
    reuse: dict[int, Any] = {}
    uncertain: list[int] = []
    failed: list[int] = []
    for item, task_id in enumerate(task_ids):
        record = by_id.get(task_id)
        if record is not None:
            found[item] = record
        cls = classes[item] = classify_task(record, idempotent=idempotent)
        if cls in (TaskClass.NOT_STARTED, TaskClass.RERUN):
            to_run.append(item)
        elif cls is TaskClass.COMPLETED:
            assert record is not None
            reuse[item] = record.result
        elif cls is TaskClass.UNCERTAIN:
            uncertain.append(item)
        else:
            failed.append(item)
    return MapClassification(classes, tuple(to_run), reuse, tuple(uncertain),
                             tuple(task_ids[i] for i in uncertain), tuple(failed), found)
