"""Group commit: creates and finishes of several invocations in one transaction
(``create_invocations``, ``finish_invocations``), each with exactly the checks and
effects of its single form, on SQLite and PostgreSQL."""

from __future__ import annotations

from hayata_py._errors import StaleWriter, StoreError
from hayata_py.store import SqlTaskStore
from tests.store.test_store_threads import on_thread
from tests.store.util import invocation


def test_a_burst_of_creates_lands_together(store: SqlTaskStore,
                                           fast_commits: list[bool]) -> None:
    records = [(on_thread(f"inv-{n}", thread=f"t{n}"), None) for n in range(3)]
    records.append((invocation("inv-plain"), None))
    assert store.create_invocations(records, owner="o", max_running=None) == [1, 1, 1, 1]
    assert fast_commits == [True]  # one transaction for the four
    assert {r.invocation_id for r in store.unfinished_invocations("agent-1")} == {
        "inv-0", "inv-1", "inv-2", "inv-plain"}
    thread = store.get_thread("agent-1", "t1")
    assert thread is not None and thread.running_invocation_id == "inv-1"


def test_a_refused_create_refuses_only_itself(store: SqlTaskStore) -> None:
    assert store.create_invocations([(on_thread("inv-a", thread="busy"), None)], owner="o",
                                    max_running=None) == [1]
    got = store.create_invocations([(on_thread("inv-b", thread="free"), None),
                                    (on_thread("inv-c", thread="busy"), None),
                                    (on_thread("inv-d", thread="free2"), None)],
                                   owner="o", max_running=None)
    assert got[0] == 1 and got[2] == 1
    assert isinstance(got[1], StoreError) and got[1].code == "thread_busy"
    assert store.get_invocation("inv-c") is None
    assert {r.invocation_id for r in store.unfinished_invocations("agent-1")} == {
        "inv-a", "inv-b", "inv-d"}


def test_a_burst_of_finishes_lands_together_and_a_stale_one_only_fails_itself(
        store: SqlTaskStore, fast_commits: list[bool]) -> None:
    tokens = store.create_invocations([(on_thread(f"inv-{n}", thread=f"t{n}"), None)
                                       for n in range(2)] + [(invocation("inv-x"), None)],
                                      owner="o", max_running=None)
    assert tokens == [1, 1, 1]
    done = store.finish_invocations([
        ("inv-0", 1, "completed", {"ok": 0}, None, {"count": 1}),
        ("inv-1", 1, "failed", None, {"code": "node_failed"}, None),
        ("inv-x", 1, "completed", {"ok": "x"}, None, None)])
    assert done == [None, None, None]
    assert fast_commits[-1] is True and len(fast_commits) == 2  # the creates, the finishes
    zero, one = store.get_thread("agent-1", "t0"), store.get_thread("agent-1", "t1")
    assert zero is not None and (zero.version, zero.state, zero.running_invocation_id) == (
        1, {"count": 1}, None)
    assert one is not None and (one.version, one.running_invocation_id) == (0, None)
    store.create_invocations([(invocation("inv-y"), None), (invocation("inv-z"), None)],
                             owner="o", max_running=None)
    store.claim_invocation("inv-z", owner="o2")  # a newer owner: token 1 is stale
    mixed = store.finish_invocations([("inv-y", 1, "completed", {"y": 1}, None, None),
                                      ("inv-z", 1, "completed", {"z": 1}, None, None)])
    assert mixed[0] is None and isinstance(mixed[1], StaleWriter)
    y, z = store.get_invocation("inv-y"), store.get_invocation("inv-z")
    assert y is not None and y.status == "completed" and y.result == {"y": 1}
    assert z is not None and z.status == "running"


def test_a_finish_that_starts_a_queued_run_returns_it_from_a_burst(store: SqlTaskStore) -> None:
    store.create_invocations([(on_thread("inv-0", thread="t"), None),
                              (on_thread("inv-1", thread="u"), None)], owner="o",
                             max_running=None)
    assert store.enqueue_run("agent-1", "t", "inv-next", {"q": 1}) == 1
    done = store.finish_invocations([("inv-0", 1, "completed", {"a": 1}, None, {"n": 1}),
                                     ("inv-1", 1, "completed", {"b": 1}, None, {"n": 9})],
                                    lease_seconds=10)
    started = done[0]
    assert started is not None and not isinstance(started, StoreError)
    assert (started.invocation_id, started.state, started.input) == ("inv-next", {"n": 1},
                                                                     {"q": 1})
    assert done[1] is None
    thread = store.get_thread("agent-1", "t")
    assert thread is not None and thread.running_invocation_id == "inv-next"
