"""Chains of map items on one-task edges (``EdgePool``), without processes: an
idle edge of a fast node is sent several items of one map step at once; a
slow node's, another step's and a plain task never join one; a map step runs
at most ``map_concurrency`` items at once however many edges its node has;
and map items that wait never make the node grow."""

from __future__ import annotations

from typing import Any

import pytest

import hayata_py as hy
from hayata_py._actor_messages import EdgeExit, EdgeRef, EdgeTable, RunTask, RunTasks
from hayata_py._config import validate_config
from hayata_py._rules.edge_pool import CHAIN_BELOW, ITEMS_PER_EDGE, EdgePool, chain_windows
from hayata_py._rules.outbox import Outbox
from hayata_py._rules.recovery import recorded_outcome
from hayata_py.store import TaskRecord

NODE = "node-addr"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def spec(map_concurrency: int = 2, limit: int = 4, capacity: int = 1) -> Any:
    return validate_config(hy.AgentConfig(
        "a", {"w": "tests.edge_nodes:sleeper"}, "tests.map_nodes:map_policy",
        map_concurrency=map_concurrency, node_concurrency={"w": limit},
        edge_concurrency={"w": capacity}))


def item(i: int, execution: str = "inv:0") -> RunTask:
    return RunTask(execution, f"{execution}/{i}", execution.split(":")[0], "w", i, {},
                   "agent", False, f"{execution}/{i}", item=i)


def plain(task_id: str) -> RunTask:
    return RunTask("other:0", task_id, "other", "w", None, {}, "agent", False, task_id)


def pool_with(*edges: str, map_concurrency: int = 2, capacity: int = 1,
              clock: Clock | None = None) -> tuple[EdgePool, Clock]:
    clock = clock or Clock()
    pool = EdgePool(spec(map_concurrency, capacity=capacity), clock)
    pool.node_up("w", NODE)
    pool.on_table(NODE, EdgeTable("w", 1, tuple(EdgeRef(e, f"addr-{e}", capacity)
                                                 for e in edges)))
    return pool, clock


def sent(sends: list[tuple[Any, Any]]) -> list[tuple[str, str]]:
    return [(to, m.task_id) for to, m in sends if isinstance(m, RunTask)]


def paced(pool: EdgePool, clock: Clock, seconds: float) -> None:
    """One task that took ``seconds``: the node's pace is known."""
    sends = pool.dispatch(plain("pace"))
    assert sends and sent(sends)[0][1] == "pace"
    clock.now += seconds
    pool.done("pace")


def test_an_unknown_or_slow_pace_sends_one_item_per_edge() -> None:
    pool, clock = pool_with("e1", "e2")
    out = [s for i in range(6) for s in sent(pool.dispatch(item(i)))]
    assert out == [("addr-e1", "inv:0/0"), ("addr-e2", "inv:0/1")]  # pace unknown
    clock.now += 0.5
    assert sent(pool.done("inv:0/0")) == [("addr-e1", "inv:0/2")]  # 0.5 s: slow
    assert pool.nodes["w"].pace == pytest.approx(0.5)


def test_an_idle_edge_of_a_fast_node_gets_a_chain_of_waiting_items() -> None:
    pool, clock = pool_with("e1", "e2")
    paced(pool, clock, 0.001)
    n = 2 + ITEMS_PER_EDGE + 3
    out = [s for i in range(n) for s in sent(pool.dispatch(item(i)))]
    assert out == [("addr-e1", "inv:0/0"), ("addr-e2", "inv:0/1")]  # one each; the rest wait
    # e1 is idle again: the waiting items go to it as a chain, up to ITEMS_PER_EDGE.
    clock.now += 0.001
    chain = sent(pool.done("inv:0/0"))
    assert chain == [("addr-e1", f"inv:0/{i}") for i in range(2, 2 + ITEMS_PER_EDGE)]
    # It gets nothing more until the whole chain is over; e2 takes the rest.
    for i in range(2, 1 + ITEMS_PER_EDGE):
        clock.now += 0.001
        assert pool.done(f"inv:0/{i}") == []
    clock.now += 0.001
    assert sent(pool.done("inv:0/1")) == [
        ("addr-e2", f"inv:0/{i}") for i in range(2 + ITEMS_PER_EDGE, n)]


def test_a_chain_holds_items_of_one_step_only_and_no_plain_task() -> None:
    pool, clock = pool_with("e1", "e2", map_concurrency=4)
    paced(pool, clock, 0.001)
    pool.dispatch(item(0, "inv:0"))
    pool.dispatch(item(0, "inv:1"))
    for task in (item(1, "inv:0"), item(2, "inv:0"), item(1, "inv:1"), plain("p1"),
                 item(3, "inv:0")):
        assert sent(pool.dispatch(task)) == []  # both edges busy: they wait
    clock.now += 0.001
    assert sent(pool.done("inv:0/0")) == [  # the step's items, past the others
        ("addr-e1", "inv:0/1"), ("addr-e1", "inv:0/2"), ("addr-e1", "inv:0/3")]
    clock.now += 0.001
    assert sent(pool.done("inv:1/0")) == [("addr-e2", "inv:1/1")]
    clock.now += 0.001
    assert sent(pool.done("inv:1/1")) == [("addr-e2", "p1")]  # no chain with a plain task


def test_a_step_runs_at_most_map_concurrency_items_however_many_edges() -> None:
    pool, clock = pool_with("e1", "e2", "e3", "e4", map_concurrency=2)
    out = [s for i in range(6) for s in sent(pool.dispatch(item(i)))]
    assert [to for to, _ in out] == ["addr-e1", "addr-e2"]  # not e3, e4
    # Another step's items and plain tasks do not wait behind its items.
    assert sent(pool.dispatch(item(0, "inv:1"))) == [("addr-e3", "inv:1/0")]
    assert sent(pool.dispatch(plain("p"))) == [("addr-e4", "p")]
    clock.now += 0.001  # the pace is known (fast): the rest go to e1 as a chain
    assert sent(pool.done("inv:0/0")) == [("addr-e1", f"inv:0/{i}") for i in range(2, 6)]


def test_async_edges_count_each_item_against_map_concurrency() -> None:
    pool, _ = pool_with("e1", map_concurrency=3, capacity=8)
    out = [s for i in range(6) for s in sent(pool.dispatch(item(i)))]
    assert len(out) == 3
    assert chain_windows(spec(3, capacity=8)) == {}  # no chains: one item a slot


def test_waiting_map_items_never_grow_the_node() -> None:
    pool, _ = pool_with("e1", map_concurrency=1)
    sends = [s for i in range(5) for s in pool.dispatch(item(i))]
    assert [type(m).__name__ for _, m in sends] == ["RunTask"]  # no EnsureEdges
    grow = pool.dispatch(plain("p"))
    assert [type(m).__name__ for _, m in grow] == ["EnsureEdges"]  # a plain task does


def test_a_lost_chain_fails_every_item_it_held() -> None:
    pool, clock = pool_with("e1")
    paced(pool, clock, 0.001)
    for i in range(4):
        pool.dispatch(item(i))
    clock.now += 0.001
    assert len(sent(pool.done("inv:0/0"))) == 3
    lost = pool.on_lost("w", "e1", EdgeExit.DIED)
    assert [r.task_id for r in lost] == ["inv:0/1", "inv:0/2", "inv:0/3"]


def test_chain_windows_cover_a_chain_per_edge_of_one_task_nodes() -> None:
    assert chain_windows(spec(3)) == {"w": 3 * ITEMS_PER_EDGE}
    assert CHAIN_BELOW < 0.05


def test_a_chain_goes_as_one_runtasks_message() -> None:
    pool, clock = pool_with("e1")
    paced(pool, clock, 0.001)
    for i in range(4):
        pool.dispatch(item(i))
    box = Outbox()
    clock.now += 0.001
    for to, message in pool.done("inv:0/0"):
        box.put(to, message)
    (only,) = box.take()
    assert only[0] == "addr-e1" and isinstance(only[1], RunTasks)
    assert [t.task_id for t in only[1].tasks] == ["inv:0/1", "inv:0/2", "inv:0/3"]


@pytest.mark.parametrize(("status", "attempt", "error", "expected"), [
    ("completed", 1, None, (True, {"v": 1}, None)),
    ("failed", 1, {"code": "node_failed", "message": "ValueError: x"},
     (False, None, "node_failed")),
    ("started", 1, None, None),  # it ran, or was running: no end to take
    ("completed", 2, None, None),  # another attempt's end
    ("failed", 1, {"message": "no code"}, None),  # unreadable: lost, as before
])
def test_a_dead_edge_s_recorded_end_is_the_task_s_outcome(
        status: str, attempt: int, error: Any, expected: Any) -> None:
    task = item(3)
    record = TaskRecord(task.task_id, "inv", "inv:0", 0, "w", 3, status=status, input=3,
                        attempt=attempt, result={"v": 1} if status == "completed" else None,
                        error=error)
    got = recorded_outcome(task, record, "e1")
    if expected is None:
        assert got is None
        return
    assert got is not None and (got.ok, got.result, got.error and got.error.code) == expected
    assert (got.task_id, got.item, got.edge_id, got.execution_id) == (
        task.task_id, 3, "e1", "inv:0")
    assert recorded_outcome(task, None, "e1") is None


def test_a_chain_s_time_is_shared_out_among_its_items() -> None:
    """Its Outcomes come together: 8 items of 10 ms each are a 10 ms pace (too
    slow to chain), not one 80 ms item and seven of 0 ms."""
    pool, clock = pool_with("e1")
    paced(pool, clock, 0.001)
    for i in range(ITEMS_PER_EDGE + 1):
        pool.dispatch(item(i))
    clock.now += 0.001
    assert len(sent(pool.done("inv:0/0"))) == ITEMS_PER_EDGE  # a chain
    clock.now += 0.010 * ITEMS_PER_EDGE
    for i in range(1, ITEMS_PER_EDGE + 1):
        pool.done(f"inv:0/{i}")
    pace = pool.nodes["w"].pace
    assert pace is not None and 0.008 < pace < 0.011
    out = [s for i in range(ITEMS_PER_EDGE + 1, ITEMS_PER_EDGE + 5)
           for s in sent(pool.dispatch(item(i)))]
    assert len(out) == 1  # one at a time again
    clock.now += 0.010
    assert len(sent(pool.done(out[0][1]))) == 1
