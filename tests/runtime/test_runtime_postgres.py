"""The runtime on PostgreSQL: a run, a whole-system kill, recovery (real server)."""

from __future__ import annotations

from pathlib import Path

import pytest

import hayata_py as hy
from examples.drills.graph import config
from hayata_py.store import open_store, task_id_for
from tests.helpers import eventually


@pytest.mark.postgres
def test_run_kill_and_recover_on_postgres(tmp_path: Path, pg_url: str) -> None:
    effects = tmp_path / "effects"
    gate = tmp_path / "gate"
    # The restarted system has the same name: it owns the invocation's lease and
    # recovers at once (another system would wait for the lease to expire).
    system = hy.AgentSystem(tmp_path / "data", store_url=pg_url, name="pg-host")
    try:
        agent = system.start_agent(config())
        done = agent.run({"effects": str(effects)})
        assert agent.wait(done, 60).ok
        inv = agent.run({"effects": str(effects), "gates": {"right": str(gate)}})
        store = open_store(pg_url)

        def right_started() -> bool:
            tasks = {t.node_id: t for t in store.get_tasks(inv)}
            return tasks.get("right") is not None and tasks["right"].status == "started" \
                and tasks.get("left") is not None and tasks["left"].status == "completed"

        eventually(right_started, timeout=30, message="right in flight")
        system.kill()
        system = hy.AgentSystem(tmp_path / "data2", store_url=pg_url, name="pg-host")
        agent = system.start_agent(config())
        assert agent.status() == "recovery_required"
        earlier = agent.get_result(done)  # a finished invocation survives, read from the store
        assert earlier is not None and earlier.ok
        with pytest.raises(hy.RecoveryRejected) as err:
            agent.recover()
        assert err.value.details["task_ids"] == [task_id_for(inv, 1, "right")]
        agent.resolve_task(task_id_for(inv, 1, "right"), result={"right": "by hand"})
        assert agent.recover() == inv
        result = agent.wait(inv, 60)
        assert result.ok and result.result["state"]["report"] == "report-done"
        record = store.get_invocation(inv)
        assert record is not None and record.status == "completed"
        store.close()
    finally:
        system.shutdown()
