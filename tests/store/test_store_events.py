"""The event log (``hayata_events``) and the retention of finished invocations
(``prune``), on SQLite and PostgreSQL.

Events are fenced by the invocation's token, numbered by the writer, and
idempotent per (invocation, sequence); ``prune`` never touches a running or
paused invocation.
"""

from __future__ import annotations

import pytest

from hayata_py._errors import StoreError
from hayata_py.store import SqlTaskStore, StoredEvent
from tests.store.conftest import FakeClock
from tests.store.util import invocation, run_child, task


def _ev(seq: int, iid: str = "inv-1", kind: str = "node_started") -> StoredEvent:
    return StoredEvent(iid, seq, kind, {"node_id": "a", "n": seq, "raw": b"\x01"})


def test_events_read_back_in_order_after_a_sequence(store: SqlTaskStore,
                                                    clock: FakeClock) -> None:
    """Events come back in sequence order with their data and the store's clock;
    ``after`` and ``limit`` page through them; an unknown invocation has none."""
    token = store.create_invocation(invocation(), owner="me")
    assert store.append_events([(_ev(s), token) for s in (2, 1, 3)]) == set()
    got = store.get_events("inv-1")
    assert [(e.sequence, e.type, e.data["n"], e.data["raw"]) for e in got] == [
        (1, "node_started", 1, b"\x01"), (2, "node_started", 2, b"\x01"),
        (3, "node_started", 3, b"\x01")]
    assert {e.created_at for e in got} == {clock.now}
    assert [e.sequence for e in store.get_events("inv-1", after=1, limit=1)] == [2]
    assert store.last_event("inv-1") == 3
    assert store.get_events("nope") == [] and store.last_event("nope") == 0


def test_a_batch_written_again_changes_nothing(store: SqlTaskStore) -> None:
    """A sequence already stored keeps its first event (a replayed batch is harmless)."""
    token = store.create_invocation(invocation(), owner="me")
    store.append_events([(_ev(1), token)])
    store.append_events([(_ev(1, kind="other"), token), (_ev(2), token)])
    assert [(e.sequence, e.type) for e in store.get_events("inv-1")] == [
        (1, "node_started"), (2, "node_started")]


def test_events_of_a_replaced_owner_or_an_unknown_invocation_are_refused(
        store: SqlTaskStore) -> None:
    """After a claim, the old token's events are not written (and named); the
    others of the same batch are."""
    old = store.create_invocation(invocation(), owner="me")
    store.create_invocation(invocation("inv-2"), owner="me", max_running=None)
    new = store.claim_invocation("inv-1", owner="other")
    refused = store.append_events([(_ev(1), old), (_ev(1, "inv-2"), 1), (_ev(1, "ghost"), 1)])
    assert refused == {("inv-1", old), ("ghost", 1)}
    assert store.get_events("inv-1") == []
    assert [e.sequence for e in store.get_events("inv-2")] == [1]
    assert store.append_events([(_ev(1), new)]) == set()
    assert store.last_event("inv-1") == 1


@pytest.mark.parametrize("thread", [None, "t1"])
def test_a_finish_writes_the_runs_last_events_in_its_own_commit(
        store: SqlTaskStore, thread: str | None) -> None:
    """``finish_invocation(events=...)`` logs them with the result (on a thread
    too); one already stored keeps its first version (the general path); a
    finish the store refuses (stale token) logs none."""
    token = store.create_invocation(invocation(thread_id=thread), owner="me")
    store.append_events([(_ev(1), token)])
    store.finish_invocation("inv-1", token=token, status="completed", result={"r": 1},
                            events=[_ev(1, kind="again"), _ev(2),
                                    _ev(3, kind="invocation_completed"),
                                    _ev(1, "inv-2")])  # another invocation's: ignored
    assert [(e.sequence, e.type) for e in store.get_events("inv-1")] == [
        (1, "node_started"), (2, "node_started"), (3, "invocation_completed")]
    assert store.get_events("inv-2") == []
    # The fast path alone (nothing stored yet), and a refused finish.
    fresh = store.create_invocation(invocation("inv-3"), owner="me", max_running=None)
    store.finish_invocation("inv-3", token=fresh, status="failed", error={"code": "x"},
                            events=[_ev(1, "inv-3"), _ev(2, "inv-3")])
    assert store.last_event("inv-3") == 2
    old = store.create_invocation(invocation("inv-4"), owner="me", max_running=None)
    new = store.claim_invocation("inv-4", owner="other")
    with pytest.raises(StoreError):
        store.finish_invocation("inv-4", token=old, status="completed", result=1,
                                events=[_ev(1, "inv-4")])
    assert store.get_events("inv-4") == [] and new != old


def test_prune_deletes_old_finished_invocations_with_their_tasks_and_events(
        store: SqlTaskStore, clock: FakeClock) -> None:
    """Only finished invocations older than the age go, with their records; a
    running one, a paused one and a recent one stay."""
    tokens = {}
    for iid in ("done", "failed", "running", "paused", "recent"):
        tokens[iid] = token = store.create_invocation(
            invocation(iid, paused={"payload": 1}) if iid == "paused" else invocation(iid),
            owner="me", max_running=None)
        store.append_events([(_ev(1, iid), token), (_ev(2, iid), token)])
        store.schedule_tasks([task(invocation_id=iid)], token=token)
        if iid in ("done", "failed"):
            store.finish_invocation(iid, token=token, status="completed" if iid == "done"
                                    else "failed", result=1, error=None)
    clock.advance(3600)
    store.finish_invocation("recent", token=tokens["recent"], status="completed", result=1,
                            error=None)
    report = store.prune(60)
    assert (report.invocations, report.tasks, report.events) == (2, 2, 4)
    assert store.get_invocation("done") is None and store.get_invocation("failed") is None
    assert store.get_events("done") == [] and store.get_tasks("done") == []
    for iid in ("running", "paused", "recent"):
        assert store.get_invocation(iid) is not None
        assert store.last_event(iid) == 2
    assert store.prune(0, agent_id="another-agent").invocations == 0
    clock.advance(1)
    assert store.prune(0).invocations == 1  # "recent", a second old now


@pytest.mark.parametrize("age", [-1, float("nan"), float("inf"), "7d", True])
def test_prune_refuses_an_age_that_is_not_seconds(store: SqlTaskStore, age: object) -> None:
    with pytest.raises(StoreError) as err:
        store.prune(age)  # type: ignore[arg-type]
    assert err.value.code == "invalid_argument"


def test_stored_events_are_read_by_a_new_process(store_url: str, store: SqlTaskStore) -> None:
    """Durable: another process opening the store reads the committed events."""
    token = store.create_invocation(invocation(), owner="me")
    store.append_events([(_ev(1), token), (_ev(2), token)])
    out = run_child(
        "import sys\n"
        "from hayata_py.store import open_store\n"
        "s = open_store(sys.argv[1])\n"
        "print([(e.sequence, e.data['n']) for e in s.get_events('inv-1')])\n", store_url)
    assert out.strip() == "[(1, 1), (2, 2)]"
