"""Edges on demand and async edges, end to end on real actor processes: a node
grows its edges for a map step and retires the idle ones, an ``async def``
node with ``edge_concurrency=20`` runs 20 items at once on one edge process, a
SIGKILL of that edge ends exactly its tasks, and a timed-out step on a shared
edge cancels its coroutines without killing the edge.

The queue-driven growth (tasks of many invocations waiting for one node) is
tested on the pure pool (tests/unit/test_edge_pool.py)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from hayata_py.store import open_store
from tests.helpers import alive, eventually, find, walk

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def data(tmp_path: Path) -> Iterator[tuple[hy.AgentSystem, Path]]:
    with hy.AgentSystem(tmp_path / "data") as system:
        yield system, tmp_path


def start(system: hy.AgentSystem, node: str, **extra: Any) -> hy.AgentRef:
    return system.start_agent(hy.AgentConfig(
        "edges", {"w": f"tests.edge_nodes:{node}"}, "tests.edge_nodes:map_policy", **extra))


def edge_pids(system: hy.AgentSystem) -> list[int]:
    """Pids of node w's running edges, as its node reports them."""
    node = find(system.tree(), "node", "node:w")
    assert node is not None
    return sorted(r["pid"] for r in walk(node) if r["role"] == "edge"
                  and r["status"] == "running" and r["pid"] is not None)


def starts(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith("start-")]


def test_a_map_step_grows_the_node_to_its_window_on_separate_processes(
        data: tuple[hy.AgentSystem, Path]) -> None:
    system, tmp = data
    agent = start(system, "plain", map_concurrency=3, node_concurrency={"w": 3})
    # An idle node keeps one edge (once it has reported ready: start_agent does
    # not wait for that).
    eventually(lambda: len(edge_pids(system)) == 1, timeout=20, message="one edge ready")
    folder = tmp / "runs"
    folder.mkdir()
    items = [{"dir": str(folder), "sleep": 0.2} for _ in range(6)]
    result = agent.wait(agent.run({"node": "w", "items": items}), 60)
    assert result.ok, result.error
    pids = {r["pid"] for r in result.result["parallel_results"]}
    assert len(pids) == 3  # three plain edges, one task each at a time
    assert len(edge_pids(system)) == 3


def test_idle_edges_beyond_the_first_are_retired_after_the_idle_timeout(
        data: tuple[hy.AgentSystem, Path]) -> None:
    system, _ = data
    agent = start(system, "plain", map_concurrency=3, node_concurrency={"w": 3},
                  edge_idle_timeout=0.5)
    items = [{"sleep": 0.2} for _ in range(6)]
    result = agent.wait(agent.run({"node": "w", "items": items}), 60)
    assert result.ok, result.error
    grown = {r["pid"] for r in result.result["parallel_results"]}
    assert len(grown) == 3
    kept = eventually(lambda: p if len(p := edge_pids(system)) == 1 else None, timeout=20,
                      message="the node back to one edge")
    retired = grown - set(kept)
    eventually(lambda: not any(alive(p) for p in retired), timeout=20,
               message="retired edge processes gone")
    # A retirement is no death: the next run works and the node keeps one edge.
    result = agent.wait(agent.run({"node": "w", "items": [{}]}), 60)
    assert result.ok, result.error
    assert len(edge_pids(system)) == 1


def test_an_async_node_runs_20_items_at_once_on_one_edge(
        data: tuple[hy.AgentSystem, Path]) -> None:
    system, tmp = data
    agent = start(system, "sleeper", map_concurrency=20, edge_concurrency={"w": 20})
    folder = tmp / "runs"
    folder.mkdir()
    # Each item waits until all 20 have started: only 20 at once can finish.
    items = [{"dir": str(folder), "expect": 20, "value": i} for i in range(20)]
    result = agent.wait(agent.run({"node": "w", "items": items}), 90)
    assert result.ok, result.error
    values = [r["value"] for r in result.result["parallel_results"]]
    assert values == list(range(20))
    pids = {r["pid"] for r in result.result["parallel_results"]}
    assert len(pids) == 1 and edge_pids(system) == sorted(pids)  # one process for all 20
    with open_store(f"sqlite:///{tmp / 'data' / 'hayata.db'}") as store:
        records = store.get_tasks(result.invocation_id)
    assert len(records) == 20 and {r.status for r in records} == {"completed"}
    assert sorted(r.result["value"] for r in records) == list(range(20))


def test_sigkill_of_a_shared_edge_ends_exactly_its_tasks_and_the_node_replaces_it(
        data: tuple[hy.AgentSystem, Path]) -> None:
    system, tmp = data
    agent = start(system, "sleeper", map_concurrency=20, edge_concurrency={"w": 20})
    folder = tmp / "runs"
    folder.mkdir()
    items = [{"dir": str(folder), "gate": str(tmp / "never")} for _ in range(20)]
    inv = agent.run({"node": "w", "items": items})
    eventually(lambda: len(starts(folder)) == 20, timeout=60, message="20 items running")
    (pid,) = edge_pids(system)
    assert {int(name.rsplit("-", 1)[1]) for name in starts(folder)} == {pid}
    os.kill(pid, signal.SIGKILL)
    result = agent.wait(inv, 60)
    assert not result.ok and result.error is not None
    assert result.error.code == "node_failed"
    assert result.error.details["node_id"] == "w"
    # Every item started and none recorded a result: each is uncertain, none re-run.
    with open_store(f"sqlite:///{tmp / 'data' / 'hayata.db'}") as store:
        records = store.get_tasks(inv)
    assert len(records) == 20 and {r.status for r in records} == {"started"}
    assert len(starts(folder)) == 20
    def replacement() -> list[int] | None:
        now = edge_pids(system)
        return now if now and pid not in now else None

    replaced = eventually(replacement, timeout=30, message="a replacement edge")
    assert len(replaced) == 1 and not alive(pid)
    result = agent.wait(agent.run({"node": "w", "items": [{"value": 7}]}), 60)
    assert result.ok and result.result["parallel_results"][0]["pid"] == replaced[0]


def test_a_timed_out_step_cancels_the_coroutines_of_a_shared_edge_not_the_edge(
        data: tuple[hy.AgentSystem, Path]) -> None:
    system, tmp = data
    agent = start(system, "sleeper", map_concurrency=5, edge_concurrency={"w": 5},
                  node_timeouts={"w": 1.0})
    folder = tmp / "runs"
    folder.mkdir()
    items = [{"dir": str(folder), "gate": str(tmp / "never")} for _ in range(5)]
    inv = agent.run({"node": "w", "items": items})
    eventually(lambda: len(starts(folder)) == 5, timeout=60, message="5 items running")
    (pid,) = {int(name.rsplit("-", 1)[1]) for name in starts(folder)}
    result = agent.wait(inv, 60)
    assert not result.ok and result.error is not None
    assert result.error.code == "execution_timeout"
    assert edge_pids(system) == [pid] and alive(pid)
    # The same edge process runs the next step: the cancel did not kill it.
    result = agent.wait(agent.run({"node": "w", "items": [{"value": 1}, {"value": 2}]}), 60)
    assert result.ok, result.error
    assert {r["pid"] for r in result.result["parallel_results"]} == {pid}
    assert not [p for p in folder.iterdir() if p.name.startswith("end-")]
    with open_store(f"sqlite:///{tmp / 'data' / 'hayata.db'}") as store:
        assert {r.status for r in store.get_tasks(inv)} == {"started"}
