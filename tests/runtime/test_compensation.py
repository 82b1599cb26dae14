"""Compensation on real processes (issue 22 §4): a failed booking flow undoes
its completed tasks, latest first, exactly once, also across a whole-system
kill -9 during a compensation; ``abandon()`` undoes too; bad configurations
are refused naming the field."""

from __future__ import annotations

import dataclasses
import os
import signal
from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from examples.drills.booking import charge_card, config
from hayata_py._invocation.compensation import compensation_execution_id, compensation_id_for
from hayata_py.store import task_id_for
from tests.helpers import assert_logged, eventually

pytestmark = pytest.mark.timeout(180)


def trip_agent() -> hy.AgentConfig:
    """The booking flow of drill 11 (``examples/drills/booking.py``)."""
    return config


def trip_input(tmp_path: Path, hold: str | None = None, fail: bool = True) -> dict[str, Any]:
    """``hold``: the node or compensator that waits for the gate file once started."""
    gates = {hold: str(tmp_path / "gate")} if hold else {}
    return {"effects": str(tmp_path / "effects.log"), "fail": fail, "gates": gates}


def effects(path: str) -> list[str]:
    """What started, in order (one ``start <name> <pid>`` line each)."""
    lines = Path(path).read_text().splitlines() if Path(path).exists() else []
    return [line.split()[1] for line in lines if line.startswith("start ")]


def named(inv: str, step: int, node: str) -> dict[str, str]:
    return {"node_id": node, "task_id": task_id_for(inv, step, node)}


def started(path: Path, name: str) -> None:
    eventually(lambda: name in effects(str(path)), timeout=60, message=f"{name} started")


def test_a_failed_invocation_undoes_its_completed_tasks_latest_first(tmp_path: Path) -> None:
    data = trip_input(tmp_path)
    with hy.AgentSystem(tmp_path / "data") as system:
        agent = system.start_agent(trip_agent())
        inv = agent.run(data, subscriber=hy.CALLER, stream=True)
        messages = list(agent.messages(inv, timeout=60))
        result = messages[-1]
        assert isinstance(result, hy.AgentResult) and not result.ok
        assert result.error is not None and result.error.code == "node_failed"
        assert result.error.details["compensated"] == [named(inv, 1, "book_hotel"),
                                                       named(inv, 0, "charge_card")]
        assert effects(data["effects"]) == ["charge_card", "book_hotel", "fly",
                                            "cancel_hotel", "refund"]
        events = [m for m in messages if isinstance(m, hy.AgentEvent)]
        undo = [(e.type, e.data["node_id"]) for e in events if e.type.startswith("compensation")]
        assert undo == [("compensation_started", "book_hotel"),
                        ("compensation_completed", "book_hotel"),
                        ("compensation_started", "charge_card"),
                        ("compensation_completed", "charge_card")]
        assert events[-1].type == "invocation_failed"
        assert_logged(system.store, inv, events)
        # Each compensation is a task record of its own.
        records = {t.task_id: t for t, _ in agent.tasks(inv)}
        refund = records[compensation_id_for(task_id_for(inv, 0, "charge_card"))]
        assert (refund.status, refund.node_id, refund.execution_id) == (
            "completed", "charge_card", compensation_execution_id(inv))
        assert refund.result == {"refunded": "ch_1"}
        assert agent.get_result(inv) == result
        # A run that completes undoes nothing.
        ok = agent.wait(agent.run(trip_input(tmp_path, fail=False)), 60)
        assert ok.ok and effects(data["effects"]).count("refund") == 1


@pytest.mark.parametrize(("hold", "step", "node"), [("refund", 0, "charge_card"),
                                                    ("cancel_hotel", 1, "book_hotel")])
def test_a_kill_during_a_compensation_never_runs_one_twice(
        tmp_path: Path, hold: str, step: int, node: str) -> None:
    """kill -9 of the whole system while a compensator runs: recover() refuses
    that uncertain compensation and runs nothing; once it is resolved,
    recover() runs only the compensations that had not started (refund, after
    cancel_hotel) and ends the invocation failed, naming all it undid."""
    data = trip_input(tmp_path, hold=hold)
    path = Path(data["effects"])
    system = hy.AgentSystem(tmp_path / "data")
    try:
        agent = system.start_agent(trip_agent())
        inv = agent.run(data)
        started(path, hold)
    finally:
        system.kill()
    before = effects(str(path))
    assert before[:3] == ["charge_card", "book_hotel", "fly"] and before[-1] == hold
    Path(tmp_path / "gate").touch()
    undo_id = compensation_id_for(task_id_for(inv, step, node))
    with hy.AgentSystem(tmp_path / "data") as again:
        agent = again.start_agent(trip_agent())
        with pytest.raises(hy.RecoveryRejected) as refused:
            agent.recover(inv)
        assert refused.value.code == "task_execution_uncertain"
        assert refused.value.details["task_ids"] == [undo_id]
        assert refused.value.details["node_ids"] == [node]
        assert effects(str(path)) == before  # a refused recovery runs nothing
        agent.resolve_task(undo_id, result={"undone": "checked by hand"})
        assert agent.recover(inv) == inv
        result = agent.wait(inv, 60)
        assert result.error is not None and result.error.code == "node_failed"
        assert result.error.details["compensated"] == [named(inv, 1, "book_hotel"),
                                                       named(inv, 0, "charge_card")]
        assert effects(str(path)) == ["charge_card", "book_hotel", "fly", "cancel_hotel",
                                      "refund"]  # each exactly once
        logged = again.store.get_events(inv) if again.store else []
        assert [e.sequence for e in logged] == list(range(1, len(logged) + 1))
        assert logged[-1].type == "invocation_failed"


def test_abandon_undoes_the_completed_tasks_once(tmp_path: Path) -> None:
    """kill -9 while ``fly`` runs: recover() refuses (fly is uncertain);
    abandon() undoes charge_card and book_hotel, once each, and the invocation
    ends abandoned, naming them."""
    data = trip_input(tmp_path, hold="fly")
    path = Path(data["effects"])
    system = hy.AgentSystem(tmp_path / "data")
    try:
        agent = system.start_agent(trip_agent())
        inv = agent.run(data)
        started(path, "fly")
    finally:
        system.kill()
    Path(tmp_path / "gate").touch()
    with hy.AgentSystem(tmp_path / "data") as again:
        agent = again.start_agent(trip_agent())
        with pytest.raises(hy.RecoveryRejected) as refused:
            agent.recover(inv)
        assert refused.value.details["node_ids"] == ["fly"]
        agent.abandon(inv)
        result = agent.wait(inv, 60)
        assert result.error is not None and result.error.code == "abandoned"
        assert result.error.details["compensated"] == [named(inv, 1, "book_hotel"),
                                                       named(inv, 0, "charge_card")]
        assert effects(str(path)) == ["charge_card", "book_hotel", "fly", "cancel_hotel",
                                      "refund"]
        assert agent.status() == "idle"


def test_a_compensator_whose_edge_dies_is_not_run_again(tmp_path: Path) -> None:
    """SIGKILL of the edge running ``refund``, even of an idempotent node: the
    compensation fails (``compensation_failed``), is never re-run, and the
    invocation still ends failed, naming what was undone and what was not."""
    data = trip_input(tmp_path, hold="refund")
    path = Path(data["effects"])
    idempotent = dataclasses.replace(config, idempotent_nodes=frozenset({"charge_card"}))
    with hy.AgentSystem(tmp_path / "data") as system:
        agent = system.start_agent(idempotent)
        inv = agent.run(data)
        started(path, "refund")
        pid = int(next(line.split()[2] for line in path.read_text().splitlines()
                       if line.startswith("start refund")))
        os.kill(pid, signal.SIGKILL)
        result = agent.wait(inv, 60)
        assert result.error is not None and result.error.code == "node_failed"
        assert result.error.details["compensated"] == [named(inv, 1, "book_hotel")]
        assert result.error.details["compensation_failed"] == [named(inv, 0, "charge_card")]
        assert effects(str(path)).count("refund") == 1


@pytest.mark.parametrize(("compensate", "field", "says"), [
    ({"charge_card": lambda ctx: None}, "compensate['charge_card']", "lambda"),
    ({"nope": charge_card}, "compensate", "unknown node id 'nope'"),
    ({"charge_card": "examples.drills.booking:no_such"}, "compensate['charge_card']",
     "no_such"),
    ({"charge_card": "not a path"}, "compensate['charge_card']", "package.module:function"),
    (["charge_card"], "compensate", "mapping"),
])
def test_a_bad_compensator_is_refused_naming_the_field(
        tmp_path: Path, compensate: Any, field: str, says: str) -> None:
    config = trip_agent()
    bad = hy.AgentConfig(config.id, config.nodes, config.decision_policy, compensate=compensate)
    with hy.AgentSystem(tmp_path / "data") as system:
        with pytest.raises(hy.ConfigError) as err:
            system.start_agent(bad)
        assert err.value.details["field"] == field and says in str(err.value)
        assert system.agents() == []
