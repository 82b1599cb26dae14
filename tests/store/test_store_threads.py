"""Conformance: conversation threads (state carried across invocations, refusals, reads)."""

from __future__ import annotations

from typing import Any

import pytest

from hayata_py._errors import CorruptRecord, StoreError
from hayata_py.store import InvocationRecord, SqlTaskStore, ThreadRecord
from tests.helpers import race
from tests.store.conftest import FakeClock
from tests.store.util import invocation, raw_execute


def on_thread(iid: str, thread: str = "t1", agent_id: str = "agent-1", **changes: Any
              ) -> InvocationRecord:
    """A running invocation record on ``thread``."""
    return invocation(iid, agent_id=agent_id, thread_id=thread, **changes)


def start_from_thread(store: SqlTaskStore, iid: str, thread: str = "t1",
                      agent_id: str = "agent-1", **kwargs: Any) -> int:
    """Create ``iid`` the way the agent does: from the thread's state and version."""
    current = store.get_thread(agent_id, thread)
    state = {} if current is None else current.state
    version = 0 if current is None else current.version
    return store.create_invocation(on_thread(iid, thread, agent_id, state=state),
                                   owner="o1", thread_version=version, **kwargs)


def test_first_create_makes_the_thread(store: SqlTaskStore, clock: FakeClock) -> None:
    """A create on an unknown thread creates it (state = the record's, version 0),
    running the new invocation; the invocation records its thread."""
    record = on_thread("inv-1", state={"n": 1})
    assert store.create_invocation(record, owner="o1") == 1
    assert store.get_thread("agent-1", "t1") == ThreadRecord(
        "agent-1", "t1", {"n": 1}, 0, "inv-1", (), clock.now, clock.now)
    got = store.get_invocation("inv-1")
    assert got is not None and got.thread_id == "t1" and got.state == {"n": 1}
    assert store.get_thread("agent-1", "other") is None
    assert store.get_thread("agent-2", "t1") is None


def test_state_carried_across_three_invocations(store: SqlTaskStore) -> None:
    """Each completed invocation's final state becomes the thread's; the version
    counts them 0 -> 3; the next invocation starts from it."""
    for n in range(3):
        iid = f"inv-{n}"
        token = start_from_thread(store, iid)
        start = store.get_invocation(iid)
        assert start is not None
        turns = start.state.get("turns", [])
        assert turns == [f"msg-{i}" for i in range(n)]
        assert store.finish_invocation(iid, token=token, status="completed", result=n,
                                       state={"turns": [*turns, f"msg-{n}"]}) is None
        thread = store.get_thread("agent-1", "t1")
        assert thread is not None
        assert (thread.version, thread.running_invocation_id) == (n + 1, None)
        assert thread.state == {"turns": [f"msg-{i}" for i in range(n + 1)]}


def test_completed_without_state_carries_the_stored_state(store: SqlTaskStore) -> None:
    """finish_invocation(state=None): the invocation's last checkpointed state is carried."""
    token = store.create_invocation(on_thread("inv-1", state={"n": 1}), owner="o1")
    store.save_checkpoint(on_thread("inv-1", step=3, state={"n": 4}), token=token)
    store.finish_invocation("inv-1", token=token, status="completed", result=None)
    thread = store.get_thread("agent-1", "t1")
    assert thread is not None and (thread.state, thread.version) == ({"n": 4}, 1)


def test_failed_invocation_keeps_state_and_frees_the_thread(
    store: SqlTaskStore, clock: FakeClock
) -> None:
    """A failed invocation leaves state and version as they were; the thread is free."""
    token = start_from_thread(store, "inv-1")
    store.finish_invocation("inv-1", token=token, status="completed", state={"n": 1})
    clock.advance(5)
    token = start_from_thread(store, "inv-2")
    store.save_checkpoint(on_thread("inv-2", state={"n": 99}), token=token)
    store.finish_invocation("inv-2", token=token, status="failed", error={"type": "E"},
                            state={"n": 100})
    thread = store.get_thread("agent-1", "t1")
    assert thread is not None
    assert (thread.state, thread.version, thread.running_invocation_id) == ({"n": 1}, 1, None)
    assert thread.updated_at == clock.now
    assert start_from_thread(store, "inv-3") == 1  # free again


def test_thread_busy(store: SqlTaskStore) -> None:
    """A second invocation on a busy thread is refused thread_busy, naming the
    running one, and writes nothing."""
    store.create_invocation(on_thread("inv-1"), owner="o1")
    with pytest.raises(StoreError) as info:
        store.create_invocation(on_thread("inv-2"), owner="o1", max_running=None)
    assert info.value.code == "thread_busy"
    assert info.value.details["thread_id"] == "t1"
    assert info.value.details["invocation_id"] == "inv-1"
    assert store.get_invocation("inv-2") is None
    thread = store.get_thread("agent-1", "t1")
    assert thread is not None and thread.running_invocation_id == "inv-1"
    # Another thread of the same agent is not busy (given room for two).
    assert store.create_invocation(on_thread("inv-3", "t2"), owner="o1", max_running=2) == 1


def test_thread_changed(store: SqlTaskStore) -> None:
    """A create from a stale read of the thread (thread_version behind) is refused."""
    token = store.create_invocation(on_thread("inv-1"), owner="o1", thread_version=0)
    store.finish_invocation("inv-1", token=token, status="completed", state={"n": 2})
    for stale in (0, 2):
        with pytest.raises(StoreError) as info:
            store.create_invocation(on_thread("inv-2"), owner="o1", thread_version=stale)
        assert info.value.code == "thread_changed"
        assert info.value.details["version"] == 1
    assert store.get_invocation("inv-2") is None
    thread = store.get_thread("agent-1", "t1")
    assert thread is not None and thread.running_invocation_id is None
    assert store.create_invocation(on_thread("inv-2"), owner="o1", thread_version=1) == 1


def test_thread_changed_on_unknown_thread(store: SqlTaskStore) -> None:
    """An unknown thread counts as version 0: another version is refused and no
    thread row is left behind."""
    with pytest.raises(StoreError) as info:
        store.create_invocation(on_thread("inv-1"), owner="o1", thread_version=3)
    assert info.value.code == "thread_changed"
    assert store.get_thread("agent-1", "t1") is None


def test_thread_version_needs_a_thread(store: SqlTaskStore) -> None:
    with pytest.raises(StoreError) as info:
        store.create_invocation(invocation("inv-1"), owner="o1", thread_version=0)
    assert info.value.code == "invalid_argument"
    assert store.get_invocation("inv-1") is None


def test_refused_create_leaves_no_thread(store: SqlTaskStore) -> None:
    """A threaded create refused agent_busy rolls back the thread it would create."""
    store.create_invocation(invocation("inv-1"), owner="o1")
    with pytest.raises(StoreError) as info:
        store.create_invocation(on_thread("inv-2"), owner="o1")
    assert info.value.code == "agent_busy"
    assert store.get_thread("agent-1", "t1") is None
    with pytest.raises(StoreError) as exists:
        store.create_invocation(on_thread("inv-1", "t2"), owner="o1", max_running=None)
    assert exists.value.code == "invocation_exists"
    assert store.get_thread("agent-1", "t2") is None


def test_thread_invocation_statuses_newest_first(store: SqlTaskStore, clock: FakeClock) -> None:
    """thread_invocation_statuses lists the thread's invocations only, newest
    first, up to limit, each with its status."""
    for n in range(3):
        token = start_from_thread(store, f"inv-{n}")
        store.finish_invocation(f"inv-{n}", token=token, status="completed", state={"n": n})
        clock.advance(1)
    store.create_invocation(invocation("plain"), owner="o1")
    store.create_invocation(on_thread("other", "t2"), owner="o1", max_running=None)
    assert start_from_thread(store, "inv-3", max_running=None) > 0
    assert store.thread_invocation_statuses("agent-1", "t1") == [
        ("inv-3", "running"), ("inv-2", "completed"), ("inv-1", "completed"),
        ("inv-0", "completed")]
    assert store.thread_invocation_statuses("agent-1", "t1", limit=2) == [
        ("inv-3", "running"), ("inv-2", "completed")]
    assert store.thread_invocation_statuses("agent-2", "t1") == []


def test_list_threads_pages_by_thread_id(store: SqlTaskStore) -> None:
    """list_threads orders by thread id; ``after`` continues from a page's last id."""
    names = [f"t{n:02d}" for n in range(7)]
    for n, name in enumerate(reversed(names)):
        token = store.create_invocation(on_thread(f"inv-{n}", name), owner="o1", max_running=None)
        store.finish_invocation(f"inv-{n}", token=token, status="completed", state={"t": name})
    store.create_invocation(on_thread("elsewhere", "t00", agent_id="agent-2"), owner="o1")
    pages: list[list[str]] = []
    after = None
    while True:
        page = store.list_threads("agent-1", limit=3, after=after)
        if not page:
            break
        pages.append([t.thread_id for t in page])
        assert all(t.agent_id == "agent-1" and t.state == {"t": t.thread_id} for t in page)
        after = page[-1].thread_id
    assert pages == [names[0:3], names[3:6], names[6:]]
    store.create_invocation(on_thread("busy", "t03"), owner="o1", max_running=None)
    for q in ("q-1", "q-2"):
        store.enqueue_run("agent-1", "t03", q, None)
    (t03,) = store.list_threads("agent-1", limit=1, after="t02")
    assert (t03.thread_id, t03.running_invocation_id, t03.queued) == ("t03", "busy",
                                                                     ("q-1", "q-2"))
    assert [t.thread_id for t in store.list_threads("agent-1")] == names
    assert store.list_threads("agent-3") == []


def test_concurrent_creates_on_one_thread_exactly_one_wins(
    store_url: str, clock: FakeClock
) -> None:
    """Two stores (own connections) racing to start a run on the same new thread:
    exactly one wins, the other is refused thread_busy; 10 rounds."""
    racers = [SqlTaskStore(store_url, clock=clock) for _ in range(2)]
    try:
        for n in range(10):
            outcomes = race(*(
                lambda i=i, n=n: racers[i].create_invocation(
                    on_thread(f"inv-{n}-{i}", f"t{n}"), owner=f"r{i}", max_running=None)
                for i in range(2)))
            won = [o for o in outcomes if o == 1]
            busy = [o for o in outcomes if isinstance(o, StoreError)]
            assert len(won) == 1 and [b.code for b in busy] == ["thread_busy"], outcomes
            thread = racers[0].get_thread("agent-1", f"t{n}")
            assert thread is not None
            assert thread.running_invocation_id == f"inv-{n}-{outcomes.index(1)}"
    finally:
        for racer in racers:
            racer.close()


def test_corrupt_thread_state(store: SqlTaskStore, store_url: str) -> None:
    """Garbage in a thread's state reads as CorruptRecord naming the thread and column."""
    store.create_invocation(on_thread("inv-1"), owner="o1")
    raw_execute(store_url, "UPDATE hayata_threads SET state = :g", g=b"\x01\xc1\xff")
    with pytest.raises(CorruptRecord) as info:
        store.get_thread("agent-1", "t1")
    assert info.value.details == {"record": "thread t1 of agent agent-1", "column": "state"}
