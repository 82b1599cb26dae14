"""Issue 21's two service drills on real processes: a SIGKILL of an async edge
running 20 invocations' tasks with runs enqueued behind them, and a
whole-system kill with many invocations in flight, restarted with
``auto_recover``: 1,000 in flight on SQLite (250 tasks per edge: 15 s on a quiet
2-core machine, 50 s under a full test run's load), 200 on PostgreSQL (1,000
there take 40 s quiet: ``make chaos`` runs 1,000 on both,
``benchmarks/chaos.py --drill``). ``HAYATA_DRILL_INVOCATIONS`` sets both sizes."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.chaos.drills import HELD, HELD_IDEMPOTENT, _starts, drill_config, whole_system_kill
from tests.helpers import alive, eventually

SIZE = os.environ.get("HAYATA_DRILL_INVOCATIONS")
IN_FLIGHT = {"sqlite": int(SIZE or 1000), "postgres": int(SIZE or 200)}


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_whole_system_kill_with_many_in_flight_then_auto_recover(
        tmp_path: Path, store: str, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("pg_url") if store == "postgres" else None
    n = IN_FLIGHT[store]
    per_edge = max(1, n // 4)
    report = whole_system_kill(tmp_path, n, per_edge, store_url=url)
    print(report)
    assert report.problems == []
    assert report.started_at_kill == 2 * per_edge  # one edge per node, full
    assert report.uncertain == per_edge  # the plain node's started tasks
    assert report.auto_completed == n - per_edge
    assert report.enqueued == n // 10


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("idempotent", [False, True])
def test_a_killed_shared_async_edge_ends_its_20_tasks_and_the_runs_behind_them_go_on(
        tmp_path: Path, idempotent: bool) -> None:
    """20 thread heads on one async edge (``edge_concurrency=20``), each with a run
    enqueued behind it, and bystanders without a thread: SIGKILL of the edge ends
    exactly the 20 tasks (``node_failed``; an idempotent node's run again once,
    attempt 2); each enqueued run then starts from its thread's state and runs
    once; the bystanders are untouched."""
    import hayata_py as hy

    node = HELD_IDEMPOTENT if idempotent else HELD
    gate = tmp_path / "gate"
    with hy.AgentSystem(tmp_path / "data") as system:
        agent = system.start_agent(drill_config(40, 20))
        heads, behind = {}, {}
        for k in range(20):
            path = tmp_path / f"head-{k}.log"
            heads[agent.run({"effects": str(path), "plan": [node, "count"], "gate": str(gate)},
                            thread=f"t{k}")] = path
        for k in range(20):
            path = tmp_path / f"next-{k}.log"
            behind[agent.run({"effects": str(path), "plan": ["count"]}, thread=f"t{k}",
                             multitask="enqueue")] = path
        eventually(lambda: all(_starts(p)[node] == 1 for p in heads.values()), 60,
                   message="20 tasks on the shared edge")
        (edge,) = {int(line.split()[3]) for p in heads.values()
                   for line in p.read_text().splitlines()}
        bystanders = {agent.run({"effects": str(tmp_path / f"by-{k}.log"), "plan": ["count"]}):
                      k for k in range(5)}
        os.kill(edge, signal.SIGKILL)
        gate.touch()  # a run again (idempotent) is not held
        for inv in heads:
            result = agent.wait(inv, timeout=60)
            if idempotent:
                assert result.ok, result.error
            else:
                assert result.error is not None and result.error.code == "node_failed", result
        for k, inv in enumerate(behind):
            result = agent.wait(inv, timeout=60)
            assert result.ok and result.result is not None, result.error
            info = agent.thread(f"t{k}")
            assert (info.version, info.state["count"]) == ((2, 2) if idempotent else (1, 1))
            assert info.state["seen"][-1] == inv and info.queued == ()
        for inv in bystanders:
            assert agent.wait(inv, timeout=60).ok
        for path in heads.values():
            assert _starts(path)[node] == (2 if idempotent else 1)
            assert _starts(path)["count"] == (1 if idempotent else 0)
        for path in behind.values():
            assert _starts(path) == {"count": 1}
        assert not alive(edge)
        for inv in heads:
            tasks = {t.node_id: t for t in system.store.get_tasks(inv)}
            assert tasks[node].attempt == (2 if idempotent else 1), tasks[node]
