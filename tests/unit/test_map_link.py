"""The agent's side of a map step's reducer (``_rules/map_link.py``), without processes:
items wait for the reducer, a replacement is asked again, a closed map sends nothing."""

from __future__ import annotations

from typing import Any

import hayata_py as hy
from hayata_py import _actor_messages as p
from hayata_py import _invocation as m
from hayata_py._config import validate_config
from hayata_py._rules.edge_pool import EdgePool
from hayata_py._rules.map_link import MapLink

EX = "inv:0"


def link() -> tuple[MapLink, EdgePool]:
    spec = validate_config(hy.AgentConfig(
        "a", {"item": "tests.map_nodes:item"}, "tests.map_nodes:map_policy"))
    pool = EdgePool()
    pool.node_up("item", "node-addr")
    return MapLink("agent-addr", spec), pool


def kinds(sends: list[tuple[Any, Any]]) -> list[tuple[Any, str]]:
    return [(address, type(message).__name__) for address, message in sends]


def test_open_asks_the_node_for_edges_and_a_reducer() -> None:
    maps, pool = link()
    sends = maps.on_command(m.OpenMap(EX, "item", ("t0", "t1"), 2, "x.y:z"), pool, "inv")
    assert kinds(sends) == [("node-addr", "EnsureEdges"), ("node-addr", "StartReducer")]
    assert sends[0][1] == p.EnsureEdges(2)
    start = sends[1][1]
    assert isinstance(start, p.StartReducer)
    assert (start.task_ids, start.agent, start.invocation_id) == (("t0", "t1"), "agent-addr",
                                                                  "inv")


def test_open_without_reduce_asks_the_node_for_edges_only() -> None:
    maps, pool = link()
    sends = maps.on_command(m.OpenMap(EX, "item", ("t0", "t1"), 2, None), pool, "inv")
    assert sends == [("node-addr", p.EnsureEdges(2))]
    assert maps.on_command(m.CloseMap(EX, "item"), pool, "inv") == []  # no reducer to stop


def test_open_waits_for_an_unknown_node() -> None:
    maps, _ = link()
    assert maps.on_command(m.OpenMap(EX, "item", ("t0",), 1, "x.y:z"), EdgePool(),
                           "inv") == []
    assert maps.node_up("other", "elsewhere") == []
    assert kinds(maps.node_up("item", "late")) == [("late", "EnsureEdges"),
                                                   ("late", "StartReducer")]
    assert maps.node_up("item", "later") == []  # sent once
    assert maps.on_command(m.OpenMap(EX, "item", ("t0",), 3, None), EdgePool(), "inv") == []
    assert maps.node_up("item", "late") == [("late", p.EnsureEdges(3))]


def test_items_wait_for_the_reducer_and_a_replacement_is_asked_again() -> None:
    maps, pool = link()
    maps.on_command(m.OpenMap(EX, "item", ("t0", "t1"), 2, "x.y:z"), pool, "inv")
    assert maps.on_command(m.Collect(EX, 0, {"v": 0}), pool, "inv") == []
    sends, event = maps.on_message(p.ReducerReady(EX, "r1"))
    assert event is None and sends == [("r1", p.ItemResult(EX, 0, {"v": 0}))]
    assert maps.on_command(m.Collect(EX, 1, {"v": 1}), pool, "inv") == [
        ("r1", p.ItemResult(EX, 1, {"v": 1}))]
    assert maps.on_command(m.Consolidate(EX), pool, "inv") == [("r1", p.ConsolidateItems(EX))]
    # r1 died before answering; its replacement is asked again (it reads the
    # items it was not sent from the store).
    sends, _ = maps.on_message(p.ReducerReady(EX, "r2"))
    assert sends == [("r2", p.ConsolidateItems(EX))]
    _, event = maps.on_message(p.ReducerAnswer(EX, True, {"t": 1}))
    assert event == m.Reduced(EX, True, {"t": 1})
    opening = maps.start.opening if maps.start else ""
    assert opening and maps.on_command(m.CloseMap(EX, "item"), pool, "inv") == [
        ("node-addr", p.StopReducer(EX, opening))]
    assert maps.on_message(p.ReducerAnswer(EX, True, {})) == ([], None)  # closed


def test_messages_of_another_step_are_ignored() -> None:
    maps, pool = link()
    maps.on_command(m.OpenMap(EX, "item", ("t0",), 1, "x.y:z"), pool, "inv")
    assert maps.on_message(p.ReducerReady("inv:9", "r")) == ([], None)
    assert maps.on_command(m.Collect("inv:9", 0, {}), pool, "inv") == []
    _, event = maps.on_message(p.ReducerGone(EX, 3))
    assert event == m.ReducerLost(EX, 3)
