"""Human-in-the-loop pauses on real actor processes: hy.Pause, pause_before and
pause_after breakpoints, resume() (once, exactly one of two), and a pause that
survives a SIGKILL of the whole system."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from hayata_py._config import validate_config
from hayata_py.store import open_store
from tests.helpers import alive, collect, eventually, race
from tests.hitl_nodes import effects

NODES = {"draft": "tests.hitl_nodes:flaky", "send": "tests.hitl_nodes:flaky"}


def config(**overrides: Any) -> hy.AgentConfig:
    fields: dict[str, Any] = {"id": "hitl", "nodes": NODES,
                              "decision_policy": "tests.hitl_nodes:approve"}
    fields.update(overrides)
    return hy.AgentConfig(**fields)


def test_a_policy_pause_waits_for_resume(agents: hy.AgentSystem, tmp_path: Path) -> None:
    log = tmp_path / "effects"
    agent = agents.start_agent(config())
    inv = agent.run({"effects": str(log)}, subscriber=hy.CALLER, stream=True)
    events, result = collect(agent, inv)
    assert (result.status, result.ok) == ("paused", False)
    assert result.error is not None and result.error.code == "invocation_paused"
    payload = {"draft": "done-1", "why": "approve sending"}
    assert result.error.details["payload"] == payload
    assert events[-1].type == "invocation_paused"
    assert events[-1].data == {"payload": payload, "kind": "policy", "nodes": []}
    assert agent.status() == "paused" and agent.status_info().invocation_id == inv
    assert agent.wait(inv, 30).status == "paused"
    with pytest.raises(hy.RunRejected) as err:
        agent.run({"effects": str(log)})
    assert err.value.code == "agent_paused" and err.value.details["invocation_id"] == inv
    with pytest.raises(hy.RecoveryRejected) as rec:
        agent.recover()
    assert rec.value.code == "invocation_paused"
    assert effects(log) == [("draft", 1)]

    assert agent.resume(inv, {"approve": True, "by": "ann"}, subscriber=hy.CALLER,
                        stream=True) == inv
    events, result = collect(agent, inv)
    assert result.ok and result.status == "completed", result
    assert result.result["state"]["send"] == "done-1"
    assert result.result["resume_value"] is None  # seen by one decision only
    assert events[0].type == "invocation_started" and events[0].data["recovered"]
    assert effects(log) == [("draft", 1), ("send", 1)]
    assert agent.status() == "idle"
    with pytest.raises(hy.RecoveryRejected) as again:
        agent.resume(inv, {"approve": True})
    assert again.value.code == "not_paused"


def test_pause_before_holds_the_step_and_resume_runs_it_once(agents: hy.AgentSystem,
                                                             tmp_path: Path) -> None:
    log = tmp_path / "effects"
    agent = agents.start_agent(config(decision_policy="tests.hitl_nodes:sequence",
                                      pause_before=frozenset({"send"})))
    inv = agent.run({"effects": str(log), "plan": ["draft", "send"]})
    result = agent.wait(inv, 30)
    assert result.status == "paused" and result.error is not None
    assert result.error.details["payload"] == {"pause_before": ["send"]}
    assert effects(log) == [("draft", 1)]
    assert agent.tasks(inv)[-1][0].node_id == "draft"  # send has no task record yet
    agent.resume(inv, "go")
    final = agent.wait(inv, 30)
    assert final.ok, final
    assert effects(log) == [("draft", 1), ("send", 1)]


def test_pause_after_keeps_the_result_and_waits_for_the_next_decision(
        agents: hy.AgentSystem, tmp_path: Path) -> None:
    log = tmp_path / "effects"
    agent = agents.start_agent(config(decision_policy="tests.hitl_nodes:sequence",
                                      pause_after=frozenset({"draft"})))
    inv = agent.run({"effects": str(log), "plan": ["draft", "send"]})
    assert agent.wait(inv, 30).status == "paused"
    with open_store(agents.store_url) as store:
        record = store.get_invocation(inv)
    assert record is not None and record.state["draft"] == "done-1" and record.step == 1
    assert record.paused is not None and record.paused["kind"] == "after"
    agent.resume(inv, None)
    final = agent.wait(inv, 30)
    assert final.ok and final.result["state"]["send"] == "done-1"
    assert effects(log) == [("draft", 1), ("send", 1)]


def test_a_pause_survives_a_whole_system_kill(tmp_path: Path) -> None:
    data, log = tmp_path / "data", tmp_path / "effects"
    cfg = config(decision_policy="tests.hitl_nodes:sequence",
                 pause_before=frozenset({"send"}))
    system = hy.AgentSystem(data)
    try:
        agent = system.start_agent(cfg)
        inv = agent.run({"effects": str(log), "plan": ["draft", "send"]})
        assert agent.wait(inv, 30).status == "paused"
        killed = system.kill()
        assert killed and not any(alive(pid) for pid in killed)
    finally:
        system.shutdown()
    with hy.AgentSystem(data) as system2:
        agent2 = system2.start_agent(cfg)
        assert agent2.status() == "paused"
        with pytest.raises(hy.RunRejected) as err:
            agent2.run({"effects": str(log), "plan": ["draft"]})
        assert err.value.code == "agent_paused"
        assert agent2.resume(inv, {"ok": True}, subscriber=hy.CALLER) == inv
        _, result = collect(agent2, inv)
        assert result.ok, result
        assert effects(log) == [("draft", 1), ("send", 1)]


def _resume_then_kill(data: Path, cfg: hy.AgentConfig, spec: dict[str, Any], value: Any,
                      meanwhile: Callable[[], bool]) -> str:
    """Run until paused, resume with ``value``, SIGKILL the whole system once
    ``meanwhile()`` holds; the invocation id."""
    system = hy.AgentSystem(data)
    try:
        agent = system.start_agent(cfg)
        inv = agent.run(spec)
        assert agent.wait(inv, 30).status == "paused"
        agent.resume(inv, value)
        eventually(meanwhile, timeout=30, message="the resumed run under way")
        killed = system.kill()
        assert killed and not any(alive(pid) for pid in killed)
    finally:
        system.shutdown()
    return inv


def test_a_resume_value_survives_a_kill_before_the_next_decision(tmp_path: Path) -> None:
    """resume() stores the value with the invocation: a whole-system kill while the
    policy is still deciding on it (a slow model call) loses neither the value nor the
    approval; the recovered decision sees it and sends."""
    data, log = tmp_path / "data", tmp_path / "effects"
    thinking, gate = tmp_path / "thinking", tmp_path / "think-gate"
    cfg = config(decision_policy="tests.hitl_nodes:approve_after_thinking")
    spec = {"effects": str(log), "thinking": str(thinking), "think_gate": str(gate)}
    inv = _resume_then_kill(data, cfg, spec, {"approve": True, "by": "ann"},
                            thinking.exists)
    gate.touch()
    with hy.AgentSystem(data) as system2:
        agent2 = system2.start_agent(cfg)
        assert agent2.status() == "recovery_required"  # resumed: no longer paused
        assert agent2.recover() == inv
        result = agent2.wait(inv, 60)
        assert result.ok and result.status == "completed", result
        assert effects(log) == [("send", 1)]


def test_a_pause_before_value_survives_a_kill_during_the_held_step(tmp_path: Path) -> None:
    """The value of a pause_before resume is for the decision after the held step: a
    kill while that step runs keeps it for the recovered decision."""
    data, log, gate = tmp_path / "data", tmp_path / "effects", tmp_path / "gate"
    cfg = config(decision_policy="tests.hitl_nodes:sequence_noting",
                 pause_before=frozenset({"send"}))
    inv = _resume_then_kill(
        data, cfg, {"effects": str(log), "plan": ["send"], "gates": {"send": str(gate)}},
        {"note": "approved by ann"}, lambda: effects(log) == [("send", 1)])
    gate.touch()
    with hy.AgentSystem(data) as system2:
        agent2 = system2.start_agent(config(decision_policy="tests.hitl_nodes:sequence_noting",
                                            pause_before=frozenset({"send"}),
                                            idempotent_nodes=frozenset({"send"})))
        assert agent2.recover() == inv
        result = agent2.wait(inv, 60)
        assert result.ok, result
        assert result.result is not None
        assert result.result["resume_value"] == {"note": "approved by ann"}
        assert effects(log) == [("send", 1), ("send", 2)]  # re-run: declared idempotent


def test_of_two_resumes_at_once_exactly_one_wins(agents: hy.AgentSystem,
                                                 tmp_path: Path) -> None:
    log = tmp_path / "effects"
    agent = agents.start_agent(config())
    inv = agent.run({"effects": str(log)})
    assert agent.wait(inv, 30).status == "paused"
    outcomes = race(lambda: agent.resume(inv, {"approve": True}),
                    lambda: agent.resume(inv, {"approve": True}))
    won = [o for o in outcomes if o == inv]
    lost = [o for o in outcomes if isinstance(o, hy.HayataError)]
    assert len(won) == 1 and len(lost) == 1, outcomes
    assert lost[0].code in ("not_paused", "agent_busy")
    assert agent.wait(inv, 30).ok
    assert effects(log) == [("draft", 1), ("send", 1)]


def test_bad_pause_input_is_refused_naming_the_field(agents: hy.AgentSystem,
                                                     tmp_path: Path) -> None:
    with pytest.raises(hy.ConfigError) as err:
        validate_config(config(pause_before=frozenset({"nope"})))
    assert err.value.details["field"] == "pause_before"
    with pytest.raises(hy.ConfigError) as err:
        validate_config(config(pause_after="draft"))
    assert err.value.details["field"] == "pause_after"

    agent = agents.start_agent(config())
    log = tmp_path / "effects"
    inv = agent.run({"effects": str(log)})
    assert agent.wait(inv, 30).status == "paused"
    with pytest.raises(hy.ConfigError) as bad:
        agent.resume(inv, {"when": object()})
    assert bad.value.details["field"] == "value"
    assert agent.status() == "paused"
    with pytest.raises(hy.RecoveryRejected) as wrong:
        agent.resume("not-this-one", 1)
    assert wrong.value.code == "not_found"  # no such invocation: not "not paused"
    agent.abandon(inv)
    assert agent.status() == "idle"

    agents.stop_agent("hitl")
    agent = agents.start_agent(config(decision_policy="tests.hitl_nodes:unstorable_pause"))
    result = agent.wait(agent.run({"effects": str(log)}), 30)
    assert result.error is not None and result.error.code == "invalid_policy_result"
    assert result.error.details["field"] == "payload"
    assert agent.status() == "idle"


def test_the_asyncio_api_resumes(tmp_path: Path) -> None:
    import asyncio

    async def main() -> None:
        async with hy.AsyncAgentSystem(tmp_path / "data") as system:
            agent = await system.start_agent(config())
            inv = await agent.run({"effects": str(tmp_path / "e")})
            assert (await agent.wait(inv, 30)).status == "paused"
            assert await agent.resume(inv, {"approve": True}) == inv
            assert (await agent.wait(inv, 30)).ok

    asyncio.run(main())
