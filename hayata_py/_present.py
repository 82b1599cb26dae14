"""What the two front ends show alike: the JSON of events, results and task rows.

The ``hayata`` command (``--json``) and the observer page print the same
shapes, so a line of ``hayata run --json`` and a message of the page read the
same way. Below both front ends: imported by :mod:`hayata_py.cli` and
:mod:`hayata_py._observer`, it imports neither.
"""

from __future__ import annotations

import json
from typing import Any

from hayata_py._invocation.compensation import is_compensation
from hayata_py.messages import AgentEvent, AgentResult
from hayata_py.store import InvocationRecord, TaskRecord, TaskStore, classify_task, task_id_for


def dumps(value: Any) -> str:
    """Compact JSON; values JSON cannot hold are written as their repr."""
    return json.dumps(value, default=repr, separators=(",", ":"))


def event_json(event: AgentEvent) -> dict[str, Any]:
    return {"kind": "event", "invocation_id": event.invocation_id, "type": event.type,
            "sequence": event.sequence, "data": event.data}


def result_json(result: AgentResult) -> dict[str, Any]:
    return {"kind": "result", "invocation_id": result.invocation_id, "ok": result.ok,
            "status": result.status, "result": result.result,
            "error": result.error.to_dict() if result.error is not None else None}


def compensates(task: TaskRecord) -> str | None:
    """The task that ``task`` undoes, if it is a compensation (else None)."""
    if not is_compensation(task.execution_id) or not isinstance(task.input, dict):
        return None
    undone = task.input.get("task_id")
    return undone if isinstance(undone, str) else None


def task_row(task: TaskRecord, idempotent: bool = False) -> dict[str, Any]:
    """One task as ``tasks --json`` prints it (``compensates``: the task a
    compensation undoes; None for every other task)."""
    undoes = compensates(task)
    idempotent = idempotent and undoes is None  # a compensation is never re-run
    return {"task_id": task.task_id, "invocation_id": task.invocation_id, "step": task.step,
            "node_id": task.node_id, "branch": task.branch_index, "status": task.status,
            "attempt": task.attempt,
            "classification": classify_task(task, idempotent=idempotent).value,
            "resolved": task.resolved, "cached": task.cached, "result": task.result,
            "error": task.error, "compensates": undoes}


def task_rows(store: TaskStore, invocation: InvocationRecord,
              idempotent: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """The rows ``tasks`` shows: every recorded task of the invocation, then (while it
    runs) the nodes of its active step that have no record yet (status ``-``).
    ``idempotent``: the agent's idempotent nodes (their uncertain tasks are ``rerun``)."""
    records = store.get_tasks(invocation.invocation_id)
    rows = [task_row(t, t.node_id in idempotent) for t in records]
    active = invocation.active_execution
    if active is not None and invocation.status == "running":
        # Tasks of the interrupted step that never got a record: recovery runs them
        # (a map step's are its items: BRANCH is the item index).
        recorded = {t.task_id for t in records if t.execution_id == active.execution_id}
        wanted = [(i, active.node_ids[0], i) for i in range(len(active.input))] \
            if active.map else [(i, n, None) for i, n in enumerate(active.node_ids)]
        for index, node_id, item in wanted:
            task_id = task_id_for(invocation.invocation_id, active.step, node_id, item=item)
            if task_id not in recorded:
                rows.append({**task_row(TaskRecord(
                    task_id, invocation.invocation_id, active.execution_id, active.step,
                    node_id, branch_index=index)), "status": "-"})
    return rows
