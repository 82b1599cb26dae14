"""The agent runtime end to end, on real actor processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from hayata_py.store import task_id_for
from tests.helpers import alive, eventually, find

NODES = {name: "tests.graph_nodes:worker" for name in ("a", "b", "c", "slow", "fast", "worker")}


def start(system: hy.AgentSystem, **overrides: Any) -> hy.AgentRef:
    fields: dict[str, Any] = {"id": "agent-1", "nodes": NODES,
                              "decision_policy": "tests.graph_nodes:scripted"}
    fields.update(overrides)
    return system.start_agent(hy.AgentConfig(**fields))


def collect(agent: hy.AgentRef, invocation_id: str, timeout: float = 30.0
            ) -> tuple[list[hy.AgentEvent], hy.AgentResult]:
    events: list[hy.AgentEvent] = []
    for message in agent.messages(invocation_id, timeout=timeout):
        if isinstance(message, hy.AgentResult):
            return events, message
        events.append(message)
    raise AssertionError("messages() ended without a result")


def test_hello_example_events_and_result(agents: hy.AgentSystem) -> None:
    from examples.hello import config

    agent = agents.start_agent(config())
    inv = agent.run("hello", subscriber=hy.CALLER, stream=True)
    events, result = collect(agent, inv)
    execution = f"{inv}:0"
    assert [(e.sequence, e.type, e.data) for e in events] == [
        (1, "invocation_started", {"input": "hello"}),
        (2, "node_started", {"node_id": "mock", "execution_id": execution}),
        (3, "node_completed", {"node_id": "mock", "execution_id": execution}),
        (4, "invocation_completed", {"result": result.result}),
    ]
    assert all(e.invocation_id == inv for e in events)
    assert result.ok and result.error is None
    assert result.result == {"answer": "mock answer to 'hello'"}
    assert agent.status() == "idle"
    assert agent.get_result(inv) == result


def test_sequential_results_merge_into_state(agents: hy.AgentSystem) -> None:
    agent = start(agents, state={"seed": 1})
    inv = agent.run({"steps": [["next", "a", {"result": 1}], ["next", "b", "$context"],
                               ["finish_ctx"]]})
    result = agent.wait(inv, 30)
    assert result.ok
    ctx = result.result
    assert ctx["step"] == 2 and ctx["parallel_results"] is None
    assert ctx["state"]["seed"] == 1 and ctx["state"]["a"] == 1 and ctx["state"]["b"] == "done"
    assert ctx["last_result"]["b"] == "done"
    # The node saw the state after step 0 as a snapshot.
    assert ctx["last_result"]["context"]["state"]["a"] == 1
    assert ctx["last_result"]["context"]["task_id"] == task_id_for(inv, 1, "b")


def test_parallel_results_keep_requested_order_and_run_concurrently(
    agents: hy.AgentSystem, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    agent = start(agents, state={"keep": True})
    # Both branches sleep, so their intervals overlap if (and only if) they run
    # concurrently; run one after the other they could not.
    plan = {"log": str(log), "per_node": {"slow": {"sleep": 0.8, "result": "S"},
                                          "fast": {"sleep": 0.4, "result": "F"}}}
    inv = agent.run({"steps": [
        ["next", ["slow", "fast"], plan],
        ["next", "a", "$context"],
        ["finish_ctx"],
    ]})
    result = agent.wait(inv, 30)
    assert result.ok, result.error
    seen_at_step_1 = result.result["last_result"]["context"]
    # Branch results do not touch the state: they go to parallel_results.
    assert "slow" not in result.result["state"] and "fast" not in result.result["state"]
    assert result.result["state"]["a"] == "done"
    assert result.result["parallel_results"] is None  # cleared by the next transition
    assert seen_at_step_1["state"] == {"keep": True}

    rows = [line.split() for line in log.read_text().splitlines()]
    times = {(r[0], r[1]): float(r[3]) for r in rows}
    # slow was requested first and finished last; its interval overlaps fast's.
    assert times[("fast", "end")] < times[("slow", "end")]
    assert times[("slow", "start")] < times[("fast", "end")]
    assert times[("fast", "start")] < times[("slow", "end")]


def test_parallel_results_visible_at_next_decision_and_none_in_new_invocation(
    agents: hy.AgentSystem,
) -> None:
    agent = start(agents)
    plan = {"per_node": {"slow": {"sleep": 0.3, "result": "S"}, "fast": {"result": "F"}}}
    inv = agent.run({"steps": [["next", ["slow", "fast"], plan], ["finish_ctx"]]})
    ctx = agent.wait(inv, 30).result
    assert [r["slow" if i == 0 else "fast"] for i, r in enumerate(ctx["parallel_results"])] == [
        "S", "F"]
    inv2 = agent.run({"steps": [["finish_ctx"]]})
    ctx2 = agent.wait(inv2, 30).result
    assert ctx2["parallel_results"] is None and ctx2["step"] == 0
    assert ctx2["last_result"] is None


@pytest.mark.parametrize(
    ("steps", "code", "overrides"),
    [
        ([["next", "a", {"raise": "boom"}]], "node_failed", {}),
        ([["next", "a", {"return": [1, 2]}]], "invalid_node_result", {}),
        ([["next", "a", {"return": {"when": object.__name__}}], ["finish", 1]], None, {}),
        ([["next", "a", {"sleep": 5}]], "execution_timeout", {"execution_timeout": 0.5}),
        ([["raise", "policy broke"]], "policy_failed", {}),
        ([["garbage"]], "invalid_policy_result", {}),
        ([["next", "nope", {}]], "unknown_node", {}),
        ([["next", ["a", "b", "a"], {}]], "duplicate_node", {}),
        ([["next", [], {}]], "invalid_policy_result", {}),
        ([["next", "a", {}]] * 5, "max_steps_exceeded", {"max_steps": 3}),
    ],
)
def test_failures_end_the_invocation_with_a_code_and_leave_the_agent_ready(
    agents: hy.AgentSystem, steps: list[Any], code: str | None, overrides: dict[str, Any]
) -> None:
    agent = start(agents, **overrides)
    inv = agent.run({"steps": steps}, subscriber=hy.CALLER, stream=True)
    events, result = collect(agent, inv)
    if code is None:
        assert result.ok
    else:
        assert not result.ok and result.error is not None
        assert result.error.code == code, result.error
        assert events[-1].type == "invocation_failed"
        assert events[-1].data["reason"] == code
        assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert agent.status() == "idle"
    again = agent.run({"steps": [["next", "b", {}], ["finish", "ok"]]})
    assert agent.wait(again, 30) == hy.AgentResult(again, True, "ok")


def test_policy_error_details(agents: hy.AgentSystem) -> None:
    agent = start(agents)
    result = agent.wait(agent.run({"steps": [["raise", "policy broke"]]}), 30)
    assert result.error is not None
    assert result.error.message == "ValueError: policy broke"
    assert result.error.details["type"] == "ValueError"


def test_node_function_runs_once_when_it_raises(agents: hy.AgentSystem, tmp_path: Path) -> None:
    count = tmp_path / "count"
    agent = agents.start_agent(hy.AgentConfig(
        "once", {"n": "tests.graph_nodes:counted_raise"}, "tests.graph_nodes:scripted"))
    result = agent.wait(agent.run({"steps": [["next", "n", {"count_file": str(count)}]]}), 30)
    assert result.error is not None and result.error.code == "node_failed"
    assert count.read_text().splitlines() == [task_id_for(result.invocation_id, 0, "n")]


def test_failed_branch_cancels_its_sibling(agents: hy.AgentSystem, tmp_path: Path) -> None:

    agent = agents.start_agent(hy.AgentConfig(
        "par", {"slow": "tests.graph_nodes:touch_and_wait", "bad": "tests.graph_nodes:worker"},
        "tests.graph_nodes:scripted"))
    node = find(agents.tree(), "node", "node:slow")
    assert node is not None
    (slow_edge,) = [e["pid"] for e in node["children"] if e["role"] == "edge"]
    plan = {"pid_file": str(tmp_path / "slow.pid"), "sleep": 60,
            "per_node": {"bad": {"raise": "x", "sleep": 0}}}
    inv = agent.run({"steps": [["next", ["slow", "bad"], plan]]}, subscriber=hy.CALLER,
                    stream=True)
    events, result = collect(agent, inv)
    assert result.error is not None and result.error.code == "node_failed"
    assert "node_completed" not in [e.type for e in events]
    # The edge that took the slow branch is killed, whether or not it had begun.
    eventually(lambda: not alive(slow_edge), message="cancelled edge killed")
    # The node replaced its edge and serves the next run.
    again = agent.run({"steps": [["next", "bad", {}], ["finish", 1]]})
    assert agent.wait(again, 30).ok


def test_busy_agent_rejects_a_second_run_and_sends_it_nothing(
    agents: hy.AgentSystem, tmp_path: Path
) -> None:
    pid_file, gate = tmp_path / "pid", tmp_path / "gate"
    agent = agents.start_agent(hy.AgentConfig(
        "busy", {"w": "tests.graph_nodes:touch_and_wait"}, "tests.graph_nodes:scripted"))
    first = agent.run({"steps": [["next", "w", {"pid_file": str(pid_file), "gate": str(gate)}],
                                 ["finish", "first"]]})
    eventually(lambda: pid_file.exists(), message="first run started")
    assert agent.status() == "running"
    with pytest.raises(hy.RunRejected) as err:
        agent.run({"steps": []}, subscriber=hy.CALLER)
    assert err.value.code == "agent_busy"
    assert agent.get_result(first) is None
    gate.touch()
    assert agent.wait(first, 30).result == "first"
    assert agent.status() == "idle"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"stream": True}, "subscriber"),
        ({"stream": "yes", "subscriber": hy.CALLER}, "stream"),
        ({"subscriber": "someone"}, "subscriber"),
        ({"subscriber": 42}, "subscriber"),
    ],
)
def test_run_options_are_validated(agents: hy.AgentSystem, kwargs: dict[str, Any],
                                   field: str) -> None:
    agent = start(agents)
    with pytest.raises(hy.RunRejected) as err:
        agent.run({"steps": [["finish", 1]]}, **kwargs)
    assert err.value.code == "invalid_option" and err.value.details["field"] == field
    assert agent.status() == "idle"


def test_unencodable_input_is_rejected(agents: hy.AgentSystem) -> None:
    agent = start(agents)
    with pytest.raises(hy.RunRejected) as err:
        agent.run({"when": object()})
    assert err.value.code == "invalid_input" and "input.when" in str(err.value)


def test_raw_protocol_rejection_reaches_another_sender(agents: hy.AgentSystem) -> None:
    agent = start(agents)
    address = agent._current_address()
    reply = agents._system.ask(address, hy.Run(None, None, True), 10)
    assert isinstance(reply, hy.RunRejected) and reply.code == "invalid_option"
    reply = agents._system.ask(address, hy.Run({"steps": [["finish", 7]]}), 10)
    assert isinstance(reply, hy.RunAccepted)
    assert agent.wait(reply.invocation_id, 10).result == 7


def test_no_events_without_stream(agents: hy.AgentSystem) -> None:
    agent = start(agents)
    inv = agent.run({"steps": [["next", "a", {}], ["finish", 3]]},
                    subscriber=hy.CALLER)
    messages = list(agent.messages(inv, timeout=30))
    assert messages == [hy.AgentResult(inv, True, 3)]


def test_wait_times_out_once_and_late_replies_are_not_mistaken(
    agents: hy.AgentSystem, tmp_path: Path
) -> None:
    import time

    agent = start(agents)
    inv = agent.run({"steps": [["next", "a", {"sleep": 1.0}], ["finish", "late"]]})
    began = time.monotonic()
    with pytest.raises(TimeoutError):
        agent.wait(inv, 0.3)
    assert time.monotonic() - began < 1.0

    def finished() -> bool:
        record = agents.store.get_invocation(inv)
        return record is not None and record.status == "completed"

    eventually(finished, message="invocation finished")  # its late reply is now on its way
    # Neither a supervisor request nor an agent request takes the late reply as its own.
    assert agents.agents() == ["agent-1"]
    assert agent.status() == "idle"
    assert agent.get_result(inv) == hy.AgentResult(inv, True, "late")
    assert agents.agents() == ["agent-1"]
    assert agent.wait(inv, 30).result == "late"


def test_stopping_the_agent_mid_run_still_sends_one_result(
    agents: hy.AgentSystem, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    agent = agents.start_agent(hy.AgentConfig(
        "stopme", {"w": "tests.graph_nodes:touch_and_wait"}, "tests.graph_nodes:scripted"))
    inv = agent.run({"steps": [["next", "w", {"pid_file": str(pid_file), "sleep": 60}]]},
                    subscriber=hy.CALLER)
    eventually(lambda: pid_file.exists(), message="running")
    agents.stop_agent("stopme")
    messages = list(agent.messages(inv, timeout=30))
    assert len(messages) == 1 and isinstance(messages[0], hy.AgentResult)
    assert messages[0].error is not None and messages[0].error.code == "agent_stopped"


def test_parallel_example(agents: hy.AgentSystem) -> None:
    from examples.parallel import config

    agent = agents.start_agent(config())
    inv = agent.run({"customer_id": 7}, subscriber=hy.CALLER, stream=True)
    events, result = collect(agent, inv)
    assert result.ok and result.result == "Ada spent 42"
    completed = [e.data["node_id"] for e in events if e.type == "node_completed"]
    assert completed[:2] == ["orders", "customer"]  # the slow branch, requested first, ends last
    assert completed[2] == "aggregate"


def test_an_attached_handle_learns_the_store_and_instance(agents: hy.AgentSystem) -> None:
    attached = hy.AgentSystem.connect(agents.admin_port)
    try:
        assert attached.store_url == agents.store_url
        assert attached.instance == agents.instance
        agent = attached.start_agent(hy.AgentConfig(
            "via-connect", {"w": "tests.graph_nodes:worker"}, "tests.graph_nodes:scripted"))
        inv = agent.run({"steps": [["next", "w", {}], ["finish", "attached"]]})
        assert agent.wait(inv, 30).result == "attached"
        record = agents.store.get_invocation(inv)
        assert record is not None and record.status == "completed"
        tasks = agents.store.get_tasks(inv)
        assert [t.system_instance for t in tasks] == [agents.instance]
    finally:
        attached.shutdown()  # detaches only
    assert "via-connect" in agents.agents()
