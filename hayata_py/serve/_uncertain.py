"""The ``/hayata/`` endpoints: the ways out of a run that waits on a task a
crash left uncertain (a node that started and recorded no result).

Such a run ends ``success`` asking about the task (an interrupt); ``GET`` of
it carries a ``hayata`` field (:func:`ways_out`) naming each task and these
endpoints:

- ``POST /hayata/threads/{t}/tasks/{task_id}/resolve`` with
  ``{"completed": <the node's update>}`` (the node did its work; its update is
  used and it is not run again) or ``{"rerun": true}``: recorded by the
  runner (``HayataGraph.resolve_uncertain``); once no task of the thread is
  left uncertain the waiting run goes on (:meth:`Runner.carry_on`): its row
  turns ``pending``, then ``running``, then ends as any run, and its event log
  (its stream from ``Last-Event-ID``) gets the rest.
- ``POST /hayata/threads/{t}/abandon``: the thread's unfinished invocation is
  abandoned (``HayataGraph.abandon_unfinished``); the waiting run ends
  ``error`` with an ``Abandoned`` error event, the thread ``error``; the
  thread keeps the progress its completed nodes made.

Bodies are checked here (a 422 naming the field and what to send); an
unknown thread or task is a 404, a task that is not uncertain or a thread
with a run still active a 409.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hayata_py._errors import ConfigError, HayataError
from hayata_py.langgraph import HayataGraph
from hayata_py.serve._db import RunRow, ServeDB, ThreadRow
from hayata_py.serve._runs import Runner
from hayata_py.serve._wire import BadRequest, run_json

__all__ = ["RESOLVE_BODY", "abandon", "parse_abandon", "parse_answer", "resolve", "ways_out"]

RESOLVE_BODY = {"completed": "the node's return value (a JSON object), if it did its work",
                "rerun": "true: run the node again"}
"""What a resolve body holds: one of these keys."""

_SEND = 'send {"completed": <the node\'s update, a JSON object>} or {"rerun": true}'
_REFUSED = {"task_not_found": 404, "task_not_uncertain": 409, "nothing_to_abandon": 409}


def resolve_path(thread_id: str, task_id: str) -> str:
    return f"/hayata/threads/{thread_id}/tasks/{task_id}/resolve"


def abandon_path(thread_id: str) -> str:
    return f"/hayata/threads/{thread_id}/abandon"


def ways_out(thread_id: str, waits: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``hayata`` field of a run waiting on ``waits`` (the runner's
    ``uncertain_tasks``): each task with the endpoint that answers it, and the
    endpoint that gives the run up."""
    return {"uncertain": [{**wait, "resolve": {"method": "POST",
                                               "path": resolve_path(thread_id, wait["task_id"]),
                                               "body": dict(RESOLVE_BODY)}}
                          for wait in waits],
            "abandon": {"method": "POST", "path": abandon_path(thread_id)}}


def _object(raw: bytes, what: str) -> dict[str, Any]:
    try:
        data = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise BadRequest(422, f"Invalid JSON in request body ({what})") from exc
    if not isinstance(data, dict):
        raise BadRequest(422, f"the request body must be a JSON object ({what})")
    return data


def parse_answer(raw: bytes, thread_id: str) -> dict[str, Any]:
    """A resolve body: exactly one of ``completed`` (a JSON object) and
    ``rerun`` (true); a 422 naming the field and what to send otherwise."""
    data = _object(raw, "resolve: " + _SEND)
    if "abandon" in data:
        raise BadRequest(422, "abandon: not an answer for one task; to give the run up, "
                         f"POST {abandon_path(thread_id)} (no body)")
    unknown = sorted(set(data) - set(RESOLVE_BODY))
    if unknown:
        raise BadRequest(422, f"{unknown[0]}: not a field of a resolve body; {_SEND}")
    if not data:
        raise BadRequest(422, f"completed: required (or rerun); {_SEND}")
    if len(data) > 1:
        raise BadRequest(422, "completed, rerun: give one of them, not both; " + _SEND)
    if "rerun" in data and data["rerun"] is not True:
        raise BadRequest(422, f"rerun: must be true, got {json.dumps(data['rerun'])}; "
                         "to use the node's result instead send {\"completed\": <update>}")
    if "completed" in data and not isinstance(data["completed"], dict):
        raise BadRequest(422, "completed: must be a JSON object, the update the node "
                         "returned (its state keys, e.g. {\"steps\": [\"done\"]}), got "
                         f"{json.dumps(data['completed'])[:200]}")
    return data


def parse_abandon(raw: bytes) -> None:
    """An abandon body: none, or an empty JSON object."""
    data = _object(raw, "abandon: send no body or {}")
    if data:
        raise BadRequest(422, f"{sorted(data)[0]}: not a field of an abandon body; "
                         "send no body or {}")


def _refused(exc: HayataError) -> Exception:
    """The HTTP refusal of the runner's ``exc`` (``exc`` itself if none fits)."""
    if isinstance(exc, ConfigError):
        return BadRequest(422, exc.message)
    if exc.code in _REFUSED:
        return BadRequest(_REFUSED[exc.code], exc.message)
    return exc


def _no_active_run(db: ServeDB, thread: ThreadRow) -> None:
    active = db.active_runs(thread.thread_id)
    if active:
        run = active[-1]
        raise BadRequest(409, f"run {run.run_id} of thread {thread.thread_id} is {run.status}: "
                         "wait for it to end (a run carried on after a restart ends asking "
                         "about the tasks a crash left uncertain; GET "
                         f"/threads/{thread.thread_id}/runs/{run.run_id} names them)")


def _waiting_run(db: ServeDB, thread_id: str) -> RunRow | None:
    """The thread's last run if it ended ``success``: the one that asked."""
    latest = db.list_runs(thread_id)
    return latest[0] if latest and latest[0].status == "success" else None


def _graph(graphs: Mapping[str, HayataGraph], thread: ThreadRow) -> HayataGraph:
    graph = graphs.get(thread.graph_id or "")
    if graph is None:
        raise BadRequest(404, f"thread {thread.thread_id} has run no graph: it has no tasks")
    return graph


def resolve(db: ServeDB, runner: Runner, graphs: Mapping[str, HayataGraph],
            thread: ThreadRow, task_id: str, answer: dict[str, Any]) -> dict[str, Any]:
    """Record ``answer`` for the uncertain task ``task_id`` of ``thread``; once
    none is left the thread's waiting run goes on. The answer: the task, the
    tasks still uncertain, the run that goes on (or null)."""
    graph = _graph(graphs, thread)
    _no_active_run(db, thread)
    try:
        left = graph.resolve_uncertain(thread.thread_id, task_id, answer)
    except HayataError as exc:
        refusal = _refused(exc)
        if refusal is exc:
            raise
        raise refusal from exc
    run = None if left else _waiting_run(db, thread.thread_id)
    run = db.get_run(run.run_id) if run is not None and runner.carry_on(run) else None
    return {"thread_id": thread.thread_id, "task_id": task_id,
            "answer": "rerun" if answer.get("rerun") else "completed",
            "uncertain": ways_out(thread.thread_id, left)["uncertain"],
            "run": run_json(run) if run is not None else None}


def abandon(db: ServeDB, runner: Runner, graphs: Mapping[str, HayataGraph],
            thread: ThreadRow) -> dict[str, Any]:
    """Abandon ``thread``'s unfinished invocation; its waiting run ends ``error``."""
    graph = _graph(graphs, thread)
    _no_active_run(db, thread)
    nodes = [w["node"] for w in graph.uncertain_tasks(thread.thread_id)]
    try:
        invocation = graph.abandon_unfinished(thread.thread_id)
    except HayataError as exc:
        refusal = _refused(exc)
        if refusal is exc:
            raise
        raise refusal from exc
    error = {"error": "Abandoned",
             "message": f"abandoned by hand (POST {abandon_path(thread.thread_id)}): the run "
                        f"ends here; node(s) {nodes} a crash left uncertain were neither "
                        "answered nor run again; the thread keeps the progress of its "
                        "completed nodes"}
    run = _waiting_run(db, thread.thread_id)
    if run is not None and runner.end_abandoned(run, error):
        run = db.get_run(run.run_id)
    else:
        run = None
        runner.settle(thread.thread_id, error=error)
    return {"thread_id": thread.thread_id, "abandoned": invocation,
            "run": run_json(run) if run is not None else None}
