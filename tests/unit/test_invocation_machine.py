"""The pure invocation machine: every (phase, event) path as a table row, and
random interleavings checked with hypothesis. No process is started."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hayata_py as hy
from hayata_py._errors import ErrorInfo
from hayata_py._invocation import (
    ArmDeadline,
    Begin,
    CallPolicy,
    CancelRequested,
    CancelTask,
    CheckpointSaved,
    CircuitChanged,
    Command,
    DeadlinePassed,
    Dispatch,
    DownCause,
    Emit,
    End,
    Event,
    Invocation,
    LeaseLost,
    NodeDown,
    PartialResult,
    Phase,
    PolicyAnswered,
    PolicyRaised,
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

NODES = frozenset({"a", "b", "c"})
A, B = TaskKey("a"), TaskKey("b")
FAILED = ErrorInfo("node_failed", "ValueError: x", {"node_id": "a", "type": "ValueError"})
STORE_DOWN = ErrorInfo("store_unavailable", "the store failed", {})
STALE = ErrorInfo("stale_writer", "fenced", {})


def short(cmd: Command) -> tuple[Any, ...]:
    """A command as a short tuple for the tables."""
    if isinstance(cmd, Emit):
        return ("emit", cmd.type)
    if isinstance(cmd, CallPolicy):
        return ("policy", cmd.context.step)
    if isinstance(cmd, SaveCheckpoint):
        return ("checkpoint", cmd.checkpoint.step, cmd.checkpoint.nodes)
    if isinstance(cmd, Dispatch):
        return ("dispatch", cmd.key.node_id, cmd.attempt)
    if isinstance(cmd, CancelTask):
        return ("cancel", cmd.key.node_id)
    if isinstance(cmd, ArmDeadline):
        return ("deadline", cmd.execution_id)
    if isinstance(cmd, RecordResult):
        return ("record", cmd.ok, None if cmd.error is None else cmd.error.code)
    assert isinstance(cmd, End)
    return ("end", cmd.ok, None if cmd.error is None else cmd.error.code, cmd.kept)


def machine(*, durable: bool = True, stream: bool = True) -> Invocation:
    return Invocation(Seed("inv", "in", {"s": 0}, stream=stream),
                      Rules(NODES, max_steps=3, execution_timeout=2.0, durable=durable,
                            owner="sys"))


def deciding(**kw: Any) -> Invocation:
    m = machine(**kw)
    m.step(Begin())
    return m


def saving(nodes: str | list[str] = "a", **kw: Any) -> Invocation:
    m = deciding(**kw)
    m.step(PolicyAnswered(hy.Next(nodes, 1)))
    return m


def running(nodes: str | list[str] = "a", **kw: Any) -> Invocation:
    m = saving(nodes, **kw)
    m.step(CheckpointSaved())
    return m


def finishing(ok: bool = True) -> Invocation:
    m = deciding()
    m.step(PolicyAnswered(hy.Finish({"r": 1}) if ok else "nonsense"))
    return m


def ended() -> Invocation:
    m = finishing()
    m.step(ResultRecorded())
    return m


def outcome(key: TaskKey = A, ok: bool = True, execution: str = "inv:0", partials: int = 0,
            error: ErrorInfo | None = None) -> TaskOutcome:
    return TaskOutcome(execution, key, ok, {"x": 1} if ok else None,
                       None if ok else (error or FAILED), partials)


def partial(key: TaskKey = A, index: int = 1, execution: str = "inv:0") -> PartialResult:
    return PartialResult(execution, key, index, "a.edge-1", {"p": index})


EX = "inv:0"
POLICY1 = ("policy", 1)
ROWS: list[tuple[str, Callable[[], Invocation], Event, list[tuple[Any, ...]]]] = [
    # NEW
    ("begin", machine, Begin(), [("emit", "invocation_started"), ("policy", 0)]),
    ("resume between steps", machine, Resume(),
     [("emit", "invocation_started"), ("policy", 0)]),
    ("resume with a recorded failure", machine, Resume(EX, ("a",), 1, failed=FAILED),
     [("emit", "invocation_started"), ("record", False, "node_failed")]),
    ("resume runs what did not run", machine,
     Resume(EX, ("a", "b"), 1, True, to_run={"b": 2}, reuse={"a": {"x": 1}}),
     [("emit", "invocation_started"), ("emit", "node_started"), ("dispatch", "b", 2),
      ("deadline", EX)]),
    ("resume with everything completed", machine,
     Resume(EX, ("a",), 1, reuse={"a": {"x": 1}}),
     [("emit", "invocation_started"), POLICY1]),
    ("new ignores outcomes", machine, outcome(), []),
    # DECIDING
    ("finish", deciding, PolicyAnswered(hy.Finish(1)), [("record", True, None)]),
    ("next", deciding, PolicyAnswered(hy.Next("a", 1)), [("checkpoint", 0, ("a",))]),
    ("next parallel", deciding, PolicyAnswered(hy.Next(["a", "b"], 1)),
     [("checkpoint", 0, ("a", "b"))]),
    ("not a decision", deciding, PolicyAnswered(3),
     [("record", False, "invalid_policy_result")]),
    ("unknown node", deciding, PolicyAnswered(hy.Next("zz")),
     [("record", False, "unknown_node")]),
    ("duplicate node", deciding, PolicyAnswered(hy.Next(["a", "a"])),
     [("record", False, "duplicate_node")]),
    ("finish result not storable", deciding, PolicyAnswered(hy.Finish(object())),
     [("record", False, "invalid_policy_result")]),
    ("next input not storable", deciding, PolicyAnswered(hy.Next("a", object())),
     [("record", False, "invalid_policy_result")]),
    ("policy raised", deciding, PolicyRaised("KeyError", "'k'"),
     [("record", False, "policy_failed")]),
    ("lease lost while deciding", deciding, LeaseLost(),
     [("emit", "invocation_interrupted"), ("end", False, "ownership_lost", True)]),
    ("stopped while deciding", deciding, Stop(StopKind.REQUESTED),
     [("record", False, "agent_stopped")]),
    ("deciding ignores outcomes", deciding, outcome(), []),
    # SAVING
    ("checkpoint saved", saving, CheckpointSaved(),
     [("emit", "node_started"), ("dispatch", "a", 1), ("deadline", EX)]),
    ("parallel checkpoint saved", lambda: saving(["a", "b"]), CheckpointSaved(),
     [("emit", "node_started"), ("dispatch", "a", 1), ("deadline", EX),
      ("emit", "node_started"), ("dispatch", "b", 1), ("deadline", EX)]),
    ("a node has no system", saving, CheckpointSaved({"a": "no host"}),
     [("emit", "invocation_interrupted"), ("end", False, "invocation_interrupted", True)]),
    ("no system, no store: run anyway", lambda: saving(durable=False),
     CheckpointSaved({"a": "no host"}),
     [("emit", "node_started"), ("dispatch", "a", 1), ("deadline", EX)]),
    ("checkpoint fenced", saving, WriteRefused(STALE, fenced=True),
     [("emit", "invocation_interrupted"), ("end", False, "ownership_lost", True)]),
    ("checkpoint refused: kept, as the store says", saving, WriteRefused(STORE_DOWN),
     [("emit", "invocation_interrupted"), ("end", False, "store_unavailable", True)]),
    # RUNNING
    ("outcome", running, outcome(), [("emit", "node_completed"), POLICY1]),
    ("outcome before its partial", running, outcome(partials=1), []),
    ("partial", running, partial(), [("emit", "node_partial_result")]),
    ("failed outcome", running, outcome(ok=False), [("record", False, "node_failed")]),
    ("failed branch cancels the other", lambda: running(["a", "b"]), outcome(ok=False),
     [("cancel", "b"), ("record", False, "node_failed")]),
    ("first of two branches", lambda: running(["a", "b"]), outcome(),
     [("emit", "node_completed")]),
    ("an edge's write was fenced", running, outcome(ok=False, error=STALE),
     [("emit", "invocation_interrupted"), ("end", False, "ownership_lost", True)]),
    ("an edge's write was refused: kept, as the store says", running,
     outcome(ok=False, error=STORE_DOWN),
     [("emit", "invocation_interrupted"), ("end", False, "store_unavailable", True)]),
    ("an edge's write was refused, no store", lambda: running(durable=False),
     outcome(ok=False, error=STORE_DOWN), [("record", False, "store_unavailable")]),
    ("outcome of another execution", running, outcome(execution="inv:7"), []),
    ("outcome of a node not in the step", running, outcome(B), []),
    ("partial of another execution", running, partial(execution="inv:7"), []),
    ("node crashed", running, NodeDown("a", DownCause.CRASHED, 42, "killed"),
     [("record", False, "node_crashed")]),
    ("another node crashed", running, NodeDown("b", DownCause.CRASHED, 42, "killed"), []),
    ("node unreachable", running, NodeDown("a", DownCause.UNREACHABLE, 42, "no pings"),
     [("emit", "invocation_interrupted"), ("end", False, "invocation_interrupted", True)]),
    ("node waiting for placement", running,
     NodeDown("a", DownCause.WAITING_FOR_PLACEMENT, None, "no host"),
     [("emit", "invocation_interrupted"), ("end", False, "invocation_interrupted", True)]),
    ("node unreachable, no store", lambda: running(durable=False),
     NodeDown("a", DownCause.UNREACHABLE, 42, "no pings"),
     [("record", False, "node_crashed")]),
    ("deadline", running, DeadlinePassed(EX),
     [("cancel", "a"), ("record", False, "execution_timeout")]),
    ("deadline of an old execution", running, DeadlinePassed("inv:7"), []),
    ("the task's deadline", running, DeadlinePassed(EX, A),
     [("cancel", "a"), ("record", False, "execution_timeout")]),
    ("deadline of a task already done", lambda: running(["a", "b"]),
     DeadlinePassed(EX, TaskKey("c")), []),
    ("lease lost while running", running, LeaseLost(),
     [("cancel", "a"), ("emit", "invocation_interrupted"),
      ("end", False, "ownership_lost", True)]),
    ("stopped while running", running, Stop(StopKind.REQUESTED),
     [("cancel", "a"), ("record", False, "agent_stopped")]),
    ("nodes lost while running", running, Stop(StopKind.NODES_LOST),
     [("cancel", "a"), ("emit", "invocation_interrupted"),
      ("end", False, "invocation_interrupted", True)]),
    ("nodes lost, no store", lambda: running(durable=False), Stop(StopKind.NODES_LOST),
     [("cancel", "a"), ("record", False, "agent_stopped")]),
    ("running ignores a policy answer", running, PolicyAnswered(hy.Finish(1)), []),
    # FINISHING
    ("completed recorded", finishing, ResultRecorded(),
     [("emit", "invocation_completed"), ("end", True, None, False)]),
    ("failure recorded", lambda: finishing(ok=False), ResultRecorded(),
     [("emit", "invocation_failed"), ("end", False, "invalid_policy_result", False)]),
    ("result fenced", finishing, WriteRefused(STALE, fenced=True),
     [("emit", "invocation_interrupted"), ("end", False, "ownership_lost", True)]),
    ("result refused: kept, as the store says", finishing, WriteRefused(STORE_DOWN),
     [("emit", "invocation_interrupted"), ("end", False, "store_unavailable", True)]),
    ("finishing ignores a stop", finishing, Stop(StopKind.REQUESTED), []),
    ("finishing ignores a lost lease", finishing, LeaseLost(), []),
    ("finishing ignores a deadline", finishing, DeadlinePassed(EX), []),
    # ENDED
    ("ended ignores outcomes", ended, outcome(), []),
    ("ended ignores a stop", ended, Stop(StopKind.REQUESTED), []),
    ("ended ignores a second record", ended, ResultRecorded(), []),
    ("ended ignores begin", ended, Begin(), []),
]


@pytest.mark.parametrize(("name", "make", "event", "expected"), ROWS,
                         ids=[row[0] for row in ROWS])
def test_table(name: str, make: Callable[[], Invocation], event: Event,
               expected: list[tuple[Any, ...]]) -> None:
    assert [short(c) for c in make().step(event)] == expected


def test_held_outcome_completes_after_its_partials() -> None:
    m = running()
    assert m.step(outcome(partials=2)) == []
    assert [short(c) for c in m.step(partial(index=1))] == [("emit", "node_partial_result")]
    assert [short(c) for c in m.step(partial(index=2))] == [
        ("emit", "node_partial_result"), ("emit", "node_completed"), POLICY1]


def test_sequential_result_merges_into_state_and_parallel_results_keep_order() -> None:
    m = running()
    (*_, policy) = m.step(TaskOutcome(EX, A, True, {"x": 5}))
    assert isinstance(policy, CallPolicy)
    assert dict(policy.context.state) == {"s": 0, "x": 5}
    assert policy.context.last_result == {"x": 5}
    m.step(PolicyAnswered(hy.Next(["b", "a"], 2)))
    m.step(CheckpointSaved())
    m.step(TaskOutcome("inv:1", A, True, {"a": 1}))
    (*_, policy) = m.step(TaskOutcome("inv:1", B, True, {"b": 1}))
    assert isinstance(policy, CallPolicy)
    assert policy.context.parallel_results == [{"b": 1}, {"a": 1}]
    assert dict(policy.context.state) == {"s": 0, "x": 5}


def test_max_steps() -> None:
    m = deciding()
    for step in range(3):
        m.step(PolicyAnswered(hy.Next("a")))
        m.step(CheckpointSaved())
        m.step(TaskOutcome(f"inv:{step}", A, True, {}))
    assert [short(c) for c in m.step(PolicyAnswered(hy.Next("a")))] == [
        ("record", False, "max_steps_exceeded")]


def test_not_streaming_without_a_store_emits_nothing_and_still_ends_once() -> None:
    m = running(stream=False, durable=False)
    cmds = m.step(DeadlinePassed(EX)) + m.step(ResultRecorded())
    assert [short(c) for c in cmds] == [("cancel", "a"), ("record", False, "execution_timeout"),
                                        ("end", False, "execution_timeout", False)]
    assert m.phase is Phase.ENDED


def test_a_durable_machine_emits_every_event_for_its_log_even_unstreamed() -> None:
    """The event log keeps every event of a durable agent's invocation, streamed or
    not: the machine numbers them all."""
    m = running(stream=False)
    cmds = m.step(DeadlinePassed(EX)) + m.step(ResultRecorded())
    assert [short(c) for c in cmds] == [("cancel", "a"), ("record", False, "execution_timeout"),
                                        ("emit", "invocation_failed"),
                                        ("end", False, "execution_timeout", False)]
    emitted = [c for c in cmds if isinstance(c, Emit)]
    assert [c.sequence for c in emitted] == [3]  # invocation_started, node_started before


def test_a_recovered_machine_numbers_on_from_the_stored_log() -> None:
    m = Invocation(Seed("inv", "in", {"s": 0}, stream=True, sequence=41),
                   Rules(NODES, max_steps=3, execution_timeout=2.0, durable=True, owner="sys"))
    first = [c for c in m.step(Begin()) if isinstance(c, Emit)]
    assert [c.sequence for c in first] == [42]


def test_task_ids_are_stable_and_distinct_per_step_and_node() -> None:
    def dispatched(nodes: list[str]) -> list[Dispatch]:
        return [c for c in running(nodes).step(CheckpointSaved()) if isinstance(c, Dispatch)]

    first = [c for c in saving(["a", "b"]).step(CheckpointSaved()) if isinstance(c, Dispatch)]
    again = [c for c in saving(["a", "b"]).step(CheckpointSaved()) if isinstance(c, Dispatch)]
    assert [c.task_id for c in first] == [c.task_id for c in again]
    assert len({c.task_id for c in first}) == 2
    assert dispatched(["a"]) == []  # a running step ignores a second CheckpointSaved


# -- random interleavings --------------------------------------------------------------


class Shell:
    """A perfect shell: answers the machine's questions at once and keeps a log."""

    def __init__(self, m: Invocation, plan: Sequence[list[str]], refuse_record: bool) -> None:
        self.m, self.plan, self.refuse_record = m, plan, refuse_record
        self.log: list[Command] = []
        self.ended_at: int | None = None
        self.in_flight: dict[tuple[str, TaskKey], list[Event]] = {}

    def feed(self, event: Event) -> None:
        queue = [event]
        while queue:
            for cmd in self.m.step(queue.pop(0)):
                if self.ended_at is not None:
                    assert not isinstance(cmd, (Dispatch, Emit, End, RecordResult)), cmd
                self.log.append(cmd)
                if isinstance(cmd, CallPolicy):
                    step = cmd.context.step
                    queue.append(PolicyAnswered(
                        hy.Next(self.plan[step], step) if step < len(self.plan)
                        else hy.Finish(step)))
                elif isinstance(cmd, SaveCheckpoint):
                    queue.append(CheckpointSaved())
                elif isinstance(cmd, RecordResult):
                    queue.append(WriteRefused(STORE_DOWN) if self.refuse_record
                                 else ResultRecorded())
                elif isinstance(cmd, Dispatch):
                    self.in_flight[(cmd.execution_id, cmd.key)] = []
                elif isinstance(cmd, End):
                    self.ended_at = len(self.log)


plans = st.lists(st.lists(st.sampled_from(sorted(NODES)), min_size=1, max_size=3, unique=True),
                 min_size=0, max_size=3)


@settings(max_examples=300, deadline=None)
@given(plan=plans, stream=st.booleans(), durable=st.booleans(),
       refuse_record=st.booleans(), data=st.data())
def test_any_interleaving_ends_once_in_order(plan: list[list[str]], stream: bool,
                                             durable: bool, refuse_record: bool,
                                             data: st.DataObject) -> None:
    m = Invocation(Seed("inv", None, {}, stream=stream),
                   Rules(NODES, max_steps=5, execution_timeout=1.0, durable=durable))
    shell = Shell(m, plan, refuse_record)
    shell.feed(Begin())
    outbox: list[Event] = []  # messages sent to the agent, delivered in any order
    seen_tasks: set[tuple[str, TaskKey]] = set()
    for _ in range(60):
        for task, _msgs in list(shell.in_flight.items()):
            if task in seen_tasks:
                continue
            seen_tasks.add(task)
            execution_id, key = task
            count = data.draw(st.integers(0, 3), label="partials")
            ok = data.draw(st.booleans(), label="ok") or data.draw(st.booleans())
            outbox += [PartialResult(execution_id, key, i + 1, "e", {"i": i})
                       for i in range(count)]
            outbox.append(TaskOutcome(execution_id, key, ok, {key.node_id: 1} if ok else None,
                                      None if ok else FAILED, count))
        noise = [NodeDown(data.draw(st.sampled_from(sorted(NODES))),
                          data.draw(st.sampled_from(list(DownCause)))),
                 DeadlinePassed(data.draw(st.sampled_from(["inv:0", "inv:1", "inv:9"]))),
                 LeaseLost(), Stop(data.draw(st.sampled_from(list(StopKind)))),
                 CancelRequested(),
                 CircuitChanged(data.draw(st.sampled_from(sorted(NODES))),
                                data.draw(st.booleans()), 5, 30.0)]
        if not outbox and m.ended:
            break
        if outbox and data.draw(st.integers(0, 9), label="deliver or noise") < 8:
            event = outbox.pop(data.draw(st.integers(0, len(outbox) - 1), label="which"))
        elif data.draw(st.integers(0, 9), label="noise?") < 3:
            event = noise[data.draw(st.integers(0, len(noise) - 1), label="noise")]
        elif outbox:
            continue
        else:
            event = DeadlinePassed(m.execution.id if m.execution else "none")
        shell.feed(event)
    while not m.ended:  # the deadline always ends a stuck step
        shell.feed(DeadlinePassed(m.execution.id if m.execution else "none"))
        if m.phase is Phase.DECIDING:
            shell.feed(Stop(StopKind.REQUESTED))

    ends = [c for c in shell.log if isinstance(c, End)]
    assert len(ends) == 1
    emits = [c for c in shell.log if isinstance(c, Emit)]
    assert [e.sequence for e in emits] == list(range(1, len(emits) + 1))
    assert bool(emits) == (stream or durable)  # a durable agent logs every event
    if stream or durable:
        assert emits[-1].type in ("invocation_completed", "invocation_failed",
                                  "invocation_interrupted")
        completed: set[tuple[str, str]] = set()
        for e in emits:
            task = (e.data.get("execution_id"), e.data.get("node_id"))
            if e.type == "node_completed":
                completed.add(task)  # type: ignore[arg-type]
            elif e.type == "node_partial_result":
                assert task not in completed, "a partial after its node_completed"
    assert shell.ended_at == len(shell.log), "a command after the end"
    if ends[0].kept:  # nothing durable is written for a kept invocation
        assert durable
        recorded = [c for c in shell.log if isinstance(c, RecordResult)]
        # ... or its terminal write was refused: the store still holds it running.
        assert not recorded or refuse_record or recorded[-1] is not shell.log[-2]
