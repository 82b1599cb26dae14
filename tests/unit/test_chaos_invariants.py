"""The invariant checker on crafted observations: it passes a clean one and
names each rule when that rule is broken."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from hayata_py.store import TaskClass
from tests.chaos.invariants import (
    Observation,
    Recovery,
    Task,
    ThreadObservation,
    ThreadRun,
    check,
    check_thread,
    orphans,
    parse_effects,
)

pytestmark = pytest.mark.timeout(30)

DONE = Task("t1", "a", "completed", 1, TaskClass.COMPLETED, {"a": 1}, "i:0")
MAYBE = Task("t2", "b", "started", 1, TaskClass.UNCERTAIN, None, "i:1")
RESOLVED = Task("t2", "b", "completed", 1, TaskClass.COMPLETED, {"r": 1}, "i:1")


def effects(**counts: int) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for key, n in counts.items():
        event, tid = key.split("_")
        out[(event, tid)] = n
    return out


def clean() -> Observation:
    seen = effects(start_t1=1, end_t1=1, start_t2=1)
    return Observation("i", (DONE, MAYBE), seen, (DONE, RESOLVED), seen, Recovery.RESOLVED, 1,
                       "completed", "i:1", ("t2",), seen, {10: 1, 11: 10, 12: 11}, 10)


def rules(obs: Observation) -> set[str]:
    return {v.rule for v in check(obs)}


def test_a_clean_observation_has_no_violation() -> None:
    assert check(clean()) == []
    log = ((1, "invocation_started", {"input": 1}), (2, "node_started", {"node_id": "a"}))
    # A subscriber that saw a prefix of the log (the rest lost with a crash of the
    # caller, or not sent yet) agrees with it.
    assert check(dataclasses.replace(clean(), events=log, live_events=log[:1])) == []


@pytest.mark.parametrize(("change", "rule"), [
    ({"tasks_after": (dataclasses.replace(DONE, result={"a": 2}), RESOLVED)},
     "completed_result_lost"),
    ({"tasks_after": (RESOLVED,)}, "completed_result_lost"),
    ({"effects_after": effects(start_t1=2, end_t1=2, start_t2=1)}, "completed_task_ran_twice"),
    ({"effects_at_fault": effects(start_t1=1, start_t2=1)}, "misclassified"),
    ({"tasks_at_fault": (DONE, dataclasses.replace(MAYBE, status="scheduled", attempt=0,
                                                   klass=TaskClass.NOT_STARTED))},
     "misclassified"),
    ({"effects_after": effects(start_t1=1, end_t1=1, start_t2=1, start_t9=1)},
     "ran_unrecorded"),
    ({"refused_task_ids": ()}, "refusal_wrong_tasks"),
    ({"refused_task_ids": ("t1", "t2")}, "refusal_wrong_tasks"),
    ({"effects_at_refusal": effects(start_t1=1, end_t1=1, start_t2=2)},
     "refused_recovery_ran_code"),
    ({"terminal_results": 2}, "result_count"),
    ({"terminal_results": 0}, "result_count"),
    ({"final_status": "running"}, "result_count"),
    ({"recovery": Recovery.RECOVERABLE}, "not_recoverable"),
    ({"processes": {10: 1, 11: 10, 12: 99}}, "unsupervised_process"),
    ({"accepted_next": False}, "no_new_runs"),
    ({"final_status": "failed", "final_error": "store_unavailable"},
     "refused_write_failed_run"),
    ({"events": ((1, "invocation_started", {}), (3, "invocation_completed", {}))},
     "event_log_gap"),
    ({"events": ((2, "invocation_started", {}),)}, "event_log_gap"),
    ({"events": ((1, "invocation_started", {}),), "live_events": ((2, "node_started", {}),)},
     "event_log_disagrees"),
    ({"events": ((1, "invocation_started", {"input": 1}),),
      "live_events": ((1, "invocation_started", {"input": 2}),)}, "event_log_disagrees"),
])
def test_each_broken_rule_is_named(change: dict[str, object], rule: str) -> None:
    assert rule in rules(dataclasses.replace(clean(), **change))  # type: ignore[arg-type]


def test_a_refused_recovery_that_ran_code_names_the_lines() -> None:
    obs = dataclasses.replace(clean(), effects_at_refusal=effects(start_t1=1, end_t1=1,
                                                                  start_t2=1, end_t2=1))
    (found,) = check(obs)
    assert found.rule == "refused_recovery_ran_code"
    assert found.detail.endswith("recovery: end t2: 0 -> 1"), found.detail
    (unread,) = check(dataclasses.replace(clean(), effects_at_refusal=None))
    assert unread.detail.endswith("not read at the refusal"), unread.detail


def test_a_resolved_task_may_never_have_started() -> None:
    """Found by the long campaign (seed 20261201, fault 438 on SQLite): a task
    killed before its node wrote ``start``, resolved by the user, is completed
    with no start line; that is no second run."""
    never = effects(start_t1=1, end_t1=1)
    resolved = dataclasses.replace(RESOLVED, resolved=True)
    obs = dataclasses.replace(clean(), effects_at_fault=never, effects_after=never,
                              effects_at_refusal=never, tasks_after=(DONE, resolved))
    assert check(obs) == []
    assert "completed_task_ran_twice" in rules(dataclasses.replace(
        obs, tasks_after=(DONE, dataclasses.replace(resolved, resolved=False))))


def test_orphans_are_processes_whose_parent_is_outside() -> None:
    assert orphans({10: 1, 11: 10, 12: 11}, 10) == []
    assert orphans({10: 1, 11: 10, 13: 1}, 10) == [13]


def test_parse_effects_counts_lines_and_ignores_a_torn_one() -> None:
    text = "start t1 a 5\nend t1 a 5\nstart t2 b 6\nsta"
    assert parse_effects(text) == effects(start_t1=1, end_t1=1, start_t2=1)


def takeover() -> Observation:
    """A clean takeover at t=100: the old instance "old" started t2 before it
    (pid 7), the new one resolved it."""
    old_maybe = dataclasses.replace(MAYBE, system_instance="old", started_at=99.0)
    resolved = dataclasses.replace(RESOLVED, system_instance="old", started_at=99.0,
                                   finished_at=101.0, resolved=True)
    return dataclasses.replace(
        clean(), tasks_after=(DONE, resolved), replaced_instance="old", replaced_at=100.0,
        tasks_at_takeover=(DONE, old_maybe), replaced_pids=frozenset({7}),
        effects_after_takeover=(("start", "t2", 7), ("end", "t2", 7), ("start", "t3", 8)))


def test_a_clean_takeover_has_no_violation() -> None:
    assert check(takeover()) == []


@pytest.mark.parametrize("change", [
    # the old instance started a task after the takeover
    {"tasks_after": (DONE, dataclasses.replace(RESOLVED, system_instance="old",
                                               started_at=100.5, finished_at=101.0))},
    # its completion landed after the takeover (not a resolve_task by the new owner)
    {"tasks_after": (DONE, dataclasses.replace(RESOLVED, system_instance="old",
                                               started_at=99.0, finished_at=101.0))},
    # a process of the old instance started a task it had not begun before
    {"effects_after_takeover": (("start", "t3", 7),)},
])
def test_a_write_by_a_replaced_instance_is_named(change: dict[str, object]) -> None:
    obs = dataclasses.replace(takeover(), **change)  # type: ignore[arg-type]
    assert "replaced_instance_wrote" in rules(obs)
    assert "replaced_instance_wrote" not in rules(dataclasses.replace(
        obs, replaced_instance=None))


# -- threads (the concurrent campaign) ---------------------------------------------------

def _thread(**changes: object) -> ThreadObservation:
    """Three runs on a thread: two completed (the second's counter resolved by
    hand, so not counted), one failed; the thread idle."""
    runs = (ThreadRun("i1", "completed", True, 1.0, 2.0),
            ThreadRun("i2", "completed", False, 2.5, 3.0),
            ThreadRun("i3", "failed", True, 3.5, 4.0))
    base = ThreadObservation("t", runs, 2, {"count": 1, "seen": ["i1"]}, "idle", (),
                             (("i3", "failed"), ("i2", "completed"), ("i1", "completed")))
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def thread_rules(obs: ThreadObservation) -> set[str]:
    return {v.rule for v in check_thread(obs)}


def test_a_clean_thread_has_no_violation() -> None:
    assert check_thread(_thread()) == []


@pytest.mark.parametrize(("changes", "rule"), [
    ({"status": "running"}, "thread_stuck"),
    ({"queued": ("i4",)}, "thread_stuck"),
    ({"version": 3}, "thread_version"),            # a failed run counted as completed
    ({"version": 1}, "thread_version"),            # a completed run lost
    ({"state": {"count": 2, "seen": ["i1", "i1"]}}, "thread_state"),  # counted twice
    ({"state": {"count": 0, "seen": []}}, "thread_state"),            # an increment lost
    ({"state": {"count": 2, "seen": ["i1", "i3"]}}, "thread_state"),  # a failed run's state kept
    ({"invocations": (("i2", "completed"), ("i1", "completed"))}, "thread_invocations"),
])
def test_each_thread_rule_can_fail(changes: dict[str, object], rule: str) -> None:
    assert rule in thread_rules(_thread(**changes))


def test_runs_on_a_thread_that_overlap_or_never_end_are_named() -> None:
    overlapping = (*_thread().runs[:2], ThreadRun("i3", "failed", True, 2.9, 4.0))
    assert thread_rules(_thread(runs=overlapping)) == {"thread_overlap"}
    lost = (*_thread().runs[:2], ThreadRun("i3", "lost", False))
    assert "thread_run_lost" in thread_rules(_thread(runs=lost))


def test_only_the_newest_invocations_are_compared_with_the_listing() -> None:
    listed = (("i3", "failed"), ("i2", "completed"))
    assert check_thread(_thread(invocations=listed, listed_max=2)) == []
