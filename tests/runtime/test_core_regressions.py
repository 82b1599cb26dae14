"""Regressions of the runtime core, on real processes killed with SIGKILL.

- A node re-checks all its edges whenever one exit arrives: Thespian, after
  delivering one ``ChildActorExited``, silently reaps every other child that
  is already dead, so a node that trusted the exits it is told about kept
  dead edges in its table (and in ``tree()``) forever.
- A crash of the node supervisor restarts the agent through a clean stop; the
  running invocation must stay recoverable, not end as ``agent_stopped``.
- A sequential step is two hops (agent -> edge -> agent): no reducer process,
  no node on the path.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import hayata_py as hy
from hayata_py._actor_messages import EnsureEdges
from supervisors import SupervisorRef
from tests.helpers import alive, eventually, find, walk


def _child_address(system: hy.AgentSystem, *path: str) -> Any:
    """The address of the child at ``path`` below the top supervisor."""
    address = system._top.address
    for child_id in path:
        address = SupervisorRef(system._system, address, "", 0).child(child_id).address
    return address


def _edges(system: hy.AgentSystem, node: str) -> list[dict[str, Any]]:
    row = find(system.tree(), "node", f"node:{node}")
    assert row is not None
    return [e for e in row["children"] if e["role"] == "edge"]


def test_a_node_notices_every_dead_edge_when_several_die_at_once(
    agents: hy.AgentSystem,
) -> None:
    agent = agents.start_agent(hy.AgentConfig(
        "many", {"w": "tests.graph_nodes:worker"}, "tests.graph_nodes:scripted"))
    node = _child_address(agents, "agent:many", "nodes", "node:w")
    agents._system.tell(node, EnsureEdges(3))
    first = eventually(lambda: (e := _edges(agents, "w")) and len(e) == 3
                       and all(r["pid"] for r in e) and e, message="three edges")
    killed = [e["pid"] for e in first]
    for pid in killed:
        os.kill(pid, signal.SIGKILL)

    def replaced() -> list[dict[str, Any]] | None:
        now = _edges(agents, "w")
        pids = [e["pid"] for e in now]
        ok = len(now) == 3 and all(p and alive(p) for p in pids) \
            and not set(pids) & set(killed)
        return now if ok else None

    eventually(replaced, timeout=20, message="every dead edge replaced, none kept")
    assert not [p for p in killed if alive(p)]
    result = agent.wait(agent.run({"steps": [["next", "w", {}], ["finish", "ok"]]}), 30)
    assert result.ok and result.result == "ok"


def test_a_node_supervisor_crash_keeps_the_invocation_recoverable(
    agents: hy.AgentSystem, tmp_path: Path,
) -> None:
    pid_file, gate = tmp_path / "edge.pid", tmp_path / "gate"
    agent = agents.start_agent(hy.AgentConfig(
        "sturdy", {"w": "tests.graph_nodes:touch_and_wait"}, "tests.graph_nodes:scripted",
        execution_timeout=60.0, idempotent_nodes=frozenset({"w"})))
    inv = agent.run({"steps": [["next", "w", {"pid_file": str(pid_file), "gate": str(gate),
                                              "sleep": 60}], ["finish", "done"]]})
    edge_pid = int(eventually(lambda: pid_file.exists() and pid_file.read_text()))
    nodes = find(agents.tree(), "supervisor", "nodes")
    before = find(agents.tree(), "agent")
    assert nodes is not None and before is not None
    os.kill(nodes["pid"], signal.SIGKILL)

    eventually(lambda: not alive(edge_pid), message="the edge died with its node")

    def restarted() -> bool:
        now = find(agents.tree(), "agent")
        return bool(now and now["status"] == "running" and now["pid"] != before["pid"])

    eventually(restarted, timeout=20, message="the agent restarted with its nodes")
    assert agent.status() == "recovery_required"
    assert agent.get_result(inv) is None  # nothing was recorded as its end
    gate.touch()
    assert agent.recover() == inv  # the idempotent task runs again, this time briefly
    result = agent.wait(inv, 30)
    assert result.ok and result.result == "done"


def test_stop_agent_still_ends_a_running_invocation_as_agent_stopped(
    agents: hy.AgentSystem, tmp_path: Path,
) -> None:
    pid_file = tmp_path / "edge.pid"
    agent = agents.start_agent(hy.AgentConfig(
        "stoppable", {"w": "tests.graph_nodes:touch_and_wait"}, "tests.graph_nodes:scripted",
        execution_timeout=60.0))
    inv = agent.run({"steps": [["next", "w", {"pid_file": str(pid_file), "sleep": 60}]]})
    eventually(lambda: pid_file.exists(), message="edge running")
    agents.stop_agent("stoppable")
    again = agents.start_agent(hy.AgentConfig(
        "stoppable", {"w": "tests.graph_nodes:touch_and_wait"}, "tests.graph_nodes:scripted"))
    assert again.status() == "idle"
    result = again.get_result(inv)
    assert result is not None and result.error is not None
    assert result.error.code == "agent_stopped"


def test_a_sequential_step_uses_no_reducer_and_no_extra_process(
    agents: hy.AgentSystem,
) -> None:
    agent = agents.start_agent(hy.AgentConfig(
        "lean", {n: "tests.graph_nodes:worker" for n in ("a", "b", "c")},
        "tests.graph_nodes:scripted"))
    before = sorted(r["pid"] for r in walk(agents.tree()) if r["pid"])
    steps = [["next", n, {}] for n in ("a", "b", "c")] + [["finish", 3]]
    assert agent.wait(agent.run({"steps": steps}), 30).result == 3
    rows = list(walk(agents.tree()))
    assert not [r for r in rows if r["role"] == "reducer"]
    assert sorted(r["pid"] for r in rows if r["pid"]) == before  # no process created
    agent_rows = [r for r in rows if r["id"] == "agent:lean"]
    # agent supervisor, node supervisor, watcher, 3 nodes, 3 edges, agent
    assert len(list(walk(agent_rows[0]))) == 10
