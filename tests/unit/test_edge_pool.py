"""The agent's edge routing (``EdgePool``), without processes: which edge runs a
task, tables that arrive out of order or before the node's address, cancels
and lost edges, edges on demand (growth up to ``node_concurrency``, idle edges
retired after ``edge_idle_timeout``, with explicit clock values) and edges
that run several tasks at once."""

from __future__ import annotations

import dataclasses

import hayata_py as hy
from hayata_py._actor_messages import (
    CancelRun,
    EdgeExit,
    EdgeRef,
    EdgeTable,
    EnsureEdges,
    KillEdge,
    KillReason,
    RetireEdge,
    RunTask,
)
from hayata_py._config import validate_config
from hayata_py._rules.edge_pool import EdgePool

NODE, NEW_NODE = "node-addr-1", "node-addr-2"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def task(task_id: str, node: str = "w") -> RunTask:
    return RunTask("inv:0", task_id, "inv", node, None, {}, "agent", False, task_id)


def table(version: int, *edges: str, node: str = "w", capacity: int = 1, wanted: int = 0,
          ensured: int = 0) -> EdgeTable:
    return EdgeTable(node, version, tuple(EdgeRef(e, f"addr-{e}", capacity) for e in edges),
                     wanted, ensured)


def new_pool(limit: int = 1, capacity: int = 1, idle: float = 60.0,
             clock: Clock | None = None) -> EdgePool:
    spec = validate_config(hy.AgentConfig(
        "a", {"w": "tests.edge_nodes:sleeper"}, "tests.map_nodes:map_policy",
        node_concurrency={"w": limit}, edge_concurrency={"w": capacity},
        edge_idle_timeout=idle))
    return EdgePool(spec, clock or Clock())


def pool_with(*edges: str, limit: int = 1, capacity: int = 1, idle: float = 60.0,
              clock: Clock | None = None) -> EdgePool:
    pool = new_pool(limit, capacity, idle, clock)
    pool.node_up("w", NODE)
    pool.on_table(NODE, table(1, *edges, capacity=capacity))
    return pool


def test_a_task_goes_to_an_idle_edge_and_waits_when_none_is_idle() -> None:
    pool = pool_with("e1")
    assert pool.dispatch(task("t1")) == [("addr-e1", task("t1"))]
    assert pool.dispatch(task("t2")) == []  # e1 is busy; the node may not grow
    assert pool.done("t1") == [("addr-e1", task("t2"))]
    assert pool.done("t2") == []
    assert pool.done("t2") == []  # a second outcome frees nothing


def test_tasks_wait_for_the_first_table() -> None:
    pool = new_pool()
    assert pool.dispatch(task("t1")) == []
    assert pool.node_up("w", NODE) == []
    assert pool.on_table(NODE, table(1, "e1")) == [("addr-e1", task("t1"))]


def test_an_older_table_never_replaces_a_newer_one() -> None:
    pool = pool_with("e1")
    assert pool.on_table(NODE, table(3, "e2")) == []
    assert pool.on_table(NODE, table(2, "e1")) == []  # overtaken: ignored
    assert pool.dispatch(task("t1")) == [("addr-e2", task("t1"))]


def test_a_table_from_an_address_that_is_not_the_nodes_waits_for_it() -> None:
    pool = pool_with("e1")
    pool.node_down("w")
    assert pool.on_table(NEW_NODE, table(1, "e9")) == []  # the restarted node, early
    assert pool.dispatch(task("t1")) == []
    assert pool.node_up("w", NEW_NODE) == [("addr-e9", task("t1"))]


def test_a_table_of_a_dead_node_is_ignored() -> None:
    pool = pool_with("e1")
    pool.node_down("w")
    pool.node_up("w", NEW_NODE)
    assert pool.on_table(NODE, table(5, "old")) == []
    assert pool.dispatch(task("t1")) == []  # no edge of the new node yet


def test_cancelling_a_running_task_kills_its_edge_and_never_reuses_it() -> None:
    pool = pool_with("e1", "e2", limit=2)
    pool.dispatch(task("t1"))
    assert pool.cancel("w", "t1", KillReason.TIMED_OUT) == [
        (NODE, KillEdge("e1", KillReason.TIMED_OUT))]
    assert pool.dispatch(task("t2")) == [("addr-e2", task("t2"))]
    assert pool.dispatch(task("t3")) == []  # e1 is gone (its replacement is pending), e2 busy
    # A table the node sent before it killed e1 does not bring e1 back.
    assert pool.on_table(NODE, table(2, "e1", "e2")) == []
    assert pool.on_table(NODE, table(3, "e2", "e3")) == [("addr-e3", task("t3"))]


def test_cancelling_a_waiting_task_drops_it() -> None:
    pool = pool_with("e1")
    pool.dispatch(task("t1"))
    pool.dispatch(task("t2"))
    assert pool.cancel("w", "t2", KillReason.CANCELLED) == []
    assert pool.done("t1") == []  # t2 is not sent after all


def test_an_edge_that_died_fails_its_task_one_that_was_killed_does_not() -> None:
    pool = pool_with("e1", "e2", limit=2)
    pool.dispatch(task("t1"))
    pool.dispatch(task("t2"))
    assert [r.task_id for r in pool.on_lost("w", "e1", EdgeExit.DIED)] == ["t1"]
    assert pool.on_lost("w", "e2", EdgeExit.KILLED) == []
    assert pool.on_lost("w", "e2", EdgeExit.DIED) == []  # already gone


def test_a_table_without_a_dead_edge_overtaking_its_loss_keeps_its_task_for_it() -> None:
    pool = pool_with("e1", "e2", limit=2)
    pool.dispatch(task("t1"))
    assert pool.on_table(NODE, table(2, "e2", "e3")) == []  # e1 died; its EdgeLost is late
    assert [r.task_id for r in pool.on_lost("w", "e1", EdgeExit.DIED)] == ["t1"]
    assert pool.tasks == {}


def test_a_node_down_forgets_its_edges_and_their_tasks() -> None:
    pool = pool_with("e1")
    pool.dispatch(task("t1"))
    pool.node_down("w")
    assert pool.done("t1") == []
    assert pool.tasks == {}


# -- edges on demand ----------------------------------------------------------------


def test_waiting_tasks_beyond_the_free_slots_ask_for_edges_once_up_to_the_limit() -> None:
    pool = pool_with("e1", limit=3)
    assert pool.dispatch(task("t1")) == [("addr-e1", task("t1"))]
    assert pool.dispatch(task("t2")) == [(NODE, EnsureEdges(2, 1))]
    assert pool.dispatch(task("t3")) == [(NODE, EnsureEdges(3, 2))]
    assert pool.dispatch(task("t4")) == []  # at the limit: t4 waits
    # The node's table before it handled the asks: the asked-for edges still count.
    assert pool.on_table(NODE, table(2, "e1", wanted=1, ensured=0)) == []
    assert pool.on_table(NODE, table(3, "e1", "e2", wanted=3, ensured=2)) == [
        ("addr-e2", task("t2"))]
    assert pool.done("t1") == [("addr-e1", task("t3"))]
    assert pool.on_table(NODE, table(4, "e1", "e2", "e3", wanted=3, ensured=2)) == [
        ("addr-e3", task("t4"))]


def test_the_queue_is_first_in_first_out_across_invocations() -> None:
    pool = pool_with("e1")
    first = [dataclasses.replace(task(f"a{i}"), invocation_id="A") for i in range(3)]
    second = [dataclasses.replace(task(f"b{i}"), invocation_id="B") for i in range(3)]
    for a, b in zip(first, second, strict=True):
        pool.dispatch(a)
        pool.dispatch(b)
    order = [first[0].task_id]
    for _ in range(5):
        sends = pool.done(order[-1])
        order.append(sends[0][1].task_id)
    assert order == ["a0", "b0", "a1", "b1", "a2", "b2"]


def test_a_node_that_kept_fewer_edges_than_asked_is_asked_again() -> None:
    # The pool retired e2 and asked for 2 again; the node handled the ask first
    # (nothing to do), then the retirement: its table says 1 edge after ask 2.
    clock = Clock()
    pool = pool_with("e1", "e2", limit=2, idle=1.0, clock=clock)
    clock.now += 2
    assert pool.retire_due(clock.now) == [(NODE, RetireEdge("e2"))]
    pool.dispatch(task("t1"))
    assert pool.dispatch(task("t2")) == [(NODE, EnsureEdges(2, 1))]
    assert pool.on_table(NODE, table(2, "e1", wanted=1, ensured=1)) == [
        (NODE, EnsureEdges(2, 2))]
    assert pool.on_table(NODE, table(3, "e1", "e3", wanted=2, ensured=2)) == [
        ("addr-e3", task("t2"))]


def test_a_restarted_node_starts_from_one_edge() -> None:
    pool = pool_with("e1", limit=4)
    for i in range(3):
        pool.dispatch(task(f"t{i}"))  # t0 runs, the pool asks for 2, then 3 edges
    pool.node_down("w")  # t0 is the machine's to end (NodeDown); t1 and t2 wait
    assert pool.node_up("w", NEW_NODE) == [(NEW_NODE, EnsureEdges(2, 3))]


def test_idle_edges_beyond_the_first_retire_after_the_idle_timeout() -> None:
    clock = Clock()
    pool = pool_with("e1", "e2", "e3", limit=3, idle=5.0, clock=clock)
    assert pool.next_retire(clock.now) == 105.0
    pool.dispatch(task("t1"))  # on e1
    clock.now = 103.0
    pool.dispatch(task("t2"))  # on e2
    pool.done("t2")  # e2 idle from 103
    assert pool.retire_due(104.9) == []
    assert pool.retire_due(105.0) == [(NODE, RetireEdge("e3"))]
    assert pool.next_retire(105.0) == 108.0  # e2; e1 is busy
    assert pool.next_retire(200.0) == 200.0  # already due
    assert pool.retire_due(200.0) == [(NODE, RetireEdge("e2"))]
    pool.done("t1")
    assert pool.next_retire(200.0) is None  # only the first is left
    assert pool.retire_due(1e9) == []
    # A retired edge gets nothing, even while a table sent before it left lists it.
    assert pool.on_table(NODE, table(2, "e1", "e2", "e3")) == []
    assert pool.dispatch(task("t3")) == [("addr-e1", task("t3"))]
    assert pool.on_lost("w", "e3", EdgeExit.RETIRED) == []


def test_nothing_retires_while_tasks_wait() -> None:
    clock = Clock()
    pool = pool_with("e1", "e2", limit=2, capacity=2, idle=1.0, clock=clock)
    for i in range(5):
        pool.dispatch(task(f"t{i}"))
    pool.done("t0")  # frees e1's slot: t4 takes it at once
    clock.now += 10
    assert pool.retire_due(clock.now) == []


# -- edges that run several tasks at once --------------------------------------------


def test_an_edge_takes_up_to_its_capacity_and_fills_before_the_next() -> None:
    pool = pool_with("e1", "e2", limit=2, capacity=3)
    sends = [s for i in range(5) for s in pool.dispatch(task(f"t{i}"))]
    assert [(a, r.task_id) for a, r in sends] == [
        ("addr-e1", "t0"), ("addr-e1", "t1"), ("addr-e1", "t2"),
        ("addr-e2", "t3"), ("addr-e2", "t4")]
    assert pool.dispatch(task("t5")) == [("addr-e2", task("t5"))]
    assert pool.dispatch(task("t6")) == []  # 6 slots, all taken; at the limit
    assert pool.done("t1") == [("addr-e1", task("t6"))]


def test_growth_counts_slots_and_asks_in_tasks_at_once() -> None:
    pool = pool_with("e1", limit=4, capacity=10)
    sends = [s for i in range(25) for s in pool.dispatch(task(f"t{i}"))]
    assert [m for _, m in sends if isinstance(m, EnsureEdges)] == [
        EnsureEdges(20, 1), EnsureEdges(30, 2)]  # 2 edges for t10-t19, 3 for t20-t24


def test_cancelling_one_task_of_a_shared_edge_cancels_only_its_run() -> None:
    pool = pool_with("e1", limit=1, capacity=2)
    pool.dispatch(task("t1"))
    pool.dispatch(task("t2"))
    pool.dispatch(task("t3"))
    assert pool.cancel("w", "t1", KillReason.TIMED_OUT) == [
        ("addr-e1", CancelRun("t1", KillReason.TIMED_OUT)), ("addr-e1", task("t3"))]
    assert pool.done("t2") == []
    assert [r.task_id for r in pool.on_lost("w", "e1", EdgeExit.DIED)] == ["t3"]


def test_a_dead_shared_edge_ends_every_task_it_ran_and_a_rerun_is_dispatched_again() -> None:
    pool = pool_with("e1", "e2", limit=2, capacity=3)
    for i in range(4):
        pool.dispatch(task(f"t{i}"))
    lost = pool.on_lost("w", "e1", EdgeExit.DIED)
    assert [r.task_id for r in lost] == ["t0", "t1", "t2"]
    assert pool.done("t0") == []  # a late outcome of a lost task frees nothing
    rerun = dataclasses.replace(lost[0], attempt=lost[0].attempt + 1)
    assert pool.dispatch(rerun) == [("addr-e2", rerun)]  # an idempotent re-run
    assert pool.tasks["t0"] == ("e2", rerun)
    assert pool.on_lost("w", "e2", EdgeExit.KILLED) == []
