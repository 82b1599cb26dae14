"""Map steps end to end, on real actor processes: the window of items, the
reducer and its failures, bad input, and a reducer SIGKILLed mid-map."""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from hayata_py.cli.ps import find_targets
from hayata_py.store import TaskRecord, open_store, task_id_for
from tests.helpers import alive, collect, eventually, find

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def data(tmp_path: Path) -> Iterator[tuple[hy.AgentSystem, Path]]:
    with hy.AgentSystem(tmp_path / "data") as system:
        yield system, tmp_path


def start(system: hy.AgentSystem, concurrency: int = 4, **extra: Any) -> hy.AgentRef:
    return system.start_agent(hy.AgentConfig(
        "mapper", {"item": "tests.map_nodes:item"}, "tests.map_nodes:map_policy",
        map_concurrency=concurrency, **extra))


def tasks(tmp: Path, inv: str) -> dict[int, TaskRecord]:
    """The invocation's task records by item (branch index)."""
    with open_store(f"sqlite:///{tmp / 'data' / 'hayata.db'}") as store:
        return {t.branch_index: t for t in store.get_tasks(inv)}


def lines(log: Path) -> list[list[str]]:
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []


def test_map_of_20_items_runs_at_most_4_at_once_in_item_order(
        data: tuple[hy.AgentSystem, Path]) -> None:
    system, tmp = data
    log = tmp / "effects.log"
    agent = start(system, concurrency=4)
    items = [{"value": i, "log": str(log), "sleep": 0.15} for i in range(20)]
    inv = agent.run({"items": items}, subscriber=hy.CALLER, stream=True)
    events, result = collect(agent, inv)
    assert result.ok, result.error
    assert [r["item"] for r in result.result["parallel_results"]] == list(range(20))
    assert [r["value"] for r in result.result["parallel_results"]] == list(range(20))
    assert result.result["last_result"] is None and result.result["state"] == {}
    # Each item ran once, on at most 4 edges, at most 4 at a time.
    effects = lines(log)
    assert Counter(e[1] for e in effects if e[0] == "start") == Counter(
        str(i) for i in range(20))
    assert 2 <= len({e[2] for e in effects}) <= 4
    spans = {e[1]: [0.0, 0.0] for e in effects}
    for event, item_no, _pid, at in effects:
        spans[item_no][0 if event == "start" else 1] = float(at)
    edges = sorted([(s, 1) for s, _ in spans.values()] + [(e, -1) for _, e in spans.values()],
                   key=lambda p: (p[0], p[1]))
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    assert 2 <= peak <= 4, peak
    # One durable task per item, with the item's stable id.
    records = tasks(tmp, inv)
    assert sorted(records) == list(range(20))
    assert all(records[i].task_id == task_id_for(inv, 0, "item", item=i)
               and records[i].status == "completed" for i in range(20))
    started = [e.data["item"] for e in events if e.type == "node_started"]
    done = [e.data["item"] for e in events if e.type == "node_completed"]
    assert sorted(started) == sorted(done) == list(range(20)) and started == sorted(started)
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert system.tree() and find(system.tree(), "reducer") is None  # it was temporary


def test_a_map_without_reduce_starts_no_reducer_and_ends_with_the_items_in_order(
        data: tuple[hy.AgentSystem, Path]) -> None:
    """Nothing to consolidate: the agent's machine holds every item's result."""
    system, tmp = data
    gate, log = tmp / "gate", tmp / "log"
    agent = start(system, concurrency=2)
    inv = agent.run({"items": [{"value": i, "log": str(log)} for i in range(3)]
                     + [{"value": 3, "gate": str(gate), "log": str(log)}]})
    eventually(lambda: ["start", "3"] in [e[:2] for e in lines(log)], timeout=30,
               message="the last item running")
    assert find(system.tree(), "reducer") is None  # while the step still runs
    gate.touch()
    result = agent.wait(inv, 60)
    assert result.ok, result.error
    assert [(r["value"], r["item"], r["task_id"]) for r in result.result["parallel_results"]
            ] == [(i, i, task_id_for(inv, 0, "item", item=i)) for i in range(4)]
    assert result.result["last_result"] is None


def test_reduce_result_is_the_step_result(data: tuple[hy.AgentSystem, Path]) -> None:
    system, _ = data
    agent = start(system, state={"keep": 1})
    inv = agent.run({"items": [{"value": i} for i in range(5)],
                     "reduce": "tests.map_nodes:total"})
    result = agent.wait(inv, 60)
    assert result.ok, result.error
    assert result.result["last_result"] == {"total": 10, "count": 5}
    assert result.result["state"] == {"keep": 1, "total": 10, "count": 5}
    assert result.result["parallel_results"] is None


@pytest.mark.parametrize(("reduce", "code", "detail"), [
    ("tests.map_nodes:raising", "reduce_failed", ("type", "ValueError")),
    ("tests.map_nodes:not_a_dict", "reduce_invalid_result", ("returned", "list")),
])
def test_reduce_that_raises_or_returns_no_dict(data: tuple[hy.AgentSystem, Path], reduce: str,
                                               code: str, detail: tuple[str, str]) -> None:
    system, tmp = data
    agent = start(system)
    inv = agent.run({"items": [{"value": i} for i in range(3)], "reduce": reduce})
    result = agent.wait(inv, 60)
    assert not result.ok and result.error is not None
    assert result.error.code == code
    assert result.error.details[detail[0]] == detail[1]
    assert reduce in result.error.message
    # The items did complete (and only they are recorded so).
    assert {i: t.status for i, t in tasks(tmp, inv).items()} == dict.fromkeys(
        range(3), "completed")


@pytest.mark.parametrize(("answer", "code", "field"), [
    ({"items": []}, "map_items_invalid", "items"),
    ({"items": {"not": "a list"}}, "map_items_invalid", "items"),
    ({"items": [1, 2], "reduce": "tests.no_such_module:f"}, "reduce_not_importable", "reduce"),
    ({"items": [1, 2], "reduce": "tests.map_nodes:no_such"}, "reduce_not_importable",
     "reduce"),
    ({"items": "$unencodable"}, "invalid_policy_result", "items[1]"),
])
def test_bad_map_fails_before_any_item_starts(data: tuple[hy.AgentSystem, Path],
                                              answer: dict[str, Any], code: str,
                                              field: str) -> None:
    system, tmp = data
    agent = start(system)
    inv = agent.run(answer)
    result = agent.wait(inv, 60)
    assert not result.ok and result.error is not None
    assert result.error.code == code
    assert result.error.details["field"] == field and field in result.error.message
    assert tasks(tmp, inv) == {}  # nothing started, nothing recorded


def test_first_failing_item_cancels_the_others(data: tuple[hy.AgentSystem, Path]) -> None:
    system, tmp = data
    log = tmp / "effects.log"
    agent = start(system, concurrency=3)
    items: list[dict[str, Any]] = [{"value": i, "log": str(log), "sleep": 30} for i in range(6)]
    items[1] = {"value": 1, "log": str(log), "raise": "item 1 fails"}
    inv = agent.run({"items": items})
    result = agent.wait(inv, 60)
    assert not result.ok and result.error is not None and result.error.code == "node_failed"
    records = tasks(tmp, inv)
    assert records[1].status == "failed"
    # Cut off (or still waiting for an edge when cancelled): none completed.
    assert all(records[i].status == "started" for i in (0, 2) if i in records)
    assert 0 in records or 2 in records
    assert not set(records) & {3, 4, 5}  # never sent
    # Their edges were killed and replaced: the node keeps its 3 edges, all fresh.
    effects = lines(log)
    killed = {e[2] for e in effects if e[1] in ("0", "2")}
    eventually(lambda: not any(alive(int(pid)) for pid in killed), timeout=30,
               message="cancelled items' edges killed")
    assert not any(e[0] == "end" for e in effects)


def test_reducer_killed_mid_map_is_replaced_and_the_step_ends_once(
        data: tuple[hy.AgentSystem, Path]) -> None:
    system, tmp = data
    log, gate = tmp / "effects.log", tmp / "gate"
    agent = start(system, concurrency=2)
    items = [{"value": i, "log": str(log), "gate": str(gate)} for i in range(4)]
    inv = agent.run({"items": items, "reduce": "tests.map_nodes:total"},
                    subscriber=hy.CALLER, stream=True)
    first = eventually(lambda: find(system.tree(), "reducer"), timeout=30, message="reducer")
    assert first["id"] == "item.reducer"
    _, rows = find_targets(system.tree(), "mapper", None, False, None, "item", False)
    assert [r["pid"] for r in rows] == [first["pid"]]  # hayata kill --reducer finds it
    os.kill(first["pid"], signal.SIGKILL)

    def replaced() -> dict[str, Any] | None:
        row = find(system.tree(), "reducer")
        return row if row is not None and row["pid"] != first["pid"] else None

    second = eventually(replaced, timeout=30, message="a replacement reducer")
    assert second["restarts"] == 1 and not alive(first["pid"])
    gate.touch()
    events, result = collect(agent, inv)
    assert result.ok, result.error
    assert result.result["last_result"] == {"total": 6, "count": 4}
    assert Counter(e[1] for e in lines(log) if e[0] == "start") == Counter(
        str(i) for i in range(4))
    assert [e.type for e in events].count("invocation_completed") == 1
    assert sorted(e.data["item"] for e in events if e.type == "node_completed") == [0, 1, 2, 3]


def test_reducer_that_keeps_dying_fails_the_step(data: tuple[hy.AgentSystem, Path]) -> None:
    system, tmp = data
    gate = tmp / "gate"
    agent = start(system, concurrency=1)
    inv = agent.run({"items": [{"value": 0, "gate": str(gate)}],
                     "reduce": "tests.map_nodes:total"})
    killed: list[int] = []
    for _ in range(3):
        row = eventually(lambda: (r := find(system.tree(), "reducer")) is not None
                         and r["pid"] not in killed and r, timeout=30, message="reducer")
        assert isinstance(row, dict)
        os.kill(row["pid"], signal.SIGKILL)
        killed.append(row["pid"])
    gate.touch()
    result = agent.wait(inv, 60)
    assert not result.ok and result.error is not None
    assert result.error.code == "reducer_crashed" and result.error.details["deaths"] == 3
