"""Where a running invocation waits: a task's retry backoff, or a pause.

Machine glue in the style of :mod:`~hayata_py._invocation.mapping`: functions
that take the machine and return its commands. The decisions themselves are
pure, in :mod:`~hayata_py._invocation.retry` (what follows a failure) and
:mod:`~hayata_py._invocation.pause` (where an invocation pauses). A task that
waits for a retry stays pending (a map item keeps its place in the window),
keyed by its :class:`TaskKey` (node and, in a map step, item).
"""

from __future__ import annotations

from collections.abc import Mapping

from hayata_py._errors import ErrorInfo
from hayata_py._invocation import mapping, pause, retry
from hayata_py._invocation.commands import Command, End, RecordPause, ScheduleRetry
from hayata_py._invocation.events import CircuitChanged, RetryDue, TaskKey
from hayata_py._invocation.machine_view import Machine
from hayata_py._invocation.state import Execution, Phase, Task
from hayata_py.store._records import task_id_for


def hold(ex: Execution, task: Task, plan: retry.RetryPlan,
         error: ErrorInfo | None = None) -> list[Command]:
    """Task ``task`` waits for its next attempt (nothing of it runs meanwhile)."""
    task.retry = plan
    return [ScheduleRetry(ex.id, task.key, plan.delay, plan.attempt, error)]


def hold_recovered(inv: Machine, ex: Execution, nodes: Mapping[str, retry.RetryPlan],
                   items: Mapping[int, retry.RetryPlan]) -> list[Command]:
    """``recover()`` found recorded failures followed by a retry (of ``nodes``, or of a
    map step's ``items``): each waits what is left of its backoff."""
    out: list[Command] = []
    keys = [(TaskKey(n), task_id_for(inv.id, inv.step_no, n), p) for n, p in nodes.items()]
    if ex.map is not None:
        keys += [(TaskKey(ex.map.node_id, i), ex.map.task_ids[i], p)
                 for i, p in sorted(items.items())]
    for key, task_id, plan in keys:
        task = ex.pending[key] = Task(key, task_id, attempt=plan.attempt - 1)
        out += hold(ex, task, plan)
    return out


def after_failure(inv: Machine, ex: Execution, task: Task, error: ErrorInfo
                  ) -> list[Command] | None:
    """Task ``task`` failed: hold it for its retry, or None (the failure is final)."""
    found = retry.plan(inv.rules.retry.get(task.key.node_id), error, task.attempt,
                       task.task_id)
    if found is None:
        return None
    ex.pending[task.key] = task
    return inv._emit("node_retrying", retrying_data(task.key, ex.id, found, error)) \
        + hold(ex, task, found, error)


def retrying_data(key: TaskKey, execution_id: str, plan: retry.RetryPlan, error: ErrorInfo
                  ) -> dict[str, object]:
    """The ``node_retrying`` event's data (``item``: a map step's item)."""
    return {"node_id": key.node_id, "execution_id": execution_id, "attempt": plan.attempt,
            "delay": plan.delay,
            "error": {"code": error.code, "type": error.details.get("type")}} | (
                {} if key.item is None else {"item": key.item})


def on_retry_due(inv: Machine, due: RetryDue) -> list[Command]:
    """A backoff is over: send the task's next attempt."""
    found = inv._current(due.execution_id, due.key)
    plan = found[1].retry if found else None
    if found is None or plan is None:
        return []
    if found[0].map is not None:
        return mapping.resend(inv, found[0], due.key, plan.attempt, plan.history, retry=True)
    return inv._send(found[0], [(due.key.node_id, plan.attempt)], plan.history, retry=True)


def on_circuit(inv: Machine, change: CircuitChanged) -> list[Command]:
    """The agent's breaker of a node opened or closed. An invocation with a task of
    that node pending is affected: it says so (``circuit_opened``/``circuit_closed``)
    and, on a close, sends at once its tasks that wait for the circuit."""
    ex = inv.execution
    keys = [] if ex is None else [k for k in ex.pending if k.node_id == change.node_id]
    if ex is None or not keys:
        return []
    out = inv._emit("circuit_opened" if change.opened else "circuit_closed",
                    {"node_id": change.node_id, "failures": change.failures,
                     "cool_down": change.cool_down})
    for key in keys if not change.opened else ():
        plan = ex.pending[key].retry
        if plan is not None and plan.circuit:
            out += on_retry_due(inv, RetryDue(ex.id, key))
    return out


def start_pause(inv: Machine, held: pause.Hold) -> list[Command]:
    """Record the pause durably first (the checkpoint, ``held`` in it)."""
    inv.phase = Phase.PAUSING
    inv.hold = held
    return [RecordPause(inv.checkpoint(), held)]


def paused(inv: Machine) -> list[Command]:
    """The pause is recorded: tell the caller and end this run (the invocation is kept)."""
    inv.phase, inv.execution = Phase.ENDED, None
    return [*inv._emit("invocation_paused", pause.event_data(inv.hold)),
            End(False, error=pause.paused_error(inv.id, inv.hold), kept=True, paused=True)]
