"""When recover() refuses, and what a refusal leaves behind, on real processes.

- A refused recover() (an uncertain task) writes nothing: it neither claims the
  invocation nor fences anyone, so when only the agent died the node's edge still
  records its real result, and the next recover() reuses it.
- A step whose outcome is already decided by a recorded final failure is not held
  up by an uncertain sibling: recover() ends the invocation with that failure
  instead of asking the user about a task whose result cannot matter.
"""

from __future__ import annotations

import dataclasses
import os
import signal
from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from hayata_py.store import TaskClass, open_store
from tests.helpers import alive, eventually, find, freeze
from tests.hitl_nodes import effects

pytestmark = pytest.mark.timeout(120)

NODES = {"a": "tests.hitl_nodes:flaky", "b": "tests.hitl_nodes:flaky"}


def config() -> hy.AgentConfig:
    return hy.AgentConfig(id="refusals", nodes=NODES,
                          decision_policy="tests.hitl_nodes:sequence", execution_timeout=120)


def statuses(data: Path, invocation_id: str) -> dict[str, str]:
    with open_store(f"sqlite:///{data / 'hayata.db'}") as store:
        return {t.node_id: t.status for t in store.get_tasks(invocation_id)}


def started_logged(data: Path, invocation_id: str) -> set[str]:
    with open_store(f"sqlite:///{data / 'hayata.db'}") as store:
        return {e.data["node_id"] for e in store.get_events(invocation_id)
                if e.type == "node_started"}


def test_a_refused_recover_writes_nothing_so_a_live_edge_still_records(
        tmp_path: Path) -> None:
    data, log, gate = tmp_path / "data", tmp_path / "effects", tmp_path / "gate"
    with hy.AgentSystem(data) as system:
        agent = system.start_agent(config())
        inv = agent.run({"effects": str(log), "plan": ["a"], "gates": {"a": str(gate)}})
        eventually(lambda: statuses(data, inv) == {"a": "started"}, timeout=30,
                   message="a started")
        before = find(system.tree(), "agent")
        assert before is not None
        os.kill(before["pid"], signal.SIGKILL)  # the agent alone: node and edge live on

        def restarted() -> bool:
            now = find(system.tree(), "agent")
            return now is not None and now.get("pid") not in (None, before["pid"])

        eventually(restarted, timeout=30, message="the agent restarted")
        assert agent.status() == "recovery_required"
        with pytest.raises(hy.RecoveryRejected) as err:
            agent.recover()  # too early: a is still running
        assert err.value.code == "task_execution_uncertain"
        gate.touch()
        eventually(lambda: statuses(data, inv) == {"a": "completed"}, timeout=30,
                   message="the live edge's result recorded after the refusal")
        assert agent.recover() == inv
        result = agent.wait(inv, 30)
        assert result.ok, result
        assert result.result is not None and result.result["state"]["a"] == "done-1"
        assert effects(log) == [("a", 1)]  # ran once; its result was reused


def test_a_recorded_final_failure_ends_the_step_despite_an_uncertain_sibling(
        tmp_path: Path) -> None:
    data, log = tmp_path / "data", tmp_path / "effects"
    gate_a, gate_b = tmp_path / "gate-a", tmp_path / "gate-b"
    spec: dict[str, Any] = {"effects": str(log), "plan": [["a", "b"]], "fail": {"a": 1},
                            "permanent": True,
                            "gates": {"a": str(gate_a), "b": str(gate_b)}}
    system = hy.AgentSystem(data)
    try:
        agent = system.start_agent(config())
        inv = agent.run(spec)
        eventually(lambda: statuses(data, inv) == {"a": "started", "b": "started"},
                   timeout=30, message="both branches started")
        # Freeze the agent once its last write before the wait committed (the log's
        # node_started events): frozen inside a write transaction it would keep
        # SQLite's write lock, and a's edge could not record its failure at all.
        eventually(lambda: started_logged(data, inv) == {"a", "b"}, timeout=30,
                   message="both branches' node_started in the log")
        agent_pid = find(system.tree(), "agent")
        assert agent_pid is not None
        freeze(agent_pid["pid"])  # too slow to act on a's failure
        gate_a.touch()
        eventually(lambda: statuses(data, inv).get("a") == "failed", timeout=30,
                   message="a's failure recorded")
        killed = system.kill()
        assert killed and not any(alive(pid) for pid in killed)
    finally:
        system.shutdown()
    with hy.AgentSystem(data) as system2:
        agent2 = system2.start_agent(config())
        assert agent2.status() == "recovery_required"
        assert agent2.recover() == inv  # not refused over b: the step failed already
        result = agent2.wait(inv, 30)
        assert not result.ok and result.error is not None
        assert result.error.code == "node_failed", result.error
        assert statuses(data, inv) == {"a": "failed", "b": "started"}  # b is not re-run
        assert sorted(effects(log)) == [("a", 1), ("b", 1)]


def test_tasks_classifies_as_this_agents_recover_would(agents: hy.AgentSystem,
                                                       tmp_path: Path) -> None:
    """An uncertain task of an idempotent node is ``rerun`` (recover runs it again),
    not ``uncertain``; another agent's invocation is not this agent's to list."""
    log, gate = tmp_path / "effects", tmp_path / "gate"
    idem = agents.start_agent(dataclasses.replace(
        config(), id="idem", idempotent_nodes=frozenset({"a"})))
    other = agents.start_agent(dataclasses.replace(config(), id="other"))
    inv = idem.run({"effects": str(log), "plan": [["a", "b"]],
                    "gates": {"a": str(gate), "b": str(gate)}})
    rows = eventually(lambda: (r := idem.tasks(inv)) and len(r) == 2
                      and all(t.status == "started" for t, _ in r) and r,
                      timeout=30, message="both branches started")
    assert {t.node_id: c for t, c in rows} == {"a": TaskClass.RERUN,
                                               "b": TaskClass.UNCERTAIN}
    with pytest.raises(hy.HayataError) as err:
        other.tasks(inv)
    assert err.value.code == "not_found"
    gate.touch()
    assert idem.wait(inv, 30).ok
