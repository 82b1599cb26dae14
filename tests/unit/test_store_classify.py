"""Unit tests for the pure recovery classification (no database)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hayata_py.store import (
    TaskClass,
    TaskRecord,
    classify_execution,
    classify_map,
    classify_task,
    task_id_for,
)


def _task(node: str, status: Any, result: Any = None) -> TaskRecord:
    return TaskRecord(
        task_id=task_id_for("inv", 3, node),
        invocation_id="inv",
        execution_id="ex",
        step=3,
        node_id=node,
        status=status,
        result=result,
    )


EXPECTED = {
    (None, False): TaskClass.NOT_STARTED,
    (None, True): TaskClass.NOT_STARTED,
    ("scheduled", False): TaskClass.NOT_STARTED,
    ("scheduled", True): TaskClass.NOT_STARTED,
    ("started", False): TaskClass.UNCERTAIN,
    ("started", True): TaskClass.RERUN,
    ("completed", False): TaskClass.COMPLETED,
    ("completed", True): TaskClass.COMPLETED,
    ("failed", False): TaskClass.FAILED,
    ("failed", True): TaskClass.FAILED,
}


@pytest.mark.parametrize(("status", "idempotent"), sorted(EXPECTED, key=str))
def test_classify_task_matrix(status: Any, idempotent: bool) -> None:
    """Every status x idempotence pair maps to its documented class."""
    record = None if status is None else _task("a", status)
    assert classify_task(record, idempotent=idempotent) is EXPECTED[(status, idempotent)]


def test_classify_task_unknown_status() -> None:
    """An unknown status is a ValueError, not a silent guess."""
    with pytest.raises(ValueError):
        classify_task(_task("a", "exploded"))


def test_classify_execution_example() -> None:
    """A mixed execution splits into run / reuse / uncertain / failed in request order."""
    records = [
        _task("c", "completed", {"x": 1}),
        _task("b", "started"),
        _task("d", "failed"),
        _task("e", "started"),
        _task("a", "completed", 5),
        _task("other", "completed", 9),
    ]
    out = classify_execution(["e", "a", "b", "c", "d", "f"], records, {"e"})
    assert out.to_run == ("e", "f")
    assert list(out.reuse.items()) == [("a", 5), ("c", {"x": 1})]
    assert out.uncertain_node_ids == ("b",)
    assert out.uncertain_task_ids == (task_id_for("inv", 3, "b"),)
    assert out.failed_node_ids == ("d",)
    assert list(out.classes) == ["e", "a", "b", "c", "d", "f"]
    assert out.has_uncertain and not out.all_completed


def test_classify_execution_duplicate_nodes_rejected() -> None:
    """Repeated node ids are rejected."""
    with pytest.raises(ValueError):
        classify_execution(["a", "a"], [], ())


def test_classify_execution_duplicate_records_rejected() -> None:
    """Two records for one requested node (mixed executions) are rejected."""
    with pytest.raises(ValueError):
        classify_execution(["a"], [_task("a", "started"), _task("a", "completed")], ())


STATUSES = st.sampled_from([None, "scheduled", "started", "completed", "failed"])


@given(
    st.lists(st.tuples(STATUSES, st.booleans()), max_size=12),
)
def test_classify_execution_partitions(spec: list[tuple[Any, bool]]) -> None:
    """Each node lands in exactly one bucket matching classify_task, order kept."""
    nodes = [f"n{i}" for i in range(len(spec))]
    records = [
        _task(n, s, result=i)
        for i, (n, (s, _)) in enumerate(zip(nodes, spec, strict=True))
        if s is not None
    ]
    idem = {n for n, (_, flag) in zip(nodes, spec, strict=True) if flag}
    out = classify_execution(nodes, records, idem)
    by_node = {r.node_id: r for r in records}
    for n in nodes:
        assert out.classes[n] is classify_task(by_node.get(n), idempotent=n in idem)
    buckets = [*out.to_run, *out.reuse, *out.uncertain_node_ids, *out.failed_node_ids]
    assert sorted(buckets) == sorted(nodes)
    for seq in (out.to_run, tuple(out.reuse), out.uncertain_node_ids, out.failed_node_ids):
        assert list(seq) == [n for n in nodes if n in seq]
    assert all(out.reuse[n] == by_node[n].result for n in out.reuse)
    assert out.uncertain_task_ids == tuple(by_node[n].task_id for n in out.uncertain_node_ids)
    assert out.all_completed == (len(out.reuse) == len(nodes))


@given(st.text(), st.integers(min_value=0, max_value=10**6), st.text(), st.text(), st.text())
def test_task_id_for_is_injective(inv: str, step: int, node: str, inv2: str, node2: str) -> None:
    """task_id_for is deterministic and differs when any part differs."""
    assert task_id_for(inv, step, node) == task_id_for(inv, step, node)
    if (inv, node) != (inv2, node2):
        assert task_id_for(inv, step, node) != task_id_for(inv2, step, node2)
    assert task_id_for(inv, step, node) != task_id_for(inv, step + 1, node)


def _item(item: int, status: Any, result: Any = None) -> TaskRecord:
    return TaskRecord(task_id_for("inv", 3, "m", item=item), "inv", "ex", 3, "m",
                      branch_index=item, status=status, result=result)


def test_item_task_ids_are_distinct_and_leave_other_ids_unchanged() -> None:
    ids = {task_id_for("inv", 3, "m", item=i) for i in range(50)}
    assert len(ids) == 50 and task_id_for("inv", 3, "m") not in ids
    assert task_id_for("inv", 3, "m", item=None) == task_id_for("inv", 3, "m")
    # The id of a task without an item is the one earlier versions computed.
    raw = "\x1f".join(("3", "inv", "3", "m")).encode()
    assert task_id_for("inv", 3, "m") == "task-" + hashlib.sha256(raw).hexdigest()[:32]


@pytest.mark.parametrize("idempotent", [False, True])
def test_classify_map_per_item(idempotent: bool) -> None:
    ids = [task_id_for("inv", 3, "m", item=i) for i in range(5)]
    records = [_item(0, "completed", {"v": 0}), _item(1, "started"), _item(2, "scheduled"),
               _item(4, "failed"), _task("other", "completed", {"x": 1})]
    found = classify_map(ids, records, idempotent=idempotent)
    assert found.reuse == {0: {"v": 0}}
    assert found.failed_items == (4,)
    if idempotent:
        assert found.to_run == (1, 2, 3) and not found.has_uncertain
        assert found.classes[1] is TaskClass.RERUN
    else:
        assert found.to_run == (2, 3) and found.uncertain_items == (1,)
        assert found.uncertain_task_ids == (ids[1],)
