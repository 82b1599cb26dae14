"""``compile(..., uncertain="interrupt")``: a task a crash left uncertain, asked
about in LangGraph's own terms.

Instead of raising :class:`TaskUncertain`, ``invoke(None, config)`` ends like
a LangGraph run that hit ``interrupt()``: ``__interrupt__`` holds one
``Interrupt`` per uncertain task, its id the hayata task id and its value
``{"uncertain": {"node", "task_id", "invocation_id", "input", "answers"}}``.
The answer comes back as ``Command(resume=...)`` (a dict keyed by task id when
several are uncertain):

- ``{"completed": update}``: the node did its work and returned ``update``;
  its writes are made from it by the node's own writers (so its edges and
  conditional edges go on as if it had returned it) and recorded as the
  task's result (``resolve_task``); the run goes on.
- ``{"rerun": True}``: run the node again (it did nothing, or may run twice).
- ``{"abandon": True}``: end the run (``abandon``); the thread keeps its progress.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langgraph._internal._constants import INTERRUPT
from langgraph.types import Interrupt

from hayata_py._errors import ConfigError
from hayata_py._ref import AgentRef
from hayata_py.langgraph._drive import Carry, Chunk, finished_writes, open_task
from hayata_py.langgraph._snapshot import dump_value
from hayata_py.langgraph._steps import settings_of
from hayata_py.store import TaskRecord

ANSWERS = {"completed": "the node's return value, if it did its work",
           "rerun": "True: run the node again", "abandon": "True: end the run"}


def uncertain_records(agent: AgentRef, invocation: str) -> list[TaskRecord]:
    """The invocation's tasks that started and recorded no outcome."""
    return [record for record, kind in agent.tasks(invocation) if kind.value == "uncertain"]


def _task_input(record: TaskRecord) -> Any:
    step: dict[str, Any] = record.input
    with open_task(settings_of(step["r"]), step["s"], Carry.of(step["k"]),
                   step["tasks"][record.node_id], None) as task:
        return task.input


def interrupt_chunks(invocation: str, records: list[TaskRecord], values: Any
                     ) -> Iterator[Chunk]:
    """The chunks of a run that stops to ask about its uncertain tasks."""
    interrupts = tuple(Interrupt(value={"uncertain": {
        "node": record.node_id, "task_id": record.task_id, "invocation_id": invocation,
        "input": _task_input(record), "answers": ANSWERS}}, id=record.task_id)
        for record in records)
    yield ((), "updates", {INTERRUPT: interrupts})
    yield ((), "values", values)


def answer(agent: AgentRef, invocation: str, resume: Any) -> bool:
    """Record what the person said about each uncertain task; False when the
    run was abandoned, True when it can be recovered."""
    records = uncertain_records(agent, invocation)
    if not records:
        return True
    by_task = resume if isinstance(resume, dict) and all(
        r.task_id in resume for r in records) else None
    if by_task is None:
        if len(records) > 1:
            raise ConfigError("resume", "several tasks are uncertain: resume with a dict "
                              f"keyed by their task ids {[r.task_id for r in records]}")
        by_task = {records[0].task_id: resume}
    for record in records:
        said = by_task[record.task_id]
        if not isinstance(said, dict) or not ({"completed", "rerun", "abandon"} & set(said)):
            raise ConfigError("resume", f"answer for task {record.task_id} must be "
                              "{'completed': update}, {'rerun': True} or {'abandon': True}, "
                              f"got {said!r}")
        if said.get("abandon"):
            agent.abandon(invocation)
            return False
    for record in records:
        record_answer(agent, record, by_task[record.task_id])
    return True


def record_answer(agent: AgentRef, record: TaskRecord, said: dict[str, Any]) -> None:
    """Record ``{"completed": update}`` or ``{"rerun": True}`` as the result of
    the uncertain task ``record``: the node's writes made from ``update`` by
    its own writers, or a mark to run it again. ``ConfigError("completed")``
    when the node's writers refuse ``update`` (nothing is recorded)."""
    step: dict[str, Any] = record.input
    task_id = step["tasks"][record.node_id]
    if said.get("rerun"):
        result: dict[str, Any] = {"rerun": True, "t": task_id}
    else:
        with open_task(settings_of(step["r"]), step["s"], Carry.of(step["k"]), task_id,
                       None) as task:
            try:
                writes = finished_writes(task, said["completed"])
            except Exception as exc:  # the writers refuse the update: the answer's fault
                raise ConfigError("completed", f"node {record.node_id!r} cannot have returned "
                                  f"{said['completed']!r:.200}: {type(exc).__name__}: {exc}; "
                                  "give the update the node returns (its state keys)"
                                  ) from exc
        result = {"t": task_id, "w": dump_value(writes), "i": False, "f": False}
    if step["lead"] == record.node_id:
        result["s"] = step["s"]
        result["k"] = step["k"]
    agent.resolve_task(record.task_id, result=result)
