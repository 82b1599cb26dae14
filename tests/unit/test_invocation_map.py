"""Map steps in the pure invocation machine: table rows for every path and random
interleavings checked with hypothesis. No process is started."""

from __future__ import annotations

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
    CancelTask,
    CheckpointSaved,
    CloseMap,
    Collect,
    Command,
    Consolidate,
    DeadlinePassed,
    Dispatch,
    DownCause,
    Emit,
    End,
    Event,
    Invocation,
    NodeDown,
    OpenMap,
    PartialResult,
    PolicyAnswered,
    RecordResult,
    Reduced,
    ReducerLost,
    ResultRecorded,
    Resume,
    RetryDue,
    Rules,
    SaveCheckpoint,
    ScheduleRetry,
    Seed,
    TaskKey,
    TaskOutcome,
)
from hayata_py.store import task_id_for

NODES = frozenset({"a", "b"})
EX = "inv:0"
FAILED = ErrorInfo("node_failed", "ValueError: x", {"node_id": "a", "type": "ValueError"})


def reduce_check(path: str) -> str | None:
    return None if path.startswith("ok.") else "cannot be imported (No module named 'x')"


def machine(*, concurrency: int = 2, durable: bool = True, stream: bool = True) -> Invocation:
    return Invocation(Seed("inv", None, {"s": 0}, stream=stream),
                      Rules(NODES, max_steps=5, execution_timeout=2.0, durable=durable,
                            map_concurrency=concurrency, reduce_check=reduce_check))


def answer(m: Invocation, decision: Any) -> list[Command]:
    m.step(Begin())
    return m.step(PolicyAnswered(decision))


def started(items: list[Any], reduce: str | None = None, **kw: Any
            ) -> tuple[Invocation, list[Command]]:
    m = machine(**kw)
    answer(m, hy.Map("a", items, reduce))
    return m, m.step(CheckpointSaved())


def ok(item: int, result: Any = None, partials: int = 0) -> TaskOutcome:
    return TaskOutcome(EX, TaskKey("a", item), True,
                       {"i": item} if result is None else result, None, partials)


def code(cmds: list[Command]) -> str | None:
    records = [c for c in cmds if isinstance(c, RecordResult)]
    assert len(records) == 1, cmds
    return None if records[0].error is None else records[0].error.code


@pytest.mark.parametrize(("items", "reduce", "expected", "field"), [
    ([], None, "map_items_invalid", "items"),
    ((1, 2), None, "map_items_invalid", "items"),
    ("abc", None, "map_items_invalid", "items"),
    (None, None, "map_items_invalid", "items"),
    ([1, object()], None, "invalid_policy_result", "items[1]"),
    ([1], "nope.mod:f", "reduce_not_importable", "reduce"),
    ([1], "not a path", "reduce_not_importable", "reduce"),
    ([1], lambda rs: {}, "reduce_not_importable", "reduce"),
    ([1], 42, "invalid_policy_result", "reduce"),
])
def test_bad_map_fails_before_any_item_runs(items: Any, reduce: Any, expected: str,
                                            field: str) -> None:
    cmds = answer(machine(), hy.Map("a", items, reduce))
    assert code(cmds) == expected
    record = next(c for c in cmds if isinstance(c, RecordResult))
    assert record.error is not None and record.error.details["field"] == field
    assert field in record.error.message
    assert not any(isinstance(c, (SaveCheckpoint, Dispatch, OpenMap)) for c in cmds)


def test_unknown_node_and_closure() -> None:
    assert code(answer(machine(), hy.Map("zz", [1]))) == "unknown_node"

    def local(results: list[dict[str, Any]]) -> dict[str, Any]:
        return {}

    cmds = answer(machine(), hy.Map("a", [1], local))
    assert code(cmds) == "reduce_not_importable"


def test_module_level_reduce_function_is_taken_by_path() -> None:
    m = machine()
    m.rules = Rules(NODES, 5, 2.0, map_concurrency=2)  # every path importable
    (save,) = answer(m, hy.Map("a", [1], code))
    assert isinstance(save, SaveCheckpoint)
    assert save.checkpoint.map and save.checkpoint.reduce == f"{__name__}:code"


def test_checkpoint_names_the_map_before_anything_runs() -> None:
    (save,) = answer(machine(), hy.Map("a", [1, 2, 3], "ok.m:r"))
    assert isinstance(save, SaveCheckpoint)
    cp = save.checkpoint
    assert (cp.nodes, cp.input, cp.map, cp.reduce, cp.parallel) == (
        ("a",), [1, 2, 3], True, "ok.m:r", False)


@pytest.mark.parametrize(("reduce", "after_one"), [
    (None, [Emit, Emit, Dispatch]),  # no reducer: nothing to forward
    ("ok.m:r", [Emit, Collect, Emit, Dispatch]),
])
def test_window_open_and_next_item_per_completion(reduce: str | None,
                                                  after_one: list[type]) -> None:
    m, cmds = started([10, 11, 12, 13, 14], reduce, concurrency=2)
    opened = cmds[0]
    assert isinstance(opened, OpenMap)
    assert opened.edges == 2 and opened.task_ids == tuple(
        task_id_for("inv", 0, "a", item=i) for i in range(5))
    sent = [c for c in cmds if isinstance(c, Dispatch)]
    assert [(d.key, d.input, d.branch_index) for d in sent] == [
        (TaskKey("a", 0), 10, 0), (TaskKey("a", 1), 11, 1)]
    assert isinstance(cmds[-1], ArmDeadline)
    cmds = m.step(ok(1))
    assert [type(c) for c in cmds] == after_one
    assert [(c.type, c.data["item"]) for c in cmds if isinstance(c, Emit)] == [
        ("node_completed", 1), ("node_started", 2)]


def test_a_node_s_map_window_keeps_more_items_out_than_run_at_once() -> None:
    """The agent sends a fast one-task node's items in chains: more are out
    (``map_window``) than its step asks edges for (``map_concurrency``)."""
    m = Invocation(Seed("inv", None, {"s": 0}, stream=True),
                   Rules(NODES, max_steps=5, execution_timeout=2.0, map_concurrency=2,
                         map_window={"a": 6}, reduce_check=reduce_check))
    answer(m, hy.Map("a", list(range(10))))
    cmds = m.step(CheckpointSaved())
    opened = next(c for c in cmds if isinstance(c, OpenMap))
    assert opened.edges == 2
    assert [c.key.item for c in cmds if isinstance(c, Dispatch)] == [0, 1, 2, 3, 4, 5]
    assert [c.key.item for c in m.step(ok(3)) if isinstance(c, Dispatch)] == [6]
    m = Invocation(Seed("inv", None, {}), Rules(NODES, 5, 2.0, map_concurrency=2,
                                                 map_window={"b": 6}))
    answer(m, hy.Map("a", list(range(10))))  # another node's window: not this one's
    assert len([c for c in m.step(CheckpointSaved()) if isinstance(c, Dispatch)]) == 2


def test_edges_asked_are_at_most_the_items() -> None:
    _, cmds = started([1, 2], concurrency=8)
    assert isinstance(cmds[0], OpenMap) and cmds[0].edges == 2


def test_without_reduce_the_machine_ends_the_step_with_the_results_in_item_order(
) -> None:
    m, _ = started([0, 1, 2], concurrency=3)
    for item in (2, 0):
        assert not any(isinstance(c, (CloseMap, CallPolicy)) for c in m.step(ok(item)))
    cmds = m.step(ok(1))
    assert not any(isinstance(c, (Collect, Consolidate)) for c in cmds)  # no reducer
    assert [type(c) for c in cmds[-2:]] == [CloseMap, CallPolicy]
    policy = cmds[-1]
    assert isinstance(policy, CallPolicy)
    assert policy.context.parallel_results == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert dict(policy.context.state) == {"s": 0} and policy.context.last_result is None
    assert m.step(Reduced(EX, True, [])) == []  # the step ended once


def test_reduce_in_item_order_reducer_reads_the_gaps_from_the_store() -> None:
    m, _ = started([0, 1, 2], "ok.m:r", concurrency=3)
    for item in (2, 0):
        m.step(ok(item))
    assert m.step(ok(1))[-1] == Consolidate(EX, None)  # durable: the reducer reads the gaps
    cmds = m.step(Reduced(EX, True, {"n": 3}))
    assert isinstance(cmds[0], CloseMap) and isinstance(cmds[-1], CallPolicy)


def test_without_store_consolidate_carries_the_results() -> None:
    m, _ = started([0, 1], "ok.m:r", durable=False)
    m.step(ok(1))
    assert m.step(ok(0))[-1] == Consolidate(EX, ({"i": 0}, {"i": 1}))


def test_reduce_result_is_the_step_result() -> None:
    m, _ = started([0], "ok.m:r")
    m.step(ok(0))
    policy = m.step(Reduced(EX, True, {"total": 3}))[-1]
    assert isinstance(policy, CallPolicy)
    assert policy.context.last_result == {"total": 3}
    assert dict(policy.context.state) == {"s": 0, "total": 3}
    assert policy.context.parallel_results is None


@pytest.mark.parametrize("event", [
    Reduced(EX, False, error=ErrorInfo("reduce_failed", "ValueError: x", {"type": "ValueError"})),
    Reduced(EX, False, error=ErrorInfo("reduce_invalid_result", "list", {"returned": "list"})),
    ReducerLost(EX, 3),
])
def test_reducer_failures_fail_the_step(event: Event) -> None:
    m, _ = started([0], "ok.m:r")
    m.step(ok(0))
    cmds = m.step(event)
    expected = event.error.code if isinstance(event, Reduced) and event.error else \
        "reducer_crashed"
    assert isinstance(cmds[0], CloseMap) and code(cmds) == expected
    assert [short for short in cmds if isinstance(short, CancelTask)] == []


def test_reducer_answer_before_consolidation_is_ignored() -> None:
    m, _ = started([0, 1], "ok.m:r")
    assert m.step(Reduced(EX, True, [])) == [] and m.step(ReducerLost("inv:9", 3)) == []
    assert m.step(Reduced("inv:9", True, [])) == []


def test_reducer_lost_while_items_run_fails_the_step() -> None:
    m, _ = started([0, 1, 2], "ok.m:r")
    cmds = m.step(ReducerLost(EX, 3))
    assert [type(c) for c in cmds[:3]] == [CancelTask, CancelTask, CloseMap]
    assert code(cmds) == "reducer_crashed"


def test_first_failure_cancels_the_rest_and_sends_no_more() -> None:
    m, _ = started([0, 1, 2, 3], concurrency=2)
    cmds = m.step(TaskOutcome(EX, TaskKey("a", 0), False, error=FAILED))
    assert [(type(c), getattr(c, "key", None)) for c in cmds[:2]] == [
        (CancelTask, TaskKey("a", 1)), (CloseMap, None)]
    assert code(cmds) == "node_failed"
    assert not any(isinstance(c, Dispatch) for c in cmds)
    assert m.step(ok(1)) == []


def test_deadline_while_waiting_for_the_reducer() -> None:
    m, _ = started([0], "ok.m:r")
    m.step(ok(0))
    cmds = m.step(DeadlinePassed(EX))
    assert code(cmds) == "execution_timeout"


def test_node_down_fails_the_map() -> None:
    m, _ = started([0, 1, 2])
    cmds = m.step(NodeDown("a", DownCause.CRASHED, 7, "killed"))
    assert code(cmds) == "node_crashed" and isinstance(cmds[0], CloseMap)


def test_partials_carry_the_item_and_come_before_its_completion() -> None:
    m, _ = started([0, 1])
    assert m.step(ok(0, partials=1)) == []
    cmds = m.step(PartialResult(EX, TaskKey("a", 0), 1, "a.edge-1", {"p": 1}))
    emits = [(c.type, c.data.get("item")) for c in cmds if isinstance(c, Emit)]
    assert emits[:2] == [("node_partial_result", 0), ("node_completed", 0)]


def test_resume_runs_missing_items_and_consolidates_with_the_reused() -> None:
    m = machine(concurrency=2)
    cmds = m.step(Resume(EX, ("a",), [5, 6, 7, 8], map=True, reduce="ok.m:r",
                         items_to_run={1: 1, 3: 2}, items_reused={0: {"i": 0}, 2: {"i": 2}}))
    sent = [(c.key.item, c.attempt, c.input) for c in cmds if isinstance(c, Dispatch)]
    assert sent == [(1, 1, 6), (3, 2, 8)]
    m.step(ok(1))
    assert m.step(ok(3))[-1] == Consolidate(EX, None)


def test_resume_without_reduce_ends_with_the_reused_and_the_new_in_item_order() -> None:
    m = machine(concurrency=2)
    m.step(Resume(EX, ("a",), [5, 6, 7], map=True, items_to_run={1: 1},
                  items_reused={0: {"i": 0}, 2: {"i": 2}}))
    policy = m.step(ok(1))[-1]
    assert isinstance(policy, CallPolicy)
    assert policy.context.parallel_results == [{"i": 0}, {"i": 1}, {"i": 2}]


def test_resume_with_every_item_completed_consolidates_at_once() -> None:
    m = machine()
    cmds = m.step(Resume(EX, ("a",), [5, 6], map=True, reduce="ok.m:r",
                         items_reused={0: {}, 1: {}}))
    assert isinstance(cmds[1], OpenMap) and cmds[-1] == Consolidate(EX, None)
    assert not any(isinstance(c, Dispatch) for c in cmds)
    m = machine()  # without reduce: the step ends at once
    cmds = m.step(Resume(EX, ("a",), [5, 6], map=True, items_reused={0: {}, 1: {}}))
    assert isinstance(cmds[-1], CallPolicy) and cmds[-1].context.parallel_results == [{}, {}]
    assert not any(isinstance(c, (Dispatch, Consolidate)) for c in cmds)


# -- random interleavings --------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, 9), concurrency=st.integers(1, 4), stream=st.booleans(),
       reduce=st.booleans(), data=st.data())
def test_any_interleaving_of_a_map(n: int, concurrency: int, stream: bool, reduce: bool,
                                   data: st.DataObject) -> None:
    """The window never exceeds the concurrency, each item is sent once, results
    come in item order, the first failure cancels the rest, exactly one End,
    events numbered without gaps, every partial before its item's completion."""
    m = machine(concurrency=concurrency, stream=stream)
    log: list[Command] = []
    out: list[Event] = []
    running: set[int] = set()
    sent: list[int] = []
    consolidating = False
    fail_at = data.draw(st.one_of(st.none(), st.integers(0, n - 1)), label="fails")

    def feed(event: Event) -> None:
        nonlocal consolidating
        queue = [event]
        while queue:
            for cmd in m.step(queue.pop(0)):
                log.append(cmd)
                if isinstance(cmd, CallPolicy):
                    queue.append(PolicyAnswered(
                        hy.Map("a", list(range(n)), "ok.m:r" if reduce else None)
                        if cmd.context.step == 0 else hy.Finish(
                            cmd.context.last_result if reduce
                            else cmd.context.parallel_results)))
                elif isinstance(cmd, SaveCheckpoint):
                    queue.append(CheckpointSaved())
                elif isinstance(cmd, RecordResult):
                    queue.append(ResultRecorded())
                elif isinstance(cmd, Dispatch):
                    assert cmd.key.item is not None
                    running.add(cmd.key.item)
                    sent.append(cmd.key.item)
                    assert len(running) <= concurrency
                    item = cmd.key.item
                    partials = data.draw(st.integers(0, 2), label="partials")
                    out.extend(PartialResult(EX, cmd.key, i + 1, "e", {"i": i})
                               for i in range(partials))
                    good = item != fail_at
                    out.append(TaskOutcome(EX, cmd.key, good, {"i": item} if good else None,
                                           None if good else FAILED, partials))
                elif isinstance(cmd, CancelTask):
                    assert cmd.key.item is not None
                    running.discard(cmd.key.item)
                elif isinstance(cmd, Consolidate):
                    consolidating = True
                    out.append(Reduced(EX, True, {"n": n} if reduce
                                       else [{"i": i} for i in range(n)]))

    feed(Begin())
    while out and not m.ended:
        event = out.pop(data.draw(st.integers(0, len(out) - 1), label="which"))
        if isinstance(event, TaskOutcome) and event.key.item is not None:
            running.discard(event.key.item)
        feed(event)
    assert m.ended
    assert len(sent) == len(set(sent)), "an item was sent twice"
    assert sent == sorted(sent), "items are sent in item order"
    ends = [c for c in log if isinstance(c, End)]
    assert len(ends) == 1
    assert ends[0].ok == (fail_at is None)
    if fail_at is None:
        assert consolidating == reduce and sorted(sent) == list(range(n))
        assert ends[0].result == ({"n": n} if reduce else [{"i": i} for i in range(n)])
    else:
        assert not consolidating
    emits = [c for c in log if isinstance(c, Emit)]
    assert [e.sequence for e in emits] == list(range(1, len(emits) + 1))
    completed: set[int] = set()
    for e in emits:
        if e.type == "node_completed":
            completed.add(e.data["item"])
        elif e.type == "node_partial_result":
            assert e.data["item"] not in completed, "a partial after its node_completed"


# -- retries of map items ------------------------------------------------------------

RETRYABLE = ErrorInfo("node_failed", "Transient: x", {"node_id": "a", "type": "Transient",
                                                      "retryable": True,
                                                      "attempts": ["Transient"]})


def retrying_machine(max_attempts: int = 2) -> Invocation:
    policy = hy.RetryPolicy(max_attempts=max_attempts, initial_interval=0.5, jitter=False)
    return Invocation(Seed("inv", None, {"s": 0}, stream=True),
                      Rules(NODES, max_steps=5, execution_timeout=2.0, map_concurrency=2,
                            retry={"a": policy}))


def test_a_failed_map_item_is_held_then_resent_alone_with_its_attempt() -> None:
    m = retrying_machine()
    answer(m, hy.Map("a", [10, 11, 12]))
    m.step(CheckpointSaved())
    held = m.step(TaskOutcome(EX, TaskKey("a", 0), False, error=RETRYABLE))
    retries = [c for c in held if isinstance(c, ScheduleRetry)]
    assert [(c.key, c.attempt, c.seconds) for c in retries] == [(TaskKey("a", 0), 2, 0.5)]
    assert not any(isinstance(c, (Dispatch, RecordResult)) for c in held)
    emitted = [c.data for c in held if isinstance(c, Emit) and c.type == "node_retrying"]
    assert emitted and emitted[0]["item"] == 0 and emitted[0]["attempt"] == 2
    # The held item keeps its place in the window: item 2 takes item 1's place only.
    assert [c.key for c in m.step(ok(1)) if isinstance(c, Dispatch)] == [TaskKey("a", 2)]
    resent = [c for c in m.step(RetryDue(EX, TaskKey("a", 0))) if isinstance(c, Dispatch)]
    assert [(c.key, c.attempt, c.input, c.history) for c in resent] == [
        (TaskKey("a", 0), 2, 10, ("Transient",))]
    assert m.step(RetryDue(EX, TaskKey("a", 0))) == []  # once
    assert not any(isinstance(c, (Dispatch, CloseMap)) for c in m.step(ok(2)))
    assert any(isinstance(c, CloseMap) for c in m.step(ok(0)))


def test_a_map_item_failing_its_last_attempt_fails_the_step() -> None:
    m = retrying_machine(max_attempts=2)
    answer(m, hy.Map("a", [10, 11]))
    m.step(CheckpointSaved())
    m.step(TaskOutcome(EX, TaskKey("a", 1), False, error=RETRYABLE))
    m.step(RetryDue(EX, TaskKey("a", 1)))
    final = m.step(TaskOutcome(EX, TaskKey("a", 1), False, error=RETRYABLE))
    assert code(final) == "node_failed"
    assert any(isinstance(c, CancelTask) and c.key == TaskKey("a", 0) for c in final)


def test_a_recovered_map_item_waiting_for_its_retry_is_held_first() -> None:
    from hayata_py._invocation.retry import RetryPlan
    m = retrying_machine(max_attempts=3)
    cmds = m.step(Resume(EX, ("a",), [10, 11, 12], map=True, items_to_run={2: 1},
                         items_reused={0: {"i": 0}},
                         items_retry={1: RetryPlan(2, 0.25, ("Transient",))}))
    assert [(c.key, c.attempt, c.seconds) for c in cmds if isinstance(c, ScheduleRetry)] == [
        (TaskKey("a", 1), 2, 0.25)]
    assert [c.key for c in cmds if isinstance(c, Dispatch)] == [TaskKey("a", 2)]
    opened = [c for c in cmds if isinstance(c, OpenMap)]
    assert opened and opened[0].edges == 2
    resent = [c for c in m.step(RetryDue(EX, TaskKey("a", 1))) if isinstance(c, Dispatch)]
    assert [(c.key, c.attempt) for c in resent] == [(TaskKey("a", 1), 2)]
