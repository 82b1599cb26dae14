"""Circuit breakers on real actor processes (a whole-system kill included):
what ran is counted in a side-effect file, what was recorded read from the store."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from hayata_py.store import TaskRecord, open_store
from tests.helpers import collect, eventually
from tests.hitl_nodes import effects

COOL = 4.0
"""Seconds a circuit stays open: long enough for a run started right after the
circuit opened to meet it open, on a loaded machine too."""
ON_TRANSIENT = ("tests.hitl_nodes:Transient",)


def config(**overrides: Any) -> hy.AgentConfig:
    fields: dict[str, Any] = {
        "id": "breaker", "nodes": {"llm": "tests.circuit_nodes:llm"},
        "decision_policy": "tests.circuit_nodes:once", "max_invocations": 4,
        "circuit": {"llm": hy.CircuitBreaker(failures=5, window=60, cool_down=COOL)}}
    fields.update(overrides)
    return hy.AgentConfig(**fields)


def task_of(data: Path, inv: str) -> TaskRecord | None:
    with open_store(f"sqlite:///{data / 'hayata.db'}") as store:
        tasks = store.get_tasks(inv)
    return tasks[0] if tasks else None


def refused(data: Path, inv: str) -> TaskRecord | None:
    """The task record of ``inv`` once it is the recorded circuit_open failure."""
    task = task_of(data, inv)
    return task if task is not None and task.status == "failed" and task.error \
        and task.error["code"] == "circuit_open" else None


def circuit(agent: hy.AgentRef) -> tuple[str, int]:
    (state,) = agent.status_info().circuits
    assert state.node_id == "llm"
    return state.state, state.failures


def gap_free(events: list[hy.AgentEvent]) -> bool:
    return [e.sequence for e in events] == list(range(1, len(events) + 1))


@pytest.fixture
def telemetry_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "telemetry.jsonl"
    monkeypatch.setenv("HAYATA_TEST_TELEMETRY", str(path))
    return path


def test_opens_after_five_failures_fails_fast_and_closes_after_a_probe(
        tmp_path: Path, telemetry_file: Path) -> None:
    log, outage = tmp_path / "effects", tmp_path / "outage"
    outage.touch()
    data = tmp_path / "data"
    events_of = [("hayata", "circuit", "opened"), ("hayata", "circuit", "closed")]
    with hy.AgentSystem(data, telemetry_handlers={
            "sink": ("tests.telemetry_sink:record", events_of)}) as system:
        agent = system.start_agent(config())
        spec = {"effects": str(log), "outage": str(outage)}
        for n in range(1, 6):
            events, result = collect(agent, agent.run(spec, subscriber=hy.CALLER,
                                                      stream=True))
            assert result.error is not None and result.error.code == "node_failed"
            assert gap_free(events)
            opened = [e.data for e in events if e.type == "circuit_opened"]
            assert opened == ([{"node_id": "llm", "failures": 5, "cool_down": COOL}]
                              if n == 5 else [])
        assert circuit(agent) == ("open", 5)
        assert len(effects(log)) == 5

        # Open: the task fails at once, recorded, without running the node.
        inv = agent.run(spec, subscriber=hy.CALLER, stream=True)
        events, result = collect(agent, inv)
        assert result.error is not None and result.error.code == "circuit_open"
        assert 0 < result.error.details["retry_after"] <= COOL
        assert len(effects(log)) == 5, "the node ran although the circuit was open"
        record = refused(data, inv)
        assert record is not None and record.attempt == 0 and record.started_at is None
        assert gap_free(events)

        # Half-open after the cool-down (the agent's clock): one probe goes; it succeeds.
        outage.unlink()
        eventually(lambda: circuit(agent)[0] == "half_open", timeout=COOL + 30,
                   message="half-open")
        inv = agent.run(spec, subscriber=hy.CALLER, stream=True)
        events, result = collect(agent, inv)
        assert result.ok, result.error
        assert [e.data for e in events if e.type == "circuit_closed"] == [
            {"node_id": "llm", "failures": 5, "cool_down": COOL}]
        assert [e.type for e in events].index("circuit_closed") < [
            e.type for e in events].index("node_completed")
        assert gap_free(events)
        assert circuit(agent) == ("closed", 0)
        assert effects(log)[-1] == ("llm", 1) and len(effects(log)) == 6
    rows = [json.loads(line) for line in telemetry_file.read_text().splitlines()]
    assert [(r["event"][-1], r["metadata"]["node_id"], r["measurements"]["failures"])
            for r in rows] == [("opened", "llm", 5), ("closed", "llm", 5)]


def test_a_retry_waits_for_the_cool_down_without_spending_attempts(
        agents: hy.AgentSystem, tmp_path: Path) -> None:
    log, outage = tmp_path / "effects", tmp_path / "outage"
    outage.touch()
    policy = hy.RetryPolicy(max_attempts=5, initial_interval=0.01, jitter=False,
                            retry_on=ON_TRANSIENT)
    agent = agents.start_agent(config(retry={"llm": policy}))
    spec = {"effects": str(log), "outage": str(outage)}
    first = agent.wait(agent.run(spec), 60)  # five attempts fail: the circuit opens
    assert first.error is not None and first.error.code == "node_failed"
    assert len(first.error.details["attempts"]) == 5
    assert circuit(agent) == ("open", 5)
    waiting = [agent.run(spec, subscriber=hy.CALLER, stream=True) for _ in range(2)]
    for inv in waiting:
        eventually(partial(refused, agents.data_dir, inv), timeout=30,
                   message="the refusal recorded")
    assert len(effects(log)) == 5, "a node ran although the circuit was open"
    outage.unlink()
    for inv in waiting:
        events, result = collect(agent, inv)
        assert result.ok, result.error
        assert gap_free(events)
        retrying = [e.data for e in events if e.type == "node_retrying"]
        assert retrying and all(d["error"]["code"] == "circuit_open" and d["attempt"] == 1
                                for d in retrying)
        assert "circuit_closed" in [e.type for e in events]
        record = task_of(agents.data_dir, inv)
        assert record is not None and (record.status, record.attempt) == ("completed", 1)
    assert effects(log)[5:] == [("llm", 1), ("llm", 1)]
    assert circuit(agent) == ("closed", 0)


def test_a_map_steps_items_wait_for_the_circuit_and_run_once_each(
        agents: hy.AgentSystem, tmp_path: Path) -> None:
    log, outage = tmp_path / "effects", tmp_path / "outage"
    outage.touch()
    agent = agents.start_agent(config(
        decision_policy="tests.circuit_nodes:mapped", map_concurrency=3,
        retry={"llm": hy.RetryPolicy(max_attempts=1)},  # no retry of a real failure
        circuit={"llm": hy.CircuitBreaker(failures=1, window=60, cool_down=COOL)}))
    item = {"effects": str(log), "outage": str(outage)}
    first = agent.wait(agent.run({"items": [item]}), 60)
    assert first.error is not None and first.error.code == "node_failed"
    assert circuit(agent) == ("open", 1)
    outage.unlink()
    inv = agent.run({"items": [item] * 3}, subscriber=hy.CALLER, stream=True)
    events, result = collect(agent, inv)
    assert result.ok, result.error
    assert [r["answer"] for r in result.result["results"]] == ["ok-1"] * 3
    assert gap_free(events)
    retrying = [e.data for e in events if e.type == "node_retrying"]
    assert all(d["error"]["code"] == "circuit_open" and d["attempt"] == 1 for d in retrying)
    assert len({d["item"] for d in retrying}) >= 2  # at most one went as the probe at once
    assert effects(log) == [("llm", 1)] * 4  # the first run's item, then each item once
    with open_store(f"sqlite:///{agents.data_dir / 'hayata.db'}") as store:
        tasks = store.get_tasks(inv)
    assert sorted((t.branch_index, t.status, t.attempt) for t in tasks) == [
        (i, "completed", 1) for i in range(3)]
    assert circuit(agent) == ("closed", 0)


def test_a_whole_system_kill_while_a_task_waits_for_the_circuit(tmp_path: Path) -> None:
    """The refusal is a recorded failure: recovery retries it (not an attempt) and
    the node runs once; the restarted agent's breaker starts closed."""
    data, log, outage = tmp_path / "data", tmp_path / "effects", tmp_path / "outage"
    outage.touch()
    policy = hy.RetryPolicy(max_attempts=2, initial_interval=0.01, jitter=False,
                            retry_on=ON_TRANSIENT)
    cfg = config(retry={"llm": policy}, max_invocations=1,
                 circuit={"llm": hy.CircuitBreaker(failures=2, window=60, cool_down=600)})
    spec = {"effects": str(log), "outage": str(outage)}
    system = hy.AgentSystem(data)
    try:
        agent = system.start_agent(cfg)
        assert agent.wait(agent.run(spec), 60).error is not None  # 2 failures: open
        inv = agent.run(spec)
        eventually(lambda: refused(data, inv), timeout=30, message="the refusal recorded")
        system.kill()
    finally:
        system.shutdown()
    outage.unlink()
    assert len(effects(log)) == 2
    with hy.AgentSystem(data) as system2:
        agent2 = system2.start_agent(cfg)
        assert circuit(agent2) == ("closed", 0)
        (unfinished,) = agent2.unfinished()
        assert (unfinished.invocation_id, unfinished.recovery) == (inv, "recoverable")
        assert agent2.recover() == inv
        result = agent2.wait(inv, 60)
        assert result.ok, result.error
        record = task_of(data, inv)
        assert record is not None and (record.status, record.attempt) == ("completed", 1)
        assert effects(log)[2:] == [("llm", 1)]


@pytest.mark.timeout(120)
def test_hayata_agent_list_shows_the_circuit(tmp_path: Path) -> None:
    from tests.cli.test_cli import hayata, ok

    data, outage = tmp_path / "data", tmp_path / "outage"
    outage.touch()
    try:
        ok(data, "system", "start")
        ok(data, "agent", "start", "tests.circuit_nodes:breaker")
        (listed,) = [json.loads(line) for line in
                     ok(data, "agent", "list", "--json").splitlines()]
        assert listed["circuits"] == [{"node_id": "llm", "state": "closed", "failures": 0,
                                       "retry_after": 0.0}]
        spec = json.dumps({"effects": str(tmp_path / "effects"), "outage": str(outage)})
        failed = hayata(data, "run", "breaker", "--input", spec, "--json")
        assert json.loads(failed.stdout)["error"]["code"] == "node_failed", failed
        (listed,) = [json.loads(line) for line in
                     ok(data, "agent", "list", "--json").splitlines()]
        (state,) = listed["circuits"]
        assert (state["state"], state["failures"]) == ("open", 1)
        assert 0 < state["retry_after"] <= 600
        refused = hayata(data, "run", "breaker", "--input", spec, "--json")
        answer = json.loads(refused.stdout)
        assert answer["error"]["code"] == "circuit_open", refused
        assert "llm open (1 failures" in ok(data, "agent", "list")
        (task,) = [json.loads(line) for line in ok(
            data, "tasks", "breaker", "--invocation", answer["invocation_id"],
            "--json").splitlines()]
        assert (task["status"], task["attempt"], task["error"]["code"]) == (
            "failed", 0, "circuit_open")
    finally:
        hayata(data, "system", "kill")
