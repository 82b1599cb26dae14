"""Invocation leases in the running system (SQLite, one host).

The agent holds each invocation under a lease in the store and renews it;
another owner can take the invocation only once the lease has expired, and
the old owner then stops without writing anything more.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from pathlib import Path

import pytest

import hayata_py as hy
from examples.drills.graph import config
from hayata_py.store import open_store, task_id_for
from tests.helpers import alive, eventually, find, freeze, lease_row


def _lease(db: Path, invocation_id: str) -> tuple[str, int, float | None]:
    return lease_row(f"sqlite:///{db}", invocation_id)


def test_the_lease_is_renewed_while_the_invocation_runs(tmp_path: Path) -> None:
    effects, gate = tmp_path / "effects", tmp_path / "gate"
    with hy.AgentSystem(tmp_path / "data", name="host-a") as system:
        agent = system.start_agent(dataclasses.replace(config(), lease_seconds=0.9))
        inv = agent.run({"effects": str(effects), "gates": {"right": str(gate)}})
        db = system.data_dir / "hayata.db"
        owner, token, first = _lease(db, inv)
        assert owner == "host-a" and first is not None
        # Renewed every 0.3 s: the expiry moves past its first value (no sleep:
        # wait for the renewal, with a deadline).
        eventually(lambda: (_lease(db, inv)[2] or 0) > first + 0.5, timeout=10,
                   message="lease renewed")
        assert _lease(db, inv)[1] == token  # renewal keeps the token
        store = open_store(f"sqlite:///{db}")
        with pytest.raises(hy.InvocationBusy):
            store.claim_invocation(inv, owner="host-b", lease_seconds=5)
        gate.touch()
        assert agent.wait(inv, timeout=60).ok
        store.close()


def test_a_frozen_owner_loses_the_invocation_and_writes_nothing_more(tmp_path: Path) -> None:
    """SIGSTOP the agent past its lease; another owner claims; on SIGCONT the
    agent's renewal is refused: its run ends ``ownership_lost``, its edge is
    cancelled, and the store keeps the new owner's lease."""
    effects, gate = tmp_path / "effects", tmp_path / "gate"
    with hy.AgentSystem(tmp_path / "data", name="host-a") as system:
        agent = system.start_agent(dataclasses.replace(config(), lease_seconds=1.0))
        inv = agent.run({"effects": str(effects), "gates": {"right": str(gate)}},
                        subscriber=hy.CALLER)
        db = system.data_dir / "hayata.db"
        store = open_store(f"sqlite:///{db}")
        right = task_id_for(inv, 1, "right")
        eventually(lambda: (t := store.get_task(right)) is not None and t.status == "started",
                   timeout=30, message="right in flight")
        row = find(system.tree(), "agent")
        assert row is not None
        # Freeze the agent just after a renewal committed, not in the middle of
        # one: a process frozen inside a write transaction keeps SQLite's write
        # lock, and then nobody (not the new owner either) can write at all.
        seen = _lease(db, inv)[2] or 0
        eventually(lambda: (_lease(db, inv)[2] or 0) > seen, timeout=10,
                   message="a renewal committed")
        freeze(row["pid"])
        try:
            eventually(lambda: (_lease(db, inv)[2] or 0) < time.time(), timeout=10,
                       message="lease expired")
            token = store.claim_invocation(inv, owner="host-b", lease_seconds=60)
        finally:
            os.kill(row["pid"], signal.SIGCONT)
        (result,) = list(agent.messages(inv, timeout=30))
        assert isinstance(result, hy.AgentResult) and not result.ok
        assert result.error is not None and result.error.code == "ownership_lost"
        status = agent.status_info()
        assert status.status == "recovery_required" and status.invocation_id == inv
        with pytest.raises(hy.RecoveryRejected) as busy:
            agent.recover()
        assert busy.value.code == "invocation_busy"
        # The old owner cancels its own work: the edge running `right` is killed.
        edge_pid = int(next(line.split()[3] for line in effects.read_text().splitlines()
                            if line.startswith(f"start {right} ")))
        eventually(lambda: not alive(edge_pid), timeout=30, message="old owner's edge killed")
        gate.touch()
        before = store.get_task(right)
        assert before is not None and before.status == "started"
        assert _lease(db, inv)[:2] == ("host-b", token)
        record = store.get_invocation(inv)
        assert record is not None and record.status == "running"
        store.close()


def test_another_system_learns_of_an_invocation_started_after_it_and_takes_it_over(
        tmp_path: Path) -> None:
    """Two systems with an agent of one id on one store, each started before
    the invocation: the one that did not start it lists it ``busy`` while its
    owner's lease runs, and once the owner was killed and the lease expired,
    ``recover(invocation_id)`` claims it (here refused for the task the kill
    left uncertain, which the new owner resolves, then goes on to the end)."""
    effects, gate = tmp_path / "effects", tmp_path / "gate"
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    agent_config = dataclasses.replace(config(), lease_seconds=1.0)
    with hy.AgentSystem(tmp_path / "a", store_url=url, name="host-a") as first, \
            hy.AgentSystem(tmp_path / "b", store_url=url, name="host-b") as second:
        runner = first.start_agent(agent_config)
        other = second.start_agent(agent_config)
        assert other.unfinished() == []
        inv = runner.run({"effects": str(effects), "gates": {"right": str(gate)}})
        store = open_store(url)
        right, left = task_id_for(inv, 1, "right"), task_id_for(inv, 1, "left")
        eventually(lambda: (t := store.get_task(right)) is not None and t.status == "started",
                   timeout=30, message="right in flight")
        # left, its ungated sibling, must have ended before the kill, or the
        # kill leaves it uncertain too
        eventually(lambda: (t := store.get_task(left)) is not None and t.status == "completed",
                   timeout=30, message="left completed")
        [busy] = other.unfinished(inv)  # found by its id alone: another system runs it
        assert (busy.invocation_id, busy.recovery) == (inv, "busy")
        assert [(u.invocation_id, u.recovery) for u in other.unfinished()] == [(inv, "busy")]
        first.kill()
        eventually(lambda: [u.recovery for u in other.unfinished()] == ["uncertain"],
                   timeout=15, message="the dead owner's lease expired")
        with pytest.raises(hy.RecoveryRejected) as uncertain:
            other.recover(inv)
        assert uncertain.value.code == "task_execution_uncertain"
        other.resolve_task(right, result={"right": "right-done"})
        gate.touch()
        other.recover(inv)
        result = other.wait(inv, timeout=60)
        assert result.ok, result
        starts = [line.split()[2] for line in effects.read_text().splitlines()
                  if line.startswith("start ")]
        assert sorted(starts) == ["fetch", "left", "report", "right"], "none ran twice"
        store.close()
