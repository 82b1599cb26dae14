"""The edge's light task writer behaves exactly like the store's task writes.

:class:`TaskWriter` (``hayata_py/store/_fast/writer.py``) runs the store's fast
statements on a plain driver connection and hands every other case to the
full store. The store's own task-record conformance cases run here once more
with ``mark_started`` / ``mark_completed`` / ``mark_failed`` going through a
writer, on SQLite and PostgreSQL; and the common case must not open the full
store (else the edge would pay for an SQLAlchemy engine after all).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from hayata_py._errors import StaleWriter
from hayata_py.store import SqlTaskStore
from hayata_py.store._fast.writer import TaskWriter
from tests.store import test_store_tasks as cases
from tests.store.conftest import FakeClock
from tests.store.util import invocation, task


class _ThroughWriter:
    """The store, with its three task writes going through ``writer``."""

    def __init__(self, store: SqlTaskStore, writer: TaskWriter) -> None:
        self._store = store
        self.mark_started = writer.mark_started
        self.mark_completed = writer.mark_completed
        self.mark_failed = writer.mark_failed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@pytest.fixture
def writer(store_url: str, clock: FakeClock) -> Iterator[TaskWriter]:
    opened = TaskWriter(store_url, clock=clock)
    try:
        yield opened
    finally:
        opened.close()


def _cases() -> list[Callable[..., None]]:
    found = []
    for name, fn in inspect.getmembers(cases, inspect.isfunction):
        params = set(inspect.signature(fn).parameters)
        if name.startswith("test_") and params <= {"store", "clock"}:
            found.append(fn)
    return found


@pytest.mark.parametrize("case", _cases(), ids=lambda fn: fn.__name__)
def test_task_conformance_through_writer(case: Callable[..., None], store: SqlTaskStore,
                                         clock: FakeClock, writer: TaskWriter) -> None:
    """Each task-record conformance case of the store holds with the writer."""
    params = inspect.signature(case).parameters
    args = {"store": _ThroughWriter(store, writer), "clock": clock}
    case(**{k: v for k, v in args.items() if k in params})


@pytest.mark.parametrize("op", ["start", "complete", "fail"])
def test_stale_write_through_writer_refused(store: SqlTaskStore, writer: TaskWriter,
                                            op: str) -> None:
    """A superseded token is refused (StaleWriter) and records nothing."""
    cases.test_stale_task_write_refused(_ThroughWriter(store, writer), op)  # type: ignore[arg-type]


def test_common_case_needs_no_engine(store: SqlTaskStore, clock: FakeClock,
                                     writer: TaskWriter) -> None:
    """started -> completed and started -> failed are single statements on the
    writer's own connection: the full store is never opened."""
    token = store.create_invocation(invocation(), owner="o1")
    a, b = task("a"), task("b")
    started = writer.mark_started(a.task_id, token=token, system_instance="s", attempt=1, task=a)
    assert started == store.get_task(a.task_id)
    clock.advance(1)
    writer.mark_completed(a.task_id, token=token, result={"ok": 1})
    writer.mark_started(b.task_id, token=token, system_instance="s", attempt=1, task=b)
    writer.mark_failed(b.task_id, token=token, error={"code": "x", "message": "m", "details": {}})
    got_a, got_b = store.get_task(a.task_id), store.get_task(b.task_id)
    assert got_a is not None and got_b is not None
    assert (got_a.status, got_a.result, got_a.finished_at) == ("completed", {"ok": 1}, clock.now)
    assert (got_b.status, got_b.error["code"]) == ("failed", "x")
    assert writer._store is None


def test_refusal_goes_to_the_store(store: SqlTaskStore, writer: TaskWriter) -> None:
    """A write the fast statement cannot make (stale token) is decided by the store."""
    old = store.create_invocation(invocation(), owner="o1")
    store.claim_invocation("inv-1", owner="o2")
    t = task("a")
    with pytest.raises(StaleWriter):
        writer.mark_started(t.task_id, token=old, system_instance="s", attempt=1, task=t)
    assert writer._store is not None
    assert store.get_tasks("inv-1") == []


def _folded(step: int) -> Any:
    from hayata_py.store import ActiveExecution

    return invocation(step=step, state={"n": step},
                      active_execution=ActiveExecution(f"ex-{step}", step, ("a",), {"x": step},
                                                       False),
                      parallel_results=None, last_result={"r": step})


def test_folded_checkpoint_commits_with_started_on_the_writer(
        store: SqlTaskStore, writer: TaskWriter) -> None:
    """The step's checkpoint rides on ``started`` (one transaction on the
    writer's own connection): both are there afterwards, and no engine opened."""
    token = store.create_invocation(invocation(), owner="o1")
    t = task("a", step=1, execution_id="ex-1")
    writer.mark_started(t.task_id, token=token, system_instance="s", attempt=1, task=t,
                        checkpoint=_folded(1))
    got, record = store.get_task(t.task_id), store.get_invocation("inv-1")
    assert got is not None and got.status == "started"
    assert record is not None and record.active_execution is not None
    assert (record.step, record.state, record.active_execution.execution_id) == (
        1, {"n": 1}, "ex-1")
    assert writer._store is None


def test_folded_checkpoint_refused_with_a_stale_token_writes_neither(
        store: SqlTaskStore, writer: TaskWriter) -> None:
    """Fenced: a stale writer changes neither the checkpoint nor the tasks."""
    old = store.create_invocation(invocation(), owner="o1")
    store.claim_invocation("inv-1", owner="o2")
    before = store.get_invocation("inv-1")
    t = task("a", step=1, execution_id="ex-1")
    with pytest.raises(StaleWriter):
        writer.mark_started(t.task_id, token=old, system_instance="s", attempt=1, task=t,
                            checkpoint=_folded(1))
    after = store.get_invocation("inv-1")
    assert before is not None and after is not None
    assert (after.step, after.state, after.active_execution) == (
        before.step, before.state, before.active_execution)
    assert store.get_tasks("inv-1") == []


def test_finish_many_records_ends_together_and_names_each_refusal(
        store: SqlTaskStore, writer: TaskWriter) -> None:
    """Group commit: the ends of tasks that ended together land in one
    transaction; one that would be refused leaves the others to land on their own
    and comes back as its own error."""
    token = store.create_invocation(invocation(), owner="o1")
    names = ("a", "b", "c")
    for name in names:
        writer.mark_started(task(name).task_id, token=token, system_instance="s", attempt=1,
                            task=task(name))
    assert writer.finish_many([(task("a").task_id, token, True, {"a": 1}),
                               (task("b").task_id, token, False, {"code": "node_failed"})]
                              ) == [None, None]
    got = {t.node_id: (t.status, t.result, t.error) for t in store.get_tasks("inv-1")}
    assert got["a"] == ("completed", {"a": 1}, None)
    assert got["b"] == ("failed", None, {"code": "node_failed"})
    # b is finished already: the batch cannot land whole, so each goes on its own.
    errors = writer.finish_many([(task("c").task_id, token, True, {"c": 3}),
                                 (task("b").task_id, token, True, {"b": 2})])
    assert errors[0] is None and getattr(errors[1], "code", None) == "task_finished"
    got = {t.node_id: (t.status, t.result) for t in store.get_tasks("inv-1")}
    assert got["c"] == ("completed", {"c": 3}) and got["b"] == ("failed", None)


def _start(name: str, token: int) -> dict[str, Any]:
    return {"task_id": task(name).task_id, "token": token, "system_instance": "s",
            "attempt": 1, "task": task(name), "checkpoint": None, "retry": False}


def test_start_many_records_first_starts_together_or_writes_nothing(
        store: SqlTaskStore, writer: TaskWriter) -> None:
    """Group commit of starts (tasks that reached an async edge together): all in
    one transaction; if one of them would not land (a start already recorded, a
    stale token, a retry), nothing of the batch is written and False says so,
    so the caller records each on its own and each refusal is named."""
    token = store.create_invocation(invocation(), owner="o1")
    assert writer.start_many([_start("a", token), _start("b", token)]) is True
    assert {t.node_id: t.status for t in store.get_tasks("inv-1")} == {
        "a": "started", "b": "started"}
    assert writer.start_many([_start("c", token), _start("a", token)]) is False  # a again
    assert writer.start_many([_start("d", token), {**_start("e", token), "retry": True}]
                             ) is False  # a retry is never part of a batch
    assert writer.start_many([_start("f", token), _start("g", token - 1)]) is False  # stale
    assert sorted(t.node_id for t in store.get_tasks("inv-1")) == ["a", "b"]
    assert writer.start_many([]) is False


def test_end_and_start_commit_together_or_write_nothing(
        store: SqlTaskStore, clock: FakeClock, writer: TaskWriter) -> None:
    """A chain on an edge: one task's end and the next one's first start in ONE
    transaction (one timestamp); if either would not land (the end of a task
    already finished, a start already recorded, a stale token, a retry),
    nothing is written and False says so."""
    token = store.create_invocation(invocation(), owner="o1")
    writer.mark_started(task("a").task_id, token=token, system_instance="s", attempt=1,
                        task=task("a"))
    assert writer.end_and_start((task("a").task_id, token, True, {"a": 1}),
                                _start("b", token)) is True
    got = {t.node_id: t for t in store.get_tasks("inv-1")}
    assert (got["a"].status, got["a"].result, got["b"].status) == (
        "completed", {"a": 1}, "started")
    assert got["a"].finished_at == got["b"].started_at  # one transaction
    assert writer.end_and_start((task("b").task_id, token, False, {"code": "node_failed"}),
                                _start("c", token)) is True
    assert {t.node_id: t.status for t in store.get_tasks("inv-1")} == {
        "a": "completed", "b": "failed", "c": "started"}
    refused = [
        ((task("a").task_id, token, True, {"a": 2}), _start("d", token)),  # a finished
        ((task("c").task_id, token, True, {"c": 3}), _start("b", token)),  # b recorded
        ((task("c").task_id, token - 1, True, {"c": 3}), _start("d", token)),  # stale end
        ((task("c").task_id, token, True, {"c": 3}), _start("d", token - 1)),  # stale start
        ((task("c").task_id, token, True, {"c": 3}), {**_start("d", token), "retry": True}),
    ]
    for end, start in refused:
        assert writer.end_and_start(end, start) is False
    got = {t.node_id: (t.status, t.result) for t in store.get_tasks("inv-1")}
    assert got == {"a": ("completed", {"a": 1}), "b": ("failed", None),
                   "c": ("started", None)}
