"""Conformance: runs enqueued on a busy thread, started by the finish that frees it."""

from __future__ import annotations

import json
import signal
from functools import partial

import pytest

from hayata_py._errors import StaleWriter, StoreError
from hayata_py.store import QueuedRun, SqlTaskStore
from tests.helpers import race
from tests.store.conftest import FakeClock
from tests.store.test_store_threads import on_thread
from tests.store.util import invocation, raw_execute, run_child, start_child


def test_enqueue_on_a_free_or_unknown_thread_is_refused(store: SqlTaskStore) -> None:
    """thread_free: the caller should create the invocation directly; nothing is queued."""
    with pytest.raises(StoreError) as unknown:
        store.enqueue_run("agent-1", "t1", "q-1", {"msg": 1})
    token = store.create_invocation(on_thread("inv-1"), owner="o1")
    store.finish_invocation("inv-1", token=token, status="completed")
    with pytest.raises(StoreError) as free:
        store.enqueue_run("agent-1", "t1", "q-1", {"msg": 1})
    assert (unknown.value.code, free.value.code) == ("thread_free", "thread_free")
    assert free.value.details == {"agent_id": "agent-1", "thread_id": "t1"}
    assert store.queued_run("q-1") is None


def test_enqueue_reused_id_is_refused(store: SqlTaskStore) -> None:
    """An id already stored as an invocation, or already queued: invocation_exists;
    a queued id cannot be created directly either."""
    store.create_invocation(on_thread("inv-1"), owner="o1")
    assert store.enqueue_run("agent-1", "t1", "q-1", 1) == 1
    for reused in ("inv-1", "q-1"):
        with pytest.raises(StoreError) as info:
            store.enqueue_run("agent-1", "t1", reused, 2)
        assert info.value.code == "invocation_exists"
    with pytest.raises(StoreError) as direct:
        store.create_invocation(invocation("q-1", agent_id="agent-2"), owner="o1")
    assert direct.value.code == "invocation_exists"
    thread = store.get_thread("agent-1", "t1")
    assert thread is not None and thread.queued == ("q-1",)


def test_enqueue_positions_and_queued_run(store: SqlTaskStore) -> None:
    """enqueue_run returns the 1-based position; queued_run reads it back with
    the input and stream flag."""
    store.create_invocation(on_thread("inv-1"), owner="o1")
    positions = [store.enqueue_run("agent-1", "t1", f"q-{n}", {"msg": n, "pair": (n, n)},
                                   stream=n == 2) for n in range(1, 4)]
    assert positions == [1, 2, 3]
    assert store.queued_run("q-2") == QueuedRun("agent-1", "t1", "q-2",
                                                {"msg": 2, "pair": [2, 2]}, True, 2)
    thread = store.get_thread("agent-1", "t1")
    assert thread is not None and thread.queued == ("q-1", "q-2", "q-3")
    assert store.queued_run("nope") is None


def test_finish_starts_the_queued_run_in_the_same_transaction(
    store: SqlTaskStore, clock: FakeClock
) -> None:
    """Finishing the running invocation creates the first queued one (running,
    token 1, step 0, the thread's new state, the queued input, the same thread
    and owner, a lease from now), makes it the thread's running invocation and
    empties the queue; finish_invocation returns that record."""
    token = store.create_invocation(on_thread("inv-1", state={"n": 0}), owner="host-a",
                                    lease_seconds=10)
    assert store.enqueue_run("agent-1", "t1", "q-1", {"msg": "next"}) == 1
    clock.advance(3)
    started = store.finish_invocation("inv-1", token=token, status="completed",
                                      state={"n": 1}, lease_seconds=30)
    assert started is not None and started == store.get_invocation("q-1")
    assert (started.status, started.step, started.state, started.input, started.thread_id) == (
        "running", 0, {"n": 1}, {"msg": "next"}, "t1")
    assert started.created_at == clock.now and started.active_execution is None
    assert raw_execute(store.url.render_as_string(False),
                       "SELECT token, owner, lease_expires_at FROM hayata_invocations "
                       "WHERE invocation_id = 'q-1'") == [(1, "host-a", clock.now + 30)]
    thread = store.get_thread("agent-1", "t1")
    assert thread is not None
    assert (thread.running_invocation_id, thread.queued, thread.version) == ("q-1", (), 1)
    assert store.queued_run("q-1") is None
    # The started run is driven with token 1 like any created invocation.
    store.save_checkpoint(on_thread("q-1", step=1, state={"n": 1, "seen": True}), token=1)
    assert store.finish_invocation("q-1", token=1, status="completed") is None
    thread = store.get_thread("agent-1", "t1")
    assert thread is not None
    assert (thread.state, thread.version, thread.running_invocation_id) == (
        {"n": 1, "seen": True}, 2, None)


def test_queue_keeps_its_order_across_several_finishes(store: SqlTaskStore) -> None:
    """Each finish starts the next queued run, first enqueued first; the state
    flows through all of them; a failed one passes the thread on unchanged."""
    token = store.create_invocation(on_thread("inv-0", state={"log": []}), owner="o1")
    for n in range(1, 5):
        store.enqueue_run("agent-1", "t1", f"q-{n}", n)
    order = []
    current = "inv-0"
    while True:
        record = store.get_invocation(current)
        assert record is not None
        log = record.state["log"]
        if current == "q-2":
            started = store.finish_invocation(current, token=token, status="failed",
                                              error={"type": "E"}, state={"log": ["lost"]})
        else:
            started = store.finish_invocation(current, token=token, status="completed",
                                              state={"log": [*log, current]})
        if started is None:
            break
        order.append(started.invocation_id)
        current = started.invocation_id
    assert order == ["q-1", "q-2", "q-3", "q-4"]
    thread = store.get_thread("agent-1", "t1")
    assert thread is not None
    assert thread.state == {"log": ["inv-0", "q-1", "q-3", "q-4"]}
    assert (thread.version, thread.running_invocation_id, thread.queued) == (4, None, ())


def test_repeated_identical_finish_does_not_pop_twice(store: SqlTaskStore) -> None:
    """A repeated identical finish is accepted, returns None and starts nothing;
    a different one is still refused; a stale one is fenced and starts nothing."""
    token = store.create_invocation(on_thread("inv-1"), owner="o1")
    store.enqueue_run("agent-1", "t1", "q-1", 1)
    store.enqueue_run("agent-1", "t1", "q-2", 2)
    first = store.finish_invocation("inv-1", token=token, status="completed", result=1,
                                    state={"n": 1})
    assert first is not None and first.invocation_id == "q-1"
    again = store.finish_invocation("inv-1", token=token, status="completed", result=1,
                                    state={"n": 1})
    assert again is None
    with pytest.raises(StoreError) as info:
        store.finish_invocation("inv-1", token=token, status="failed")
    assert info.value.code == "invocation_finished"
    thread = store.get_thread("agent-1", "t1")
    assert thread is not None
    assert (thread.running_invocation_id, thread.queued, thread.version) == ("q-1", ("q-2",), 1)
    assert store.get_invocation("q-2") is None
    store.claim_invocation("q-1", owner="o2")  # token 2
    with pytest.raises(StaleWriter):
        store.finish_invocation("q-1", token=1, status="completed")
    thread = store.get_thread("agent-1", "t1")
    assert thread is not None and thread.queued == ("q-2",) and thread.version == 1


def test_unfinished_invocations_lists_every_running_one(
    store: SqlTaskStore, clock: FakeClock
) -> None:
    """unfinished_invocations: every running invocation of the agent, oldest first."""
    token = store.create_invocation(on_thread("inv-a", "ta"), owner="o1", max_running=None)
    clock.advance(1)
    store.create_invocation(invocation("inv-b"), owner="o1", max_running=None)
    clock.advance(1)
    store.create_invocation(on_thread("inv-c", "tc"), owner="o1", max_running=None)
    store.enqueue_run("agent-1", "ta", "q-a", None)
    store.create_invocation(invocation("other", agent_id="agent-2"), owner="o1")
    assert [r.invocation_id for r in store.unfinished_invocations("agent-1")] == [
        "inv-a", "inv-b", "inv-c"]
    unfinished = store.unfinished_invocation("agent-1")
    assert unfinished is not None and unfinished.invocation_id == "inv-a"
    clock.advance(1)
    store.finish_invocation("inv-a", token=token, status="completed")
    assert [r.invocation_id for r in store.unfinished_invocations("agent-1")] == [
        "inv-b", "inv-c", "q-a"]
    assert store.unfinished_invocations("agent-3") == []


def test_enqueue_racing_the_finish_is_never_lost(store_url: str, clock: FakeClock) -> None:
    """An enqueue racing the finish of the thread's running invocation (two stores,
    own connections) either lands before it (and is started by it) or is refused
    thread_free; never queued on a free thread. 10 rounds."""
    racers = [SqlTaskStore(store_url, clock=clock) for _ in range(2)]
    try:
        for n in range(10):
            iid, queued = f"inv-{n}", f"q-{n}"
            racers[0].create_invocation(on_thread(iid), owner="o1")
            finished, enqueued = race(
                partial(racers[0].finish_invocation, iid, token=1, status="completed"),
                partial(racers[1].enqueue_run, "agent-1", "t1", queued, None))
            thread = racers[0].get_thread("agent-1", "t1")
            assert thread is not None and thread.queued == ()
            if enqueued == 1:
                assert finished is not None and finished.invocation_id == queued
                assert thread.running_invocation_id == queued
                racers[0].finish_invocation(queued, token=1, status="completed")
            else:
                assert isinstance(enqueued, StoreError) and enqueued.code == "thread_free"
                assert finished is None and thread.running_invocation_id is None
                assert racers[0].get_invocation(queued) is None
    finally:
        for racer in racers:
            racer.close()


CHILD_ENQUEUE_THEN_DIE = """
import os, signal, sys
from hayata_py.store import InvocationRecord, open_store
s = open_store(sys.argv[1])
s.create_invocation(InvocationRecord("inv-1", "agent-1", "running", 0, {"n": 0}, "first",
                                     thread_id="t1"), owner="child")
s.finish_invocation("inv-1", token=1, status="completed", state={"n": 1})
s.create_invocation(InvocationRecord("inv-2", "agent-1", "running", 0, {"n": 1}, "second",
                                     thread_id="t1"), owner="child", thread_version=1)
for n in (3, 4):
    s.enqueue_run("agent-1", "t1", f"inv-{n}", {"msg": n}, stream=n == 4)
print("enqueued", flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # no close, no commit pending: a crash
"""

CHILD_READ = """
import json, sys
from dataclasses import asdict
from hayata_py.store import open_store
with open_store(sys.argv[1]) as s:
    t = s.get_thread("agent-1", "t1")
    q = s.queued_run("inv-4")
    print(json.dumps({"state": t.state, "version": t.version,
                      "running": t.running_invocation_id, "queued": list(t.queued),
                      "q4": asdict(q)}))
"""

CHILD_FINISH = """
import json, sys
from hayata_py.store import open_store
with open_store(sys.argv[1]) as s:
    started = s.finish_invocation("inv-2", token=1, status="completed", state={"n": 2})
    print(json.dumps([started.invocation_id, started.state, started.input]))
"""


def test_queue_and_state_survive_a_crash_and_a_new_process(
    store: SqlTaskStore, store_url: str
) -> None:
    """A process that enqueued two runs is SIGKILLed; a new process reads the
    thread's state, version, running invocation and queue as committed; another
    finishes the running one and starts the first queued run from the new state."""
    proc = start_child(CHILD_ENQUEUE_THEN_DIE, store_url)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL and out.strip() == "enqueued", err
    read = json.loads(run_child(CHILD_READ, store_url))
    assert read == {"state": {"n": 1}, "version": 1, "running": "inv-2",
                    "queued": ["inv-3", "inv-4"],
                    "q4": {"agent_id": "agent-1", "thread_id": "t1", "invocation_id": "inv-4",
                           "input": {"msg": 4}, "stream": True, "position": 2}}
    started = json.loads(run_child(CHILD_FINISH, store_url))
    assert started == ["inv-3", {"n": 2}, {"msg": 3}]
    thread = store.get_thread("agent-1", "t1")
    assert thread is not None
    assert (thread.state, thread.version, thread.running_invocation_id, thread.queued) == (
        {"n": 2}, 2, "inv-3", ("inv-4",))
