"""Pause decisions without processes: where the machine pauses, what it writes
first, and what resume continues with (tables)."""

from __future__ import annotations

from typing import Any

import pytest

import hayata_py as hy
from hayata_py._errors import ErrorInfo
from hayata_py._invocation import (
    Begin,
    CallPolicy,
    CheckpointSaved,
    Command,
    Dispatch,
    Emit,
    End,
    Hold,
    Invocation,
    PauseKind,
    PauseRecorded,
    PolicyAnswered,
    RecordPause,
    RecordResult,
    Resume,
    Rules,
    SaveCheckpoint,
    Seed,
    TaskKey,
    TaskOutcome,
    WriteRefused,
)
from hayata_py._invocation import pause as p

EX = "inv:0"


def machine(before: set[str] | None = None, after: set[str] | None = None,
            resume_value: Any = None) -> Invocation:
    return Invocation(Seed("inv", "in", {}, stream=True, resume_value=resume_value),
                      Rules(frozenset({"a", "b"}), 5, 2.0,
                            pause_before=frozenset(before or ()),
                            pause_after=frozenset(after or ())))


def kinds(cmds: list[Command]) -> list[str]:
    return [c.type if isinstance(c, Emit) else type(c).__name__ for c in cmds]


def test_a_policy_pause_is_written_before_anyone_hears_of_it() -> None:
    m = machine()
    m.step(Begin())
    out = m.step(PolicyAnswered(hy.Pause({"ask": 1})))
    assert kinds(out) == ["RecordPause"]
    record = out[0]
    assert isinstance(record, RecordPause)
    assert record.hold == Hold(PauseKind.POLICY, {"ask": 1})
    assert record.checkpoint.execution_id is None
    end = m.step(PauseRecorded())
    assert kinds(end) == ["invocation_paused", "End"]
    assert isinstance(end[1], End) and end[1].paused and end[1].kept and not end[1].ok
    assert end[1].error is not None and end[1].error.code == "invocation_paused"
    assert m.ended


def test_pause_before_names_the_step_but_runs_nothing() -> None:
    m = machine(before={"b"})
    m.step(Begin())
    assert kinds(m.step(PolicyAnswered(hy.Next(["a", "b"], 1)))) == ["SaveCheckpoint"]
    out = m.step(CheckpointSaved())
    assert kinds(out) == ["RecordPause"]
    record = out[0]
    assert isinstance(record, RecordPause)
    assert record.checkpoint.nodes == ("a", "b") and record.checkpoint.execution_id == EX
    assert record.hold.payload == {"pause_before": ["b"]}
    assert not any(isinstance(c, Dispatch) for c in out + m.step(PauseRecorded()))


def test_pause_after_records_the_merged_state() -> None:
    m = machine(after={"a"})
    m.step(Begin())
    m.step(PolicyAnswered(hy.Next("a", 1)))
    m.step(CheckpointSaved())
    out = m.step(TaskOutcome(EX, TaskKey("a"), True, {"x": 1}))
    assert kinds(out) == ["node_completed", "RecordPause"]
    record = out[1]
    assert isinstance(record, RecordPause)
    assert record.checkpoint.state == {"x": 1} and record.checkpoint.step == 1
    assert record.hold.kind is PauseKind.AFTER


def test_a_refused_pause_write_keeps_the_run_for_recover() -> None:
    """The store still holds the invocation running (not paused): the run ends
    without a result and stays recoverable, as the store says."""
    m = machine()
    m.step(Begin())
    m.step(PolicyAnswered(hy.Pause(1)))
    out = m.step(WriteRefused(ErrorInfo("store_unavailable", "down", {})))
    assert kinds(out) == ["invocation_interrupted", "End"]
    end = out[-1]
    assert isinstance(end, End) and end.kept and end.error is not None
    assert end.error.code == "store_unavailable"
    fenced = machine()
    fenced.step(Begin())
    fenced.step(PolicyAnswered(hy.Pause(1)))
    end = fenced.step(WriteRefused(ErrorInfo("stale_writer", "x", {}), fenced=True))[-1]
    assert isinstance(end, End) and end.error is not None
    assert end.error.code == "ownership_lost"


def test_resume_value_is_seen_by_the_next_decision_only() -> None:
    m = machine(resume_value={"approve": True})
    out = m.step(Resume())
    call = out[-1]
    assert isinstance(call, CallPolicy) and call.context.resume_value == {"approve": True}
    m.step(PolicyAnswered(hy.Next("a", 1)))
    m.step(CheckpointSaved())
    after = m.step(TaskOutcome(EX, TaskKey("a"), True, {}))[-1]
    assert isinstance(after, CallPolicy) and after.context.resume_value is None


def test_a_resumed_breakpoint_runs_its_held_step_without_pausing_again() -> None:
    m = machine(before={"a"})
    out = m.step(Resume(EX, ("a",), 1, to_run={"a": 1}))
    assert [c.key.node_id for c in out if isinstance(c, Dispatch)] == ["a"]
    assert not any(isinstance(c, (RecordPause, SaveCheckpoint, RecordResult)) for c in out)


@pytest.mark.parametrize(("points", "nodes", "expected"), [
    (set(), ("a",), None), ({"b"}, ("a",), None),
    ({"a"}, ("a", "b"), ("a",)), ({"a", "b"}, ("b", "a"), ("b", "a")),
])
def test_breakpoints(points: set[str], nodes: tuple[str, ...],
                     expected: tuple[str, ...] | None) -> None:
    hold = p.breakpoint_at(points, nodes, PauseKind.BEFORE)
    assert (hold.nodes if hold else None) == expected
    if hold is not None:
        assert Hold.from_dict(hold.to_dict()) == hold


def test_an_unstorable_pause_payload_fails_naming_the_field() -> None:
    m = machine()
    m.step(Begin())
    out = m.step(PolicyAnswered(hy.Pause({"s": {1}})))
    assert isinstance(out[0], RecordResult) and out[0].error is not None
    assert out[0].error.code == "invalid_policy_result"
    assert out[0].error.details["field"] == "payload"
