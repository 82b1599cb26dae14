"""Compensation as pure data: which completed tasks an ending invocation undoes.

``AgentConfig(compensate={"charge_card": "myapp.pay:refund"})``: when an
invocation ends failed (or is abandoned), every completed task of a node with
a compensator gets that compensator run once, latest first, with the task's
input and result. Each compensation is itself a task with its own durable
record, under an id derived from the task it undoes
(:func:`compensation_id_for`), in the invocation's compensation execution
(:func:`compensation_execution_id`): a crash during one leaves its record
``started`` (uncertain, refused like any task), and a completed one is never
run again. Tasks that completed from the cache did not run their node, so
they are not undone.

No Thespian, no store: :func:`history` reads task records, the machine's
glue (:mod:`~hayata_py._invocation.compensating`) carries the plan out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hayata_py.store._classify import TaskClass, classify_task
from hayata_py.store._records import TaskRecord

__all__ = ["History", "Undo", "compensation_execution_id", "compensation_id_for",
           "compensation_input", "history", "is_compensation"]


@dataclass(frozen=True)
class Undo:
    """A completed task that a compensator undoes."""

    task_id: str
    node_id: str
    step: int
    input: Any
    result: Any


def compensation_id_for(task_id: str) -> str:
    """The id of the compensation of task ``task_id`` (one per task, ever)."""
    return "undo-" + hashlib.sha256(task_id.encode("utf-8")).hexdigest()[:32]


def compensation_execution_id(invocation_id: str) -> str:
    """The execution every compensation of the invocation is recorded in."""
    return f"{invocation_id}:{_UNDO}"


def is_compensation(execution_id: str) -> bool:
    """``execution_id`` is an invocation's compensation execution."""
    return execution_id.rpartition(":")[2] == _UNDO


_UNDO = "compensation"
"""The last part of a compensation execution's id (a step's is its number)."""


def compensation_input(undo: Undo) -> dict[str, Any]:
    """What the compensator's ``ctx.input`` is: the undone task's id, input and result."""
    return {"task_id": undo.task_id, "node_id": undo.node_id, "input": undo.input,
            "result": undo.result}


@dataclass(frozen=True)
class History:
    """Where an invocation's compensations stand, from its task records.

    ``todo``: completed tasks of compensated nodes not undone yet, oldest
    first; ``done``: the tasks already undone (``{"node_id", "task_id"}``),
    in the order they were; ``failed``: those whose compensator failed;
    ``uncertain``: compensations that started and recorded no outcome (the
    task ids of the compensation records)."""

    todo: tuple[Undo, ...] = ()
    done: tuple[dict[str, str], ...] = ()
    failed: tuple[dict[str, str], ...] = ()
    uncertain: tuple[TaskRecord, ...] = ()


def _order(record: TaskRecord) -> tuple[float, int, int]:
    return (record.finished_at or 0.0, record.step, record.branch_index)


def history(records: Iterable[TaskRecord], compensate: Mapping[str, str]) -> History:
    """Classify an invocation's records (all of them) for its compensation."""
    if not compensate:
        return History()
    records = list(records)
    by_id = {r.task_id: r for r in records}
    todo: list[Undo] = []
    done: list[tuple[TaskRecord, dict[str, str]]] = []
    failed: list[dict[str, str]] = []
    uncertain: list[TaskRecord] = []
    for record in sorted(records, key=_order):
        if record.node_id not in compensate or record.status != "completed" \
                or record.cached or is_compensation(record.execution_id):
            continue
        undone = by_id.get(compensation_id_for(record.task_id))
        named = {"node_id": record.node_id, "task_id": record.task_id}
        cls = classify_task(undone)
        if cls is TaskClass.NOT_STARTED:
            todo.append(Undo(record.task_id, record.node_id, record.step, record.input,
                             record.result))
        elif cls is TaskClass.COMPLETED:
            assert undone is not None
            done.append((undone, named))
        elif cls is TaskClass.FAILED:
            failed.append(named)
        else:
            assert undone is not None
            uncertain.append(undone)
    done.sort(key=lambda pair: _order(pair[0]))
    return History(tuple(todo), tuple(n for _, n in done), tuple(failed), tuple(uncertain))
