"""Drills 1-5 and 7 (a map step) of VM_RECOVERY_TESTS.md, automated (drill 6, a member host's
death, is in tests/runtime/test_scale_out.py and tests/cli/test_cli.py).

Each drill runs a real system, kills real processes with SIGKILL (the whole
system, or one actor), starts a new system on the same data directory (new
processes reading the same database file), and compares the store with the
side-effect file the node functions write.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from examples.drills.graph import config
from hayata_py.store import TaskRecord, open_store, task_id_for
from tests.helpers import alive, assert_logged, eventually, find, freeze, lease_row


class Drill:
    def __init__(self, tmp: Path) -> None:
        self.data = tmp / "data"
        self.effects_file = tmp / "effects.log"
        self.tmp = tmp
        self.systems: list[hy.AgentSystem] = []

    def system(self) -> hy.AgentSystem:
        system = hy.AgentSystem(self.data)
        self.systems.append(system)
        return system

    def gate(self, name: str) -> Path:
        return self.tmp / f"gate-{name}"

    def input(self, **extra: Any) -> dict[str, Any]:
        return {"effects": str(self.effects_file), **extra}

    def effects(self) -> Counter[tuple[str, str]]:
        if not self.effects_file.exists():
            return Counter()
        return Counter((line.split()[0], line.split()[2])
                       for line in self.effects_file.read_text().splitlines())

    def tasks(self, inv: str) -> dict[str, TaskRecord]:
        with open_store(f"sqlite:///{self.data / 'hayata.db'}") as store:
            return {t.node_id: t for t in store.get_tasks(inv)}

    def wait_status(self, inv: str, node: str, status: str) -> TaskRecord:
        def probe() -> TaskRecord | None:
            task = self.tasks(inv).get(node)
            return task if task is not None and task.status == status else None

        return eventually(probe, timeout=30, message=f"{node} {status}")

    def close(self) -> None:
        for system in self.systems:
            system.shutdown()


@pytest.fixture
def drill(tmp_path: Path) -> Iterator[Drill]:
    d = Drill(tmp_path)
    try:
        yield d
    finally:
        d.close()


def crash_while_right_runs(drill: Drill) -> tuple[str, hy.AgentSystem, hy.AgentRef]:
    """Drill 1: run until fetch and left completed and right is in flight, then
    SIGKILL every process of the system; start a new system on the same data."""
    system = drill.system()
    agent = system.start_agent(config())
    inv = agent.run(drill.input(gates={"right": str(drill.gate("right"))}))
    drill.wait_status(inv, "left", "completed")
    drill.wait_status(inv, "right", "started")
    # An unstreamed run's events wait up to 100 ms for their write (a kill can
    # lose those): kill once fetch's are in the log, so the recovered run has
    # a first run's log to number on from (drill 2).
    eventually(lambda: any(e.type == "node_completed" and e.data["node_id"] == "fetch"
                           for e in system.store.get_events(inv)),
               timeout=30, message="fetch's events in the log")
    killed = system.kill()
    assert killed and not any(alive(pid) for pid in killed)

    system2 = drill.system()
    agent2 = system2.start_agent(config())
    assert agent2.status() == "recovery_required"
    tasks = drill.tasks(inv)
    assert tasks["fetch"].status == "completed" and tasks["fetch"].result["fetch"] == "fetch-done"
    assert tasks["left"].status == "completed" and tasks["left"].result["left"] == "left-done"
    assert tasks["right"].status == "started" and tasks["right"].result is None
    assert "report" not in tasks
    assert drill.effects() == Counter({("start", "fetch"): 1, ("end", "fetch"): 1,
                                       ("start", "left"): 1, ("end", "left"): 1,
                                       ("start", "right"): 1})
    with pytest.raises(hy.RunRejected) as err:
        agent2.run(drill.input())
    assert err.value.code == "recovery_required"
    return inv, system2, agent2


def test_drill_1_completed_results_survive_a_whole_system_kill(drill: Drill) -> None:
    inv, _system, agent = crash_while_right_runs(drill)
    assert agent.get_result(inv) is None  # unfinished, known


@pytest.mark.parametrize("way_out", ["resolve", "abandon", "idempotent"])
def test_drill_2_uncertain_task_and_each_way_out(drill: Drill, way_out: str) -> None:
    inv, system, agent = crash_while_right_runs(drill)
    right_task = task_id_for(inv, 1, "right")
    before = drill.effects()
    with pytest.raises(hy.RecoveryRejected) as err:
        agent.recover()
    assert err.value.code == "task_execution_uncertain"
    assert err.value.details["task_ids"] == [right_task]
    assert err.value.details["node_ids"] == ["right"]
    assert drill.effects() == before, "a refused recovery runs nothing"
    assert agent.status() == "recovery_required"

    if way_out == "abandon":
        agent.abandon(inv)
        result = agent.get_result(inv)
        assert result is not None and result.error is not None
        assert result.error.code == "abandoned"
        assert agent.status() == "idle"
        fresh = agent.run(drill.input())
        assert agent.wait(fresh, 60).ok
        return

    if way_out == "resolve":
        # A result the store cannot hold is refused before anything is written:
        # not even sent, so no claim (a new fencing token) happens.
        token_before = lease_row(system.store_url, inv)[1]
        with pytest.raises(hy.ConfigError) as bad:
            agent.resolve_task(right_task, result={"right": {1, 2}})
        assert bad.value.details["field"] == "result"
        assert lease_row(system.store_url, inv)[1] == token_before
        assert not drill.tasks(inv)["right"].resolved
        agent.resolve_task(right_task, result={"right": "checked-by-hand"})
        assert drill.tasks(inv)["right"].resolved
    else:
        system.stop_agent("drill")
        agent = system.start_agent(config(idempotent=frozenset({"right"})))
        drill.gate("right").touch()
    recovered = agent.recover(subscriber=hy.CALLER, stream=True)
    assert recovered == inv
    messages = list(agent.messages(inv, timeout=60))
    result = messages[-1]
    assert isinstance(result, hy.AgentResult) and result.ok, result
    assert result.result["state"]["fetch"] == "fetch-done"
    assert result.result["state"]["report"] == "report-done"
    counts = drill.effects()
    assert counts[("start", "fetch")] == 1 and counts[("start", "left")] == 1
    assert counts[("start", "report")] == 1
    expected_right = 2 if way_out == "idempotent" else 1
    assert counts[("start", "right")] == expected_right
    if way_out == "idempotent":
        assert drill.tasks(inv)["right"].attempt == 2
    events = [m for m in messages if isinstance(m, hy.AgentEvent)]
    assert events[0].type == "invocation_started" and events[0].data["recovered"]
    # Numbered on from the first run's logged events: fetch's, at least (the
    # drill killed the system once they were in the log).
    assert events[0].sequence > 1
    assert_logged(system.store, inv, events)
    assert agent.get_result(inv) == result


def test_drill_3_a_new_agent_process_restores_the_checkpoint(drill: Drill) -> None:
    system = drill.system()
    agent = system.start_agent(config())
    inv = agent.run(drill.input(gates={"fetch": str(drill.gate("fetch"))}))
    drill.wait_status(inv, "fetch", "started")
    old = find(system.tree(), "agent")
    assert old is not None
    os.kill(old["pid"], signal.SIGKILL)

    def restarted() -> bool:
        now = find(system.tree(), "agent")
        return bool(now and now["pid"] != old["pid"] and now["status"] == "running")

    eventually(restarted, message="agent restarted")
    assert agent.status() == "recovery_required"
    drill.gate("fetch").touch()  # the edge, still running, finishes and records its result
    drill.wait_status(inv, "fetch", "completed")
    assert agent.recover(subscriber=hy.CALLER) == inv
    result = list(agent.messages(inv, timeout=60))[-1]
    assert isinstance(result, hy.AgentResult) and result.ok
    assert drill.effects()[("start", "fetch")] == 1
    assert agent.status() == "idle"


def test_drill_4_parallel_recovery_reuses_the_done_branch_and_runs_the_other(
    drill: Drill,
) -> None:
    system = drill.system()
    agent = system.start_agent(config())
    right_node = find(system.tree(), "node", "node:right")
    assert right_node is not None
    (right_edge,) = [e for e in right_node["children"] if e["role"] == "edge"]
    freeze(right_edge["pid"])  # right never takes up its work
    inv = agent.run(drill.input())
    drill.wait_status(inv, "left", "completed")
    assert "right" not in drill.tasks(inv)
    system.kill()

    system2 = drill.system()
    agent2 = system2.start_agent(config())
    assert agent2.status() == "recovery_required"
    assert agent2.recover() == inv
    result = agent2.wait(inv, 60)
    assert result.ok, result
    counts = drill.effects()
    assert counts[("start", "left")] == 1 and counts[("start", "right")] == 1
    assert counts[("start", "fetch")] == 1 and counts[("start", "report")] == 1
    tasks = drill.tasks(inv)
    assert tasks["right"].status == "completed" and tasks["right"].attempt == 1


def test_drill_5_an_orphan_edge_cannot_write_after_takeover(drill: Drill) -> None:
    system = drill.system()
    agent = system.start_agent(config())
    inv = agent.run(drill.input(gates={"right": str(drill.gate("right"))}, escape=["right"]))
    drill.wait_status(inv, "right", "started")
    drill.wait_status(inv, "left", "completed")  # only right's outcome is in question
    # The function notes its start just after its durable `started` record.
    orphan = eventually(lambda: next(
        (int(line.split()[3]) for line in drill.effects_file.read_text().splitlines()
         if line.split()[:1] == ["start"] and line.split()[2] == "right"), None),
        timeout=30, message="right's start noted")
    try:
        system.kill()
        assert alive(orphan), "the escaped edge outlives its system"
        system2 = drill.system()
        agent2 = system2.start_agent(config())
        with pytest.raises(hy.RecoveryRejected) as err:
            agent2.recover()  # refused: it writes nothing, the orphan could still record
        assert err.value.code == "task_execution_uncertain"
        right_task = task_id_for(inv, 1, "right")
        # The user checked the external system: resolving claims the invocation, so
        # the orphan's token is now stale.
        agent2.resolve_task(right_task, result={"right": "checked by hand"})
        drill.gate("right").touch()  # the orphan finishes its work and tries to record it
        log = drill.data / "hayata.log.jsonl"

        def refused() -> bool:
            for line in log.read_text().splitlines():
                row = json.loads(line)
                if row.get("event") == "task_result_refused" and row.get("pid") == orphan:
                    return row["task_id"] == right_task and row["code"] == "stale_writer"
            return False

        eventually(refused, timeout=30, message="the orphan's write refused")
        task = drill.tasks(inv)["right"]
        assert task.status == "completed" and task.resolved and task.attempt == 1
        assert task.result == {"right": "checked by hand"}  # the user's, not the orphan's
        assert drill.effects()[("end", "right")] == 1  # it did run; its result did not land
        assert agent2.recover() == inv
        result = agent2.wait(inv, 60)
        assert result.ok, result
        assert drill.effects()[("end", "right")] == 1  # and it is not run again
    finally:
        if alive(orphan):
            os.kill(orphan, signal.SIGKILL)


def test_drill_7_map_recovery_reuses_completed_items_and_runs_the_missing(
    drill: Drill,
) -> None:
    """Drill 7: a map of 6 items, 2 at a time: items 0-2 complete, 3 and 4 are in
    flight (held by a gate), 5 never started; kill -9 the whole system. The new
    system's recover() refuses (3 and 4 are uncertain); with the node declared
    idempotent it re-runs 3 and 4, runs 5 and reuses 0-2 (not run again)."""
    from examples.drills import mapgraph

    system = drill.system()
    agent = system.start_agent(mapgraph.config())
    gate = drill.gate("items")
    inv = agent.run(drill.input(count=6, gates={"3": str(gate), "4": str(gate)}))

    def items() -> dict[int, TaskRecord]:
        with open_store(f"sqlite:///{drill.data / 'hayata.db'}") as store:
            return {t.branch_index: t for t in store.get_tasks(inv)}

    def starts() -> Counter[str]:
        if not drill.effects_file.exists():
            return Counter()
        return Counter(line.split()[1] for line in drill.effects_file.read_text().splitlines()
                       if line.startswith("start "))

    def held() -> bool:
        now = items()
        # Recorded started, and the function got as far as its first effect.
        return all(now[i].status == "completed" for i in (0, 1, 2) if i in now) \
            and {i for i, t in now.items() if t.status == "started"} == {3, 4} \
            and len(now) == 5 and starts()["3"] == 1 and starts()["4"] == 1

    eventually(held, timeout=60, message="items 0-2 completed, 3 and 4 in flight")
    killed = system.kill()
    assert killed and not any(alive(pid) for pid in killed)

    assert starts() == Counter({"0": 1, "1": 1, "2": 1, "3": 1, "4": 1})
    system2 = drill.system()
    agent2 = system2.start_agent(mapgraph.config())
    assert agent2.status() == "recovery_required"
    with pytest.raises(hy.RecoveryRejected) as err:
        agent2.recover()
    assert err.value.code == "task_execution_uncertain"
    assert err.value.details["items"] == [3, 4]
    assert err.value.details["task_ids"] == [task_id_for(inv, 0, "item", item=i)
                                             for i in (3, 4)]
    assert starts() == Counter({"0": 1, "1": 1, "2": 1, "3": 1, "4": 1}), "refused: ran nothing"

    system2.stop_agent("mapdrill")
    agent2 = system2.start_agent(mapgraph.idempotent_config())
    gate.touch()
    assert agent2.recover(subscriber=hy.CALLER, stream=True) == inv
    messages = list(agent2.messages(inv, timeout=60))
    result = messages[-1]
    assert isinstance(result, hy.AgentResult) and result.ok, result
    assert result.result == {"sum": sum(i * i for i in range(6)), "items": list(range(6))}
    assert starts() == Counter({"0": 1, "1": 1, "2": 1, "3": 2, "4": 2, "5": 1})
    events = [m for m in messages if isinstance(m, hy.AgentEvent)]
    assert sorted(e.data["item"] for e in events if e.type == "node_started") == [3, 4, 5]
    assert_logged(system.store, inv, events)
    final = items()
    assert [final[i].attempt for i in range(6)] == [1, 1, 1, 2, 2, 1]
    assert all(t.status == "completed" for t in final.values())
