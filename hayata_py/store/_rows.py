"""Conversion between records and table rows (encoding/decoding values), for
both write paths.

Writing a record encodes its values first (:class:`EncodingError` names the
key, nothing is written); the checkpoint a task's start carries is checked
against the task before it is encoded (:func:`start_checkpoint_values`).

Reading a row checks it whole before a record is returned: the value columns
decode (:func:`hayata_py._codec.decode`) to the kinds the record holds, the
status is a known one, the integer columns are integers, and an invocation's
``format_version`` is this code's (:class:`SchemaTooNew` for a record written
by a newer hayata_py). Anything else raises :class:`CorruptRecord` naming the
record and the column; nothing half-read is returned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hayata_py._codec import FORMAT_VERSION, decode, encode
from hayata_py._errors import CorruptRecord, SchemaTooNew, StoreError
from hayata_py.store._records import (
    INVOCATION_STATUSES,
    TASK_STATUSES,
    ActiveExecution,
    InvocationRecord,
    TaskRecord,
    ThreadRecord,
)

__all__ = [
    "check_control",
    "checkpoint_values",
    "finish_values",
    "invocation_from_row",
    "invocation_values",
    "start_checkpoint_values",
    "task_error",
    "task_from_row",
    "task_values",
    "thread_from_row",
]


def _active_to_plain(active: ActiveExecution | None, paused: dict[str, Any] | None = None,
                     failing: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The active execution column; a pause (``"paused"``) and a failure whose
    compensations run (``"failing"``) ride along in it, with or without an
    execution, so neither needs a schema change."""
    extra = ({"paused": paused} if paused is not None else {}) \
        | ({"failing": failing} if failing is not None else {})
    if active is None:
        return extra or None
    plain = extra | {
        "execution_id": active.execution_id,
        "step": active.step,
        "node_ids": list(active.node_ids),
        "input": active.input,
        "parallel": active.parallel,
    }
    if active.map:  # only map steps carry these: other records are as before
        plain.update(map=True, reduce=active.reduce)
    return plain


def checkpoint_values(record: InvocationRecord) -> dict[str, Any]:
    """Encode what a checkpoint changes (raises EncodingError); the input never
    changes after creation, so it is not written again at every step."""
    return {
        "step": int(record.step),
        "state": encode(record.state, key="state"),
        "active_execution": encode(
            _active_to_plain(record.active_execution, record.paused,
                             record.failing), key="active_execution"
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


def finish_values(result: Any, error: dict[str, Any] | None, state: dict[str, Any] | None
                  ) -> dict[str, Any]:
    """Encode what an invocation's end writes: result, error, and the state when
    given (raises EncodingError)."""
    values: dict[str, Any] = {"result": encode(result, key="result"),
                              "error": encode(error, key="error")}
    if state is not None:
        values["state"] = encode(state, key="state")
    return values


def task_error(task_id: str, code: str, message: str, **details: Any) -> StoreError:
    """A refusal of a write to the task ``task_id``."""
    return StoreError(f"task {task_id}: {message}", code=code, task_id=task_id, **details)


def start_checkpoint_values(task_id: str, task: TaskRecord | None, record: InvocationRecord
                            ) -> dict[str, Any]:
    """The encoded checkpoint columns of ``record`` for a task's start that carries
    it (``mark_started(checkpoint=...)``, ``complete_cached``), checked before
    anything is written: it needs the task's record, and must be of the task's
    running invocation and name the task's execution and node
    (``invalid_argument``)."""
    if task is None:
        raise task_error(task_id, "invalid_argument",
                         "a checkpoint can only be saved with the task record it names")
    if record.invocation_id != task.invocation_id or record.status != "running":
        raise task_error(
            task_id, "invalid_argument",
            f"the checkpoint must be of the task's running invocation {task.invocation_id}, "
            f"got {record.invocation_id} ({record.status})")
    active = record.active_execution
    if active is None or active.execution_id != task.execution_id \
            or task.node_id not in active.node_ids:
        raise task_error(task_id, "invalid_argument",
                         f"the checkpoint must name the task's execution {task.execution_id} "
                         f"and node {task.node_id!r}")
    return checkpoint_values(record)


def _corrupt(where: str, column: str, why: str) -> CorruptRecord:
    return CorruptRecord(f"{where}, column {column}: {why}", record=where, column=column)


def check_control(row: Any, where: str) -> None:
    """Refuse an invocation row of another value format or an unknown status.

    Runs on every read and fenced write of an invocation, before anything else.
    """
    version = row.format_version
    if not isinstance(version, int) or version < 1:
        raise _corrupt(where, "format_version", f"not a format version: {version!r}")
    if version > FORMAT_VERSION:
        raise SchemaTooNew(
            f"{where}, column format_version: written in value format {version} by a newer "
            f"hayata_py; this version reads format {FORMAT_VERSION}. Upgrade hayata_py to use "
            "it (the record was not changed).",
            record=where, column="format_version", format_version=version,
        )
    if row.status not in INVOCATION_STATUSES:
        raise _corrupt(where, "status", f"unknown invocation status {row.status!r}")


def _integers(row: Any, where: str, columns: tuple[str, ...]) -> None:
    for column in columns:
        value = getattr(row, column)
        if not isinstance(value, int):
            raise _corrupt(where, column, f"not an integer: {value!r}")


def _kind(value: Any, where: str, column: str, kinds: tuple[type, ...]) -> Any:
    if not isinstance(value, kinds):
        names = " or ".join("None" if k is type(None) else k.__name__ for k in kinds)
        raise _corrupt(where, column, f"holds a {type(value).__name__}, not {names}")
    return value


def _paused_from_plain(raw: Any, where: str) -> dict[str, Any] | None:
    paused = raw.get("paused") if isinstance(raw, dict) else None
    if paused is not None and not isinstance(paused, dict):
        raise _corrupt(where, "active_execution", f"not a pause: {paused!r:.200}")
    return paused


def _failing_from_plain(raw: Any, where: str) -> dict[str, Any] | None:
    failing = raw.get("failing") if isinstance(raw, dict) else None
    if failing is not None and not (isinstance(failing, dict) and "code" in failing):
        raise _corrupt(where, "active_execution", f"not a failure: {failing!r:.200}")
    return failing


def _active_from_plain(raw: Any, where: str) -> ActiveExecution | None:
    if raw is None or (isinstance(raw, dict) and raw.keys() <= {"paused", "failing"}):
        return None
    column = "active_execution"
    if not isinstance(raw, dict) or not {"execution_id", "step", "node_ids"} <= raw.keys():
        raise _corrupt(where, column, f"not an active execution: {raw!r:.200}")
    node_ids, step, parallel = raw["node_ids"], raw["step"], raw.get("parallel", False)
    if not isinstance(raw["execution_id"], str) or not isinstance(step, int) \
            or not isinstance(node_ids, list) or not all(isinstance(n, str) for n in node_ids) \
            or not isinstance(parallel, bool) or not isinstance(raw.get("map", False), bool) \
            or not isinstance(raw.get("reduce"), (str, type(None))) \
            or (raw.get("map") and not isinstance(raw.get("input"), list)):
        raise _corrupt(where, column, f"not an active execution: {raw!r:.200}")
    return ActiveExecution(raw["execution_id"], step, tuple(node_ids), raw.get("input"),
                           parallel, raw.get("map", False), raw.get("reduce"))


def _decoder(row: Any, where: str) -> Callable[..., Any]:
    def dec(column: str, *kinds: type) -> Any:
        value = decode(getattr(row, column), record=where, column=column)
        return _kind(value, where, column, kinds) if kinds else value

    return dec


_NONE = type(None)


def invocation_from_row(row: Any) -> InvocationRecord:
    """Decode a full ``hayata_invocations`` row (raises CorruptRecord or SchemaTooNew)."""
    where = f"invocation {row.invocation_id}"
    check_control(row, where)
    _integers(row, where, ("step",))
    dec = _decoder(row, where)
    return InvocationRecord(
        invocation_id=row.invocation_id,
        agent_id=row.agent_id,
        status=row.status,
        step=row.step,
        state=dec("state", dict),
        input=dec("input"),
        active_execution=_active_from_plain(active := dec("active_execution"), where),
        paused=_paused_from_plain(active, where),
        failing=_failing_from_plain(active, where),
        parallel_results=dec("parallel_results", list, _NONE),
        last_result=dec("last_result"),
        result=dec("result"),
        error=dec("error", dict, _NONE),
        created_at=row.created_at,
        updated_at=row.updated_at,
        format_version=row.format_version,
        thread_id=row.thread_id,
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
    if row.status not in TASK_STATUSES:
        raise _corrupt(where, "status", f"unknown task status {row.status!r}")
    _integers(row, where, ("step", "branch_index", "attempt"))
    dec = _decoder(row, where)
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
        error=dec("error", dict, _NONE),
        attempt=row.attempt,
        started_at=row.started_at,
        finished_at=row.finished_at,
        system_instance=row.system_instance,
        resolved=bool(row.resolved),
        cached=bool(getattr(row, "cached", False)),
    )


def thread_from_row(row: Any, queued: tuple[str, ...]) -> ThreadRecord:
    """Decode a ``hayata_threads`` row; ``queued``: its queue's invocation ids in order."""
    where = f"thread {row.thread_id} of agent {row.agent_id}"
    _integers(row, where, ("version",))
    return ThreadRecord(
        agent_id=row.agent_id,
        thread_id=row.thread_id,
        state=_decoder(row, where)("state", dict),
        version=row.version,
        running_invocation_id=row.running_invocation_id,
        queued=queued,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )
