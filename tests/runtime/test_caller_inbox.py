"""The hy.CALLER inbox on real processes: streams survive the agent process
that sent them, a recovered stream starts afresh, and many short-lived
threads share one receiver."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

import psutil

import hayata_py as hy
from tests.helpers import alive, eventually, find
from tests.runtime.test_agent_runtime import collect

TERMINAL = {"invocation_completed", "invocation_failed", "invocation_interrupted"}


def gated_agent(agents: hy.AgentSystem, agent_id: str) -> hy.AgentRef:
    return agents.start_agent(hy.AgentConfig(
        agent_id, {"w": "tests.graph_nodes:touch_and_wait", "ok": "tests.graph_nodes:worker"},
        "tests.graph_nodes:scripted", execution_timeout=60.0))


def gated_step(tmp_path: Path) -> tuple[list[Any], Path, Path]:
    gate, pid_file = tmp_path / "gate", tmp_path / "edge.pid"
    return ["next", "w", {"pid_file": str(pid_file), "gate": str(gate)}], gate, pid_file


def kill_agent(agents: hy.AgentSystem) -> int:
    row = find(agents.tree(), "agent")
    assert row is not None
    os.kill(row["pid"], signal.SIGKILL)
    return int(row["pid"])


def restarted(agents: hy.AgentSystem, old_pid: int) -> None:
    def probe() -> bool:
        now = find(agents.tree(), "agent")
        return bool(now and now["pid"] != old_pid and now["status"] == "running")

    eventually(probe, timeout=30, message="agent restarted")


def assert_whole_stream(events: list[hy.AgentEvent], result: hy.AgentResult, inv: str) -> None:
    first = events[0].sequence  # a recovered run numbers on from the logged events
    assert [e.sequence for e in events] == list(range(first, first + len(events)))
    assert all(e.invocation_id == inv for e in events) and result.invocation_id == inv
    assert events[0].type == "invocation_started"
    assert events[-1].type in TERMINAL
    assert [e for e in events if e.type in TERMINAL] == [events[-1]]


def test_a_recovered_stream_starts_afresh_on_the_same_thread(
        agents: hy.AgentSystem, tmp_path: Path) -> None:
    """Issue 11: after reading part of a stream whose agent was SIGKILLed,
    recover(subscriber=CALLER, stream=True) on the same thread yields the
    recovered run from sequence 1 (invocation_started, recovered) with
    nothing of the dead run, and wait() and messages() agree."""
    agent = gated_agent(agents, "phoenix")
    step, gate, pid_file = gated_step(tmp_path)
    inv = agent.run({"steps": [["next", "ok", {}], step, ["finish", "done"]]},
                    subscriber=hy.CALLER, stream=True)
    stream = agent.messages(inv, timeout=30)
    first = [next(stream) for _ in range(3)]
    assert [m.type for m in first if isinstance(m, hy.AgentEvent)] == [
        "invocation_started", "node_started", "node_completed"]
    eventually(pid_file.exists, timeout=30, message="the gated node runs")
    restarted(agents, kill_agent(agents))
    assert agent.status() == "recovery_required"
    gate.touch()  # the edge, still running, finishes and records its result
    eventually(lambda: any(t.node_id == "w" and t.status == "completed"
                           for t, _ in agent.tasks(inv)), timeout=30, message="w completed")

    assert agent.recover(subscriber=hy.CALLER, stream=True) == inv
    waited = agent.wait(inv, timeout=30)
    assert waited.ok and waited.result == "done"
    events, result = collect(agent, inv)
    assert result == waited
    assert_whole_stream(events, result, inv)
    assert events[0].data["recovered"] is True
    assert [e.type for e in events] == ["invocation_started", "invocation_completed"]


def test_a_stream_survives_stop_agent_on_the_same_thread(
        agents: hy.AgentSystem, tmp_path: Path) -> None:
    """Issue 11: the caller is not reading while stop_agent() ends the run:
    its subscriber still gets every event and the AgentResult."""
    agent = gated_agent(agents, "stopped")
    step, _gate, pid_file = gated_step(tmp_path)
    inv = agent.run({"steps": [step, ["finish", 1]]}, subscriber=hy.CALLER, stream=True)
    eventually(pid_file.exists, timeout=30, message="the gated node runs")
    agents.stop_agent("stopped")
    events, result = collect(agent, inv)
    assert_whole_stream(events, result, inv)
    assert [e.type for e in events] == ["invocation_started", "node_started",
                                        "invocation_failed"]
    assert not result.ok and result.error is not None
    assert result.error.code == "agent_stopped"
    assert events[-1].data["reason"] == "agent_stopped"


def test_a_stream_survives_the_restart_after_the_node_supervisor_died(
        agents: hy.AgentSystem, tmp_path: Path) -> None:
    """Issue 11: the node supervisor is SIGKILLed mid-run and the agent is
    restarted after it; the caller, not reading, still gets the whole stream
    of the run that ended (its code is the agent's decision: stopped or
    interrupted)."""
    agent = gated_agent(agents, "orphaned")
    step, _gate, pid_file = gated_step(tmp_path)
    inv = agent.run({"steps": [step, ["finish", 1]]}, subscriber=hy.CALLER, stream=True)
    eventually(pid_file.exists, timeout=30, message="the gated node runs")
    nodes = find(agents.tree(), "supervisor", "nodes")
    agent_row = find(agents.tree(), "agent")
    assert nodes is not None and agent_row is not None
    os.kill(nodes["pid"], signal.SIGKILL)
    # The agent is stopped and restarted after it (rest_for_one); the caller
    # reads only once that agent process is gone.
    eventually(lambda: not alive(agent_row["pid"]), timeout=30, message="old agent gone")
    events, result = collect(agent, inv)
    assert_whole_stream(events, result, inv)
    assert [e.type for e in events][:2] == ["invocation_started", "node_started"]
    assert not result.ok and result.error is not None
    assert result.error.code in ("agent_stopped", "invocation_interrupted")
    assert events[-1].data["reason"] == result.error.code


def test_a_finished_stream_survives_a_sigkill_of_its_agent(agents: hy.AgentSystem) -> None:
    """Issue 11: wait() returned, the caller has read nothing, and the agent
    process is SIGKILLed: messages() still yields every event and the result."""
    agent = agents.start_agent(hy.AgentConfig(
        "victim", {"p": "tests.graph_nodes:worker"}, "tests.graph_nodes:scripted"))
    inv = agent.run({"steps": [["next", "p", {"partials": 5}], ["finish", "done"]]},
                    subscriber=hy.CALLER, stream=True)
    waited = agent.wait(inv, timeout=30)
    assert waited.ok
    pid = kill_agent(agents)
    eventually(lambda: not alive(pid), message="agent process gone")
    events, result = collect(agent, inv)
    assert result == waited
    assert_whole_stream(events, result, inv)
    assert [e.type for e in events] == ["invocation_started", "node_started"] + [
        "node_partial_result"] * 5 + ["node_completed", "invocation_completed"]


def test_reading_a_stream_twice_or_of_another_run_is_a_clear_error(
        agents: hy.AgentSystem) -> None:
    agent = agents.start_agent(hy.AgentConfig(
        "once", {"p": "tests.graph_nodes:worker"}, "tests.graph_nodes:scripted"))
    inv = agent.run({"steps": [["finish", 1]]}, subscriber=hy.CALLER)
    assert [type(m) for m in agent.messages(inv, timeout=30)] == [hy.AgentResult]
    plain = agent.run({"steps": [["finish", 2]]})
    assert agent.wait(plain, 30).ok
    for invocation_id in (inv, plain):
        try:
            next(agent.messages(invocation_id, timeout=30))
        except hy.HayataError as exc:
            assert exc.code == "not_found" and invocation_id in str(exc)
        else:
            raise AssertionError("a stream this system does not follow was read")


def test_many_short_lived_threads_share_one_receiver(agents: hy.AgentSystem) -> None:
    """Issue 15: threads that end while others start CALLER runs (and make
    their own endpoints) never trip over each other, every thread reads its
    own stream, and neither threads nor sockets pile up."""
    refs = [agents.start_agent(hy.AgentConfig(
        f"h{i}", {"w": "tests.graph_nodes:worker"}, "tests.graph_nodes:scripted"))
        for i in range(6)]
    failures: list[BaseException] = []
    seen: list[tuple[str, Any]] = []
    lock = threading.Lock()

    def drive(agent: hy.AgentRef, value: str) -> None:
        try:
            inv = agent.run({"steps": [["next", "w", {}], ["finish", value]]},
                            subscriber=hy.CALLER, stream=True)
            events, result = collect(agent, inv)
            assert_whole_stream(events, result, inv)
            with lock:
                seen.append((value, result.result))
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            with lock:
                failures.append(exc)

    def short() -> None:
        try:
            agents.agents()  # a per-thread endpoint, made and pruned concurrently
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            with lock:
                failures.append(exc)

    process = psutil.Process()
    fds_before = 0
    expected = []
    for round_ in range(8):
        if round_ == 1:  # after a warm-up round: the receiver and its connections exist
            fds_before = process.num_fds()
        threads = [threading.Thread(target=drive, args=(ref, f"{round_}-{i}"))
                   for i, ref in enumerate(refs)]
        threads += [threading.Thread(target=short) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        expected += [f"{round_}-{i}" for i in range(len(refs))]
    assert failures == []
    assert sorted(seen) == sorted((v, v) for v in expected)
    receivers = [t for t in threading.enumerate() if t.name == "hayata-receiver"]
    assert len(receivers) == 1
    last = threading.Thread(target=short)  # the next new endpoint prunes the ended ones
    last.start()
    last.join(60)
    assert failures == []
    assert len(agents._system._clones) <= 2
    assert process.num_fds() - fds_before <= 4, "ended threads must not keep sockets"
