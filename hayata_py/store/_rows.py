"""Conversion between records and table rows (encoding/decoding values)."""

from __future__ import annotations

from typing import Any, cast

from hayata_py._codec import decode, encode
from hayata_py._errors import CorruptRecord
from hayata_py.store._records import ActiveExecution, InvocationRecord, TaskRecord

__all__ = [
    "checkpoint_values",
    "invocation_from_row",
    "invocation_values",
    "task_from_row",
    "task_values",
]


def _active_to_plain(active: ActiveExecution | None) -> dict[str, Any] | None:
    if active is None:
        return None
    return {
        "execution_id": active.execution_id,
        "step": active.step,
        "node_ids": list(active.node_ids),
        "input": active.input,
        "parallel": active.parallel,
    }


def checkpoint_values(record: InvocationRecord) -> dict[str, Any]:
    """Encode what a checkpoint changes (raises EncodingError); the input never
    changes after creation, so it is not written again at every step."""
    return {
        "step": int(record.step),
        "state": encode(record.state, key="state"),
        "active_execution": encode(
            _active_to_plain(record.active_execution), key="active_execution"
        ),
        "parallel_results": encode(record.parallel_results, key="parallel_results"),
        "last_result": encode(record.last_result, key="last_result"),
    }


def invocation_values(record: InvocationRecord) -> dict[str, Any]:
    """Encode every value column of ``record`` (raises EncodingError)."""
    return {
        **checkpoint_values(record),
        "input": encode(record.input, key="input"),
        "result": encode(record.result, key="result"),
        "error": encode(record.error, key="error"),
    }


def invocation_from_row(row: Any) -> InvocationRecord:
    """Decode a full ``hayata_invocations`` row (raises CorruptRecord)."""
    where = f"invocation {row.invocation_id}"

    def dec(column: str) -> Any:
        return decode(getattr(row, column), record=where, column=column)

    active_raw = dec("active_execution")
    active: ActiveExecution | None = None
    if active_raw is not None:
        try:
            active = ActiveExecution(
                execution_id=str(active_raw["execution_id"]),
                step=int(active_raw["step"]),
                node_ids=tuple(str(n) for n in active_raw["node_ids"]),
                input=active_raw.get("input"),
                parallel=bool(active_raw.get("parallel", False)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptRecord(
                f"{where}, column active_execution: not an active execution ({exc!r})",
                record=where,
                column="active_execution",
            ) from exc
    return InvocationRecord(
        invocation_id=row.invocation_id,
        agent_id=row.agent_id,
        status=row.status,
        step=row.step,
        state=cast(dict[str, Any], dec("state")),
        input=dec("input"),
        active_execution=active,
        parallel_results=dec("parallel_results"),
        last_result=dec("last_result"),
        result=dec("result"),
        error=dec("error"),
        created_at=row.created_at,
        updated_at=row.updated_at,
        format_version=row.format_version,
    )


def task_values(task: TaskRecord) -> dict[str, Any]:
    """Encode all columns of ``task`` (raises EncodingError)."""
    return {
        "task_id": task.task_id,
        "invocation_id": task.invocation_id,
        "execution_id": task.execution_id,
        "step": int(task.step),
        "node_id": task.node_id,
        "branch_index": int(task.branch_index),
        "status": task.status,
        "input": encode(task.input, key="input"),
        "result": encode(task.result, key="result"),
        "error": encode(task.error, key="error"),
        "attempt": int(task.attempt),
        "started_at": task.started_at,
        "finished_at": task.finished_at,
        "system_instance": task.system_instance,
        "resolved": bool(task.resolved),
    }


def task_from_row(row: Any) -> TaskRecord:
    """Decode a full ``hayata_tasks`` row (raises CorruptRecord)."""
    where = f"task {row.task_id}"

    def dec(column: str) -> Any:
        return decode(getattr(row, column), record=where, column=column)

    return TaskRecord(
        task_id=row.task_id,
        invocation_id=row.invocation_id,
        execution_id=row.execution_id,
        step=row.step,
        node_id=row.node_id,
        branch_index=row.branch_index,
        status=row.status,
        input=dec("input"),
        result=dec("result"),
        error=dec("error"),
        attempt=row.attempt,
        started_at=row.started_at,
        finished_at=row.finished_at,
        system_instance=row.system_instance,
        resolved=bool(row.resolved),
    )
