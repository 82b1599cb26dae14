"""Streaming: sequence numbers, partial results, stale streamers."""

from __future__ import annotations

import hayata_py as hy
from tests.runtime.test_agent_runtime import collect


def test_partials_arrive_in_order_before_node_completed(agents: hy.AgentSystem) -> None:
    agent = agents.start_agent(hy.AgentConfig(
        "s", {"p": "tests.graph_nodes:worker"}, "tests.graph_nodes:scripted"))
    inv = agent.run({"steps": [["next", "p", {"partials": 5}], ["finish", 1]]},
                    subscriber=hy.CALLER, stream=True)
    events, result = collect(agent, inv)
    assert result.ok
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    types = [e.type for e in events]
    assert types == ["invocation_started", "node_started"] + ["node_partial_result"] * 5 + [
        "node_completed", "invocation_completed"]
    partials = [e.data for e in events if e.type == "node_partial_result"]
    assert [p["result"] for p in partials] == [{"i": i, "node": "p"} for i in range(5)]
    assert {p["node_id"] for p in partials} == {"p"}
    assert {p["execution_id"] for p in partials} == {f"{inv}:0"}
    assert all(p["edge_id"].startswith("p.edge-") for p in partials)


def test_non_dict_partial_raises_and_stale_streamer_is_refused(agents: hy.AgentSystem) -> None:
    agent = agents.start_agent(hy.AgentConfig(
        "probe", {"probe": "tests.graph_nodes:partial_probe"}, "tests.graph_nodes:scripted"))
    steps = [["next", "probe", {}], ["next", "probe", {}], ["finish_ctx"]]
    inv = agent.run({"steps": steps}, subscriber=hy.CALLER, stream=True)
    events, result = collect(agent, inv)
    assert result.ok, result.error
    assert result.result["last_result"] == {"stale": "refused", "non_dict": "refused"}
    partials = [e.data["result"] for e in events if e.type == "node_partial_result"]
    assert partials == [{"n": 1}, {"n": 2}, {"n": 1}, {"n": 2}]  # nothing from the stale one
    order = [e.type for e in events]
    first_done = order.index("node_completed")
    assert order[first_done - 2:first_done] == ["node_partial_result"] * 2


def test_parallel_events_interleave_but_sequence_is_strict(agents: hy.AgentSystem) -> None:
    agent = agents.start_agent(hy.AgentConfig(
        "par", {"a": "tests.graph_nodes:worker", "b": "tests.graph_nodes:worker"},
        "tests.graph_nodes:scripted"))
    inv = agent.run({"steps": [["next", ["a", "b"], {"partials": 3}], ["finish", 0]]},
                    subscriber=hy.CALLER, stream=True)
    events, result = collect(agent, inv)
    assert result.ok
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    for node in ("a", "b"):
        mine = [e for e in events if e.data.get("node_id") == node]
        assert [e.type for e in mine] == ["node_started"] + ["node_partial_result"] * 3 + [
            "node_completed"]
