"""Retries of map items on real actor processes: a failed item is retried on its
own (keyed by its item index), the other items are not run again."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import hayata_py as hy
from hayata_py.store import TaskRecord, open_store
from tests.helpers import alive, collect, eventually

pytestmark = pytest.mark.timeout(120)

FAST = hy.RetryPolicy(max_attempts=3, initial_interval=0.05, jitter=False,
                      retry_on=("tests.map_nodes:Transient",))


@pytest.fixture
def data(tmp_path: Path) -> Iterator[tuple[hy.AgentSystem, Path]]:
    with hy.AgentSystem(tmp_path / "data") as system:
        yield system, tmp_path


def tasks(tmp: Path, inv: str) -> dict[int, TaskRecord]:
    with open_store(f"sqlite:///{tmp / 'data' / 'hayata.db'}") as store:
        return {t.branch_index: t for t in store.get_tasks(inv)}


def test_a_map_item_failing_once_succeeds_on_its_retry(
        data: tuple[hy.AgentSystem, Path]) -> None:
    system, tmp = data
    log = tmp / "effects.log"
    agent = system.start_agent(hy.AgentConfig(
        "mapper", {"item": "tests.map_nodes:item"}, "tests.map_nodes:map_policy",
        map_concurrency=2, retry={"item": FAST}))
    items = [{"value": i, "log": str(log)} | ({"fail_first": 1} if i == 2 else {})
             for i in range(4)]
    inv = agent.run({"items": items}, subscriber=hy.CALLER, stream=True)
    events, result = collect(agent, inv)
    assert result.ok, result
    assert [r["value"] for r in result.result["parallel_results"]] == [0, 1, 2, 3]
    retrying = [e.data for e in events if e.type == "node_retrying"]
    assert len(retrying) == 1 and retrying[0]["item"] == 2 and retrying[0]["attempt"] == 2
    assert retrying[0]["error"] == {"code": "node_failed", "type": "Transient"}
    started = [e.data for e in events if e.type == "node_started"]
    assert Counter(d["item"] for d in started) == Counter({0: 1, 1: 1, 2: 2, 3: 1})
    assert [d.get("attempt") for d in started if d["item"] == 2] == [None, 2]
    # What really ran: item 2 twice (raised once), every other item once.
    runs = Counter(line.split()[1] for line in log.read_text().splitlines()
                   if line.startswith("start"))
    assert runs == Counter({"0": 1, "1": 1, "2": 2, "3": 1})
    records = tasks(tmp, inv)
    assert {i: (t.status, t.attempt) for i, t in records.items()} == {
        0: ("completed", 1), 1: ("completed", 1), 2: ("completed", 2), 3: ("completed", 1)}


def test_a_map_item_failing_every_attempt_fails_the_step(
        data: tuple[hy.AgentSystem, Path]) -> None:
    system, tmp = data
    agent = system.start_agent(hy.AgentConfig(
        "mapper", {"item": "tests.map_nodes:item"}, "tests.map_nodes:map_policy",
        map_concurrency=2, retry={"item": FAST}))
    items = [{"value": i} | ({"fail_first": 9} if i == 1 else {}) for i in range(3)]
    inv = agent.run({"items": items})
    result = agent.wait(inv, timeout=60)
    assert not result.ok and result.error is not None
    assert result.error.code == "node_failed"
    assert result.error.details["attempts"] == ["Transient"] * 3
    assert tasks(tmp, inv)[1].attempt == 3


def test_a_whole_system_kill_during_a_map_items_backoff_then_recover(tmp_path: Path) -> None:
    """Recovery finds item 2's recorded failure, waits what is left of its backoff
    and runs its attempt 2; the completed items are reused, not run again."""
    data, log = tmp_path / "data", tmp_path / "effects.log"
    slow = hy.RetryPolicy(max_attempts=3, initial_interval=2.0, jitter=False,
                          retry_on=("tests.map_nodes:Transient",))
    config = hy.AgentConfig("mapper", {"item": "tests.map_nodes:item"},
                            "tests.map_nodes:map_policy", map_concurrency=3,
                            retry={"item": slow})
    items = [{"value": i, "log": str(log)} | ({"fail_first": 1} if i == 2 else {})
             for i in range(3)]
    system = hy.AgentSystem(data)
    try:
        inv = system.start_agent(config).run({"items": items})

        def settled() -> bool:
            found = tasks(tmp_path, inv)
            return len(found) == 3 and [found[i].status for i in range(3)] == [
                "completed", "completed", "failed"]

        eventually(settled, timeout=30, message="items 0-1 completed, item 2 failed")
        killed = system.kill()
        assert killed and not any(alive(pid) for pid in killed)
    finally:
        system.shutdown()
    with hy.AgentSystem(data) as system2:
        agent2 = system2.start_agent(config)
        assert agent2.status() == "recovery_required"
        assert agent2.recover() == inv
        result = agent2.wait(inv, 60)
        assert result.ok, result.error
        assert [r["value"] for r in result.result["parallel_results"]] == [0, 1, 2]
    runs = Counter(line.split()[1] for line in log.read_text().splitlines()
                   if line.startswith("start"))
    assert runs == Counter({"0": 1, "1": 1, "2": 2})
    assert {i: (t.status, t.attempt) for i, t in tasks(tmp_path, inv).items()} == {
        0: ("completed", 1), 1: ("completed", 1), 2: ("completed", 2)}
