"""Run ownership in the serve tables (SQLite, no server process): one server
wins a claim, only the owner records events or ends the run, and a run whose
server's lease expired is taken over by another."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from hayata_py._errors import TimeoutError_
from hayata_py.serve._db import RunLost, RunRow, ServeDB
from hayata_py.serve._runs import READY_SLACK, Runner
from hayata_py.store import open_store

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[ServeDB]:
    url = f"sqlite:///{tmp_path / 'hayata.db'}"
    open_store(url).close()  # the migrations
    serve_db = ServeDB(url)
    try:
        yield serve_db
    finally:
        serve_db.close()


def _pending(db: ServeDB, run_id: str = "r1", kwargs: dict[str, Any] | None = None) -> RunRow:
    now = time.time()
    db.create_thread("t1", {})
    run = RunRow(run_id, "t1", "a", "steps", "pending", "enqueue", kwargs or {}, {}, now, now,
                 now)
    assert db.add_run(run, reject_if_busy=False) == "ok"
    return run


def test_one_server_wins_the_claim_and_only_it_records(db: ServeDB) -> None:
    _pending(db)
    assert db.claim_run("r1", "A", status="pending", previous=None)
    assert not db.claim_run("r1", "B", status="pending", previous=None)
    row = db.get_run("r1")
    assert row is not None and (row.status, row.owner) == ("running", "A")
    assert db.append_events("r1", [("values", {"n": 1})], owner="A") == 1
    with pytest.raises(RunLost, match="carried out by A, not B"):
        db.append_events("r1", [("values", {"n": 2})], owner="B")
    assert [seq for seq, _, _ in db.events_after("r1", 0)] == [1]
    assert not db.set_run_status("r1", "success", only_from=["running"], owner="B")
    assert db.set_run_status("r1", "success", only_from=["running"], owner="A")
    with pytest.raises(RunLost, match="is success"):
        db.append_events("r1", [("values", {"n": 3})], owner="A")
    db.delete_run("r1")
    with pytest.raises(RunLost, match="deleted"):
        db.append_events("r1", [("values", {"n": 3})], owner="A")


def test_a_taken_over_run_is_fenced_for_its_old_server(db: ServeDB) -> None:
    _pending(db)
    assert db.claim_run("r1", "A", status="pending", previous=None)
    assert db.claim_run("r1", "B", status="running", previous="A")
    assert not db.claim_run("r1", "C", status="running", previous="A"), "one taker only"
    with pytest.raises(RunLost):
        db.append_events("r1", [("values", {})], owner="A")
    assert not db.set_run_status("r1", "success", only_from=["running"], owner="A")
    assert db.append_events("r1", [("values", {})], owner="B") == 1


def test_leases_say_whose_running_runs_are_orphaned(db: ServeDB) -> None:
    db.renew_server("A", "http://a", 30.0, started=True)
    db.renew_server("B", "http://b", 30.0, started=True)
    runner = Runner(db, {}, server_id="B", lease_seconds=30.0)
    _pending(db)
    db.claim_run("r1", "A", status="pending", previous=None)
    run = db.get_run("r1")
    assert run is not None
    assert not runner._orphaned(run, db.server_leases()), "A's lease still runs"
    db.expire_server("A")
    assert db.server_leases()["A"] < time.time()
    assert runner._orphaned(run, db.server_leases()), "A's lease expired"
    mine = RunRow(**{**run.__dict__, "owner": "B"})
    assert runner._orphaned(mine, {}), "left running by this server before a restart"


class _CountingGraph:
    """Counts what the runner asks of it (its errors would be the run's own)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def stream(self, *_args: object, **_kwargs: object) -> list[object]:
        self.calls.append("stream")
        return []

    def get_state(self, _config: object) -> object:
        self.calls.append("get_state")
        raise LookupError("no state here")


def test_a_run_cancelled_as_it_is_taken_up_never_starts(db: ServeDB) -> None:
    # The race: cancel() saw the run pending (so it asked no invocation to
    # stop) just before the scheduler claimed it and started its worker.
    run = _pending(db)
    graph = _CountingGraph()
    runner = Runner(db, {"steps": graph},  # type: ignore[dict-item]
                    server_id="A", lease_seconds=30.0)
    runner._cancelled.add(run.run_id)
    assert db.claim_run(run.run_id, "A", status="pending", previous=None)
    runner._carry_out(run)
    row = db.get_run(run.run_id)
    assert row is not None and row.status == "interrupted"
    assert graph.calls == [], "the cancelled run's invocation was started"
    assert db.events_after(run.run_id, 0) == [], "nothing logged for a run that never started"


def _add(db: ServeDB, run_id: str, thread: str, created: float,
         not_before: float = 0.0) -> None:
    if db.get_thread(thread) is None:
        db.create_thread(thread, {})
    run = RunRow(run_id, thread, "a", "steps", "pending", "enqueue", {}, {}, not_before,
                 created, created)
    assert db.add_run(run, reject_if_busy=False) == "ok"


def test_the_scheduler_reads_the_oldest_pending_run_of_each_idle_thread(db: ServeDB) -> None:
    _add(db, "a1", "ta", 1.0)
    _add(db, "a2", "ta", 2.0)
    _add(db, "b1", "tb", 3.0)
    _add(db, "c1", "tc", 0.5)
    _add(db, "c2", "tc", 4.0)
    _add(db, "d1", "td", 5.0, not_before=time.time() + 3600)  # not due: holds d2 back
    _add(db, "d2", "td", 6.0)
    _add(db, "e1", "te", 7.0)
    assert db.claim_run("c1", "A", status="pending", previous=None)  # tc runs
    now = time.time()
    assert [r.run_id for r in db.ready_runs(10, now=now)] == ["a1", "b1", "e1"]
    assert [r.run_id for r in db.ready_runs(2, now=now)] == ["a1", "b1"]
    assert [r.run_id for r in db.ready_runs(10, now=now + 7200)] == ["a1", "b1", "d1", "e1"]
    assert db.ready_runs(10, now=now, graphs=["other"]) == []
    assert [r.run_id for r in db.ready_runs(10, now=now, graphs=["steps"])] == ["a1", "b1", "e1"]


def test_events_of_several_runs_in_one_batch(db: ServeDB) -> None:
    _add(db, "r1", "t1", 1.0)
    _add(db, "r2", "t2", 2.0)
    _add(db, "r3", "t3", 3.0)
    for run_id in ("r1", "r2"):
        assert db.claim_run(run_id, "A", status="pending", previous=None)
    assert db.claim_run("r3", "B", status="pending", previous=None)
    out = db.append_batch([("r1", [("values", 1), ("updates", 2)], "A"),
                           ("r3", [("values", 3)], "A"),
                           ("r2", [("values", 4)], "A"),
                           ("r1", [("values", 5)], "A")])
    assert out[0] == [(1, "values", "1"), (2, "updates", "2")]
    assert out[2] == [(1, "values", "4")] and out[3] == [(3, "values", "5")]
    assert isinstance(out[1], RunLost) and "carried out by B" in str(out[1])
    assert [(s, e) for s, e, _ in db.events_after("r1", 0)] == [
        (1, "values"), (2, "updates"), (3, "values")]
    assert db.events_after("r3", 0) == []


def test_a_run_ends_and_its_thread_settles_in_one_write(db: ServeDB) -> None:
    _pending(db, "r1")
    now = time.time()
    assert db.add_run(RunRow("r2", "t1", "a", "steps", "pending", "enqueue", {}, {}, now + 1,
                             now + 1, now + 1), reject_if_busy=False) == "ok"
    assert db.claim_run("r1", "A", status="pending", previous=None)
    # not the owner: the run is left as it is; the thread still settles (busy: r2 waits)
    assert not db.end_run("r1", "success", owner="B", thread_id="t1", thread_status="idle",
                          error=None)
    assert db.get_run("r1").status == "running"  # type: ignore[union-attr]
    assert db.end_run("r1", "success", owner="A", thread_id="t1", thread_status="idle",
                      error=None)
    assert db.get_run("r1").status == "success"  # type: ignore[union-attr]
    assert db.get_thread("t1").status == "busy"  # type: ignore[union-attr]
    assert db.claim_run("r2", "A", status="pending", previous=None)
    assert db.end_run("r2", "error", owner="A", thread_id="t1", thread_status="error",
                      error={"error": "ValueError", "message": "boom"})
    thread = db.get_thread("t1")
    assert thread is not None and thread.status == "error"
    assert thread.error == {"error": "ValueError", "message": "boom"}
    assert not db.end_run("r2", "success", owner="A", thread_id="t1", thread_status="idle",
                          error=None)  # ended already


class _CountingMarks(ServeDB):
    """A store that counts the follower's reads of watched runs."""

    marks_read = 0

    def run_marks(self, run_ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        self.marks_read += 1
        return super().run_marks(run_ids)


def test_the_follower_reads_watched_runs_only_while_another_server_is_alive(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'hayata.db'}"
    open_store(url).close()
    db = _CountingMarks(url)
    runner = Runner(db, {}, server_id="A", lease_seconds=30.0)
    try:
        db.renew_server("A", "http://a", 30.0, started=True)
        _pending(db)
        runner.wakers.watch("r1")  # a join waits on a run no worker here carries out
        assert not runner._others_alive(), "A alone on the store"
        assert runner._follow_once({}, others=False) == {}
        assert db.marks_read == 0, "the follower read runs nobody else can carry out"
        db.renew_server("B", "http://b", 30.0, started=True)
        assert runner._others_alive(), "B holds a live lease"
        assert set(runner._follow_once({}, others=True)) == {"r1"}
        assert db.marks_read == 1
        db.expire_server("B")
        assert not runner._others_alive(), "B's lease ended: alone again"
    finally:
        db.close()


class _Recording(ServeDB):
    """A store that records the scheduler's reads."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.reads: list[tuple[str, Any]] = []

    def ready_runs(self, limit: int, *, now: float, graphs: Sequence[str] | None = None
                   ) -> list[RunRow]:
        self.reads.append(("ready", (limit, list(graphs or ()))))
        return super().ready_runs(limit, now=now, graphs=graphs)

    def runs_with_status(self, statuses: Sequence[str], *, not_owned_by: str | None = None
                         ) -> list[RunRow]:
        self.reads.append(("running", not_owned_by))
        return super().runs_with_status(statuses, not_owned_by=not_owned_by)


def test_the_scheduler_reads_no_more_than_its_graphs_have_room_for(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'hayata.db'}"
    open_store(url).close()
    db = _Recording(url)
    runner = Runner(db, {"steps": _CountingGraph(), "full": _CountingGraph()},  # type: ignore[dict-item]
                    server_id="A", lease_seconds=30.0, max_running=3)
    try:
        runner._running["steps"], runner._running["full"] = 1, 3
        runner._start_ready()
        assert db.reads == [("running", None), ("ready", (2 + READY_SLACK, ["steps"]))], \
            "all running runs read once, then as many pending as 'steps' has room for"
        db.reads.clear()
        runner._next_takeover = 0.0  # a second later
        runner._running["steps"] = 3
        runner._start_ready()
        assert db.reads == [("running", "A")], \
            "no pending run read with every graph full; only other servers' running runs"
        db.reads.clear()
        runner._next_takeover = 0.0
        runner._running["steps"], runner._running["full"] = 2, 2
        runner._start_ready()
        assert db.reads == [("running", "A"), ("ready", (1 + READY_SLACK, ["full"])),
                            ("ready", (1 + READY_SLACK, ["steps"]))], \
            "each graph's own pending runs: one's backlog does not crowd another's out"
    finally:
        db.close()


class _SlowAgentGraph:
    """A graph whose thread has a running invocation and whose agent times out
    once when asked about it, then says it is free."""

    def __init__(self) -> None:
        self.asked: list[str | None] = []
        self.threads = self
        self.agent = self

    def invocations(self, _thread: str) -> list[tuple[str, str]]:
        return [("inv2", "running"), ("inv1", "success")]

    def unfinished(self, invocation_id: str | None = None) -> list[object]:
        self.asked.append(invocation_id)
        if len(self.asked) == 1:
            raise TimeoutError("the agent is busy taking a thousand runs back")
        return []


def test_a_run_taken_back_waits_out_a_slow_agent_instead_of_failing(db: ServeDB) -> None:
    run = _pending(db)
    graph = _SlowAgentGraph()
    runner = Runner(db, {"steps": graph},  # type: ignore[dict-item]
                    server_id="A", lease_seconds=1.0)
    assert db.claim_run(run.run_id, "A", status="pending", previous=None)
    runner._until_claimable(run)  # returns once the agent answers; no TimeoutError
    assert graph.asked == ["inv2", "inv2"], "asked about the thread's running invocation only"


class _ResumedGraph:
    """A graph whose run a crash left running: its agent does not answer the
    first read of the resumed stream (busy taking runs back), then goes on."""

    interrupt_before = interrupt_after = None

    def __init__(self, run_id: str) -> None:
        from hayata_py.langgraph._app import invocation_of

        self.invocation = invocation_of({"run_id": run_id})
        self.threads = self
        self.agent = self
        self.streams = 0

    def invocations(self, _thread: str) -> list[tuple[str, str]]:
        return [(self.invocation, "running")]

    def unfinished(self, invocation_id: str | None = None) -> list[object]:
        return []

    def stream(self, input: object, *_args: object, **_kwargs: object
               ) -> Iterator[tuple[str, object]]:
        assert input is None, "a run taken back goes on; it does not start again"
        self.streams += 1
        if self.streams == 1:
            raise TimeoutError_("agent 'steps' did not answer GetResult within 30.0s")
        yield "values", {"steps": 3}


def test_a_run_taken_back_asks_again_when_its_agent_did_not_answer(db: ServeDB) -> None:
    run = _pending(db, str(uuid.uuid4()))
    graph = _ResumedGraph(run.run_id)
    runner = Runner(db, {"steps": graph},  # type: ignore[dict-item]
                    server_id="A", lease_seconds=1.0)
    assert db.claim_run(run.run_id, "A", status="pending", previous=None)
    runner._resume.add(run.run_id)
    runner._carry_out(run)
    row = db.get_run(run.run_id)
    assert row is not None and row.status == "success", row
    assert graph.streams == 2
    assert [e for _, e, _ in db.events_after(run.run_id, 0)] == ["metadata", "values"]


class _LateAgentGraph:
    """A graph whose agent does not answer a new run's Run in time. ``taken``:
    when the agent takes that Run after all (after the first try: its
    invocation is running when the runner looks; after the second: the retry
    is refused as a second Run of the same invocation; never: it was lost)."""

    interrupt_before = interrupt_after = None

    def __init__(self, run_id: str, taken: str) -> None:
        from hayata_py.langgraph._app import invocation_of

        self.invocation = invocation_of({"run_id": run_id})
        self.taken = taken
        self.threads = self
        self.agent = self
        self.calls: list[tuple[object, object]] = []

    def invocations(self, _thread: str) -> list[tuple[str, str]]:
        started = (self.taken == "first" and self.calls) or (
            self.taken == "second" and len(self.calls) >= 2)
        return [(self.invocation, "running")] if started else []

    def stream(self, input: object, config: dict[str, Any], **_kwargs: object
               ) -> Iterator[tuple[str, object]]:
        from hayata_py._errors import HayataError

        self.calls.append((input, config.get("run_id")))
        if len(self.calls) == 1:
            raise TimeoutError_("agent 'steps' did not answer Run within 30.0s")
        if self.taken == "second" and len(self.calls) == 2:
            raise HayataError("invocation exists", code="invocation_exists")
        yield "values", {"steps": len(self.calls)}


@pytest.mark.parametrize("taken", ["first", "second", "never"])
def test_a_new_run_whose_agent_did_not_answer_goes_on_once(db: ServeDB, taken: str) -> None:
    """A new run whose Run the agent did not answer in time ends ``success``:
    it goes on with its invocation if the agent took the Run after all, else
    sends it again (same invocation id: never started twice)."""
    run = _pending(db, str(uuid.uuid4()), {"input": {"label": "x"}})
    graph = _LateAgentGraph(run.run_id, taken)
    runner = Runner(db, {"steps": graph},  # type: ignore[dict-item]
                    server_id="A", lease_seconds=1.0)
    assert db.claim_run(run.run_id, "A", status="pending", previous=None)
    runner._carry_out(run)
    row = db.get_run(run.run_id)
    assert row is not None and row.status == "success", row
    first = ({"label": "x"}, run.run_id)
    went_on = (None, None)  # a run going on with its invocation: no input, no new id
    assert graph.calls == {"first": [first, went_on],
                           "second": [first, first, went_on],
                           "never": [first, first]}[taken]
    assert [e for _, e, _ in db.events_after(run.run_id, 0)] == ["metadata", "values"]
