"""The agent's edge routing (``EdgePool``), without processes: which edge runs a
task, tables that arrive out of order or before the node's address, cancels
and lost edges."""

from __future__ import annotations

from hayata_py._actors._protocol import (
    EdgeExit,
    EdgeRef,
    EdgeTable,
    KillEdge,
    KillReason,
    RunTask,
)
from hayata_py._actors.edges import EdgePool

NODE, NEW_NODE = "node-addr-1", "node-addr-2"


def task(task_id: str, node: str = "w") -> RunTask:
    return RunTask("inv:0", task_id, "inv", node, None, {}, "agent", False, task_id)


def table(version: int, *edges: str, node: str = "w") -> EdgeTable:
    return EdgeTable(node, version, tuple(EdgeRef(e, f"addr-{e}") for e in edges))


def pool_with(*edges: str) -> EdgePool:
    pool = EdgePool()
    pool.node_up("w", NODE)
    pool.on_table(NODE, table(1, *edges))
    return pool


def test_a_task_goes_to_an_idle_edge_and_waits_when_none_is_idle() -> None:
    pool = pool_with("e1")
    assert pool.dispatch(task("t1")) == [("addr-e1", task("t1"))]
    assert pool.dispatch(task("t2")) == []  # e1 is busy
    assert pool.done("t1") == [("addr-e1", task("t2"))]
    assert pool.done("t2") == []
    assert pool.done("t2") == []  # a second outcome frees nothing


def test_tasks_wait_for_the_first_table() -> None:
    pool = EdgePool()
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
    pool = pool_with("e1", "e2")
    pool.dispatch(task("t1"))
    assert pool.cancel("w", "t1", KillReason.TIMED_OUT) == [
        (NODE, KillEdge("e1", KillReason.TIMED_OUT))]
    assert pool.dispatch(task("t2")) == [("addr-e2", task("t2"))]
    assert pool.dispatch(task("t3")) == []  # e1 is gone, e2 busy


def test_cancelling_a_waiting_task_drops_it() -> None:
    pool = pool_with("e1")
    pool.dispatch(task("t1"))
    pool.dispatch(task("t2"))
    assert pool.cancel("w", "t2", KillReason.CANCELLED) == []
    assert pool.done("t1") == []  # t2 is not sent after all


def test_an_edge_that_died_fails_its_task_one_that_was_killed_does_not() -> None:
    pool = pool_with("e1", "e2")
    pool.dispatch(task("t1"))
    pool.dispatch(task("t2"))
    lost = pool.on_lost("w", "e1", EdgeExit.DIED)
    assert lost is not None and lost.task_id == "t1"
    assert pool.on_lost("w", "e2", EdgeExit.KILLED) is None
    assert pool.on_lost("w", "e2", EdgeExit.DIED) is None  # already gone


def test_a_node_down_forgets_its_edges_and_their_tasks() -> None:
    pool = pool_with("e1")
    pool.dispatch(task("t1"))
    pool.node_down("w")
    assert pool.done("t1") == []
    assert pool.tasks == {}
