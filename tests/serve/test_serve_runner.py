"""The runner of a server's runs, without HTTP: a run's status follows its
graph's outcome (a read of the thread's state for the thread's status that
fails, its agent too busy to answer in time, does not turn a run whose graph
succeeded into an error), and runs beyond what a graph runs at once wait
their turn, pending."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from hayata_py._errors import HayataError
from hayata_py.serve import Served, open_server
from hayata_py.serve._db import RunRow
from tests.serve.launch import suite_workdir
from tests.serve_api.support import ASK, STEPS, wait_until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with suite_workdir() as workdir:
        server = open_server(workdir / "langgraph.json", data_dir=workdir / "data")
        loop = asyncio.new_event_loop()
        try:
            server.server.runner.start(loop)
            yield server
        finally:
            server.close()
            loop.close()


def _add(served: Served, graph_id: str, kwargs: dict[str, Any]) -> str:
    """A pending run of ``graph_id`` on a new thread, the runner kicked; its id."""
    db = served.server.db
    thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    db.create_thread(thread_id, {})
    now = time.time()
    db.add_run(RunRow(run_id, thread_id, graph_id, graph_id, "pending", "reject", kwargs, {},
                      now, now, now), reject_if_busy=True)
    served.server.runner.kick()
    return run_id


def _ended(served: Served, run_id: str) -> RunRow | None:
    row = served.server.db.get_run(run_id)
    return row if row is not None and row.status not in ("pending", "running") else None


def _run(served: Served, graph_id: str, kwargs: dict[str, Any]) -> RunRow:
    """A run of ``graph_id`` on a new thread, carried out to its end."""
    run_id = _add(served, graph_id, kwargs)
    return wait_until(lambda: _ended(served, run_id), f"run {run_id} of {graph_id} ending",
                      timeout=60)


def test_a_failing_state_read_leaves_a_finished_run_success(
        served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []

    def busy(*_args: Any, **_kwargs: Any) -> Any:
        reads.append("get_state")
        raise HayataError("agent 'serve.steps' did not answer GetResult within 30 s",
                          code="timeout")

    for graph in served.server.graphs.values():
        monkeypatch.setattr(graph, "get_state", busy)
    run = _run(served, STEPS, {"input": {"label": "s"}, "stream_mode": ["values"]})
    assert run.status == "success"
    thread = served.server.db.get_thread(run.thread_id)
    assert thread is not None and thread.status == "idle"
    # the stream told its graph ran to its end: its state was not read
    assert reads == []
    asked = _run(served, ASK, {"input": {"question": "go?"}, "stream_mode": ["values"]})
    assert asked.status == "success"
    thread = served.server.db.get_thread(asked.thread_id)
    assert thread is not None and thread.status == "interrupted"


def test_a_state_read_that_fails_once_is_read_again(
        served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    graph = served.server.graphs[STEPS]
    real = graph.get_state
    failures: list[str] = []

    def flaky(*args: Any, **kwargs: Any) -> Any:
        if not failures:
            failures.append("timeout")
            raise HayataError("agent did not answer GetResult within 30 s", code="timeout")
        return real(*args, **kwargs)

    monkeypatch.setattr(graph, "get_state", flaky)
    # a static interrupt point: only the thread's state tells where it stopped
    run = _run(served, STEPS, {"input": {"label": "i"}, "stream_mode": ["values"],
                               "interrupt_before": ["middle"]})
    assert failures == ["timeout"]
    assert run.status == "success"
    thread = served.server.db.get_thread(run.thread_id)
    assert thread is not None and thread.status == "interrupted"


def test_runs_beyond_a_graphs_capacity_wait_pending(
        served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    runner, db = served.server.runner, served.server.db
    monkeypatch.setattr(runner, "max_running", 2)
    run_ids = [_add(served, STEPS, {"input": {"label": f"c{i}", "delay": 0.3},
                                    "stream_mode": ["values"]}) for i in range(6)]
    most = 0
    waited = False

    def all_ended() -> bool:
        nonlocal most, waited
        statuses = [row.status for row in map(db.get_run, run_ids) if row is not None]
        most = max(most, statuses.count("running"))
        waited = waited or ("running" in statuses and "pending" in statuses)
        return all(s not in ("pending", "running") for s in statuses)

    wait_until(all_ended, "six runs ending", timeout=60)
    assert most <= 2, f"{most} runs of one graph ran at once; the cap is 2"
    assert waited  # some waited pending while others ran
    assert [db.get_run(r).status for r in run_ids] == ["success"] * 6  # type: ignore[union-attr]


def test_a_run_a_crash_left_claimed_but_not_begun_starts_with_its_input(
        served: Served) -> None:
    """A server claimed the run (``running``, its own) and died before the run's
    invocation began: the server that carries it on runs it from its input,
    not as a resume of nothing (LangGraph: ``EmptyInputError``)."""
    db, runner = served.server.db, served.server.runner
    thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    db.create_thread(thread_id, {})
    now = time.time()
    db.add_run(RunRow(run_id, thread_id, STEPS, STEPS, "pending", "reject",
                      {"input": {"label": "claimed"}, "stream_mode": ["values"]}, {},
                      now, now, now), reject_if_busy=True)
    # claimed as if by this server before a crash: running, nobody carrying it out
    with runner._lock:  # the scheduler must not start it as a pending run meanwhile
        assert db.claim_run(run_id, runner.server_id, status="pending", previous=None)
        # its next look is the one a server takes at its start
        runner._next_takeover = runner._next_own_scan = 0.0
    runner.kick()
    run = wait_until(lambda: _ended(served, run_id), "the claimed run ending", timeout=60)
    assert run.status == "success", served.server.outcome(run, thread_id)
    values = served.server.graphs[STEPS].get_state(
        {"configurable": {"thread_id": thread_id}}).values
    assert values["steps"] == ["claimed:first", "claimed:middle", "claimed:last"]
