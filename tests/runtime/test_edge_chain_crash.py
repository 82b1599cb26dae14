"""A chain of map items on one edge, on real processes: each item's end is
committed in the transaction of the next one's start, and an edge SIGKILLed
in the middle of a chain leaves every item it never began without a record
(``not_started``), the one it ran ``started`` (uncertain), the ones before it
completed: no item ever ran without its own ``started`` record. The chain's
Outcomes go together at its end, so the agent takes the ends the dead edge
had recorded from the store: those items completed, only the one it was
running failed."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from hayata_py._rules import edge_pool
from hayata_py.store import TaskClass, classify_map, task_id_for
from tests.helpers import collect, eventually, find
from tests.runtime.test_map_steps import data, tasks  # noqa: F401 - the fixture, and the reader

pytestmark = pytest.mark.timeout(120)


def effects(log: Path) -> dict[int, dict[str, float]]:
    """Item -> {"start"/"end": time.time() the function logged it}."""
    out: dict[int, dict[str, float]] = {}
    for line in log.read_text().splitlines() if log.exists() else []:
        event, item, _pid, at = line.split()
        out.setdefault(int(item), {})[event] = float(at)
    return out


@pytest.fixture
def chains_at_any_pace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Items chain whatever this machine's pace: the agent chains a node's items
    only while its tasks take under ``CHAIN_BELOW`` each, and a loaded machine
    takes longer (the agent, forked after this, inherits the setting)."""
    monkeypatch.setattr(edge_pool, "CHAIN_BELOW", 60.0)


def test_an_edge_killed_mid_chain_leaves_held_items_not_started(
        chains_at_any_pace: None,
        data: tuple[hy.AgentSystem, Path]) -> None:  # noqa: F811 - the imported fixture
    system, tmp = data
    agent = system.start_agent(hy.AgentConfig(
        "chainer", {"item": "tests.map_nodes:item"}, "tests.map_nodes:map_policy",
        map_concurrency=1))
    # The first items teach the agent the node's pace: its items then go in chains.
    warm = agent.wait(agent.run({"items": [{"value": i} for i in range(30)]}), 60)
    assert warm.ok, warm.error
    edge = find(system.tree(), "edge")
    assert edge is not None and edge["pid"]
    log, gate, n, held = tmp / "effects.log", tmp / "gate", 14, 5
    items: list[dict[str, Any]] = [{"value": i, "log": str(log)} for i in range(n)]
    items[held]["gate"] = str(gate)
    inv = agent.run({"items": items}, subscriber=hy.CALLER, stream=True)
    eventually(lambda: "start" in effects(log).get(held, {}), timeout=30,
               message=f"item {held} running")
    os.kill(edge["pid"], signal.SIGKILL)
    events, result = collect(agent, inv)
    assert not result.ok and result.error is not None
    assert result.error.code == "node_failed" and "died" in result.error.message
    gate.touch()
    # The items the dead edge had finished but not reported (its chain's
    # Outcomes go at the chain's end) completed, from their records.
    completed = sorted(e.data["item"] for e in events if e.type == "node_completed")
    assert completed == list(range(held))

    found, ran = tasks(tmp, inv), effects(log)
    # No item ran without its own started record, made before it ran.
    for i, times in ran.items():
        assert i in found, f"item {i} ran without a record"
        assert found[i].started_at is not None and found[i].started_at <= times["start"]
    assert sorted(ran) == list(range(held + 1))
    assert all("end" in ran[i] for i in range(held)) and "end" not in ran[held]
    # The items after the killed one never began: no record at all, not even
    # those that were sent to the edge with it.
    assert sorted(found) == list(range(held + 1))
    # The chain: an item's end and the next item's start in one transaction.
    merged = [i for i in range(held) if found[i].finished_at == found[i + 1].started_at]
    assert merged, "no item's end was committed with the next one's start"
    # What recover() would see.
    found_map = classify_map([task_id_for(inv, 0, "item", item=i) for i in range(n)],
                             found.values())
    assert [found_map.classes[i] for i in range(n)] == (
        [TaskClass.COMPLETED] * held + [TaskClass.UNCERTAIN]
        + [TaskClass.NOT_STARTED] * (n - held - 1))
