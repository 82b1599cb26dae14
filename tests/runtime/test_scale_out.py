"""Scale-out acceptance (issue 7): several AgentSystems in one Thespian convention
on loopback, one shared PostgreSQL store (a real server).

- an agent on A with one node placed on B by capability; results and events
  reach a subscriber on A;
- SIGKILL of every process of B mid-invocation: A reports the invocation
  interrupted (recoverable) within seconds; ``recover`` on A reuses the
  completed tasks and reports the uncertain one;
- two systems recovering the same invocation: exactly one proceeds, the other
  gets ``invocation_busy``; a stale writer's token records nothing.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from examples.drills.graph import config
from hayata_py.store import open_store, task_id_for
from tests.helpers import eventually, lease_row, pids, race, walk
from tests.store.util import raw_execute

pytestmark = pytest.mark.postgres

LIVENESS = hy.Liveness(heartbeat=0.1, heartbeat_misses=3, convention_period=1.0,
                       convention_misses=2)


class Cluster:
    """Systems started by a test; stopped leader-last-started-first, killed if need be."""

    def __init__(self, tmp: Path, url: str) -> None:
        self.tmp, self.url = tmp, url
        self.systems: list[hy.AgentSystem] = []
        self.leader: hy.AgentSystem | None = None

    def start(self, name: str, *, member: bool = True, **kwargs: Any) -> hy.AgentSystem:
        leader = None
        if member and self.leader is not None:
            leader = ("127.0.0.1", self.leader.admin_port)
        system = hy.AgentSystem(self.tmp / name, store_url=self.url, name=name,
                                convention_leader=leader, liveness=LIVENESS, **kwargs)
        self.systems.append(system)
        if not member and self.leader is None:
            self.leader = system
        return system

    def close(self) -> None:
        for system in self.systems:
            try:
                system.shutdown()
            except Exception:  # noqa: BLE001 - kill what a failed shutdown left
                system.kill()


@pytest.fixture
def cluster(tmp_path: Path, pg_url: str) -> Iterator[Cluster]:
    c = Cluster(tmp_path, pg_url)
    try:
        yield c
    finally:
        c.close()


def effects_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def starts(path: Path, task_id: str) -> int:
    return sum(1 for line in effects_of(path) if line.startswith(f"start {task_id} "))


def wait_right_in_flight(store: Any, inv: str, where: str) -> None:
    """Until ``left`` has completed and ``right`` has started (held by its gate):
    a kill then leaves exactly one task uncertain."""
    left, right = task_id_for(inv, 1, "left"), task_id_for(inv, 1, "right")

    def in_flight() -> bool:
        tasks = {t.task_id: t.status for t in store.get_tasks(inv)}
        return tasks.get(left) == "completed" and tasks.get(right) == "started"

    eventually(in_flight, timeout=30, message=f"left done, right in flight on {where}")


def gpu_config(**changes: Any) -> hy.AgentConfig:
    return dataclasses.replace(config(), node_placement={"right": {"gpu": True}}, **changes)


def test_node_placed_on_another_system_runs_and_streams_to_a(cluster: Cluster) -> None:
    a = cluster.start("A", member=False)
    b = cluster.start("B", capabilities={"gpu": True})
    effects = cluster.tmp / "effects"
    agent = a.start_agent(gpu_config())
    tree = a.tree()
    nodes = {row["id"]: row for row in walk(tree)}
    assert nodes["node:right"]["pid"] in pids(b)
    assert nodes["node:left"]["pid"] in pids(a)
    inv = agent.run({"effects": str(effects)}, subscriber=hy.CALLER, stream=True)
    received = list(agent.messages(inv, timeout=60))
    result = received[-1]
    assert isinstance(result, hy.AgentResult) and result.ok
    events = [m for m in received if isinstance(m, hy.AgentEvent)]
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    completed = {e.data["node_id"] for e in events if e.type == "node_completed"}
    assert completed == {"fetch", "left", "right", "report"}
    right_pid = int(next(line.split()[3] for line in effects_of(effects)
                         if line.startswith("start") and " right " in line))
    assert right_pid in pids(b) and right_pid not in pids(a)


def test_member_killed_mid_invocation_is_reported_and_recovered(cluster: Cluster) -> None:
    a = cluster.start("A", member=False)
    b = cluster.start("B", capabilities={"gpu": True})
    effects, gate = cluster.tmp / "effects", cluster.tmp / "gate"
    agent = a.start_agent(gpu_config())
    inv = agent.run({"effects": str(effects), "gates": {"right": str(gate)}})
    store = open_store(cluster.url)
    left, right = task_id_for(inv, 1, "left"), task_id_for(inv, 1, "right")
    wait_right_in_flight(store, inv, "B")
    killed_at = time.monotonic()
    b.kill()
    result = agent.wait(inv, timeout=30)
    noticed = time.monotonic() - killed_at
    assert not result.ok and result.error is not None
    assert result.error.code == "invocation_interrupted"
    assert result.error.details["recoverable"] is True
    assert noticed < 5.0, noticed  # heartbeats: 0.1 s x 3, not the convention's minutes
    assert agent.status() == "recovery_required"
    record = store.get_invocation(inv)
    assert record is not None and record.status == "running"
    # The task that started on B recorded no result: uncertain, never re-run silently.
    with pytest.raises(hy.RecoveryRejected) as err:
        agent.recover()
    assert err.value.code == "task_execution_uncertain"
    assert err.value.details["task_ids"] == [right]
    # A new GPU host joins; the operator checked the external system.
    b2 = cluster.start("B2", capabilities={"gpu": True})
    agent.resolve_task(right, result={"right": "checked by hand"})
    assert agent.recover() == inv
    done = agent.wait(inv, timeout=60)
    assert done.ok, done
    assert done.result["state"]["report"] == "report-done"
    resolved = store.get_task(right)
    assert resolved is not None and resolved.result == {"right": "checked by hand"}
    assert starts(effects, left) == 1  # completed work was reused, not re-run
    assert starts(effects, right) == 1
    report_pid = int(next(line.split()[3] for line in effects_of(effects)
                          if line.startswith(f"start {task_id_for(inv, 2, 'report')} ")))
    assert report_pid in pids(a)

    def right_on_b2() -> bool:
        rows = {row["id"]: row for row in walk(a.tree())}
        return rows["node:right"]["pid"] in pids(b2)

    eventually(right_on_b2, timeout=15, message="node right restarted on B2")
    store.close()


def _task_row(url: str, task_id: str) -> tuple[Any, ...]:
    rows = raw_execute(url, "SELECT * FROM hayata_tasks WHERE task_id = :t", t=task_id)
    assert rows, task_id
    return tuple(rows[0])


def test_two_systems_recover_one_invocation_exactly_one_proceeds(cluster: Cluster) -> None:
    cfg = dataclasses.replace(config(idempotent=frozenset({"right"})), lease_seconds=1.5)
    x = cluster.start("X", member=False)
    effects, gate = cluster.tmp / "effects", cluster.tmp / "gate"
    inv = x.start_agent(cfg).run({"effects": str(effects), "gates": {"right": str(gate)}})
    store = open_store(cluster.url)
    right = task_id_for(inv, 1, "right")
    wait_right_in_flight(store, inv, "X")
    y, z = cluster.start("Y", member=False), cluster.start("Z", member=False)
    agents = [y.start_agent(cfg), z.start_agent(cfg)]
    assert [ag.status() for ag in agents] == ["recovery_required"] * 2
    # X is alive and renews its lease: nobody else may take the invocation.
    with pytest.raises(hy.RecoveryRejected) as busy:
        agents[0].recover()
    assert busy.value.code == "invocation_busy"
    owner, old_token, _ = lease_row(cluster.url, inv)
    assert owner == "X"
    x.kill()

    def expired() -> bool:
        _owner, _token, expires = lease_row(cluster.url, inv)
        return expires is not None and expires < time.time()

    eventually(expired, timeout=10, message="X's lease expired")
    outcomes = race(agents[0].recover, agents[1].recover)
    winners = [i for i, o in enumerate(outcomes) if o == inv]
    losers = [o for o in outcomes if isinstance(o, hy.RecoveryRejected)]
    assert len(winners) == 1 and len(losers) == 1, outcomes
    assert losers[0].code == "invocation_busy"
    winner_name = "YZ"[winners[0]]
    owner, new_token, _ = lease_row(cluster.url, inv)
    assert owner == winner_name and new_token > old_token
    # The winner re-runs the idempotent task (it waits at the gate, writing nothing).
    eventually(lambda: (t := store.get_task(right)) is not None and t.attempt == 2
               and t.status == "started", timeout=30, message="right re-run started")
    # A stale writer (an orphan of X) with the old token records nothing.
    before = _task_row(cluster.url, right)
    with pytest.raises(hy.StaleWriter):
        store.mark_completed(right, token=old_token, result={"right": "stale"})
    assert _task_row(cluster.url, right) == before
    gate.touch()
    done = agents[winners[0]].wait(inv, timeout=60)
    assert done.ok, done
    rerun = store.get_task(right)
    assert rerun is not None and rerun.status == "completed"
    assert rerun.result["right"] == "right-done"
    record = store.get_invocation(inv)
    assert record is not None and record.status == "completed"
    # The loser learns from the store that the invocation ended elsewhere: it is
    # free again and answers with the stored result.
    loser = agents[1 - winners[0]]
    assert loser.status() == "idle"
    assert loser.wait(inv, timeout=10).ok
    assert loser.wait(loser.run({"effects": str(effects)}), timeout=60).ok
    store.close()


def test_agent_placed_on_a_member_moves_when_its_host_dies(cluster: Cluster) -> None:
    """The whole agent runs where its placement is satisfied; when that host
    dies the agent waits for another one, then the invocation is recovered
    there (the lease owner is the system that started the agent, A)."""
    a = cluster.start("A", member=False)
    b = cluster.start("B", capabilities={"zone": "b"})
    effects, gate = cluster.tmp / "effects", cluster.tmp / "gate"
    cfg = dataclasses.replace(config(idempotent=frozenset({"right"})), placement={"zone": "b"})
    agent = a.start_agent(cfg)
    rows = {row["id"]: row for row in walk(a.tree())}
    assert rows["agent"]["pid"] in pids(b) and rows["node:left"]["pid"] in pids(b)
    inv = agent.run({"effects": str(effects), "gates": {"right": str(gate)}})
    store = open_store(cluster.url)
    right = task_id_for(inv, 1, "right")
    wait_right_in_flight(store, inv, "B")
    b.kill()

    def waiting() -> bool:
        return any(r["id"] == "agent:drill" and r["status"] == "waiting_for_placement"
                   for r in walk(a.tree()))

    eventually(waiting, timeout=10, message="the agent waits for a zone-b system")
    b2 = cluster.start("B2", capabilities={"zone": "b"})

    def restarted_and_found_it() -> bool:
        try:
            return agent.status() == "recovery_required"
        except hy.AgentNotFound:  # between its placement and its start
            return False

    eventually(restarted_and_found_it, timeout=30,
               message="the agent restarted on B2 finds the invocation")
    rows = {row["id"]: row for row in walk(a.tree())}
    assert rows["agent"]["pid"] in pids(b2)
    assert agent.recover() == inv  # right is idempotent: re-run
    gate.touch()
    done = agent.wait(inv, timeout=60)
    assert done.ok, done
    assert starts(effects, task_id_for(inv, 0, "fetch")) == 1
    assert starts(effects, right) == 2
    store.close()


def test_a_run_for_a_node_without_a_host_is_interrupted_at_once(cluster: Cluster) -> None:
    """The node's only host died: a new run does not wait for the execution
    deadline; it is interrupted (nothing started) and recovered later."""
    a = cluster.start("A", member=False)
    b = cluster.start("B", capabilities={"gpu": True})
    effects = cluster.tmp / "effects"
    agent = a.start_agent(gpu_config())
    b.kill()

    def waiting() -> bool:
        return any(r["id"] == "node:right" and r["status"] == "waiting_for_placement"
                   for r in walk(a.tree()))

    eventually(waiting, timeout=10, message="node right waits for a gpu system")
    # A restarted agent learns which nodes wait for a host too.
    agent_row = next(r for r in walk(a.tree()) if r["id"] == "agent")
    os.kill(agent_row["pid"], signal.SIGKILL)

    def agent_back() -> bool:
        row = next(r for r in walk(a.tree()) if r["id"] == "agent")
        return row["status"] == "running" and row["pid"] != agent_row["pid"]

    eventually(agent_back, timeout=10, message="agent restarted")
    began = time.monotonic()
    inv = agent.run({"effects": str(effects)})
    result = agent.wait(inv, timeout=30)
    assert time.monotonic() - began < 5.0
    assert result.error is not None and result.error.code == "invocation_interrupted"
    assert "waiting_for_placement" in result.error.details["reason"]
    assert agent.status() == "recovery_required"
    # Too early: the step would run right, which no system can run yet. Refused,
    # nothing written (it used to be dispatched and fail at the step deadline).
    with pytest.raises(hy.RecoveryRejected) as early:
        agent.recover()
    assert early.value.code == "waiting_for_placement"
    assert early.value.details["node_id"] == "right"
    assert agent.status() == "recovery_required"
    cluster.start("B2", capabilities={"gpu": True})
    eventually(lambda: not waiting(), timeout=15, message="node right placed on B2")
    assert agent.recover() == inv
    done = agent.wait(inv, timeout=60)
    assert done.ok, done
    assert starts(effects, task_id_for(inv, 1, "right")) == 1
