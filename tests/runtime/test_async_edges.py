"""An edge that runs several tasks of an ``async def`` node at once
(``edge_concurrency`` > 1), on real processes: one edge actor driven directly,
with a stand-in for the agent that collects its ``Outcome``s and ``Partial``s.
And a node driven the same way: growing and retiring edges on the agent's
word, and running the reducers of two map steps at once."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hayata_py._actor_messages import (
    CancelRun,
    ConsolidateItems,
    Describe,
    Description,
    EdgeExit,
    EdgeInit,
    EdgeLost,
    EdgeReady,
    EdgeTable,
    EnsureEdges,
    KillReason,
    Outcome,
    Outcomes,
    Partial,
    ReducerAnswer,
    ReducerReady,
    RetireEdge,
    RunTask,
    StartReducer,
    StopReducer,
    UseAgent,
)
from supervisors import Start, System
from tests.helpers import alive, eventually

pytestmark = pytest.mark.timeout(90)

NODE = "tests.edge_nodes:sleeper"


@pytest.fixture
def rig(system: System) -> Iterator[tuple[System, Any, Any, int]]:
    """(system, edge address, collector address, edge pid) for an edge of capacity 4."""
    edge = system.thespian.createActor("hayata_py._actors.edge.EdgeActor")
    collector = system.thespian.createActor("tests.edge_nodes.Collector")
    ready = system.ask(edge, EdgeInit("sleeper", "sleeper.edge-1", NODE, None, 4), 10)
    assert isinstance(ready, EdgeReady)
    yield system, edge, collector, ready.pid


def run(task_id: str, collector: Any, spec: dict[str, Any], item: int = 0,
        stream: bool = False) -> RunTask:
    return RunTask("inv:0", task_id, "inv", "sleeper", spec, {}, collector, stream, task_id,
                   item=item)


def outcomes(system: System, collector: Any) -> list[Any]:
    """What the stand-in got, with the Outcomes of tasks that ended together
    (one message) taken apart."""
    got = system.ask(collector, ("got",), 10)
    assert isinstance(got, list)
    return [one for m in got for one in (m.outcomes if isinstance(m, Outcomes) else (m,))]


def wait_for(system: System, collector: Any, count: int) -> list[Outcome]:
    def done() -> list[Outcome] | None:
        found = [m for m in outcomes(system, collector) if isinstance(m, Outcome)]
        return found if len(found) >= count else None

    return eventually(done, timeout=30, message=f"{count} outcomes")


def starts(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("start-"))


def test_four_tasks_run_at_once_on_one_edge_each_with_its_own_outcome(
        rig: tuple[System, Any, Any, int], tmp_path: Path) -> None:
    system, edge, collector, pid = rig
    for i in range(4):  # each waits until all 4 have started: only concurrency ends them
        system.tell(edge, run(f"t{i}", collector, {"dir": str(tmp_path), "expect": 4,
                                                   "value": i}, item=i))
    got = wait_for(system, collector, 4)
    assert sorted(o.task_id for o in got) == ["t0", "t1", "t2", "t3"]
    assert all(o.ok and o.error is None and o.edge_id == "sleeper.edge-1" for o in got)
    assert {o.result["pid"] for o in got} == {pid}
    assert sorted(o.result["value"] for o in got) == [0, 1, 2, 3]


def test_a_restarted_agents_next_attempt_of_a_running_task_runs_and_reports_to_it(
        rig: tuple[System, Any, Any, int], tmp_path: Path) -> None:
    """The agent died while the edge ran task t; the restarted agent recovered the
    invocation (new token) and sends t's next attempt to the same edge. That is no
    duplicate: it runs, and its Outcome goes to the new agent (it was dropped as a
    duplicate: the recovered invocation waited for its deadline). The same
    attempt sent again is still a duplicate."""
    system, edge, old_agent, _ = rig
    new_agent = system.thespian.createActor("tests.edge_nodes.Collector")
    gate = tmp_path / "gate"
    spec = {"dir": str(tmp_path), "gate": str(gate)}
    system.tell(edge, run("t", old_agent, spec))
    eventually(lambda: len(starts(tmp_path)) == 1, timeout=30, message="attempt 1 started")
    again = dataclasses.replace(run("t", new_agent, spec), token=1, attempt=2)
    system.tell(edge, again)
    system.tell(edge, again)  # a duplicate of attempt 2: ignored
    eventually(lambda: len(starts(tmp_path)) == 2, timeout=30, message="attempt 2 started")
    gate.touch()
    got = wait_for(system, new_agent, 1)
    assert [(o.task_id, o.ok) for o in got] == [("t", True)]
    assert [o.task_id for o in wait_for(system, old_agent, 1)] == ["t"]
    system.tell(edge, run("next", new_agent, {}))  # the edge goes on
    assert [o.task_id for o in wait_for(system, new_agent, 2)] == ["t", "next"]
    assert len(starts(tmp_path)) == 2


def test_partials_of_a_shared_edge_come_before_their_outcome_and_are_counted(
        rig: tuple[System, Any, Any, int], tmp_path: Path) -> None:
    system, edge, collector, _ = rig
    system.tell(edge, run("a", collector, {"stream": 3}, item=0, stream=True))
    system.tell(edge, run("b", collector, {"stream": 2}, item=1, stream=True))
    got = wait_for(system, collector, 2)
    assert {o.task_id: o.partials for o in got} == {"a": 3, "b": 2}
    partials = [m for m in outcomes(system, collector) if isinstance(m, Partial)]
    assert sorted((p.item, p.index, p.result["token"]) for p in partials) == [
        (0, 1, 0), (0, 2, 1), (0, 3, 2), (1, 1, 0), (1, 2, 1)]


def test_cancelling_one_task_cancels_only_its_coroutine(
        rig: tuple[System, Any, Any, int], tmp_path: Path) -> None:
    system, edge, collector, pid = rig
    gate = tmp_path / "gate"
    folder = tmp_path / "runs"
    folder.mkdir()
    for name in ("keep", "drop"):
        system.tell(edge, run(name, collector, {"dir": str(folder), "gate": str(gate)}))
    eventually(lambda: len(starts(folder)) == 2, timeout=30, message="both started")
    system.tell(edge, CancelRun("drop", KillReason.TIMED_OUT))
    system.tell(edge, CancelRun("unknown"))  # nothing to cancel: ignored
    gate.touch()
    got = wait_for(system, collector, 1)
    assert [o.task_id for o in got] == ["keep"] and got[0].ok
    # The edge lives on and takes the next task; the cancelled one never reports.
    system.tell(edge, run("next", collector, {}))
    got = wait_for(system, collector, 2)
    assert [o.task_id for o in got] == ["keep", "next"]
    assert alive(pid)
    ended = [p.name for p in folder.iterdir() if p.name.startswith("end-")]
    assert len(ended) == 1  # "drop" never got past its gate


def test_a_coroutine_that_blocks_the_loop_makes_the_edge_exit_when_cancelled(
        rig: tuple[System, Any, Any, int], tmp_path: Path) -> None:
    system, edge, collector, pid = rig
    system.tell(edge, run("other", collector, {"gate": str(tmp_path / "never")}))
    system.tell(edge, run("stuck", collector, {"dir": str(tmp_path), "block": 60}))
    eventually(lambda: starts(tmp_path), timeout=30, message="the blocking task started")
    system.tell(edge, CancelRun("stuck"))
    eventually(lambda: not alive(pid), timeout=15, message="the edge exits")
    assert outcomes(system, collector) == []  # neither task reports: the edge died


def test_a_raising_and_a_bad_result_fail_only_their_own_task(
        rig: tuple[System, Any, Any, int], tmp_path: Path) -> None:
    system, edge, collector, pid = rig
    system.tell(edge, run("bad", collector, {"raise": "no"}))
    system.tell(edge, run("good", collector, {"sleep": 0.05}))
    got = {o.task_id: o for o in wait_for(system, collector, 2)}
    assert not got["bad"].ok and got["bad"].error is not None
    assert got["bad"].error.code == "node_failed"
    assert got["bad"].error.details["type"] == "RuntimeError"
    assert got["good"].ok and alive(pid)


# -- a node keeps one reducer per map step -------------------------------------------


def reducers(system: System, node: Any) -> list[dict[str, Any]]:
    reply = system.ask(node, Describe(), 10)
    assert isinstance(reply, Description)
    return [r for r in reply.children if r["role"] == "reducer"]


def test_a_node_runs_the_reducers_of_two_map_steps_at_once(system: System) -> None:
    node, _ = system.start_actor("node:w", Start(
        "hayata_py._actors.node.NodeActor", ("w", "tests.edge_nodes:plain", None, "a", 1)))
    collector = system.thespian.createActor("tests.edge_nodes.Collector")

    def start(execution_id: str) -> StartReducer:
        return StartReducer(execution_id, execution_id.split(":")[0], "w", ("t0", "t1"),
                            None, collector, opening=f"open-{execution_id}")

    system.tell(node, start("A:0"))
    system.tell(node, start("B:0"))

    def ready() -> dict[str, Any] | None:
        got = {m.execution_id: m.address for m in outcomes(system, collector)
               if isinstance(m, ReducerReady)}
        return got if len(got) == 2 else None

    addresses = eventually(ready, timeout=30, message="two reducers ready")
    rows = eventually(lambda: r if len(r := reducers(system, node)) == 2 else None,
                      timeout=10, message="two reducers described")
    assert sorted(r["id"] for r in rows) == ["w.reducer@A:0", "w.reducer@B:0"]
    first = next(r["pid"] for r in rows if r["id"].endswith("A:0"))
    # Ending A's step stops A's reducer only; B's consolidates afterwards.
    system.tell(node, StopReducer("A:0", "open-A:0"))
    eventually(lambda: not alive(first), timeout=10, message="A's reducer stopped")
    system.tell(addresses["B:0"], ConsolidateItems("B:0", ({"v": 1}, {"v": 2})))
    reduced = eventually(lambda: [m for m in outcomes(system, collector)
                                  if isinstance(m, ReducerAnswer)], timeout=30, message="Reduced")
    assert reduced == [ReducerAnswer("B:0", True, [{"v": 1}, {"v": 2}])]
    eventually(lambda: reducers(system, node) == [], timeout=10,
               message="B's reducer stopped after it answered")
    # A StopReducer that overtook its StartReducer: that reducer never starts.
    system.tell(node, StopReducer("C:0", "open-C:0"))
    system.tell(node, start("C:0"))
    system.tell(node, start("D:0"))
    eventually(lambda: [r["id"] for r in reducers(system, node)] == ["w.reducer"],
               timeout=10, message="only D's reducer")


# -- a node grows and retires its edges as the agent asks --------------------------


def test_a_node_grows_on_ensure_edges_and_stops_a_retired_edge_without_a_death(
        system: System) -> None:
    node, _ = system.start_actor("node:w", Start(
        "hayata_py._actors.node.NodeActor", ("w", "tests.edge_nodes:sleeper", None, "a", 10)))
    agent = system.thespian.createActor("tests.edge_nodes.Collector")
    system.tell(node, UseAgent(agent))

    def table(edges: int) -> EdgeTable | None:
        tables = [m for m in outcomes(system, agent) if isinstance(m, EdgeTable)]
        last = max(tables, key=lambda t: t.version, default=None)
        return last if last is not None and len(last.edges) == edges else None

    first = eventually(lambda: table(1), timeout=30, message="one edge")
    assert first.edges[0].capacity == 10
    system.tell(node, EnsureEdges(25, seq=7))  # 25 tasks at once: 3 edges of 10
    grown = eventually(lambda: table(3), timeout=30, message="three edges")
    assert (grown.wanted, grown.ensured) == (3, 7)
    system.tell(node, EnsureEdges(5))  # a smaller ask changes nothing
    retired = grown.edges[1]
    pid = next(r["pid"] for r in system.ask(node, Describe(), 10).children
               if r["id"] == retired.edge_id)
    system.tell(node, RetireEdge(retired.edge_id))
    after = eventually(lambda: table(2), timeout=30, message="two edges")
    assert retired.edge_id not in {e.edge_id for e in after.edges} and after.wanted == 2
    eventually(lambda: not alive(pid), timeout=10, message="the retired edge left")
    lost = eventually(lambda: [m for m in outcomes(system, agent) if isinstance(m, EdgeLost)],
                      timeout=10, message="its exit reported")
    assert [(m.edge_id, m.exit) for m in lost] == [(retired.edge_id, EdgeExit.RETIRED)]
    # Retiring down to the last edge keeps one: a replacement starts.
    for ref in after.edges:
        system.tell(node, RetireEdge(ref.edge_id))

    def replaced() -> EdgeTable | None:
        last = table(1)
        return last if last is not None and last.edges[0].edge_id not in {
            e.edge_id for e in after.edges} else None

    assert eventually(replaced, timeout=30, message="one fresh edge").wanted == 1
