"""``cancel()``'s pure parts: what the machine does with ``CancelRequested`` in
each phase, and the agent's answer from what it knows of the invocation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import hayata_py as hy
from hayata_py._errors import ErrorInfo, HayataError
from hayata_py._invocation import (
    Begin,
    CancelRequested,
    CancelTask,
    CheckpointSaved,
    CloseMap,
    Command,
    Emit,
    End,
    Invocation,
    Phase,
    PolicyAnswered,
    RecordCancelled,
    RecordResult,
    ResultRecorded,
    Rules,
    Seed,
    TaskKey,
    TaskOutcome,
)
from hayata_py._rules.cancels import CancelAnswer, answer
from hayata_py.messages import AgentResult
from hayata_py.store import InvocationRecord, task_id_for

NODES = frozenset({"a", "b"})


def machine(durable: bool = True, retry: bool = False) -> Invocation:
    rules = Rules(NODES, max_steps=5, execution_timeout=5.0, durable=durable,
                  map_concurrency=3,
                  retry={"a": hy.RetryPolicy(max_attempts=3, initial_interval=60.0,
                                             max_interval=60.0)}
                  if retry else {})
    m = Invocation(Seed("inv", "in", {"s": 0}, stream=True), rules)
    m.step(Begin())
    return m


def step(m: Invocation, decision: Any) -> Invocation:
    m.step(PolicyAnswered(decision))
    m.step(CheckpointSaved())
    return m


def one(durable: bool = True) -> Invocation:
    return step(machine(durable), hy.Next("a", {"x": 1}))


def second_step() -> Invocation:
    """Step 0 (``a``) completed; step 1 runs ``b``."""
    m = step(machine(), hy.Next("a", {"x": 1}))
    m.step(TaskOutcome("inv:0", TaskKey("a"), True, {"a": 1}))
    m.step(PolicyAnswered(hy.Next("b", {"y": 2})))
    m.step(CheckpointSaved())
    return m


def parallel_half_done() -> Invocation:
    m = step(machine(), hy.Next(["a", "b"], {"x": 1}))
    m.step(TaskOutcome("inv:0", TaskKey("a"), True, {"a": 1}))
    return m


def mapped() -> Invocation:
    m = step(machine(), hy.Map("a", [10, 20, 30]))
    m.step(TaskOutcome("inv:0", TaskKey("a", 1), True, {"a": 20}))
    return m


def retrying() -> Invocation:
    m = step(machine(retry=True), hy.Next(["a", "b"], {"x": 1}))
    m.step(TaskOutcome("inv:0", TaskKey("a"), False, None,
                       ErrorInfo("node_failed", "boom", {"type": "ValueError",
                                                            "retryable": True})))
    return m


def finishing() -> Invocation:
    m = machine()
    m.step(PolicyAnswered(hy.Finish(1)))
    return m


def ended() -> Invocation:
    m = finishing()
    m.step(ResultRecorded())
    return m


def short(cmd: Command) -> tuple[Any, ...]:
    if isinstance(cmd, RecordCancelled):
        return ("record_cancelled", tuple((t.key.node_id, t.key.item, t.step, t.branch_index,
                                           t.input) for t in cmd.tasks))
    if isinstance(cmd, CancelTask):
        return ("cancel", cmd.key.node_id, cmd.key.item, cmd.timed_out)
    if isinstance(cmd, CloseMap):
        return ("close_map",)
    if isinstance(cmd, RecordResult):
        return ("record", cmd.ok, cmd.error.code if cmd.error else None, cmd.state)
    if isinstance(cmd, Emit):
        return ("emit", cmd.type)
    return (type(cmd).__name__,)


STOPPED = ("record", False, "cancelled", {"s": 0})
ROWS: list[tuple[str, Callable[[], Invocation], list[tuple[Any, ...]]]] = [
    ("one task running", one,
     [("record_cancelled", (("a", None, 0, 0, {"x": 1}),)), ("cancel", "a", None, False),
      STOPPED]),
    ("no store: nothing to record", lambda: one(durable=False),
     [("cancel", "a", None, False), STOPPED]),
    ("the completed step's state is kept", second_step,
     [("record_cancelled", (("b", None, 1, 0, {"y": 2}),)), ("cancel", "b", None, False),
      ("record", False, "cancelled", {"s": 0, "a": 1})]),
    ("a completed branch stays completed", parallel_half_done,
     [("record_cancelled", (("b", None, 0, 1, {"x": 1}),)), ("cancel", "b", None, False),
      STOPPED]),
    ("map: the items out, a completed one kept", mapped,
     [("record_cancelled", (("a", 0, 0, 0, 10), ("a", 2, 0, 2, 30))),
      ("cancel", "a", 0, False), ("cancel", "a", 2, False), ("close_map",), STOPPED]),
    ("a task waiting for its retry has its failure recorded already", retrying,
     [("record_cancelled", (("b", None, 0, 1, {"x": 1}),)), ("cancel", "b", None, False),
      ("cancel", "a", None, False), STOPPED]),
    ("finishing: ends on its own", finishing, []),
    ("ended: nothing", ended, []),
]


@pytest.mark.parametrize(("name", "make", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_cancel_requested(name: str, make: Callable[[], Invocation],
                          expected: list[tuple[Any, ...]]) -> None:
    assert [short(c) for c in make().step(CancelRequested())] == expected


def test_a_cancelled_invocation_ends_once_with_a_terminal_event() -> None:
    m = second_step()
    m.step(CancelRequested())
    assert m.phase is Phase.FINISHING
    assert m.step(TaskOutcome("inv:1", TaskKey("b"), True, {"b": 1})) == []  # too late
    assert m.step(CancelRequested()) == []
    out = m.step(ResultRecorded())
    assert [short(c) for c in out[:-1]] == [("emit", "invocation_failed")]
    assert isinstance(out[0], Emit) and out[0].data["reason"] == "cancelled"
    end = out[-1]
    assert isinstance(end, End) and not end.kept and end.error is not None
    assert (end.ok, end.error.code, end.error.details) == (
        False, "cancelled", {"step": 1, "tasks": [task_id_for("inv", 1, "b")]})
    assert m.ended


def record(status: str = "running", agent: str = "ag", paused: bool = False
           ) -> InvocationRecord:
    return InvocationRecord("inv", agent, status, 0, {}, None,  # type: ignore[arg-type]
                            paused={"kind": "policy", "payload": None} if paused else None)


ANSWERS: list[tuple[str, dict[str, Any], CancelAnswer | str]] = [
    ("running here", {"phase": Phase.RUNNING}, CancelAnswer.STOP),
    ("its result being recorded", {"phase": Phase.FINISHING}, CancelAnswer.NO_OP),
    ("its compensations running", {"phase": Phase.COMPENSATING}, CancelAnswer.NO_OP),
    ("a result the agent knows", {"ended": True}, CancelAnswer.NO_OP),
    ("completed in the store", {"record": record("completed")}, CancelAnswer.NO_OP),
    ("failed in the store", {"record": record("failed")}, CancelAnswer.NO_OP),
    ("unknown", {}, "not_found"),
    ("another agent's", {"record": record(agent="other")}, "not_found"),
    ("queued behind its thread's run", {"queued": True}, "not_running"),
    ("paused", {"record": record(paused=True), "paused": True}, "not_running"),
    ("kept for recover()", {"record": record()}, "not_running"),
]


@pytest.mark.parametrize(("name", "facts", "expected"), ANSWERS, ids=[r[0] for r in ANSWERS])
def test_answer(name: str, facts: dict[str, Any], expected: CancelAnswer | str) -> None:
    got = answer("inv", "ag", facts.pop("phase", None), facts.pop("record", None), **facts)
    if isinstance(expected, CancelAnswer):
        assert got is expected
    else:
        assert isinstance(got, HayataError)
        assert got.code == expected
        assert got.details["invocation_id"] == "inv"


@pytest.mark.parametrize(("error", "status"), [
    (None, "completed"), (ErrorInfo("node_failed", "x", {}), "failed"),
    (ErrorInfo("cancelled", "x", {}), "cancelled")])
def test_result_status(error: ErrorInfo | None, status: str) -> None:
    assert AgentResult("inv", error is None, None, error).status == status
