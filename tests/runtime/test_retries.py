"""Retries with durable backoff, on real actor processes (SIGKILL of the whole
system included): what ran is counted in a side-effect file."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from hayata_py.store import TaskRecord, open_store
from tests.helpers import alive, collect, eventually
from tests.hitl_nodes import effects

NODES = {"tool": "tests.hitl_nodes:flaky", "other": "tests.hitl_nodes:flaky"}
FAST = hy.RetryPolicy(max_attempts=3, initial_interval=0.05, jitter=False,
                      retry_on=("tests.hitl_nodes:Transient",))


def config(**overrides: Any) -> hy.AgentConfig:
    fields: dict[str, Any] = {"id": "retrier", "nodes": NODES,
                              "decision_policy": "tests.hitl_nodes:sequence",
                              "retry": {"tool": FAST}}
    fields.update(overrides)
    return hy.AgentConfig(**fields)


def task_of(data: Path, inv: str, node: str) -> TaskRecord | None:
    with open_store(f"sqlite:///{data / 'hayata.db'}") as store:
        return {t.node_id: t for t in store.get_tasks(inv)}.get(node)


def test_a_node_failing_twice_succeeds_on_its_third_attempt(agents: hy.AgentSystem,
                                                            tmp_path: Path) -> None:
    log = tmp_path / "effects"
    agent = agents.start_agent(config())
    inv = agent.run({"effects": str(log), "plan": ["tool"], "fail": {"tool": 2}},
                    subscriber=hy.CALLER, stream=True)
    events, result = collect(agent, inv)
    assert result.ok, result.error
    assert effects(log) == [("tool", 1), ("tool", 2), ("tool", 3)]
    retrying = [e.data for e in events if e.type == "node_retrying"]
    assert [(d["node_id"], d["attempt"], d["delay"]) for d in retrying] == [
        ("tool", 2, 0.05), ("tool", 3, 0.1)]
    assert all(d["error"] == {"code": "node_failed", "type": "Transient"} for d in retrying)
    assert all(d["execution_id"] == f"{inv}:0" for d in retrying)
    started = [e.data.get("attempt", 1) for e in events if e.type == "node_started"]
    assert started == [1, 2, 3]
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    state = result.result["state"]
    assert state["tool"] == "done-3" and state["tool_attempt"] == 3
    record = task_of(agents.data_dir, inv, "tool")
    assert record is not None and (record.status, record.attempt) == ("completed", 3)
    assert state["tool_key"] == record.task_id  # one idempotency key for every attempt


def test_the_final_failure_names_every_attempt(agents: hy.AgentSystem,
                                               tmp_path: Path) -> None:
    log = tmp_path / "effects"
    agent = agents.start_agent(config())
    inv = agent.run({"effects": str(log), "plan": ["tool"], "fail": {"tool": 9}})
    result = agent.wait(inv, 60)
    assert result.error is not None and result.error.code == "node_failed"
    assert result.error.details["attempts"] == ["Transient", "Transient", "Transient"]
    assert effects(log) == [("tool", 1), ("tool", 2), ("tool", 3)]


def test_an_error_outside_retry_on_is_not_retried(agents: hy.AgentSystem,
                                                  tmp_path: Path) -> None:
    log = tmp_path / "effects"
    agent = agents.start_agent(config())
    inv = agent.run({"effects": str(log), "plan": ["tool"], "fail": {"tool": 1},
                     "permanent": True})
    result = agent.wait(inv, 60)
    assert result.error is not None and result.error.details["attempts"] == ["Permanent"]
    assert result.error.details["retryable"] is False
    assert effects(log) == [("tool", 1)]


def test_a_retried_branch_does_not_restart_its_sibling(agents: hy.AgentSystem,
                                                       tmp_path: Path) -> None:
    log = tmp_path / "effects"
    agent = agents.start_agent(config())
    inv = agent.run({"effects": str(log), "plan": [["tool", "other"]], "fail": {"tool": 2},
                     "sleep": {"other": 0.5}})
    result = agent.wait(inv, 60)
    assert result.ok, result.error
    assert sorted(effects(log)) == [("other", 1), ("tool", 1), ("tool", 2), ("tool", 3)]
    assert [r["tool"] if "tool" in r else r["other"] for r in result.result["parallel"]] == [
        "done-3", "done-1"]


def test_default_retry_applies_to_every_other_node(agents: hy.AgentSystem,
                                                   tmp_path: Path) -> None:
    log = tmp_path / "effects"
    agent = agents.start_agent(config(retry={}, default_retry=FAST))
    inv = agent.run({"effects": str(log), "plan": ["other"], "fail": {"other": 1}})
    assert agent.wait(inv, 60).ok
    assert effects(log) == [("other", 1), ("other", 2)]


def _kill_after_the_first_failure(data: Path, log: Path, policy: hy.RetryPolicy
                                  ) -> tuple[str, TaskRecord]:
    """Run ``tool`` (failing its first attempt) under ``policy``; SIGKILL the whole
    system once the failure is recorded (in the backoff); the record of it."""
    system = hy.AgentSystem(data)
    try:
        agent = system.start_agent(config(retry={"tool": policy}))
        inv = agent.run({"effects": str(log), "plan": ["tool"], "fail": {"tool": 1}})
        failed = eventually(lambda: (t := task_of(data, inv, "tool")) is not None
                            and t.status == "failed" and t, timeout=30, message="failed")
        assert isinstance(failed, TaskRecord) and failed.finished_at is not None
        killed = system.kill()
        assert killed and not any(alive(pid) for pid in killed)
    finally:
        system.shutdown()
    return inv, failed


BACKOFF_S = 4.0
"""Long enough that a recover which waited the passed backoff again is told
apart from one that did not even on a loaded machine (recover + one trivial
task take ~0.1 s quiet)."""


def test_a_whole_system_kill_during_the_backoff_then_recover(tmp_path: Path) -> None:
    """The failed attempt is not re-run; the next one runs once, without waiting the
    whole interval again once it has passed."""
    data, log = tmp_path / "data", tmp_path / "effects"
    slow = hy.RetryPolicy(max_attempts=3, initial_interval=BACKOFF_S, jitter=False)
    inv, failed = _kill_after_the_first_failure(data, log, slow)
    assert effects(log) == [("tool", 1)]
    with hy.AgentSystem(data) as system2:
        agent2 = system2.start_agent(config(retry={"tool": slow}))
        assert agent2.status() == "recovery_required"
        # Wait (on the clock, not a sleep) until the recorded backoff is over.
        eventually(lambda: time.time() > failed.finished_at + BACKOFF_S, timeout=10,
                   message="backoff over")
        begun = time.monotonic()
        assert agent2.recover() == inv
        result = agent2.wait(inv, 60)
        assert result.ok, result.error
        assert time.monotonic() - begun < BACKOFF_S - 0.5, "the passed backoff was not waited again"
        assert effects(log) == [("tool", 1), ("tool", 2)]
        record = task_of(data, inv, "tool")
        assert record is not None and (record.status, record.attempt) == ("completed", 2)


def test_a_recovered_backoff_waits_only_what_is_left(tmp_path: Path) -> None:
    data, log = tmp_path / "data", tmp_path / "effects"
    slow = hy.RetryPolicy(max_attempts=2, initial_interval=4.0, jitter=False)
    inv, failed = _kill_after_the_first_failure(data, log, slow)
    with hy.AgentSystem(data) as system2:
        agent2 = system2.start_agent(config(retry={"tool": slow}))
        assert agent2.recover() == inv
        assert agent2.wait(inv, 60).ok
        second = task_of(data, inv, "tool")
        assert second is not None and second.started_at is not None
        # The second attempt started at the recorded due time, not a full 4 s later.
        assert second.started_at >= failed.finished_at + 4.0 - 0.05
        assert second.started_at < failed.finished_at + 4.0 + 3.0
        assert effects(log) == [("tool", 1), ("tool", 2)]


def test_a_kill_during_an_attempt_leaves_it_uncertain(tmp_path: Path) -> None:
    data, log, gate = tmp_path / "data", tmp_path / "effects", tmp_path / "gate"
    system = hy.AgentSystem(data)
    try:
        agent = system.start_agent(config())
        inv = agent.run({"effects": str(log), "plan": ["tool"], "fail": {"tool": 1},
                         "gates": {"tool": str(gate)}, "gate_from": 2})
        eventually(lambda: (t := task_of(data, inv, "tool")) is not None
                   and t.status == "started" and t.attempt == 2, timeout=30,
                   message="attempt 2 started")
        system.kill()
    finally:
        system.shutdown()
    with hy.AgentSystem(data) as system2:
        agent2 = system2.start_agent(config())
        with pytest.raises(hy.RecoveryRejected) as err:
            agent2.recover()
        assert err.value.code == "task_execution_uncertain"
        assert effects(log) == [("tool", 1), ("tool", 2)]


def test_each_retry_emits_a_telemetry_event(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    sink = tmp_path / "telemetry.jsonl"
    monkeypatch.setenv("HAYATA_TEST_TELEMETRY", str(sink))
    handlers = {"sink": ("tests.telemetry_sink:record", [("hayata", "node", "retry")])}
    with hy.AgentSystem(tmp_path / "data", telemetry_handlers=handlers) as system:
        agent = system.start_agent(config())
        inv = agent.run({"effects": str(tmp_path / "e"), "plan": ["tool"],
                         "fail": {"tool": 2}})
        assert agent.wait(inv, 60).ok

    rows = [json.loads(line) for line in sink.read_text().splitlines()]
    assert [(r["event"], r["measurements"]["delay"], r["metadata"]["attempt"],
             r["metadata"]["error_type"]) for r in rows] == [
        (["hayata", "node", "retry"], 0.05, 2, "Transient"),
        (["hayata", "node", "retry"], 0.1, 3, "Transient")]
    assert rows[0]["metadata"]["node_id"] == "tool"
    assert rows[0]["metadata"]["execution_id"] == f"{inv}:0"
