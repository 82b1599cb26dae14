"""Per-node timeouts and ``async def`` nodes, on real actor processes (what a
config of them may hold: ``tests/unit/test_node_timeouts_config.py``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import hayata_py as hy
from tests.hitl_nodes import effects

NODES = {"slow": "tests.hitl_nodes:flaky", "quick": "tests.hitl_nodes:flaky",
         "stream": "tests.hitl_nodes:streaming"}


def config(**overrides: Any) -> hy.AgentConfig:
    fields: dict[str, Any] = {"id": "timeouts", "nodes": NODES,
                              "decision_policy": "tests.hitl_nodes:sequence"}
    fields.update(overrides)
    return hy.AgentConfig(**fields)


def test_a_node_timeout_overrides_the_execution_timeout(agents: hy.AgentSystem,
                                                        tmp_path: Path) -> None:
    agent = agents.start_agent(config(execution_timeout=30.0, node_timeouts={"quick": 0.5}))
    log = tmp_path / "effects"
    # slow sleeps 1 s under the 30 s execution timeout: it completes.
    inv = agent.run({"effects": str(log), "plan": ["slow"], "sleep": {"slow": 1.0}})
    assert agent.wait(inv, 30).ok
    # quick may take only 0.5 s: killed, with its own limit in the error.
    started = time.monotonic()
    inv = agent.run({"effects": str(log), "plan": ["quick"], "sleep": {"quick": 20}})
    result = agent.wait(inv, 30)
    assert not result.ok and result.error is not None
    assert result.error.code == "execution_timeout"
    assert result.error.details["node_id"] == "quick"
    assert result.error.details["timeout"] == 0.5
    assert time.monotonic() - started < 10
    assert agent.status() == "idle"


def test_in_a_parallel_step_the_short_timeout_fails_the_step(agents: hy.AgentSystem,
                                                             tmp_path: Path) -> None:
    agent = agents.start_agent(config(execution_timeout=30.0, node_timeouts={"quick": 0.5}))
    inv = agent.run({"effects": str(tmp_path / "e"), "plan": [["slow", "quick"]],
                     "sleep": {"slow": 20, "quick": 20}})
    result = agent.wait(inv, 30)
    assert result.error is not None and result.error.code == "execution_timeout"
    assert result.error.details["node_id"] == "quick"
    assert sorted(result.error.details["pending_nodes"]) == ["quick", "slow"]


def test_an_async_node_streams_partials_from_its_own_loop(agents: hy.AgentSystem,
                                                          tmp_path: Path) -> None:
    agent = agents.start_agent(config())
    log = tmp_path / "effects"
    inv = agent.run({"effects": str(log), "plan": ["stream"], "partials": 3},
                    subscriber=hy.CALLER, stream=True)
    messages = list(agent.messages(inv, timeout=30))
    result = messages[-1]
    assert isinstance(result, hy.AgentResult) and result.ok, result
    partials = [m.data["result"] for m in messages
                if isinstance(m, hy.AgentEvent) and m.type == "node_partial_result"]
    assert partials == [{"token": 0}, {"token": 1}, {"token": 2}]
    assert result.result["state"]["stream"] == "streamed"
    assert result.result["state"]["loop"].endswith("EventLoop")
    # The edge keeps its loop: a second run on the same edge works as well.
    inv2 = agent.run({"effects": str(log), "plan": ["stream"], "partials": 1})
    assert agent.wait(inv2, 30).ok
    assert len({line.split()[2] for line in log.read_text().splitlines()}) == 1


def test_an_async_node_that_times_out_has_its_edge_killed(agents: hy.AgentSystem,
                                                          tmp_path: Path) -> None:
    agent = agents.start_agent(config(node_timeouts={"stream": 0.5}))
    log = tmp_path / "effects"
    inv = agent.run({"effects": str(log), "plan": ["stream"], "partials": 0,
                     "sleep": {"stream": 30}})
    result = agent.wait(inv, 30)
    assert result.error is not None and result.error.code == "execution_timeout"
    inv2 = agent.run({"effects": str(log), "plan": ["stream"], "partials": 0})
    assert agent.wait(inv2, 30).ok
    pids = [line.split()[2] for line in log.read_text().splitlines()]
    assert pids[0] != pids[1], "the timed-out edge was replaced"
    assert effects(log) == [("stream", 1), ("stream", 1)]
