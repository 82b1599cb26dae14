"""Compensation of a failing invocation: machine glue (see :mod:`.compensation`).

When the machine fails an invocation whose agent has compensators
(``Rules.compensate``), it does not record the failure at once: it first
commits a checkpoint that says the invocation is failing (``failing``: the
error it ends with, so a recovery after a crash goes on undoing, it never
resumes the graph), then runs one compensation at a time, latest completed
task first, each a task of its own (``compensation_started`` /
``compensation_completed`` or ``compensation_failed``), and finally records
the failure with ``details["compensated"]`` (and ``"compensation_failed"``,
if a compensator failed: the others still run).
"""

from __future__ import annotations

from typing import Any

from hayata_py._errors import ErrorInfo
from hayata_py._invocation import reasons
from hayata_py._invocation.commands import (
    ArmDeadline,
    CancelTask,
    Command,
    Dispatch,
    RecordResult,
    SaveCheckpoint,
)
from hayata_py._invocation.compensation import (
    compensation_execution_id,
    compensation_id_for,
    compensation_input,
)
from hayata_py._invocation.events import (
    CheckpointSaved,
    DeadlinePassed,
    Event,
    LeaseLost,
    NodeDown,
    Stop,
    StopKind,
    TaskKey,
    TaskOutcome,
    WriteRefused,
)
from hayata_py._invocation.machine_view import Machine
from hayata_py._invocation.state import Phase, Task


def start(inv: Machine, error: ErrorInfo) -> list[Command]:
    """The invocation fails with ``error``: undo its completed tasks first, or,
    with nothing (left) to undo, record the failure now."""
    if not inv.rules.compensate or not inv.undo:
        return _finish(inv, error)
    inv.failing = error
    inv.phase = Phase.COMPENSATING
    return [SaveCheckpoint(inv.checkpoint())]  # says "failing" before any undo starts


def keep_failing(inv: Machine, error: ErrorInfo) -> list[Command]:
    """The agent stops while the invocation has tasks to undo: commit that it
    fails with ``error`` and end this run, kept: ``recover()`` undoes them."""
    cancelled = inv._cancel_all()
    inv.failing = error
    return [*cancelled, SaveCheckpoint(inv.checkpoint()), *inv._interrupt(error)]


def on_event(inv: Machine, event: Event) -> list[Command]:
    """An event while compensating (every other one does not apply)."""
    current = inv.undoing
    if isinstance(event, CheckpointSaved) and current is None:
        return _next(inv)
    if isinstance(event, WriteRefused):
        return inv._on_refused(event)
    if isinstance(event, LeaseLost) and inv.rules.durable:
        return _cancel(inv) + inv._lose_ownership()
    if isinstance(event, Stop):
        if inv.rules.durable:  # kept: recover() goes on undoing
            cause = reasons.nodes_lost() if event.kind is StopKind.NODES_LOST \
                else reasons.agent_stopped()
            return _cancel(inv) + inv._interrupt(cause)
        return _cancel(inv) + _finish(inv, _failing(inv))
    if current is None:
        return []
    execution_id = compensation_execution_id(inv.id)
    if isinstance(event, TaskOutcome) and event.execution_id == execution_id \
            and event.key == current.key:
        return _done(inv, None if event.ok else event.error)
    if isinstance(event, NodeDown) and event.node_id == current.key.node_id:
        return _done(inv, reasons.node_crashed(event.node_id, event.pid, execution_id,
                                               event.reason))
    if isinstance(event, DeadlinePassed) and event.execution_id == execution_id \
            and event.key in (None, current.key):
        seconds = inv.rules.timeout_for(current.key.node_id)
        return _cancel(inv, timed_out=True) + _done(
            inv, reasons.timed_out([current.key.node_id], seconds, execution_id))
    return []


def _failing(inv: Machine) -> ErrorInfo:
    assert inv.failing is not None
    return inv.failing


def _next(inv: Machine) -> list[Command]:
    if not inv.undo:
        return _finish(inv, _failing(inv))
    undo = inv.undo[-1]  # the latest completed first
    key = TaskKey(undo.node_id)
    inv.undoing = Task(key, compensation_id_for(undo.task_id))
    execution_id = compensation_execution_id(inv.id)
    started = inv._emit("compensation_started", {
        "node_id": undo.node_id, "task_id": undo.task_id,
        "compensation_id": inv.undoing.task_id})
    return [*started,
            Dispatch(execution_id, key, inv.undoing.task_id, undo.step, 0,
                     compensation_input(undo), dict(inv.state),
                     function=inv.rules.compensate[undo.node_id]),
            ArmDeadline(execution_id, inv.rules.timeout_for(undo.node_id), key)]


def _done(inv: Machine, error: ErrorInfo | None) -> list[Command]:
    undo = inv.undo.pop()
    inv.undoing = None
    named = {"node_id": undo.node_id, "task_id": undo.task_id}
    if error is None:
        inv.undone.append(named)
        out = inv._emit("compensation_completed", dict(named))
    else:
        inv.undo_failed.append(named)
        out = inv._emit("compensation_failed", named | {"reason": error.code,
                                                         "message": error.message})
    return out + _next(inv)


def _cancel(inv: Machine, timed_out: bool = False) -> list[Command]:
    current = inv.undoing
    if current is None:
        return []
    if not timed_out:
        inv.undoing = None
    return [CancelTask(compensation_execution_id(inv.id), current.key, current.task_id,
                       timed_out)]


def _finish(inv: Machine, error: ErrorInfo) -> list[Command]:
    """Record the failure, naming what was undone."""
    if inv.rules.compensate and (inv.undone or inv.undo_failed):
        details: dict[str, Any] = dict(error.details) | {"compensated": list(inv.undone)}
        if inv.undo_failed:
            details["compensation_failed"] = list(inv.undo_failed)
        error = ErrorInfo(error.code, error.message, details)
    return inv._record(RecordResult(False, None, error, dict(inv.state)))
