"""``mark_started(checkpoint=...)``: a step's checkpoint and a task's ``started``
record committed in one transaction, both or neither.

The runtime leaves a step's checkpoint to the edges of its tasks (one commit
less per step, ``docs/design.md``); recovery stays exact only if a ``started``
record never exists without the checkpoint that names its step, and a refused
start leaves the previous checkpoint untouched.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from hayata_py._errors import StaleWriter, StoreError
from hayata_py.store import ActiveExecution, SqlTaskStore
from hayata_py.store._fast.statements import Statements
from hayata_py.store._sql.engine import EngineHolder
from tests.store.util import invocation, task


def _step(step: int, nodes: tuple[str, ...] = ("a",), **changes: Any) -> Any:
    return invocation(step=step, state={"n": step},
                      active_execution=ActiveExecution(f"ex-{step}", step, nodes, {"x": step},
                                                       len(nodes) > 1),
                      parallel_results=None, last_result={"r": step}, **changes)


@pytest.fixture
def batches(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, bool]]]:
    """Record (number of statements, committed?) for every fast transaction."""
    seen: list[tuple[int, bool]] = []
    original = EngineHolder.write_all

    def spy(self: EngineHolder, statements: Statements,
            durable: bool = True) -> bool:
        done = original(self, statements, durable)
        seen.append((len(statements), done))
        return done

    monkeypatch.setattr(EngineHolder, "write_all", spy)
    yield seen


def test_checkpoint_and_start_commit_together_on_the_fast_path(
    store: SqlTaskStore, batches: list[tuple[int, bool]]
) -> None:
    """One transaction of two statements; the invocation then reads as if
    save_checkpoint had run, and the task is started."""
    token = store.create_invocation(invocation(), owner="o1")
    t = task("a", step=1, execution_id="ex-1")
    batches.clear()
    started = store.mark_started(t.task_id, token=token, system_instance="s", attempt=1,
                                 task=t, checkpoint=_step(1))
    assert batches == [(2, True)]
    assert started == store.get_task(t.task_id) and started.status == "started"
    record = store.get_invocation("inv-1")
    assert record is not None
    assert (record.step, record.state, record.last_result) == (1, {"n": 1}, {"r": 1})
    assert record.active_execution == ActiveExecution("ex-1", 1, ("a",), {"x": 1}, False)
    assert record.input == invocation().input  # never rewritten by a checkpoint


def test_each_task_of_a_parallel_step_may_carry_the_checkpoint(
    store: SqlTaskStore, batches: list[tuple[int, bool]]
) -> None:
    """Every edge of a parallel step writes the same checkpoint with its start."""
    token = store.create_invocation(invocation(), owner="o1")
    cp = _step(2, ("a", "b"))
    for branch, node in enumerate(("a", "b")):
        t = task(node, step=2, branch=branch, execution_id="ex-2")
        store.mark_started(t.task_id, token=token, system_instance="s", attempt=1, task=t,
                           checkpoint=cp)
    assert batches[-2:] == [(2, True), (2, True)]
    record = store.get_invocation("inv-1")
    assert record is not None and record.active_execution == cp.active_execution
    assert [x.status for x in store.get_tasks("inv-1")] == ["started", "started"]


def test_a_retried_start_rewrites_the_checkpoint_in_its_transaction(
    store: SqlTaskStore, batches: list[tuple[int, bool]]
) -> None:
    """A higher attempt of an existing task takes the general path; still both."""
    token = store.create_invocation(invocation(), owner="o1")
    t = task("a", step=1, execution_id="ex-1")
    store.mark_started(t.task_id, token=token, system_instance="s", attempt=1, task=t,
                       checkpoint=_step(1))
    store.save_checkpoint(_step(0), token=token)  # something else moved it meanwhile
    again = store.mark_started(t.task_id, token=token, system_instance="s", attempt=2, task=t,
                               checkpoint=_step(1))
    assert batches[-1] == (2, False)  # the insert changed nothing: general path
    assert again.attempt == 2
    record = store.get_invocation("inv-1")
    assert record is not None and record.step == 1


@pytest.mark.parametrize("why", ["stale", "finished", "task_finished"])
def test_a_refused_start_writes_no_checkpoint(store: SqlTaskStore, why: str) -> None:
    """Fenced, finished invocation, finished task: neither record changes."""
    token = store.create_invocation(invocation(), owner="o1")
    t = task("a", step=1, execution_id="ex-1")
    if why == "task_finished":
        store.mark_started(t.task_id, token=token, system_instance="s", attempt=1, task=t)
        store.mark_completed(t.task_id, token=token, result={"done": 1})
    before_inv, before_task = store.get_invocation("inv-1"), store.get_task(t.task_id)
    if why == "stale":
        new_token = store.claim_invocation("inv-1", owner="o2")
        before_inv = store.get_invocation("inv-1")
        assert new_token != token
    elif why == "finished":
        store.finish_invocation("inv-1", token=token, status="failed", error={"e": 1})
        before_inv = store.get_invocation("inv-1")
    with pytest.raises(StoreError) as refused:
        store.mark_started(t.task_id, token=token, system_instance="s", attempt=1, task=t,
                           checkpoint=_step(1))
    expected = {"stale": "stale_writer", "finished": "invocation_finished",
                "task_finished": "task_finished"}[why]
    assert refused.value.code == expected
    assert isinstance(refused.value, StaleWriter) == (why == "stale")
    assert store.get_invocation("inv-1") == before_inv
    assert store.get_task(t.task_id) == before_task


@pytest.mark.parametrize("bad", ["no_task", "other_invocation", "other_execution", "no_node"])
def test_a_checkpoint_that_does_not_name_the_task_is_refused(
    store: SqlTaskStore, bad: str
) -> None:
    """invalid_argument, nothing written."""
    token = store.create_invocation(invocation(), owner="o1")
    t = task("a", step=1, execution_id="ex-1")
    cp = {"no_task": _step(1), "other_invocation": _step(1, invocation_id="inv-2"),
          "other_execution": _step(2), "no_node": _step(1, ("b",))}[bad]
    before = store.get_invocation("inv-1")
    with pytest.raises(StoreError) as refused:
        store.mark_started(t.task_id, token=token, system_instance="s", attempt=1,
                           task=None if bad == "no_task" else t, checkpoint=cp)
    assert refused.value.code == "invalid_argument"
    assert store.get_invocation("inv-1") == before
    assert store.get_task(t.task_id) is None
