"""A step while it runs: its tasks sent, and what it hears from them (an
outcome, a partial result, the death of a task's node, the step's deadline).

Machine glue in the style of :mod:`~hayata_py._invocation.waits`: functions
that take the machine (:class:`~hayata_py._invocation.machine_view.Machine`) and
return its commands; :meth:`Invocation.step
<hayata_py._invocation.machine.Invocation.step>` calls them once the step's
checkpoint is saved and while the step is RUNNING. A task's outcome is taken
once all its partial results have been; a failure is retried
(:mod:`~hayata_py._invocation.waits`) or fails the invocation; the last
outcome ends the step (a map step's items go to
:mod:`~hayata_py._invocation.mapping`). A node that died or cannot be reached,
or a deadline that passed, ends the step with its reason
(:mod:`~hayata_py._invocation.reasons`).
"""

from __future__ import annotations

from typing import Any

from hayata_py._invocation import mapping, pause, reasons, waits
from hayata_py._invocation.commands import Command
from hayata_py._invocation.compensation import Undo
from hayata_py._invocation.events import (
    DeadlinePassed,
    DownCause,
    NodeDown,
    PartialResult,
    TaskOutcome,
)
from hayata_py._invocation.machine_view import Machine
from hayata_py._invocation.state import Execution, Phase


def dispatch_step(inv: Machine, unplaced: Any) -> list[Command]:
    """The step's checkpoint is saved: pause before it, or send its tasks (a map
    step's first window); a node no system can run now interrupts it at once."""
    ex = inv.execution
    assert ex is not None
    hold = pause.breakpoint_at(inv.rules.pause_before, ex.nodes, pause.PauseKind.BEFORE)
    if hold is not None:
        return waits.start_pause(inv, hold)
    inv.phase = Phase.RUNNING
    waiting = [n for n in ex.nodes if n in unplaced]
    if waiting and inv.rules.durable:
        # No system can run it now: say so at once. Nothing started; recover()
        # runs the step once a system that qualifies has joined.
        return inv._interrupt(reasons.unplaced(waiting[0], unplaced[waiting[0]]))
    if ex.map is not None:
        return mapping.start(inv, ex)
    return inv._send(ex, [(n, 1) for n in ex.nodes])


def on_outcome(inv: Machine, outcome: TaskOutcome) -> list[Command]:
    """A task reported its end: taken once its partial results have all come."""
    found = inv._current(outcome.execution_id, outcome.key)
    if found is None:
        return []
    ex, task = found
    if task.retry is not None:
        return []  # waiting for its next attempt: nothing of it runs
    if outcome.ok and task.partials_seen < outcome.partials:
        task.held = outcome  # its partial results are still on the way
        return []
    return task_done(inv, ex, outcome)


def on_partial(inv: Machine, partial: PartialResult) -> list[Command]:
    """A task's partial result: streamed; the last one due lets a held outcome in."""
    found = inv._current(partial.execution_id, partial.key)
    if found is None or found[1].retry is not None:
        return []  # a failed attempt's partial still on its way: dropped
    ex, task = found
    task.partials_seen += 1
    data: dict[str, Any] = {"node_id": partial.key.node_id, "execution_id": ex.id,
                            "edge_id": partial.edge_id, "result": partial.result}
    if partial.key.item is not None:
        data["item"] = partial.key.item
    out = inv._emit("node_partial_result", data)
    if task.held is not None and task.partials_seen >= task.held.partials:
        out += task_done(inv, ex, task.held)
    return out


def task_done(inv: Machine, ex: Execution, outcome: TaskOutcome) -> list[Command]:
    """Task ``outcome.key`` is over: retried or failed, or its result kept (the
    last one ends the step)."""
    task = ex.pending.pop(outcome.key)
    if not outcome.ok:
        assert outcome.error is not None
        retried = waits.after_failure(inv, ex, task, outcome.error)
        return inv._fail(outcome.error) if retried is None else retried
    if outcome.key.node_id in inv.rules.compensate and not outcome.cached:
        item = outcome.key.item
        inv.undo.append(Undo(task.task_id, outcome.key.node_id, inv.step_no,
                             ex.input if item is None or ex.map is None
                             else ex.map.items[item], outcome.result))
    if ex.map is not None:
        return mapping.item_done(inv, ex, outcome)
    ex.results[outcome.key.node_id] = outcome.result
    out = inv._emit("node_completed", {"node_id": outcome.key.node_id,
                                       "execution_id": ex.id}
                    | ({"cached": True} if outcome.cached else {}))
    if ex.pending:
        return out
    return out + inv._step_done(ex)


def on_node_down(inv: Machine, down: NodeDown) -> list[Command]:
    """A node died or cannot be reached: a step with a task of it pending ends."""
    ex = inv.execution
    assert ex is not None
    lost = [k for k, t in ex.pending.items() if k.node_id == down.node_id and not t.retry]
    if not lost:
        return []
    for key in lost:
        del ex.pending[key]
    if down.cause in (DownCause.UNREACHABLE, DownCause.WAITING_FOR_PLACEMENT) \
            and inv.rules.durable:
        return inv._interrupt(reasons.unreachable(down.node_id, ex.id, down.reason))
    return inv._fail(reasons.node_crashed(down.node_id, down.pid, ex.id, down.reason))


def on_deadline(inv: Machine, deadline: DeadlinePassed) -> list[Command]:
    """A deadline passed (the step's, or a task's ``key``): the step times out."""
    ex = inv.execution
    assert ex is not None
    key = deadline.key
    if deadline.execution_id != ex.id or not mapping.waiting(ex) \
            or (key is not None and (key not in ex.pending or ex.pending[key].retry)):
        return []
    pending = sorted({k.node_id for k in ex.pending}) or [ex.nodes[0]]
    node_id = pending[0] if key is None else key.node_id
    pending = [node_id] + [n for n in pending if n != node_id]
    return inv._fail(reasons.timed_out(pending, inv.rules.timeout_for(node_id), ex.id))
