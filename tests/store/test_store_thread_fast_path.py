"""The fast paths of invocations on threads: taken when they apply, exact when they don't.

A create on a free thread and the finish of an invocation whose thread has no
queued run are one transaction of driver statements (``_fast``); anything
else (a busy or changed thread, a queue to start, a stale token, a repeat)
falls back to the general path, which re-checks and raises the precise error.
"""

from __future__ import annotations

import pytest

from hayata_py._errors import StaleWriter, StoreError
from hayata_py.store import SqlTaskStore
from tests.store.conftest import FakeClock
from tests.store.test_store_threads import on_thread
from tests.store.util import invocation


@pytest.mark.parametrize("max_running", [1, 3, None])
def test_threaded_create_and_finish_take_the_fast_path(
    store: SqlTaskStore, clock: FakeClock, fast_commits: list[bool], max_running: int | None
) -> None:
    """create (new thread), finish, create (free thread at its version), finish
    failed: each one committed fast transaction, with the thread as the general
    path would leave it."""
    store.create_invocation(on_thread("inv-1", state={"n": 0}), owner="o1",
                            max_running=max_running, thread_version=0)
    clock.advance(1)
    assert store.finish_invocation("inv-1", token=1, status="completed", state={"n": 1}) is None
    thread = store.get_thread("agent-1", "t1")
    assert thread is not None
    assert (thread.state, thread.version, thread.running_invocation_id, thread.updated_at) == (
        {"n": 1}, 1, None, clock.now)
    store.create_invocation(on_thread("inv-2", state={"n": 1}), owner="o1",
                            max_running=max_running, thread_version=1)
    thread = store.get_thread("agent-1", "t1")
    assert thread is not None and thread.running_invocation_id == "inv-2"
    store.save_checkpoint(on_thread("inv-2", step=1, state={"n": 7}), token=1)
    assert store.finish_invocation("inv-2", token=1, status="failed", error={"e": 1}) is None
    assert fast_commits == [True] * 5
    thread = store.get_thread("agent-1", "t1")
    assert thread is not None
    assert (thread.state, thread.version, thread.running_invocation_id) == ({"n": 1}, 1, None)
    record = store.get_invocation("inv-2")
    assert record is not None and (record.status, record.error) == ("failed", {"e": 1})


def test_completed_fast_finish_without_state_carries_the_checkpoint(
    store: SqlTaskStore, fast_commits: list[bool]
) -> None:
    store.create_invocation(on_thread("inv-1", state={"n": 0}), owner="o1")
    store.save_checkpoint(on_thread("inv-1", step=2, state={"n": 2}), token=1)
    store.finish_invocation("inv-1", token=1, status="completed", result="r")
    assert fast_commits == [True] * 3
    thread = store.get_thread("agent-1", "t1")
    assert thread is not None and (thread.state, thread.version) == ({"n": 2}, 1)


def test_fast_create_refusals_are_precise_and_write_nothing(
    store: SqlTaskStore, fast_commits: list[bool]
) -> None:
    """Busy thread, changed thread, busy agent, reused id: the fast transaction
    commits nothing and the general path names the reason."""
    store.create_invocation(on_thread("inv-1"), owner="o1")
    store.finish_invocation("inv-1", token=1, status="completed", state={"n": 1})
    store.create_invocation(on_thread("inv-2", "t2"), owner="o1", max_running=None)
    before = store.get_thread("agent-1", "t1")
    fast_commits.clear()
    cases = [
        (on_thread("inv-3", "t2"), {"max_running": None}, "thread_busy"),
        (on_thread("inv-3"), {"max_running": None, "thread_version": 0}, "thread_changed"),
        (on_thread("inv-3", "t9"), {"max_running": None, "thread_version": 2},
         "thread_changed"),
        (on_thread("inv-3"), {"max_running": 1}, "agent_busy"),
        (on_thread("inv-3"), {"max_running": 1, "thread_version": 1}, "agent_busy"),
        (on_thread("inv-1", "t3"), {"max_running": None}, "invocation_exists"),
    ]
    for record, kwargs, code in cases:
        with pytest.raises(StoreError) as info:
            store.create_invocation(record, owner="o1", **kwargs)  # type: ignore[arg-type]
        assert info.value.code == code, (record, kwargs)
    assert fast_commits == [False] * len(cases)
    assert store.get_invocation("inv-3") is None
    assert store.get_thread("agent-1", "t1") == before
    assert store.get_thread("agent-1", "t3") is None and store.get_thread("agent-1", "t9") is None


def test_finish_with_a_queue_falls_back_and_starts_it(
    store: SqlTaskStore, fast_commits: list[bool]
) -> None:
    """A queued run makes the fast finish change nothing; the general path
    finishes, carries the state and starts the queued run."""
    store.create_invocation(on_thread("inv-1"), owner="o1")
    store.enqueue_run("agent-1", "t1", "q-1", "next")
    fast_commits.clear()
    started = store.finish_invocation("inv-1", token=1, status="completed", state={"n": 1})
    assert fast_commits == [False]
    assert started is not None and (started.invocation_id, started.state) == ("q-1", {"n": 1})
    assert store.finish_invocation("q-1", token=1, status="completed") is None
    assert fast_commits == [False, True]  # the started run's finish is fast again
    thread = store.get_thread("agent-1", "t1")
    assert thread is not None and (thread.version, thread.running_invocation_id) == (2, None)


def test_stale_or_repeated_threaded_finish_writes_nothing(
    store: SqlTaskStore, fast_commits: list[bool]
) -> None:
    """A stale token and an identical repeat are refused / accepted by the general
    path without touching the thread again."""
    store.create_invocation(on_thread("inv-1"), owner="o1")
    assert store.claim_invocation("inv-1", owner="o2") == 2
    fast_commits.clear()
    with pytest.raises(StaleWriter):
        store.finish_invocation("inv-1", token=1, status="completed", state={"n": 9})
    assert fast_commits == [False]
    thread = store.get_thread("agent-1", "t1")
    assert thread is not None and (thread.version, thread.running_invocation_id) == (0, "inv-1")
    store.finish_invocation("inv-1", token=2, status="completed", state={"n": 1})
    store.finish_invocation("inv-1", token=2, status="completed", state={"n": 1})
    thread = store.get_thread("agent-1", "t1")
    assert thread is not None and (thread.version, thread.state) == (1, {"n": 1})


def test_another_store_finishes_correctly_without_the_hint(
    store: SqlTaskStore, store_url: str, clock: FakeClock, fast_commits: list[bool]
) -> None:
    """The store remembers which of its invocations run on a thread to try the
    thread's fast statements first; a store that never saw the invocation (or a
    wrong hint) still finishes it exactly, through the general path."""
    store.create_invocation(on_thread("inv-1"), owner="o1")
    store.create_invocation(invocation("plain"), owner="o1", max_running=None)
    other = SqlTaskStore(store_url, clock=clock)
    try:
        fast_commits.clear()
        other.finish_invocation("inv-1", token=1, status="completed", state={"n": 1})
        other._threaded.note("plain")  # a wrong hint
        other.finish_invocation("plain", token=1, status="completed", result=5)
        assert fast_commits == [False, False]
    finally:
        other.close()
    thread = store.get_thread("agent-1", "t1")
    assert thread is not None
    assert (thread.state, thread.version, thread.running_invocation_id) == ({"n": 1}, 1, None)
    plain = store.get_invocation("plain")
    assert plain is not None and (plain.status, plain.result) == ("completed", 5)
