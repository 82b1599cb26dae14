"""Killing nodes and agents with SIGKILL: prompt failure, no orphan edges, restart."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from tests.helpers import alive, eventually, find, in_thread


def test_killing_a_node_mid_execution_fails_fast_and_the_node_comes_back(
    agents: hy.AgentSystem, tmp_path: Path
) -> None:
    pid_file = tmp_path / "edge.pid"
    agent = agents.start_agent(hy.AgentConfig(
        "crashy", {"w": "tests.graph_nodes:touch_and_wait", "ok": "tests.graph_nodes:worker"},
        "tests.graph_nodes:scripted", execution_timeout=60.0))
    inv = agent.run({"steps": [["next", "w", {"pid_file": str(pid_file), "sleep": 60}]]},
                    subscriber=hy.CALLER, stream=True)
    edge_pid = int(eventually(lambda: pid_file.exists() and pid_file.read_text()))
    node = find(agents.tree(), "node", "node:w")
    assert node is not None and node["restarts"] == 0
    assert edge_pid in [e["pid"] for e in node["children"] if e["role"] == "edge"]

    killed_at = time.monotonic()
    os.kill(node["pid"], signal.SIGKILL)
    messages = list(agent.messages(inv, timeout=30))
    took = time.monotonic() - killed_at
    result = messages[-1]
    assert isinstance(result, hy.AgentResult)
    assert result.error is not None and result.error.code == "node_crashed"
    assert result.error.details["node_id"] == "w"
    assert took < 30, "node_crashed must not wait for the execution timeout"
    assert [m.type for m in messages[:-1]][-1] == "invocation_failed"
    eventually(lambda: not alive(edge_pid), message="the dead node's edge is gone")

    def restarted() -> dict[str, Any] | None:
        again = find(agents.tree(), "node", "node:w")
        ok = again and again["status"] == "running" and again["pid"] != node["pid"]
        return again if ok else None

    again = eventually(restarted, message="node restarted")
    assert again["restarts"] == 1
    assert agent.status() == "idle"
    rerun = agent.run({"steps": [["next", "ok", {}], ["finish", "fine"]]})
    assert agent.wait(rerun, 30).result == "fine"


def test_killing_the_idle_agent_restarts_it(agents: hy.AgentSystem) -> None:
    agent = agents.start_agent(hy.AgentConfig(
        "phoenix", {"ok": "tests.graph_nodes:worker"}, "tests.graph_nodes:scripted"))
    assert agent.wait(agent.run({"steps": [["finish", 1]]}), 30).ok
    before = find(agents.tree(), "agent")
    assert before is not None
    os.kill(before["pid"], signal.SIGKILL)

    def restarted() -> dict[str, Any] | None:
        now = find(agents.tree(), "agent")
        return now if now and now["status"] == "running" and now["pid"] != before["pid"] \
            else None

    now = eventually(restarted, message="agent restarted")
    assert now["restarts"] == 1
    nodes = find(agents.tree(), "node", "node:ok")
    assert nodes is not None and nodes["restarts"] == 0  # nodes survive an agent crash
    rerun = agent.run({"steps": [["next", "ok", {}], ["finish", "again"]]})
    assert agent.wait(rerun, 30).result == "again"


def test_an_edge_that_dies_by_itself_fails_the_task(agents: hy.AgentSystem) -> None:
    agent = agents.start_agent(hy.AgentConfig(
        "exiter", {"x": "tests.graph_nodes:worker"}, "tests.graph_nodes:scripted"))
    result = agent.wait(agent.run({"steps": [["next", "x", {"exit": True}]]}), 30)
    assert result.error is not None and result.error.code == "node_failed"
    assert "died" in result.error.message
    rerun = agent.run({"steps": [["next", "x", {}], ["finish", 2]]})
    assert agent.wait(rerun, 30).result == 2


def test_no_process_survives_the_system_even_after_failures(tmp_path: Path) -> None:
    pid_file = tmp_path / "edge.pid"
    with hy.AgentSystem(tmp_path / "data") as system:
        agent = system.start_agent(hy.AgentConfig(
            "busy", {"w": "tests.graph_nodes:touch_and_wait"}, "tests.graph_nodes:scripted"))
        agent.run({"steps": [["next", "w", {"pid_file": str(pid_file), "sleep": 60}]]})
        # The file exists before its content is written: wait for the pid itself.
        edge_pid = int(eventually(lambda: pid_file.exists() and pid_file.read_text(),
                                  message="edge running"))
        pids = [p.pid for p in system.processes()]
        assert edge_pid in pids
    assert not [pid for pid in pids if alive(pid)]


def test_wait_on_an_invocation_whose_agent_dies_says_recovery_required(
    agents: hy.AgentSystem, tmp_path: Path
) -> None:
    """A waiter is not left hanging until its timeout: the restarted agent finds
    the invocation unfinished and the wait ends with ``recovery_required``."""
    agent = agents.start_agent(hy.AgentConfig(
        "mortal", {"w": "tests.graph_nodes:worker"}, "tests.graph_nodes:scripted",
        execution_timeout=60.0))
    inv = agent.run({"steps": [["next", "w", {"sleep": 60}]]})
    waited = in_thread(lambda: agent.wait(inv, timeout=60))
    eventually(lambda: agent.status() == "running", message="invocation running")
    before = find(agents.tree(), "agent")
    assert before is not None
    killed_at = time.monotonic()
    os.kill(before["pid"], signal.SIGKILL)
    error = waited.exception(timeout=30)
    assert time.monotonic() - killed_at < 10
    assert isinstance(error, hy.HayataError) and error.code == "recovery_required", error


def test_wait_checks_never_swallow_the_result(
    agents: hy.AgentSystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    """wait() checks between listens that the agent still runs; those checks go
    through their own endpoint, so the result arriving during one is never
    taken for a check's stray reply. Checking all the time makes a collision
    certain if they shared the caller's endpoint."""
    import hayata_py._ref_wait as api

    monkeypatch.setattr(api, "WAIT_CHECK_PERIOD", 0.001)
    agent = agents.start_agent(hy.AgentConfig(
        "patient", {"w": "tests.graph_nodes:worker"}, "tests.graph_nodes:scripted"))
    for _ in range(5):
        inv = agent.run({"steps": [["next", "w", {"sleep": 0.2}], ["finish", "done"]]})
        assert agent.wait(inv, timeout=20).result == "done"


def test_wait_notices_that_the_whole_system_died(tmp_path: Path) -> None:
    system = hy.AgentSystem(tmp_path / "data")
    try:
        agent = system.start_agent(hy.AgentConfig(
            "doomed", {"w": "tests.graph_nodes:worker"}, "tests.graph_nodes:scripted",
            execution_timeout=60.0))
        inv = agent.run({"steps": [["next", "w", {"sleep": 60}]]})
        waited = in_thread(lambda: agent.wait(inv, timeout=60))
        eventually(lambda: agent.status() == "running", message="invocation running")
        killed_at = time.monotonic()
        system.kill()
        error = waited.exception(timeout=30)
        assert time.monotonic() - killed_at < 10
        assert isinstance(error, hy.HayataError) and error.code == "no_system", error
    finally:
        system.kill()


def test_a_garbage_watch_request_never_strands_a_restarted_node(
    agents: hy.AgentSystem, tmp_path: Path
) -> None:
    """A malformed ``WatchNodes`` sent to the node supervisor is dropped: kept,
    it was handed to every node restarted later, which dropped it in turn and
    never told the agent of its edges, so the agent's next task for that node
    waited for ever (the concurrent chaos campaign: garbage, then a node killed)."""
    import psutil

    from hayata_py._actor_messages import WatchNodes
    from supervisors import Reply, WhichChildren
    from tests.chaos.faults import _PORT, address

    pid_file = tmp_path / "edge.pid"
    agent = agents.start_agent(hy.AgentConfig(
        "stranded", {"w": "tests.graph_nodes:touch_and_wait"}, "tests.graph_nodes:scripted",
        execution_timeout=60.0))
    sup = find(agents.tree(), "supervisor", "nodes")
    assert sup is not None
    found = _PORT.search(" ".join(psutil.Process(sup["pid"]).cmdline()))
    assert found is not None
    target = address(int(found.group(1)))
    endpoint = agents._system
    endpoint.tell(target, WatchNodes({"not": "an address"}))  # type: ignore[arg-type]
    # Answered after the garbage (one sender, in order): it has been handled.
    assert isinstance(endpoint.ask(target, WhichChildren(), 10), Reply)

    first = agent.run({"steps": [["next", "w", {"pid_file": str(pid_file), "sleep": 60}]]})
    eventually(lambda: pid_file.exists(), message="w started")
    node = find(agents.tree(), "node", "node:w")
    assert node is not None
    os.kill(node["pid"], signal.SIGKILL)
    failed = agent.wait(first, 30)  # the agent has heard of the node's death
    assert failed.error is not None and failed.error.code == "node_crashed"
    # The restarted node must tell the agent of its edges, or this waits for ever.
    again = agent.run({"steps": [["next", "w", {"pid_file": str(tmp_path / "2.pid"),
                                                "sleep": 0}], ["finish", "after"]]})
    assert agent.wait(again, 30).result == "after"
