"""A node's partial results reach the caller while the node still runs, each
as it is published: not only the first, with the others in one burst when the
node returns. Each node here waits, after each partial, for a gate the test
opens only once it has read that partial (``tests/stream_nodes.py``); a
partial held back until the node ends leaves the node waiting (it gives up
after ``GATE_WAIT`` seconds and says which gate). For a plain function, an
``async def`` one on the default one-task edge, and one on an edge that runs
several tasks at once (``edge_concurrency``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from tests.stream_nodes import GATE_WAIT

pytestmark = pytest.mark.timeout(90)


def _run_gated(agent: hy.AgentRef, node: str, folder: Path, partials: int
               ) -> tuple[list[int], hy.AgentResult]:
    """Run ``node``; open gate i on reading partial i. (partials read, the result)."""
    inv = agent.run({"node": node, "dir": str(folder), "partials": partials},
                    subscriber=hy.CALLER, stream=True)
    seen: list[int] = []
    for message in agent.messages(inv, timeout=GATE_WAIT * (partials + 2)):
        if isinstance(message, hy.AgentResult):
            return seen, message
        if message.type == "node_partial_result":
            i = message.data["result"]["i"]
            seen.append(i)
            (folder / f"seen-{i}").touch()
    raise AssertionError("messages() ended without a result")


@pytest.mark.parametrize("partials", [1, 2, 3])
@pytest.mark.parametrize("node", ["gated", "agated"])
def test_each_partial_reaches_the_caller_while_the_node_runs(
        agents: hy.AgentSystem, tmp_path: Path, node: str, partials: int) -> None:
    agent = agents.start_agent(hy.AgentConfig(
        "s", {node: f"tests.stream_nodes:{node}"}, "tests.stream_nodes:once"))
    seen, result = _run_gated(agent, node, tmp_path, partials)
    assert result.ok, result.error
    assert result.result == {"gates": partials}, "the node waited for a partial the caller " \
        "had not been given"
    assert seen == list(range(1, partials + 1))


def test_partials_of_a_shared_edge_reach_the_caller_while_the_node_runs(
        agents: hy.AgentSystem, tmp_path: Path) -> None:
    agent = agents.start_agent(hy.AgentConfig(
        "s", {"agated": "tests.stream_nodes:agated"}, "tests.stream_nodes:once",
        edge_concurrency={"agated": 4}))
    seen, result = _run_gated(agent, "agated", tmp_path, 3)
    assert result.ok, result.error
    assert result.result == {"gates": 3}
    assert seen == [1, 2, 3]


def test_a_burst_of_partials_arrives_whole_and_in_order(agents: hy.AgentSystem) -> None:
    agent = agents.start_agent(hy.AgentConfig(
        "s", {"burst": "tests.stream_nodes:burst"}, "tests.stream_nodes:once"))
    inv = agent.run({"node": "burst", "partials": 200}, subscriber=hy.CALLER, stream=True)
    got: list[Any] = []
    for message in agent.messages(inv, timeout=60):
        if isinstance(message, hy.AgentResult):
            assert message.ok, message.error
            break
        got.append(message)
    types = [m.type for m in got]
    assert types[-2:] == ["node_completed", "invocation_completed"]
    assert [m.data["result"]["i"] for m in got if m.type == "node_partial_result"] == list(
        range(200))
