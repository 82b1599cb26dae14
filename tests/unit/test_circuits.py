"""Circuit breakers without processes: CircuitBreaker validation, the breaker's
transitions on a controllable clock (tables), the retry plan of a refusal, and
the machine's side (events in its sequence, tasks sent again on a close)."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hayata_py as hy
from hayata_py._circuit import CircuitStatus
from hayata_py._errors import ErrorInfo
from hayata_py._invocation import (
    ArmDeadline,
    Begin,
    CheckpointSaved,
    CircuitChanged,
    Command,
    Dispatch,
    Emit,
    Invocation,
    PolicyAnswered,
    RecordResult,
    RetryDue,
    RetryPlan,
    Rules,
    ScheduleRetry,
    Seed,
    TaskKey,
    TaskOutcome,
)
from hayata_py._invocation import retry as r
from hayata_py._rules.circuits import Circuits, Refusal, State


class Clock:
    """Monotonic seconds the test sets."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# -- CircuitBreaker -----------------------------------------------------------------


@pytest.mark.parametrize(("fields", "field"), [
    ({"failures": 0}, "failures"), ({"failures": -1}, "failures"),
    ({"failures": True}, "failures"), ({"failures": 2.0}, "failures"),
    ({"failures": "5"}, "failures"),
    ({"window": 0}, "window"), ({"window": -1.0}, "window"),
    ({"window": float("inf")}, "window"), ({"window": float("nan")}, "window"),
    ({"window": "60"}, "window"), ({"window": False}, "window"),
    ({"cool_down": 0.0}, "cool_down"), ({"cool_down": float("inf")}, "cool_down"),
    ({"cool_down": None}, "cool_down"), ({"cool_down": 1e12}, "cool_down"),
])
def test_a_bad_circuit_breaker_field_is_named(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(hy.ConfigError) as err:
        hy.CircuitBreaker(**fields)
    assert err.value.details["field"] == field


def test_circuit_breaker_is_frozen_with_documented_defaults() -> None:
    breaker = hy.CircuitBreaker()
    assert (breaker.failures, breaker.window, breaker.cool_down) == (5, 60.0, 30.0)
    assert isinstance(hy.CircuitBreaker(window=2).window, float)
    with pytest.raises(AttributeError):
        breaker.failures = 3  # type: ignore[misc]


# -- the breaker ---------------------------------------------------------------------

BREAKER = hy.CircuitBreaker(failures=3, window=10, cool_down=5)
PROBE_TIMEOUT = 20.0


def circuits(clock: Clock) -> Circuits:
    return Circuits({"llm": BREAKER}, lambda node_id: PROBE_TIMEOUT, clock)


def drive(steps: list[tuple[Any, ...]]) -> list[Any]:
    """Run ``steps`` on a fresh breaker of ``llm``; what each step answered, shortly:
    ``("at", t)`` sets the clock; ``("admit", task)`` -> "go" or ("refused", left);
    ``("ok"|"fail"|"other", task)`` -> the changes ("opened"/"closed", failures);
    ``("release", task)``; ``("status",)`` -> (state, failures, retry_after)."""
    clock = Clock()
    c = circuits(clock)
    out: list[Any] = []
    for step in steps:
        kind = step[0]
        if kind == "at":
            clock.now = 100.0 + step[1]
            continue
        if kind == "admit":
            refusal = c.admit("llm", step[1])
            out.append("go" if refusal is None else ("refused", refusal.retry_after))
        elif kind in ("ok", "fail", "other"):
            code = {"ok": None, "fail": "node_failed", "other": "invalid_node_result"}[kind]
            changes = c.outcome("llm", step[1], kind == "ok", code)
            out.append([("opened" if ch.opened else "closed", ch.failures) for ch in changes])
        elif kind == "release":
            c.release("llm", step[1])
        else:
            (s,) = c.status()
            out.append((s.state, s.failures, s.retry_after))
    return out


@pytest.mark.parametrize(("steps", "answers"), [
    pytest.param([("fail", "t1"), ("fail", "t2"), ("status",), ("fail", "t3"), ("status",)],
                 [[], [], ("closed", 2, 0.0), [("opened", 3)], ("open", 3, 5.0)],
                 id="failures within the window open it"),
    pytest.param([("fail", "t1"), ("at", 6), ("fail", "t2"), ("at", 11), ("fail", "t3"),
                  ("status",)],
                 [[], [], [], ("closed", 2, 0.0)],
                 id="a failure older than the window no longer counts"),
    pytest.param([("ok", "t1"), ("other", "t2"), ("other", "t3"), ("other", "t4"),
                  ("admit", "t5")],
                 [[], [], [], [], "go"],
                 id="successes and failures that are not the node's count nothing"),
    pytest.param([("fail", "a"), ("fail", "b"), ("fail", "c"), ("at", 2), ("admit", "d"),
                  ("at", 4.5), ("admit", "d")],
                 [[], [], [("opened", 3)], ("refused", 3.0), ("refused", 0.5)],
                 id="open: refused with what is left of the cool-down"),
    pytest.param([("fail", "a"), ("fail", "b"), ("fail", "c"), ("at", 5), ("status",),
                  ("admit", "p"), ("admit", "q"), ("admit", "p")],
                 [[], [], [("opened", 3)], ("half_open", 3, 0.0), "go", ("refused", 5.0),
                  "go"],
                 id="after the cool-down one probe goes, the others wait"),
    pytest.param([("fail", "a"), ("fail", "b"), ("fail", "c"), ("at", 5), ("admit", "p"),
                  ("ok", "q"), ("ok", "p"), ("status",), ("admit", "q")],
                 [[], [], [("opened", 3)], "go", [], [("closed", 3)], ("closed", 0, 0.0),
                  "go"],
                 id="the probe's success closes it (another task's does not)"),
    pytest.param([("fail", "a"), ("fail", "b"), ("fail", "c"), ("at", 5), ("admit", "p"),
                  ("fail", "p"), ("at", 9), ("admit", "q"), ("at", 10), ("admit", "q")],
                 [[], [], [("opened", 3)], "go", [("opened", 1)], ("refused", 1.0), "go"],
                 id="the probe's failure opens it for another cool-down"),
    pytest.param([("fail", "a"), ("fail", "b"), ("fail", "c"), ("at", 5), ("admit", "p"),
                  ("release", "q"), ("admit", "q"), ("release", "p"), ("admit", "q")],
                 [[], [], [("opened", 3)], "go", ("refused", 5.0), "go"],
                 id="a cancelled probe lets the next task probe"),
    pytest.param([("fail", "a"), ("fail", "b"), ("fail", "c"), ("at", 5), ("admit", "p"),
                  ("at", 24.9), ("admit", "q"), ("at", 25), ("admit", "q")],
                 [[], [], [("opened", 3)], "go", ("refused", 5.0), "go"],
                 id="a probe out longer than its node's timeout is replaced"),
    pytest.param([("fail", "a"), ("fail", "b"), ("fail", "c"), ("at", 5), ("admit", "p"),
                  ("other", "p"), ("admit", "q")],
                 [[], [], [("opened", 3)], "go", [], "go"],
                 id="a probe that failed for another reason lets the next one probe"),
    pytest.param([("fail", "a"), ("fail", "b"), ("fail", "c"), ("fail", "d"), ("ok", "e"),
                  ("status",)],
                 [[], [], [("opened", 3)], [], [], ("open", 3, 5.0)],
                 id="outcomes of tasks out before it opened change nothing"),
])
def test_breaker_transitions(steps: list[tuple[Any, ...]], answers: list[Any]) -> None:
    assert drive(steps) == answers


operations = st.lists(st.one_of(
    st.tuples(st.just("at"), st.floats(0.0, 8.0)),
    st.tuples(st.sampled_from(["admit", "admit", "ok", "fail", "fail", "other", "release"]),
              st.sampled_from(["t1", "t2", "t3"]))), min_size=20, max_size=80)


@settings(max_examples=300, deadline=None)
@given(operations)
def test_any_interleaving_keeps_the_breaker_consistent(ops: list[tuple[Any, ...]]) -> None:
    """A close always follows an open (a failed probe opens it again: two opens in
    a row are fine, two closes never); a refusal never waits
    longer than the cool-down; at most one task is out as the probe until it
    reports or its node's timeout passes; while closed nothing is refused."""
    clock = Clock()
    c = circuits(clock)
    changes: list[bool] = []
    probes: dict[str, float] = {}  # admitted while not closed -> when
    for kind, value in ops:
        if kind == "at":
            clock.now += value
            continue
        was = c.breakers["llm"].state
        if kind == "admit":
            refusal = c.admit("llm", value)
            if was is State.CLOSED:
                assert refusal is None
            if refusal is not None:
                assert 0 < refusal.retry_after <= BREAKER.cool_down
                assert refusal.failures >= 1
            elif was is not State.CLOSED:
                live = {t for t, at in probes.items()
                        if t != value and clock.now < at + PROBE_TIMEOUT}
                assert not live, (value, live)
                probes = {value: clock.now}
        elif kind == "release":
            c.release("llm", value)
            probes.pop(value, None)
        else:
            code = {"ok": None, "fail": "node_failed", "other": "invalid_node_result"}[kind]
            for change in c.outcome("llm", value, kind == "ok", code):
                changes.append(change.opened)
                probes.clear()
            if value in probes and c.breakers["llm"].probe != value:
                probes.pop(value)
    assert not any(not a and not b for a, b in pairwise(changes))
    assert not changes or changes[0] is True
    (status,) = c.status()
    assert status.state in ("closed", "open", "half_open") and status.retry_after >= 0


def test_a_node_without_a_breaker_is_always_let_through() -> None:
    c = circuits(Clock())
    assert c.outcome("other", "t", False, "node_failed") == []
    assert c.admit("other", "t") is None
    assert c.status() == (CircuitStatus("llm", "closed", 0),)
    assert Circuits({}, lambda n: 1.0, Clock()).status() == ()


def test_the_refusal_is_a_recorded_failure_that_keeps_the_attempts() -> None:
    error = Refusal("llm", 2.5, 5, 30.0, State.OPEN).error("inv:0:llm", ("Transient",))
    assert error.code == "circuit_open"
    assert error.details == {"node_id": "llm", "task_id": "inv:0:llm", "retry_after": 2.5,
                             "failures": 5, "cool_down": 30.0, "attempts": ["Transient"]}
    assert "llm" in error.message and "open" in error.message
    assert r.history_of(error) == ("Transient",)


# -- the retry plan of a refusal -------------------------------------------------------

POLICY = hy.RetryPolicy(max_attempts=2, initial_interval=1.0, jitter=False)


def refusal(left: float = 2.5, attempts: tuple[str, ...] = ()) -> ErrorInfo:
    return Refusal("a", left, 5, 30.0, State.OPEN).error("t", attempts)


@pytest.mark.parametrize(("policy", "attempt", "plan"), [
    (None, 1, None),
    (POLICY, 1, RetryPlan(1, 2.5, (), circuit=True)),
    (POLICY, 2, RetryPlan(2, 2.5, (), circuit=True)),  # at max_attempts: still not spent
    (POLICY, 7, RetryPlan(7, 2.5, (), circuit=True)),
])
def test_a_refusal_waits_for_the_circuit_and_spends_no_attempt(
        policy: hy.RetryPolicy | None, attempt: int, plan: RetryPlan | None) -> None:
    assert r.plan(policy, refusal(), attempt, "t") == plan


def test_a_recovered_refusal_retries_the_refused_attempt_at_once() -> None:
    # Recorded with the attempt before the refused one (0: it never ran).
    found = r.after_recovery(POLICY, refusal(600.0, ("Transient",)), 1, "t", 50.0, 51.0)
    assert found == RetryPlan(2, 0.0, ("Transient",), circuit=True)
    assert r.after_recovery(None, refusal(), 0, "t", 50.0, 51.0) is None


@pytest.mark.parametrize("bad", [None, "3", float("nan"), True, -1.0])
def test_a_malformed_retry_after_waits_nothing(bad: Any) -> None:
    error = ErrorInfo("circuit_open", "x", {"retry_after": bad})
    assert r.circuit_wait(error) == 0.0


# -- the machine -------------------------------------------------------------------------

EX = "inv:0"
A, B = TaskKey("a"), TaskKey("b")


def running(nodes: Any = "a", retry: dict[str, hy.RetryPolicy] | None = None,
            stream: bool = True, durable: bool = True) -> Invocation:
    m = Invocation(Seed("inv", "in", {}, stream=stream),
                   Rules(frozenset({"a", "b"}), 5, 2.0, durable=durable,
                         retry={"a": POLICY} if retry is None else retry))
    m.step(Begin())
    m.step(PolicyAnswered(hy.Next(nodes, 1)))
    m.step(CheckpointSaved())
    return m


def short(cmds: list[Command]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for c in cmds:
        if isinstance(c, Emit):
            out.append(("emit", c.type, c.data))
        elif isinstance(c, Dispatch):
            out.append(("dispatch", c.key.node_id, c.attempt, c.retry))
        elif isinstance(c, ScheduleRetry):
            out.append(("retry", c.key.node_id, c.attempt, c.seconds))
        elif isinstance(c, ArmDeadline):
            out.append(("deadline",))
        elif isinstance(c, RecordResult):
            out.append(("record", c.ok, c.error.code if c.error else None))
        else:
            out.append((type(c).__name__,))
    return out


OPENED = CircuitChanged("a", True, 5, 30.0)
CLOSED = CircuitChanged("a", False, 5, 30.0)
DATA = {"node_id": "a", "failures": 5, "cool_down": 30.0}


def test_a_refused_task_waits_for_the_circuit_then_runs_the_same_attempt() -> None:
    m = running()
    out = short(m.step(TaskOutcome(EX, A, False, error=refusal())))
    assert out[1] == ("retry", "a", 1, 2.5)
    assert out[0][:2] == ("emit", "node_retrying")
    assert out[0][2]["attempt"] == 1 and out[0][2]["error"]["code"] == "circuit_open"
    assert short(m.step(RetryDue(EX, A))) == [
        ("emit", "node_started", {"node_id": "a", "execution_id": EX, "attempt": 1}),
        ("dispatch", "a", 1, True), ("deadline",)]
    # Refused again: still attempt 1, however often.
    for _ in range(3):
        assert short(m.step(TaskOutcome(EX, A, False, error=refusal())))[1] == (
            "retry", "a", 1, 2.5)
        m.step(RetryDue(EX, A))


def test_a_refused_task_without_a_policy_fails_the_invocation() -> None:
    m = running("b")
    assert short(m.step(TaskOutcome(EX, B, False, error=refusal()))) == [
        ("record", False, "circuit_open")]


def test_a_change_reaches_only_an_invocation_with_a_task_of_the_node() -> None:
    m = running("b")
    assert m.step(OPENED) == [] and m.step(CLOSED) == []
    m = running("a")
    assert short(m.step(OPENED)) == [("emit", "circuit_opened", DATA)]
    assert short(m.step(CLOSED)) == [("emit", "circuit_closed", DATA)]  # nothing waits
    seq = m.sequence
    m.step(TaskOutcome(EX, A, True, {"a": 1}))
    assert m.sequence == seq + 1  # node_completed: numbered on, no gap
    assert m.step(OPENED) == []  # deciding: no task of it out


def test_a_close_sends_at_once_the_tasks_that_wait_for_the_circuit() -> None:
    m = running(["a", "b"], retry={"a": POLICY, "b": POLICY})
    m.step(TaskOutcome(EX, A, False, error=refusal()))
    failed_b = ErrorInfo("node_failed", "x", {"retryable": True, "type": "Transient"})
    m.step(TaskOutcome(EX, B, False, error=failed_b))  # b waits for a backoff, not the circuit
    assert short(m.step(CLOSED)) == [
        ("emit", "circuit_closed", DATA),
        ("emit", "node_started", {"node_id": "a", "execution_id": EX, "attempt": 1}),
        ("dispatch", "a", 1, True), ("deadline",)]
    assert m.step(RetryDue(EX, A)) == []  # its timer fires later: nothing waits any more
    assert short(m.step(RetryDue(EX, B)))[1] == ("dispatch", "b", 2, True)


def test_without_streaming_a_close_still_sends_the_waiting_task() -> None:
    # Without a store (a durable agent logs every event, streamed or not).
    m = running(stream=False, durable=False)
    m.step(TaskOutcome(EX, A, False, error=refusal()))
    assert short(m.step(CLOSED)) == [("dispatch", "a", 1, True), ("deadline",)]


def test_the_listing_of_circuits() -> None:
    from hayata_py._circuit import as_json, summary

    circuits = (CircuitStatus("llm", "open", 5, 12.4), CircuitStatus("web", "half_open", 1))
    assert summary(circuits) == "llm open (5 failures, 12 s left), web half-open (1 failures)"
    assert summary(()) == "-" and as_json(()) == {}
    assert as_json(circuits) == {"circuits": [
        {"node_id": "llm", "state": "open", "failures": 5, "retry_after": 12.4},
        {"node_id": "web", "state": "half_open", "failures": 1, "retry_after": 0.0}]}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["refuse", "due", "open", "close"]), max_size=40))
def test_refusals_in_any_order_never_spend_an_attempt(ops: list[str]) -> None:
    """However refusals, retry timers and circuit changes interleave, the task is
    sent again as attempt 1 and never fails; its success ends the step."""
    m = running(retry={"a": hy.RetryPolicy(max_attempts=1)})  # not even one retry
    log: list[Command] = []
    out = True  # the task is on an edge (a refusal can only answer a send)
    for op in ops:
        if op == "refuse" and out:
            cmds = m.step(TaskOutcome(EX, A, False, error=refusal()))
        elif op == "due":
            cmds = m.step(RetryDue(EX, A))
        elif op in ("open", "close"):
            cmds = m.step(OPENED if op == "open" else CLOSED)
        else:
            continue
        log += cmds
        if any(isinstance(c, ScheduleRetry) for c in cmds):
            out = False
        if any(isinstance(c, Dispatch) for c in cmds):
            out = True
    if not out:
        log += m.step(RetryDue(EX, A))
    log += m.step(TaskOutcome(EX, A, True, {"a": 1}))
    assert all(c.attempt == 1 and c.retry for c in log if isinstance(c, Dispatch))
    assert not any(isinstance(c, RecordResult) for c in log)
    emits = [c for c in log if isinstance(c, Emit)]
    assert [e.sequence for e in emits] == list(range(emits[0].sequence,
                                                     emits[0].sequence + len(emits)))
    assert emits[-1].type == "node_completed"
    assert m.execution is None and m.step_no == 1
