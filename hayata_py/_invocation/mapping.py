"""Map steps in the invocation machine: one task per item, a window of them out at once.

A map step (``hy.Map(node, items, reduce)``) runs the node's function once per
item. The machine keeps at most the node's ``Rules.map_window`` items out
(else ``map_concurrency``) and sends the next as each completes. A step
with ``reduce`` forwards each item's result to the step's reducer
(:class:`Collect`) and, once every item is done, asks the reducer to
consolidate (:class:`Consolidate`); the step ends on the reducer's
``Reduced``. A step without ``reduce`` needs no reducer:
the machine holds every item's result (those it was told, and on recovery
the reused ones), so it ends the step itself with them in item order. (Or
the first failing item, a deadline, a node death end the step: the
machine's usual paths, which cancel the items still out and close the map.)
Pure: the functions here take the machine and return its commands.
"""

from __future__ import annotations

from typing import Any

from hayata_py._errors import ErrorInfo
from hayata_py._invocation.commands import (
    ArmDeadline,
    CloseMap,
    Collect,
    Command,
    Consolidate,
    Dispatch,
    OpenMap,
)
from hayata_py._invocation.events import Reduced, ReducerLost, TaskKey, TaskOutcome
from hayata_py._invocation.machine_view import Machine
from hayata_py._invocation.state import Execution, MapRun, Task
from hayata_py.store._records import task_id_for


def new_map(invocation_id: str, step: int, node_id: str, items: list[Any],
            reduce: str | None, runs: dict[int, int] | None = None,
            reused: dict[int, Any] | None = None) -> MapRun:
    """A map step's state: every item to run (attempt 1), or on recovery ``runs``
    (item -> attempt) with the completed items' ``reused`` results."""
    ids = tuple(task_id_for(invocation_id, step, node_id, item=i) for i in range(len(items)))
    queue = sorted((runs if runs is not None else dict.fromkeys(range(len(items)), 1)).items())
    return MapRun(node_id, list(items), reduce, ids, queue, dict(reused or {}))


def start(inv: Machine, ex: Execution) -> list[Command]:
    """The step's checkpoint is saved (or it is resumed, its items that wait for a
    retry already pending): open the map, send the first window of items, arm the
    step's one deadline (the node's timeout: one per map step, not one per item)."""
    run = ex.map
    assert run is not None
    edges = max(1, min(inv.rules.map_concurrency, len(run.queue) + len(ex.pending)))
    out: list[Command] = [OpenMap(ex.id, run.node_id, run.task_ids, edges, run.reduce)]
    out += _fill(inv, ex, run)
    out.append(ArmDeadline(ex.id, inv.rules.timeout_for(run.node_id)))
    return out + _maybe_consolidate(inv, ex, run)


def _fill(inv: Machine, ex: Execution, run: MapRun) -> list[Command]:
    out: list[Command] = []
    window = inv.rules.map_window.get(run.node_id, inv.rules.map_concurrency)
    while run.queue and len(ex.pending) < window:
        item, attempt = run.queue.pop(0)
        out += resend(inv, ex, TaskKey(run.node_id, item), attempt)
    return out


def resend(inv: Machine, ex: Execution, key: TaskKey, attempt: int,
           history: tuple[str, ...] = (), retry: bool = False) -> list[Command]:
    """Send item ``key.item`` (attempt ``attempt``; ``history``: a retry's earlier errors;
    ``retry``: it follows the item's recorded failure)."""
    run = ex.map
    assert run is not None and key.item is not None
    ex.pending[key] = Task(key, run.task_ids[key.item], attempt=attempt)
    out = inv._emit("node_started", {"node_id": run.node_id, "execution_id": ex.id,
                                     "item": key.item} | ({"attempt": attempt} if retry
                                                          else {}))
    out.append(Dispatch(ex.id, key, run.task_ids[key.item], inv.step_no, key.item,
                        run.items[key.item], dict(inv.state), attempt, history, retry))
    return out


def item_done(inv: Machine, ex: Execution, outcome: TaskOutcome) -> list[Command]:
    """Item ``outcome.key.item`` completed (its result is recorded): forward it, send
    the next item, or consolidate when none is left."""
    run = ex.map
    assert run is not None and outcome.key.item is not None
    item = outcome.key.item
    run.results[item] = outcome.result
    out = inv._emit("node_completed", {"node_id": run.node_id, "execution_id": ex.id,
                                       "item": item}
                    | ({"cached": True} if outcome.cached else {}))
    if run.reduce is not None:
        out.append(Collect(ex.id, item, outcome.result))
    return out + _fill(inv, ex, run) + _maybe_consolidate(inv, ex, run)


def _maybe_consolidate(inv: Machine, ex: Execution, run: MapRun) -> list[Command]:
    if ex.pending or run.queue or run.consolidating:
        return []
    run.consolidating = True
    if run.reduce is None:  # nothing to run: the results in item order are the step's
        ex.results[run.node_id] = [run.results[i] for i in range(len(run.items))]
        return inv._step_done(ex)
    results = None if inv.rules.durable else tuple(run.results[i]
                                                   for i in range(len(run.items)))
    return [Consolidate(ex.id, results)]


def waiting(ex: Execution) -> bool:
    """The step still waits for something (an item, or its reducer's answer)."""
    return bool(ex.pending) or (ex.map is not None and not ex.map.queue
                                and ex.map.consolidating)


def on_reduced(inv: Machine, event: Reduced | ReducerLost) -> list[Command] | None:
    """The reducer's answer (or its node gave up on it). None: the event does not
    belong to the step (it ends once: a second answer finds no step waiting);
    else the commands for the error (the step failed), or [] with the step's
    result stored in the execution, for the machine to end the step."""
    ex = inv.execution
    if ex is None or ex.map is None or ex.id != event.execution_id:
        return None
    if isinstance(event, ReducerLost):  # no reducer to consolidate: the step cannot end well
        return inv._fail(reducer_crashed(ex.map.node_id, ex.id, event.deaths))
    if not ex.map.consolidating:
        return None
    if not event.ok:
        assert event.error is not None
        return inv._fail(event.error)
    ex.results[ex.map.node_id] = event.result
    return []


def close(ex: Execution) -> list[Command]:
    """The step is over (ended or cancelled): stop its reducer."""
    return [] if ex.map is None else [CloseMap(ex.id, ex.map.node_id)]


def reducer_crashed(node_id: str, execution_id: str, deaths: int) -> ErrorInfo:
    return ErrorInfo("reducer_crashed", f"the reducer of map step {execution_id} (node "
                     f"{node_id!r}) died {deaths} times; its node gave up replacing it",
                     {"node_id": node_id, "deaths": deaths})
