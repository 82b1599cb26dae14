"""The agent's deadline heap without processes (``hayata_py._rules.deadlines``),
on a clock the test moves: what comes due, once, in order; what re-arming,
a new execution and an ended invocation drop; how few wakeups it asks for."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hayata_py._rules.deadlines import Deadlines, Due, invocation_of


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def heap() -> tuple[Deadlines, Clock, list[tuple[timedelta, Any]]]:
    clock = Clock()
    wakeups: list[tuple[timedelta, Any]] = []
    return Deadlines(lambda delay, at: wakeups.append((delay, at)), clock), clock, wakeups


def test_entries_come_due_once_in_order() -> None:
    deadlines, clock, _ = heap()
    deadlines.arm_execution("a:1", 5.0, "x")
    deadlines.arm_retry("b:1", "y", 2.0)
    deadlines.arm_execution("c:1", 9.0, "z")
    assert deadlines.pop_due() == []
    clock.now += 6
    assert deadlines.pop_due() == [(Due.RETRY, ("b:1", "y")), (Due.DEADLINE, ("a:1", "x"))]
    assert deadlines.pop_due() == []
    assert deadlines.next_at() == 109.0
    clock.now += 10
    assert deadlines.pop_due() == [(Due.DEADLINE, ("c:1", "z"))]
    assert deadlines.next_at() == float("inf") and len(deadlines) == 0


def test_rearming_replaces_and_a_new_execution_drops_the_old_deadlines() -> None:
    deadlines, clock, _ = heap()
    deadlines.arm_execution("a:1", 1.0, "x")
    deadlines.arm_execution("a:1", 8.0, "x")  # re-armed later: the first is stale
    deadlines.arm_execution("a:1", 2.0, "y")
    deadlines.arm_retry("a:1", "x", 3.0)
    deadlines.arm_execution("a:2", 4.0, "x")  # the next step: a:1's deadlines go
    clock.now += 5
    assert deadlines.pop_due() == [(Due.RETRY, ("a:1", "x")), (Due.DEADLINE, ("a:2", "x"))]


def test_an_ended_invocation_fires_nothing() -> None:
    deadlines, clock, _ = heap()
    deadlines.arm_execution("a:1", 1.0, "x")
    deadlines.arm_retry("a:1", "y", 1.0)
    deadlines.arm_execution("b:1", 1.0, "x")
    deadlines.forget("a")
    clock.now += 2
    assert deadlines.pop_due() == [(Due.DEADLINE, ("b:1", "x"))]


def test_a_wakeup_is_asked_for_only_when_none_pending_fires_early_enough() -> None:
    deadlines, clock, wakeups = heap()
    deadlines.arm_execution("a:1", 5.0, "x")
    deadlines.arm_execution("b:1", 6.0, "x")  # the wakeup at 105 fires early enough
    deadlines.arm_execution("c:1", 5.005, "x")  # within 10 ms of it: no new one
    assert wakeups == [(timedelta(seconds=5.0), 105.0)]
    deadlines.arm_execution("d:1", 1.0, "x")  # earlier: a new wakeup
    assert wakeups[-1] == (timedelta(seconds=1.0), 101.0)
    deadlines.fired(101.0)
    clock.now = 101.0
    assert deadlines.pop_due() == [(Due.DEADLINE, ("d:1", "x"))]
    deadlines.rearm()
    assert len(wakeups) == 2  # 105 is still pending and is the next due


def test_renewal() -> None:
    deadlines, clock, wakeups = heap()
    assert not deadlines.renewal_due()
    deadlines.renew_in(3.0)
    assert wakeups == [(timedelta(seconds=3.0), 103.0)] and not deadlines.renewal_due()
    clock.now += 3
    assert deadlines.renewal_due()


def test_invocation_of() -> None:
    assert invocation_of("abc:12") == "abc"
    assert invocation_of("abc:comp:3") == "abc:comp"


ACTIONS = st.lists(st.one_of(
    st.tuples(st.just("deadline"), st.sampled_from("ab"), st.integers(1, 3),
              st.sampled_from("xy"), st.floats(0, 10)),
    st.tuples(st.just("retry"), st.sampled_from("ab"), st.integers(1, 3),
              st.sampled_from("xy"), st.floats(0, 10)),
    st.tuples(st.just("forget"), st.sampled_from("ab")),
    st.tuples(st.just("wait"), st.floats(0, 6)),
), max_size=40)


@settings(max_examples=200, deadline=None)
@given(ACTIONS)
def test_pop_due_agrees_with_a_plain_model(actions: list[tuple[Any, ...]]) -> None:
    """Each entry comes due once, at its latest due time, unless its invocation
    ended or moved on to another execution (deadlines only) meanwhile."""
    deadlines, clock, _ = heap()
    model: dict[tuple[Due, tuple[str, str]], float] = {}
    current: dict[str, str] = {}
    for action in actions:
        if action[0] in ("deadline", "retry"):
            _, iid, step, key, seconds = action
            execution = f"{iid}:{step}"
            if action[0] == "deadline":
                if current.get(iid) != execution:
                    current[iid] = execution
                    for entry in [e for e in model if e[0] is Due.DEADLINE
                                  and invocation_of(e[1][0]) == iid]:
                        del model[entry]
                deadlines.arm_execution(execution, seconds, key)
                model[(Due.DEADLINE, (execution, key))] = clock.now + seconds
            else:
                deadlines.arm_retry(execution, key, seconds)
                model[(Due.RETRY, (execution, key))] = clock.now + seconds
        elif action[0] == "forget":
            deadlines.forget(action[1])
            current.pop(action[1], None)
            for entry in [e for e in model if invocation_of(e[1][0]) == action[1]]:
                del model[entry]
        else:
            clock.now += action[1]
            due = deadlines.pop_due()
            expected = {e for e, at in model.items() if at <= clock.now}
            assert set(due) == expected and len(due) == len(expected)
            assert [model[e] for e in due] == sorted(model[e] for e in due)
            for entry in due:
                del model[entry]
        assert len(deadlines) == len(model)
