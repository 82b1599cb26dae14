"""Retry decisions without processes: RetryPolicy validation, the delay, the plan
after a failure or a recovery, and the machine's retry paths (tables and
hypothesis)."""

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
    CheckpointSaved,
    Command,
    DeadlinePassed,
    Dispatch,
    DownCause,
    Emit,
    Invocation,
    NodeDown,
    PartialResult,
    PolicyAnswered,
    RecordResult,
    Resume,
    RetryDue,
    RetryPlan,
    Rules,
    ScheduleRetry,
    Seed,
    TaskKey,
    TaskOutcome,
)
from hayata_py._invocation import retry as r

A, B = TaskKey("a"), TaskKey("b")
EX = "inv:0"


def failed(kind: str = "Transient", retryable: bool = True, attempts: list[str] | None = None
           ) -> ErrorInfo:
    return ErrorInfo("node_failed", f"{kind}: x", {"node_id": "a", "type": kind,
                     "retryable": retryable, "attempts": attempts or [kind]})


POLICY = hy.RetryPolicy(max_attempts=3, initial_interval=1.0, backoff=2.0, jitter=False)


# -- RetryPolicy ---------------------------------------------------------------------


@pytest.mark.parametrize(("fields", "field"), [
    ({"max_attempts": 0}, "max_attempts"), ({"max_attempts": True}, "max_attempts"),
    ({"max_attempts": 2.0}, "max_attempts"), ({"initial_interval": -1}, "initial_interval"),
    ({"initial_interval": float("nan")}, "initial_interval"), ({"backoff": 0.5}, "backoff"),
    ({"max_interval": 0.1, "initial_interval": 1.0}, "max_interval"),
    ({"jitter": 1}, "jitter"), ({"retry_on": ()}, "retry_on"),
    ({"retry_on": (int,)}, "retry_on"), ({"retry_on": ("no_colon",)}, "retry_on"),
    ({"retry_on": 3}, "retry_on"),
])
def test_a_bad_retry_policy_field_is_named(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(hy.ConfigError) as err:
        hy.RetryPolicy(**fields)
    assert err.value.details["field"] == field


def test_retry_policy_is_frozen_with_documented_defaults() -> None:
    policy = hy.RetryPolicy()
    assert (policy.max_attempts, policy.initial_interval, policy.backoff, policy.max_interval,
            policy.jitter, policy.retry_on) == (3, 0.5, 2.0, 30.0, True, (Exception,))
    with pytest.raises(AttributeError):
        policy.max_attempts = 5  # type: ignore[misc]
    assert hy.RetryPolicy(retry_on=ValueError).retry_on == (ValueError,)


def test_delays_grow_by_backoff_up_to_max_interval() -> None:
    policy = hy.RetryPolicy(initial_interval=0.5, backoff=3.0, max_interval=5.0, jitter=False)
    assert [policy.delay(a) for a in (1, 2, 3, 4)] == [0.5, 1.5, 4.5, 5.0]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 10**6), st.floats(0, 100), st.floats(1, 1e6), st.text(max_size=8))
def test_jittered_delay_is_bounded_and_the_same_after_a_restart(
        attempt: int, initial: float, backoff: float, seed: str) -> None:
    policy = hy.RetryPolicy(initial_interval=initial, backoff=backoff,
                            max_interval=max(initial, 60.0))
    plain = hy.RetryPolicy(initial_interval=initial, backoff=backoff,
                           max_interval=max(initial, 60.0), jitter=False).delay(attempt)
    delay = policy.delay(attempt, seed)
    assert plain * 0.5 <= delay <= plain <= max(initial, 60.0)
    assert delay == policy.delay(attempt, seed)


# -- plans ---------------------------------------------------------------------------


@pytest.mark.parametrize(("policy", "error", "attempt", "expected"), [
    (None, failed(), 1, None),
    (POLICY, failed(retryable=False), 1, None),
    (POLICY, ErrorInfo("invalid_node_result", "x", {"node_id": "a"}), 1, None),
    (POLICY, ErrorInfo("node_failed", "edge died", {"node_id": "a"}), 1, None),
    (POLICY, ErrorInfo("store_unavailable", "x", {}), 1, None),
    (POLICY, failed(), 3, None),
    (POLICY, failed(), 1, RetryPlan(2, 1.0, ("Transient",))),
    (POLICY, failed(attempts=["A", "B"]), 2, RetryPlan(3, 2.0, ("A", "B"))),
])
def test_a_retry_follows_only_a_known_retryable_failure(
        policy: hy.RetryPolicy | None, error: ErrorInfo, attempt: int,
        expected: RetryPlan | None) -> None:
    assert r.plan(policy, error, attempt, "task-1") == expected


@pytest.mark.parametrize(("failed_at", "now", "left"), [
    (100.0, 100.0, 1.0), (100.0, 100.4, 0.6), (100.0, 101.0, 0.0), (100.0, 500.0, 0.0),
    (100.0, 50.0, 1.0),  # a clock behind the record never waits longer than the delay
    (None, 100.0, 1.0),
])
def test_a_recovered_backoff_waits_what_is_left(failed_at: float | None, now: float,
                                                left: float) -> None:
    plan = r.after_recovery(POLICY, failed(), 1, "t", failed_at, now)
    assert plan is not None and plan.attempt == 2
    assert plan.delay == pytest.approx(left)
    assert r.after_recovery(POLICY, failed(), 3, "t", failed_at, now) is None


# -- the machine ---------------------------------------------------------------------


def running(nodes: Any = "a", retry: dict[str, hy.RetryPolicy] | None = None) -> Invocation:
    m = Invocation(Seed("inv", "in", {}, stream=True),
                   Rules(frozenset({"a", "b"}), 5, 2.0, retry=retry or {"a": POLICY}))
    m.step(Begin())
    m.step(PolicyAnswered(hy.Next(nodes, 1)))
    m.step(CheckpointSaved())
    return m


def short(cmds: list[Command]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for c in cmds:
        if isinstance(c, Emit):
            out.append(("emit", c.type, c.data.get("attempt")))
        elif isinstance(c, Dispatch):
            out.append(("dispatch", c.key.node_id, c.attempt, c.history))
        elif isinstance(c, ScheduleRetry):
            out.append(("retry", c.key.node_id, c.attempt, c.seconds))
        elif isinstance(c, ArmDeadline):
            out.append(("deadline", c.key))
        elif isinstance(c, RecordResult):
            out.append(("record", c.ok, c.error.code if c.error else None))
        else:
            out.append((type(c).__name__,))
    return out


def fail(m: Invocation, key: TaskKey = A, error: ErrorInfo | None = None) -> list[Command]:
    return m.step(TaskOutcome(EX, key, False, error=error or failed()))


def test_a_retryable_failure_waits_then_runs_the_next_attempt() -> None:
    m = running()
    assert short(fail(m)) == [("emit", "node_retrying", 2), ("retry", "a", 2, 1.0)]
    # While it waits: its deadline, node's death, a late partial change nothing.
    assert m.step(DeadlinePassed(EX, A)) == []
    assert m.step(NodeDown("a", DownCause.CRASHED, 1, "killed")) == []
    assert m.step(PartialResult(EX, A, 1, "e", {"p": 1})) == []
    assert m.step(RetryDue("inv:9", A)) == []
    assert short(m.step(RetryDue(EX, A))) == [
        ("emit", "node_started", 2), ("dispatch", "a", 2, ("Transient",)), ("deadline", A)]
    assert m.step(RetryDue(EX, A)) == []  # a second due does nothing
    assert short(fail(m, error=failed(attempts=["Transient"] * 2)))[1] == (
        "retry", "a", 3, 2.0)
    m.step(RetryDue(EX, A))
    # The last attempt's failure is final and names every attempt.
    final = fail(m, error=failed(attempts=["Transient"] * 3))
    assert short(final) == [("record", False, "node_failed")]
    assert isinstance(final[0], RecordResult) and final[0].error is not None
    assert final[0].error.details["attempts"] == ["Transient"] * 3


def test_a_node_without_a_policy_fails_at_once() -> None:
    m = running("b")
    assert short(fail(m, B)) == [("record", False, "node_failed")]


def test_a_retried_branch_leaves_its_sibling_running() -> None:
    m = running(["a", "b"])
    assert short(fail(m)) == [("emit", "node_retrying", 2), ("retry", "a", 2, 1.0)]
    assert short(m.step(TaskOutcome(EX, B, True, {"b": 1}))) == [
        ("emit", "node_completed", None)]
    m.step(RetryDue(EX, A))
    out = short(m.step(TaskOutcome(EX, A, True, {"a": 1})))
    assert out == [("emit", "node_completed", None), ("CallPolicy",)]
    assert m.parallel_results == [{"a": 1}, {"b": 1}]


def test_a_sibling_failing_during_the_backoff_ends_the_step() -> None:
    m = running(["a", "b"])
    fail(m)
    out = short(fail(m, B))
    assert ("record", False, "node_failed") in out


def test_recovery_resumes_a_waiting_retry() -> None:
    m = Invocation(Seed("inv", "in", {}, stream=True, step=0),
                   Rules(frozenset({"a", "b"}), 5, 2.0, retry={"a": POLICY}))
    out = m.step(Resume(EX, ("a", "b"), 1, True, to_run={"b": 1},
                        retry={"a": RetryPlan(2, 0.3, ("Transient",))}))
    assert ("retry", "a", 2, 0.3) in short(out)
    assert ("dispatch", "b", 1, ()) in short(out)
    assert short(m.step(RetryDue(EX, A)))[1] == ("dispatch", "a", 2, ("Transient",))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.integers(0, 8))
def test_attempts_are_numbered_and_bounded(max_attempts: int, failures: int) -> None:
    policy = hy.RetryPolicy(max_attempts=max_attempts, initial_interval=0.0, jitter=False)
    m = running(retry={"a": policy})
    attempts, history = [1], ["Transient"]
    for _ in range(failures):
        out = fail(m, error=failed(attempts=list(history)))
        if any(isinstance(c, RecordResult) for c in out):
            break
        dispatched = [c for c in m.step(RetryDue(EX, A)) if isinstance(c, Dispatch)]
        assert len(dispatched) == 1 and dispatched[0].history == tuple(history)
        attempts.append(dispatched[0].attempt)
        history.append("Transient")
    assert attempts == list(range(1, len(attempts) + 1))
    assert len(attempts) == min(max_attempts, failures + 1)
