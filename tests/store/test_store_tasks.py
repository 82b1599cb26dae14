"""Conformance: task records - lifecycle, idempotent replay, fencing, classification."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from hayata_py._errors import EncodingError, StaleWriter, StoreError
from hayata_py.store import SqlTaskStore, TaskClass, TaskRecord, classify_execution
from tests.store.conftest import FakeClock
from tests.store.util import invocation, task


def _running(store: SqlTaskStore) -> int:
    return store.create_invocation(invocation(), owner="o1")


def _code(fn: Callable[[], Any]) -> str:
    with pytest.raises(StoreError) as info:
        fn()
    return info.value.code


def _get(store: SqlTaskStore, t: TaskRecord) -> TaskRecord:
    got = store.get_task(t.task_id)
    assert got is not None
    return got


def test_task_lifecycle(store: SqlTaskStore, clock: FakeClock) -> None:
    """scheduled -> started -> completed, with timestamps from the clock."""
    token = _running(store)
    t = task("a")
    store.schedule_tasks([t], token=token)
    assert _get(store, t).status == "scheduled"
    clock.advance(1)
    started = store.mark_started(t.task_id, token=token, system_instance="sys-1", attempt=1)
    assert (started.status, started.attempt, started.system_instance) == ("started", 1, "sys-1")
    assert started.started_at == clock.now
    clock.advance(1)
    store.mark_completed(t.task_id, token=token, result={"ok": [1, 2]})
    done = _get(store, t)
    assert (done.status, done.result, done.finished_at) == ("completed", {"ok": [1, 2]}, clock.now)
    assert done.input == {"node": "a"} and not done.resolved


def test_task_failure_recorded(store: SqlTaskStore) -> None:
    """mark_failed stores the error dict and status failed."""
    token = _running(store)
    t = task("a")
    store.schedule_tasks([t], token=token)
    store.mark_started(t.task_id, token=token, system_instance=None, attempt=1)
    error = {"code": "boom", "message": "m", "details": {}}
    store.mark_failed(t.task_id, token=token, error=error)
    assert (_get(store, t).status, _get(store, t).error) == ("failed", error)


def test_schedule_is_idempotent(store: SqlTaskStore) -> None:
    """Re-scheduling existing ids changes nothing, even with other contents."""
    token = _running(store)
    store.schedule_tasks([task("a"), task("b", branch=1)], token=token)
    store.mark_started(task("a").task_id, token=token, system_instance="s", attempt=1)
    store.schedule_tasks([task("a", input="new"), task("b", input="new")], token=token)
    got = store.get_tasks("inv-1")
    assert [(r.node_id, r.status, r.input) for r in got] == [
        ("a", "started", {"node": "a"}),
        ("b", "scheduled", {"node": "b"}),
    ]


def test_completed_never_overwritten(store: SqlTaskStore) -> None:
    """A completed task refuses other completions, failures and new starts."""
    token = _running(store)
    t = task("a")
    store.mark_started(t.task_id, token=token, system_instance="s", attempt=1, task=t)
    store.mark_completed(t.task_id, token=token, result=1)
    assert _code(lambda: store.mark_completed(t.task_id, token=token, result=2)) == (
        "task_finished"
    )
    assert _code(lambda: store.mark_failed(t.task_id, token=token, error={})) == "task_finished"
    assert (
        _code(lambda: store.mark_started(t.task_id, token=token, system_instance="s", attempt=2))
        == "task_finished"
    )
    got = _get(store, t)
    assert (got.status, got.result, got.attempt) == ("completed", 1, 1)


def test_identical_completion_is_noop(store: SqlTaskStore) -> None:
    """Repeating the same completion (a replayed write) succeeds and changes nothing."""
    token = _running(store)
    t = task("a")
    store.mark_started(t.task_id, token=token, system_instance="s", attempt=1, task=t)
    store.mark_completed(t.task_id, token=token, result={"r": 1})
    store.mark_completed(t.task_id, token=token, result={"r": 1})
    assert _get(store, t).result == {"r": 1}


def test_failed_never_overwritten(store: SqlTaskStore) -> None:
    """A failed task refuses completion and restarts."""
    token = _running(store)
    t = task("a")
    store.schedule_tasks([t], token=token)
    store.mark_failed(t.task_id, token=token, error={"code": "x"})
    assert _code(lambda: store.mark_completed(t.task_id, token=token, result=1)) == (
        "task_finished"
    )
    assert (
        _code(lambda: store.mark_started(t.task_id, token=token, system_instance="s", attempt=2))
        == "task_finished"
    )
    assert _get(store, t).status == "failed"


def test_complete_requires_started(store: SqlTaskStore) -> None:
    """A scheduled task cannot be completed without being started."""
    token = _running(store)
    t = task("a")
    store.schedule_tasks([t], token=token)
    assert _code(lambda: store.mark_completed(t.task_id, token=token, result=1)) == (
        "task_not_started"
    )


def test_mark_started_creates_missing_row(store: SqlTaskStore) -> None:
    """mark_started with a task record creates it; without one it is task_not_found."""
    token = _running(store)
    t = task("a", branch=2)
    assert (
        _code(lambda: store.mark_started(t.task_id, token=token, system_instance="s", attempt=1))
        == "task_not_found"
    )
    got = store.mark_started(t.task_id, token=token, system_instance="s", attempt=1, task=t)
    assert (got.status, got.branch_index, got.input) == ("started", 2, {"node": "a"})


def test_rerun_needs_increasing_attempt(store: SqlTaskStore) -> None:
    """An uncertain task restarts only with a higher attempt; an identical repeat is a no-op."""
    token = _running(store)
    t = task("a")
    store.mark_started(t.task_id, token=token, system_instance="s1", attempt=1, task=t)
    same = store.mark_started(t.task_id, token=token, system_instance="s1", attempt=1)
    assert same.attempt == 1
    assert (
        _code(lambda: store.mark_started(t.task_id, token=token, system_instance="s2", attempt=1))
        == "attempt_not_increasing"
    )
    again = store.mark_started(t.task_id, token=token, system_instance="s2", attempt=2)
    assert (again.attempt, again.system_instance) == (2, "s2")


def test_resolve_only_from_started(store: SqlTaskStore) -> None:
    """resolve_task completes a started task (resolved) and refuses other statuses."""
    token = _running(store)
    a, b = task("a"), task("b", branch=1)
    store.schedule_tasks([a, b], token=token)
    assert _code(lambda: store.resolve_task(a.task_id, result=1, token=token)) == (
        "task_not_uncertain"
    )
    store.mark_started(a.task_id, token=token, system_instance="s", attempt=1)
    store.resolve_task(a.task_id, result={"user": "yes"}, token=token)
    got = _get(store, a)
    assert (got.status, got.result, got.resolved) == ("completed", {"user": "yes"}, True)
    store.mark_started(b.task_id, token=token, system_instance="s", attempt=1)
    store.mark_completed(b.task_id, token=token, result=1)
    assert _code(lambda: store.resolve_task(b.task_id, result=2, token=token)) == (
        "task_not_uncertain"
    )


STALE_WRITES: dict[str, Callable[[SqlTaskStore, TaskRecord, int], Any]] = {
    "schedule": lambda s, t, tok: s.schedule_tasks([task("new")], token=tok),
    "start": lambda s, t, tok: s.mark_started(t.task_id, token=tok, system_instance="x", attempt=1),
    "complete": lambda s, t, tok: s.mark_completed(t.task_id, token=tok, result=1),
    "fail": lambda s, t, tok: s.mark_failed(t.task_id, token=tok, error={}),
    "resolve": lambda s, t, tok: s.resolve_task(t.task_id, result=1, token=tok),
}


@pytest.mark.parametrize("op", sorted(STALE_WRITES))
def test_stale_task_write_refused(store: SqlTaskStore, op: str) -> None:
    """Every task write with a superseded token raises StaleWriter and records nothing."""
    old = _running(store)
    t = task("a")
    store.mark_started(t.task_id, token=old, system_instance="s", attempt=1, task=t)
    store.claim_invocation("inv-1", owner="o2")
    before = store.get_tasks("inv-1")
    with pytest.raises(StaleWriter):
        STALE_WRITES[op](store, t, old)
    assert store.get_tasks("inv-1") == before


def test_schedule_on_terminal_refused(store: SqlTaskStore) -> None:
    """No task can be scheduled or started once the invocation is terminal."""
    token = _running(store)
    store.finish_invocation("inv-1", token=token, status="completed")
    assert _code(lambda: store.schedule_tasks([task("a")], token=token)) == "invocation_finished"
    assert (
        _code(
            lambda: store.mark_started(
                task("a").task_id, token=token, system_instance="s", attempt=1, task=task("a")
            )
        )
        == "invocation_finished"
    )
    assert store.get_tasks("inv-1") == []


def test_no_task_result_lands_after_its_invocation_ended(store: SqlTaskStore) -> None:
    """A late edge (frozen past its deadline, say) records nothing once the
    invocation has ended: the task stays as the end found it."""
    token = _running(store)
    for name in ("a", "b"):
        store.mark_started(task(name).task_id, token=token, system_instance="s", attempt=1,
                           task=task(name))
    store.finish_invocation("inv-1", token=token, status="failed",
                            error={"code": "execution_timeout"})
    before = store.get_tasks("inv-1")
    assert _code(lambda: store.mark_completed(task("a").task_id, token=token,
                                              result={"late": 1})) == "invocation_finished"
    assert _code(lambda: store.mark_failed(task("b").task_id, token=token,
                                           error={"code": "node_failed"})) \
        == "invocation_finished"
    assert store.get_tasks("inv-1") == before


def test_get_tasks_order_and_filters(store: SqlTaskStore) -> None:
    """get_tasks orders by step then branch_index and filters by execution and step."""
    token = _running(store)
    store.schedule_tasks(
        [
            task("c", step=1, branch=1, execution_id="ex-1"),
            task("b", step=0, branch=1),
            task("a", step=1, branch=0, execution_id="ex-1"),
            task("z", step=0, branch=0),
        ],
        token=token,
    )
    assert [r.node_id for r in store.get_tasks("inv-1")] == ["z", "b", "a", "c"]
    assert [r.node_id for r in store.get_tasks("inv-1", execution_id="ex-1")] == ["a", "c"]
    assert [r.node_id for r in store.get_tasks("inv-1", step=0)] == ["z", "b"]
    assert store.get_tasks("other") == []


def test_task_encoding_error_writes_nothing(store: SqlTaskStore) -> None:
    """An unencodable result names its key and leaves the task started."""
    token = _running(store)
    t = task("a")
    store.mark_started(t.task_id, token=token, system_instance="s", attempt=1, task=t)
    with pytest.raises(EncodingError) as info:
        store.mark_completed(t.task_id, token=token, result={"rows": [1, object()]})
    assert info.value.details["key"] == "result.rows[1]"
    assert _get(store, t).status == "started"


def test_schedule_mixed_invocations_refused(store: SqlTaskStore) -> None:
    """schedule_tasks refuses tasks of several invocations in one call."""
    token = _running(store)
    mixed = [task("a"), task("b", invocation_id="inv-2")]
    assert _code(lambda: store.schedule_tasks(mixed, token=token)) == "invalid_argument"


def test_load_and_classify_execution(store: SqlTaskStore) -> None:
    """Records read back classify into reuse / run / uncertain as recovery needs."""
    token = _running(store)
    nodes = ["a", "b", "c", "d"]
    store.schedule_tasks([task(n, branch=i) for i, n in enumerate(nodes)], token=token)
    for n in ("a", "b", "c"):
        store.mark_started(task(n).task_id, token=token, system_instance="s", attempt=1)
    store.mark_completed(task("a").task_id, token=token, result={"a": 1})
    token = store.claim_invocation("inv-1", owner="recovery")
    records = store.get_tasks("inv-1", execution_id="ex-0")
    out = classify_execution(nodes, records, idempotent_nodes={"c"})
    assert out.classes == {
        "a": TaskClass.COMPLETED,
        "b": TaskClass.UNCERTAIN,
        "c": TaskClass.RERUN,
        "d": TaskClass.NOT_STARTED,
    }
    assert dict(out.reuse) == {"a": {"a": 1}} and out.to_run == ("c", "d")
    assert out.uncertain_task_ids == (task("b").task_id,)
