"""Agents as services, on real processes: many invocations at once on one agent,
conversation threads (state, reject, enqueue), recovery per invocation and
``auto_recover`` after a whole-system kill -9."""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from tests.helpers import alive, collect, eventually, walk
from tests.service_nodes import config

pytestmark = pytest.mark.timeout(180)


def effects(path: Path) -> Counter[tuple[str, str, str]]:
    """(event, node, invocation) -> how often it was written."""
    if not path.exists():
        return Counter()
    return Counter(tuple(line.split()[:3]) for line in path.read_text().splitlines())


def test_fifty_invocations_in_flight_each_with_its_own_result_and_events(
        agents: hy.AgentSystem, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    agent = agents.start_agent(config(max_invocations=50, node_concurrency={"gated": 4}))
    ids = {agent.run({"tag": n, "steps": ["gated", "echo"], "gate": str(gate)},
                     subscriber=hy.CALLER, stream=True): n for n in range(50)}
    status = eventually(lambda: (s := agent.status_info()).running == 50 and s,
                        message="50 running")
    assert (status.status, status.max_invocations, status.unfinished) == ("running", 50, 0)
    with pytest.raises(hy.RunRejected) as err:
        agent.run({"tag": "late", "steps": ["echo"]})
    assert err.value.code == "agent_busy"
    assert (err.value.details["running"], err.value.details["max_invocations"]) == (50, 50)
    gate.touch()
    for inv, n in ids.items():
        events, result = collect(agent, inv)
        assert result.ok and result.result == {"gated": n, "echo": n}, result
        assert [e.sequence for e in events] == list(range(1, len(events) + 1))
        assert {e.invocation_id for e in events} == {inv}
        assert events[0].type == "invocation_started"
        assert events[-1].type == "invocation_completed"
    assert eventually(lambda: agent.status_info().running == 0)


def test_a_thread_carries_its_state_across_invocations(agents: hy.AgentSystem) -> None:
    agent = agents.start_agent(config(state={"count": 0}))
    last = ""
    for n in range(3):
        last = agent.run({"tag": f"t{n}", "steps": ["count"]}, thread="user-42")
        result = agent.wait(last)
        assert result.result["count"] == n + 1 and result.result["thread"] == "user-42"
    info = agent.thread("user-42")
    assert (info.state["count"], info.version, info.status) == (3, 3, "idle")
    assert info.state["seen"] == ["t0", "t1", "t2"]
    assert info.invocations[0] == (last, "completed") and len(info.invocations) == 3
    fresh = agent.wait(agent.run({"tag": "x", "steps": ["count"]}, thread="user-7"))
    assert fresh.result["count"] == 1  # another thread starts from the agent's state
    plain = agent.wait(agent.run({"tag": "y", "steps": ["count"]}))
    assert plain.result == {"count": 1, "thread": None, "seen": ["y"]}
    assert [t.thread_id for t in agent.threads()] == ["user-42", "user-7"]
    first = agent.threads(limit=1)
    assert [t.thread_id for t in first] == ["user-42"]
    assert [t.thread_id for t in agent.threads(limit=1, after="user-42")] == ["user-7"]
    with pytest.raises(hy.HayataError) as err:
        agent.thread("nobody")
    assert err.value.code == "not_found"


def test_a_busy_thread_rejects_or_enqueues_and_other_threads_go_on(
        agents: hy.AgentSystem, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    agent = agents.start_agent(config(max_invocations=4))
    first = agent.run({"tag": "a", "steps": ["gated", "count"], "gate": str(gate)},
                      thread="t")
    with pytest.raises(hy.RunRejected) as err:
        agent.run({"tag": "no", "steps": ["count"]}, thread="t")
    assert err.value.code == "thread_busy" and err.value.details["invocation_id"] == first
    queued = agent.run({"tag": "b", "steps": ["count"]}, thread="t", multitask="enqueue",
                       subscriber=hy.CALLER, stream=True)
    assert agent.thread("t").queued == (queued,)
    assert agent.get_result(queued) is None  # known, not finished
    other = agent.wait(agent.run({"tag": "u", "steps": ["count"]}, thread="u"))
    assert other.result["count"] == 1  # the busy thread holds up no other thread
    gate.touch()
    assert agent.wait(first).result["count"] == 1
    events, second = collect(agent, queued)
    assert second.result["count"] == 2 and second.result["seen"] == ["a", "b"]
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    info = agent.thread("t")
    assert (info.status, info.queued, info.version) == ("idle", (), 2)


def test_thread_state_and_an_enqueued_run_survive_a_whole_system_kill(tmp_path: Path) -> None:
    data, log, gate = tmp_path / "data", tmp_path / "effects.log", tmp_path / "gate"

    def start(system: hy.AgentSystem, **extra: Any) -> hy.AgentRef:
        return system.start_agent(config(max_invocations=4, idempotent_nodes={"slow"},
                                         **extra))

    with hy.AgentSystem(data) as system:
        agent = start(system)
        agent.wait(agent.run({"tag": "a", "steps": ["count"], "effects": str(log)},
                             thread="t"))
        held = agent.run({"tag": "b", "steps": ["slow", "count"], "gate": str(gate),
                          "effects": str(log)}, thread="t")
        queued = agent.run({"tag": "c", "steps": ["count"], "effects": str(log)},
                           thread="t", multitask="enqueue")
        eventually(lambda: effects(log)[("start", "slow", held)] == 1, timeout=30,
                   message="slow started")
        killed = system.kill()
        assert killed and not any(alive(pid) for pid in killed)
    gate.touch()
    with hy.AgentSystem(data) as system:
        agent = start(system, auto_recover=True)
        assert agent.wait(held, timeout=60).result["count"] == 2
        last = agent.wait(queued, timeout=60)
        assert last.ok and last.result["count"] == 3 and last.result["seen"] == ["a", "b", "c"]
        assert agent.thread("t").version == 3
    ran = effects(log)
    assert ran[("start", "slow", held)] == 2  # idempotent: run again after the kill
    assert ran[("start", "count", queued)] == 1  # the enqueued run ran once, not lost


def test_auto_recover_goes_on_with_the_recoverable_and_lists_the_uncertain(
        tmp_path: Path) -> None:
    data, log = tmp_path / "data", tmp_path / "effects.log"
    gate, never = tmp_path / "gate", tmp_path / "never"

    def start(system: hy.AgentSystem, **extra: Any) -> hy.AgentRef:
        return system.start_agent(config(max_invocations=8, idempotent_nodes={"slow"},
                                         **extra))

    with hy.AgentSystem(data) as system:
        agent = start(system)
        sure = [agent.run({"tag": n, "steps": ["slow", "echo"], "gate": str(gate),
                           "effects": str(log)}) for n in range(3)]
        unsure = agent.run({"tag": "u", "steps": ["gated"], "gate": str(never),
                            "effects": str(log)})
        eventually(lambda: sum(effects(log)[("start", "slow", i)] for i in sure) == 3
                   and effects(log)[("start", "gated", unsure)] == 1, timeout=30,
                   message="all started")
        system.kill()
    gate.touch()
    with hy.AgentSystem(data) as system:
        agent = start(system, auto_recover=True)
        for n, inv in enumerate(sure):
            assert agent.wait(inv, timeout=60).result == {"gated": n, "echo": n}
        waiting = agent.unfinished()
        assert [(u.invocation_id, u.recovery) for u in waiting] == [(unsure, "uncertain")]
        assert waiting[0].task_ids and waiting[0].code == "task_execution_uncertain"
        with pytest.raises(hy.HayataError) as err:
            agent.wait(unsure, timeout=10)
        assert err.value.code == "recovery_required"
        # New runs go on beside the invocation that waits for the user.
        assert agent.wait(agent.run({"tag": "new", "steps": ["echo"]})).ok
        with pytest.raises(hy.RecoveryRejected) as refused:
            agent.recover(unsure)
        assert refused.value.code == "task_execution_uncertain"
        agent.abandon(unsure)
        assert agent.unfinished() == []
    assert effects(log)[("start", "gated", unsure)] == 1  # never run again behind our back


@pytest.mark.parametrize(("options", "field"), [
    ({"thread": ""}, "thread"), ({"thread": "x" * 257}, "thread"), ({"thread": 42}, "thread"),
    ({"thread": "t", "multitask": "interrupt"}, "multitask"),
    ({"multitask": "enqueue"}, "multitask"),
])
def test_bad_thread_options_are_refused_before_anything_is_sent(
        agents: hy.AgentSystem, options: dict[str, Any], field: str) -> None:
    agent = agents.start_agent(config())
    with pytest.raises(hy.RunRejected) as err:
        agent.run({"steps": ["echo"], "tag": 1}, **options)
    assert err.value.code == "invalid_option" and err.value.details["field"] == field
    assert agent.status_info().running == 0
    assert agent.threads() == []


def _edge_pids(system: hy.AgentSystem, node_id: str) -> list[int]:
    return sorted(r["pid"] for r in walk(system.tree())
                  if r.get("role") == "edge" and str(r.get("id", "")).startswith(f"{node_id}."))


@pytest.mark.parametrize("idempotent", [False, True])
def test_sigkill_of_an_edge_running_20_invocations_tasks_ends_exactly_those(
        agents: hy.AgentSystem, tmp_path: Path, idempotent: bool) -> None:
    log, gate = tmp_path / "effects.log", tmp_path / "gate"
    agent = agents.start_agent(config(
        max_invocations=30, edge_concurrency={"agated": 20}, node_concurrency={"agated": 1},
        idempotent_nodes={"agated"} if idempotent else frozenset()))
    shared = [agent.run({"tag": n, "steps": ["agated"], "gate": str(gate), "effects": str(log),
                         "rerun_passes": True}) for n in range(20)]
    eventually(lambda: sum(effects(log)[("start", "agated", i)] for i in shared) == 20,
               timeout=60, message="20 tasks on the shared edge")
    (pid,) = _edge_pids(agents, "agated")
    bystanders = [agent.run({"tag": n, "steps": ["echo"]}) for n in range(5)]
    os.kill(pid, signal.SIGKILL)
    results = {inv: agent.wait(inv, timeout=60) for inv in shared}
    for result in results.values():
        if idempotent:
            assert result.ok and result.result["attempt"] == 2, result
        else:
            assert not result.ok and result.error is not None
            assert result.error.code == "node_failed", result.error
    for n, inv in enumerate(bystanders):
        assert agent.wait(inv, timeout=60).result == {"echo": n}
    ran = effects(log)
    assert all(ran[("start", "agated", i)] == (2 if idempotent else 1) for i in shared)
    replaced = eventually(lambda: (p := _edge_pids(agents, "agated")) and pid not in p and p,
                          timeout=30, message="a replacement edge")
    assert len(replaced) == 1 and not alive(pid)


def test_a_task_waiting_for_a_free_edge_is_not_timed_out_by_the_wait(
        agents: hy.AgentSystem) -> None:
    """Four invocations on a node with one edge, each task 0.4 s, a 1 s limit: the
    last waits 1.2 s for the edge; only its own 0.4 s count against its limit."""
    agent = agents.start_agent(config(max_invocations=4, node_concurrency={"busy": 1},
                                      node_timeouts={"busy": 1.0}))
    runs = [agent.run({"tag": n, "steps": ["busy"], "seconds": 0.4}) for n in range(4)]
    for n, inv in enumerate(runs):
        result = agent.wait(inv, timeout=60)
        assert result.ok and result.result == {"busy": n}, result.error


def test_results_for_waits_that_timed_out_do_not_hold_up_the_agent(
        agents: hy.AgentSystem, tmp_path: Path) -> None:
    """25 threads each give up waiting for a running invocation and stop
    listening. The agent's 25 results for those waits must not block its other
    sends (Thespian holds an unacknowledged send for minutes, and an actor with
    20 of them sends nothing else): later invocations run at once."""
    gate = tmp_path / "gate"
    agent = agents.start_agent(config(max_invocations=40, edge_concurrency={"agated": 30},
                                      node_concurrency={"agated": 1}))
    held = [agent.run({"tag": n, "steps": ["agated"], "gate": str(gate)}) for n in range(25)]
    gave_up: list[str] = []

    def impatient(inv: str) -> None:
        with pytest.raises(TimeoutError):
            agent.wait(inv, timeout=0.05)
        gave_up.append(inv)

    threads = [threading.Thread(target=impatient, args=(inv,)) for inv in held]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(gave_up) == sorted(held)
    gate.touch()
    for n, inv in enumerate(held):
        assert agent.wait(inv, timeout=20).result == {"agated": n, "attempt": 1}
    later = [agent.run({"tag": n, "steps": ["echo"]}, thread=None) for n in range(3)]
    for n, inv in enumerate(later):
        assert agent.wait(inv, timeout=10).result == {"echo": n}
