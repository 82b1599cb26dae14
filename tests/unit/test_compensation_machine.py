"""Compensation as pure code: which tasks are undone (``compensation.history``
over task records) and how the machine runs them (``compensating.py``): a
table of paths, no process started."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import hayata_py as hy
from hayata_py._errors import ErrorInfo
from hayata_py._invocation import (
    ArmDeadline,
    Begin,
    CancelTask,
    CheckpointSaved,
    Command,
    DeadlinePassed,
    Dispatch,
    Emit,
    End,
    Invocation,
    Phase,
    PolicyAnswered,
    RecordResult,
    ResultRecorded,
    Resume,
    Rules,
    SaveCheckpoint,
    Seed,
    Stop,
    StopKind,
    TaskKey,
    TaskOutcome,
    WriteRefused,
)
from hayata_py._invocation.compensation import (
    History,
    Undo,
    compensation_execution_id,
    compensation_id_for,
    history,
    is_compensation,
)
from hayata_py.store import TaskRecord, task_id_for

pytestmark = pytest.mark.timeout(30)

COMPENSATE = {"charge": "examples.drills.booking:refund",
              "book": "examples.drills.booking:cancel_hotel"}
FAILED = ErrorInfo("node_failed", "RuntimeError: no seats", {"node_id": "fly"})
UNDO_EX = compensation_execution_id("inv")


def record(node: str, step: int, status: str = "completed", *, finished: float = 0.0,
           cached: bool = False, execution: str | None = None, task_id: str | None = None
           ) -> TaskRecord:
    return TaskRecord(task_id or task_id_for("inv", step, node), "inv",
                      execution or f"inv:{step}", step, node, status=status,  # type: ignore[arg-type]
                      input={"n": step}, result={"r": step}, finished_at=finished or step,
                      cached=cached)


def undo_of(done: TaskRecord, status: str) -> TaskRecord:
    return record(done.node_id, done.step, status, finished=done.step + 10,
                  execution=UNDO_EX, task_id=compensation_id_for(done.task_id))


def test_history_names_what_is_left_done_failed_and_uncertain() -> None:
    charge, book, fly = record("charge", 0), record("book", 1), record("fly", 2, "failed")
    other = record("book", 3, cached=True)  # from the cache: the node did not run
    assert history([charge, book, fly, other], COMPENSATE) == History(
        (Undo(charge.task_id, "charge", 0, {"n": 0}, {"r": 0}),
         Undo(book.task_id, "book", 1, {"n": 1}, {"r": 1})))
    done = history([charge, book, fly, undo_of(book, "completed")], COMPENSATE)
    assert [u.node_id for u in done.todo] == ["charge"]
    assert done.done == ({"node_id": "book", "task_id": book.task_id},)
    started = history([charge, book, undo_of(book, "started")], COMPENSATE)
    assert [t.task_id for t in started.uncertain] == [compensation_id_for(book.task_id)]
    assert [u.node_id for u in started.todo] == ["charge"]
    failed = history([charge, undo_of(charge, "failed")], COMPENSATE)
    assert failed.failed == ({"node_id": "charge", "task_id": charge.task_id},)
    assert failed.todo == () and history([charge], {}) == History()


def test_ids_are_stable_and_distinct() -> None:
    a, b = task_id_for("inv", 0, "charge"), task_id_for("inv", 1, "charge")
    assert compensation_id_for(a) == compensation_id_for(a) != compensation_id_for(b)
    assert compensation_id_for(a) != a
    assert is_compensation(compensation_execution_id("a:b")) and is_compensation(UNDO_EX)
    assert not is_compensation("inv:3") and not is_compensation("compensation:3")


def short(cmd: Command) -> tuple[Any, ...]:
    if isinstance(cmd, Emit):
        return ("emit", cmd.type)
    if isinstance(cmd, SaveCheckpoint):
        return ("checkpoint", cmd.checkpoint.failing is not None)
    if isinstance(cmd, Dispatch):
        return ("dispatch", cmd.key.node_id, cmd.function)
    if isinstance(cmd, ArmDeadline):
        return ("deadline",)
    if isinstance(cmd, CancelTask):
        return ("cancel", cmd.key.node_id)
    if isinstance(cmd, RecordResult):
        assert cmd.error is not None
        return ("record", cmd.error.code)
    assert isinstance(cmd, End)
    return ("end", cmd.ok, cmd.kept)


def failing_machine(*, durable: bool = True) -> Invocation:
    """An invocation that completed charge (step 0) and book (step 1); fly fails."""
    inv = Invocation(Seed("inv", "in", {}, stream=True),
                     Rules(frozenset({"charge", "book", "fly"}), 5, 2.0, durable=durable,
                           compensate=COMPENSATE))
    inv.step(Begin())
    for step, node in enumerate(("charge", "book")):
        inv.step(PolicyAnswered(hy.Next(node, {"n": step})))
        inv.step(CheckpointSaved())
        inv.step(TaskOutcome(f"inv:{step}", TaskKey(node), True, {"r": step}))
    inv.step(PolicyAnswered(hy.Next("fly", {})))
    inv.step(CheckpointSaved())
    return inv


def step(inv: Invocation, event: Any) -> list[tuple[Any, ...]]:
    return [short(c) for c in inv.step(event)]


def test_a_failure_undoes_the_completed_tasks_latest_first_then_records() -> None:
    inv = failing_machine()
    assert step(inv, TaskOutcome("inv:2", TaskKey("fly"), False, error=FAILED)) == [
        ("checkpoint", True)]
    assert inv.phase is Phase.COMPENSATING and inv.checkpoint().failing == FAILED.to_dict()
    assert step(inv, CheckpointSaved()) == [
        ("emit", "compensation_started"),
        ("dispatch", "book", COMPENSATE["book"]), ("deadline",)]
    book_undo = inv.undoing
    assert book_undo is not None
    assert book_undo.task_id == compensation_id_for(task_id_for("inv", 1, "book"))
    # An outcome of another execution does not count.
    assert step(inv, TaskOutcome("inv:2", TaskKey("book"), True, {})) == []
    assert step(inv, TaskOutcome(UNDO_EX, TaskKey("book"), True, {})) == [
        ("emit", "compensation_completed"), ("emit", "compensation_started"),
        ("dispatch", "charge", COMPENSATE["charge"]), ("deadline",)]
    out = inv.step(TaskOutcome(UNDO_EX, TaskKey("charge"), True, {}))
    assert [short(c) for c in out] == [("emit", "compensation_completed"),
                                       ("record", "node_failed")]
    recorded = out[-1]
    assert isinstance(recorded, RecordResult) and recorded.error is not None
    assert recorded.error.details == {"node_id": "fly", "compensated": [
        {"node_id": "book", "task_id": task_id_for("inv", 1, "book")},
        {"node_id": "charge", "task_id": task_id_for("inv", 0, "charge")}]}
    assert step(inv, ResultRecorded()) == [("emit", "invocation_failed"),
                                           ("end", False, False)]


def test_a_failed_or_late_compensator_is_named_and_the_others_still_run() -> None:
    inv = failing_machine()
    inv.step(TaskOutcome("inv:2", TaskKey("fly"), False, error=FAILED))
    inv.step(CheckpointSaved())
    assert step(inv, DeadlinePassed(UNDO_EX, TaskKey("book")))[:3] == [
        ("cancel", "book"), ("emit", "compensation_failed"), ("emit", "compensation_started")]
    out = inv.step(TaskOutcome(UNDO_EX, TaskKey("charge"), False, error=FAILED))
    recorded = out[-1]
    assert isinstance(recorded, RecordResult) and recorded.error is not None
    assert [d["node_id"] for d in recorded.error.details["compensation_failed"]] == [
        "book", "charge"]
    assert recorded.error.details["compensated"] == []


@pytest.mark.parametrize(("event", "expected"), [
    (Stop(StopKind.REQUESTED), [("cancel", "book"), ("emit", "invocation_interrupted"),
                                     ("end", False, True)]),
    (WriteRefused(ErrorInfo("store_unavailable", "down", {})),
     [("cancel", "book"), ("emit", "invocation_interrupted"), ("end", False, True)]),
])
def test_an_interrupted_compensation_is_kept_for_recover(event: Any,
                                                         expected: list[Any]) -> None:
    inv = failing_machine()
    inv.step(TaskOutcome("inv:2", TaskKey("fly"), False, error=FAILED))
    inv.step(CheckpointSaved())
    if isinstance(event, WriteRefused):
        inv.undoing = None  # a refused checkpoint: nothing was out yet
        expected = expected[1:]
    assert step(inv, event) == expected


def test_nothing_to_undo_records_at_once_and_without_compensators_as_before() -> None:
    plain = Invocation(Seed("inv", "in", {}), Rules(frozenset({"fly"}), 5, 2.0))
    plain.step(Begin())
    plain.step(PolicyAnswered(hy.Next("fly", {})))
    plain.step(CheckpointSaved())
    assert step(plain, TaskOutcome("inv:0", TaskKey("fly"), False, error=FAILED))[-1] == (
        "record", "node_failed")


def test_a_recovered_failing_invocation_goes_on_with_what_is_left() -> None:
    charge = task_id_for("inv", 0, "charge")
    seed = Seed("inv", "in", {}, step=2, compensation=History(
        (Undo(charge, "charge", 0, {}, {}),),
        ({"node_id": "book", "task_id": task_id_for("inv", 1, "book")},)))
    inv = Invocation(seed, Rules(frozenset({"charge", "book", "fly"}), 5, 2.0,
                                 compensate=COMPENSATE))
    assert step(inv, Resume(failed=FAILED)) == [
        ("emit", "invocation_started"), ("checkpoint", True)]
    assert step(inv, CheckpointSaved())[1] == ("dispatch", "charge", COMPENSATE["charge"])
    out = inv.step(TaskOutcome(UNDO_EX, TaskKey("charge"), True, {}))
    recorded = out[-1]
    assert isinstance(recorded, RecordResult) and recorded.error is not None
    assert [d["node_id"] for d in recorded.error.details["compensated"]] == ["book", "charge"]


def test_without_a_store_it_runs_in_memory() -> None:
    inv = failing_machine(durable=False)
    assert step(inv, TaskOutcome("inv:2", TaskKey("fly"), False, error=FAILED)) == [
        ("checkpoint", True)]
    assert dataclasses.asdict(inv.checkpoint())["failing"]["code"] == "node_failed"
