"""Recovery decisions of a map step and the refusals of a recovery that cannot
go on yet, without processes (``hayata_py._rules.recovery``, tables)."""

from __future__ import annotations

from typing import Any

import pytest

from hayata_py._errors import RecoveryRejected
from hayata_py._invocation import Resume
from hayata_py._invocation.compensation import compensation_execution_id
from hayata_py._rules.recovery import (
    resolvable_execution,
    resume_map,
    uncertain_compensations,
    waiting_refusal,
)
from hayata_py.store._records import ActiveExecution, InvocationRecord, TaskRecord, task_id_for

IID = "i" * 32
ACTIVE = ActiveExecution(f"{IID}:3", 3, ("w",), input=[10, 11, 12], map=True)
RECORD = InvocationRecord(IID, "a", "running", 3, {}, None, active_execution=ACTIVE)


def task(item: int, status: str, **fields: Any) -> TaskRecord:
    return TaskRecord(task_id_for(IID, 3, "w", item=item), IID, f"{IID}:3", 3, "w",
                      branch_index=item, status=status,
                      attempt=0 if status == "scheduled" else 1, **fields)


@pytest.mark.parametrize(("case", "records", "idempotent", "expected"), [
    ("nothing recorded: every item runs", [], False,
     {"items_to_run": {0: 1, 1: 1, 2: 1}, "items_reused": {}}),
    ("completed items are reused, the others run",
     [task(0, "completed", result={"v": 0}), task(2, "scheduled")], False,
     {"items_to_run": {1: 1, 2: 1}, "items_reused": {0: {"v": 0}}}),
    ("an uncertain item of an idempotent node runs again, attempt + 1",
     [task(1, "started")], True, {"items_to_run": {0: 1, 1: 2, 2: 1}}),
    ("an uncertain item refuses the recovery", [task(1, "started")], False,
     "task_execution_uncertain"),
    ("a recorded failure decides the step, even beside an uncertain item",
     [task(0, "failed", error={"code": "node_failed", "message": "x"}),
      task(1, "started")], False, {"failed": "node_failed"}),
])
def test_resume_map(case: str, records: list[TaskRecord], idempotent: bool,
                    expected: Any) -> None:
    answer = resume_map(RECORD, ACTIVE, records, {"w"} if idempotent else set(), None,
                        now=1000.0)
    if isinstance(expected, str):
        assert isinstance(answer, RecoveryRejected) and answer.code == expected, case
        assert answer.details["items"] == [1], case
        return
    assert isinstance(answer, Resume) and answer.map, case
    assert answer.execution_id == ACTIVE.execution_id and answer.input == [10, 11, 12]
    for field, value in expected.items():
        got = getattr(answer, field)
        assert (got.code if field == "failed" else got) == value, case


@pytest.mark.parametrize(("resume", "unplaced", "node"), [
    (Resume(ACTIVE.execution_id, ("w",), None, False, to_run={"w": 1}), {"w": "no host"}, "w"),
    (Resume(ACTIVE.execution_id, ("w",), None, False, to_run={"w": 1}), {"v": "no host"},
     None),
    (Resume(ACTIVE.execution_id, ("w",), None, False, reuse={"w": {}}), {"w": "no host"},
     None),
])
def test_waiting_refusal(resume: Resume, unplaced: dict[str, str], node: str | None) -> None:
    refused = waiting_refusal(RECORD, resume, unplaced)
    if node is None:
        assert refused is None
        return
    assert refused is not None and refused.code == "waiting_for_placement"
    assert refused.details["node_id"] == node and refused.details["reason"] == "no host"


def test_uncertain_compensations_name_their_tasks() -> None:
    tasks = [task(0, "started"), task(1, "started")]
    refused = uncertain_compensations(RECORD, tasks)
    assert refused.code == "task_execution_uncertain"
    assert refused.details["task_ids"] == [t.task_id for t in tasks]
    assert refused.details["compensations"] is True


def test_resolvable_execution() -> None:
    assert resolvable_execution(RECORD) == ACTIVE.execution_id
    failing = InvocationRecord(IID, "a", "running", 3, {}, None, active_execution=ACTIVE,
                               failing={"code": "node_failed", "message": "x"})
    assert resolvable_execution(failing) == compensation_execution_id(IID)
    idle = InvocationRecord(IID, "a", "running", 3, {}, None)
    assert resolvable_execution(idle) is None
