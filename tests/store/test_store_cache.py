"""The node result cache (``hayata_cache``) and tasks completed from it
(``complete_cached``), on SQLite and PostgreSQL.

An entry is agent-wide and expires by the store's clock; a cached task is
recorded ``completed`` with ``cached`` marked, fenced like any task write,
with the step's checkpoint in the same transaction when one rides along.
"""

from __future__ import annotations

from typing import Any

import pytest

from hayata_py._errors import EncodingError, StaleWriter, StoreError
from hayata_py.store import ActiveExecution, SqlTaskStore
from tests.store.conftest import FakeClock
from tests.store.util import invocation, task


def _step(step: int, nodes: tuple[str, ...] = ("a",)) -> Any:
    return invocation(step=step, state={"n": step},
                      active_execution=ActiveExecution(f"ex-{step}", step, nodes, {"x": step},
                                                       len(nodes) > 1),
                      parallel_results=None, last_result={"r": step})


def test_a_stored_result_reads_back_until_it_expires(store: SqlTaskStore,
                                                     clock: FakeClock) -> None:
    """A put is read back by agent, node and key while live; at its expiry it is gone."""
    store.cache_put("agent-1", "embed", "k1", {"vector": [1.0, 2.5], "raw": b"\x00"}, ttl=60)
    hit = store.cache_get("agent-1", "embed", "k1")
    assert hit is not None
    assert hit.result == {"vector": [1.0, 2.5], "raw": b"\x00"}
    assert (hit.created_at, hit.expires_at) == (clock.now, clock.now + 60)
    assert store.cache_get("agent-1", "embed", "k2") is None
    assert store.cache_get("agent-1", "other", "k1") is None
    assert store.cache_get("agent-2", "embed", "k1") is None
    clock.advance(59.5)
    assert store.cache_get("agent-1", "embed", "k1") is not None
    clock.advance(0.5)
    assert store.cache_get("agent-1", "embed", "k1") is None


def test_a_put_replaces_the_entry_of_its_key(store: SqlTaskStore, clock: FakeClock) -> None:
    """A second put of a key (live or expired) replaces its result and expiry."""
    store.cache_put("agent-1", "embed", "k1", {"v": 1}, ttl=10)
    clock.advance(5)
    store.cache_put("agent-1", "embed", "k1", {"v": 2}, ttl=10)
    hit = store.cache_get("agent-1", "embed", "k1")
    assert hit is not None and hit.result == {"v": 2} and hit.expires_at == clock.now + 10
    clock.advance(20)
    assert store.cache_get("agent-1", "embed", "k1") is None
    store.cache_put("agent-1", "embed", "k1", {"v": 3}, ttl=10)
    again = store.cache_get("agent-1", "embed", "k1")
    assert again is not None and again.result == {"v": 3}


def test_clear_deletes_by_agent_node_and_expiry(store: SqlTaskStore, clock: FakeClock) -> None:
    """clear_cache counts what it deleted: all of an agent, one node, or the expired."""
    store.cache_put("agent-1", "embed", "k1", {"v": 1}, ttl=10)
    store.cache_put("agent-1", "embed", "k2", {"v": 1}, ttl=100)
    store.cache_put("agent-1", "llm", "k1", {"v": 1}, ttl=100)
    store.cache_put("agent-2", "embed", "k1", {"v": 1}, ttl=100)
    clock.advance(50)
    assert store.clear_cache("agent-1", expired_only=True) == 1
    assert store.clear_cache("agent-1", node_id="embed") == 1
    assert store.cache_get("agent-1", "llm", "k1") is not None
    assert store.clear_cache("agent-1") == 1
    assert store.clear_cache("agent-1") == 0
    assert store.cache_get("agent-2", "embed", "k1") is not None


def test_a_put_deletes_the_expired_entries_of_its_node(store: SqlTaskStore,
                                                       clock: FakeClock) -> None:
    """Lazy expiry: a put removes its node's expired entries, no other node's."""
    store.cache_put("agent-1", "embed", "old", {"v": 1}, ttl=10)
    store.cache_put("agent-1", "llm", "old", {"v": 1}, ttl=10)
    store.cache_put("agent-1", "embed", "live", {"v": 1}, ttl=100)
    clock.advance(20)
    store.cache_put("agent-1", "embed", "new", {"v": 2}, ttl=10)
    assert store.clear_cache("agent-1", node_id="embed", expired_only=True) == 0
    assert store.clear_cache("agent-1", expired_only=True) == 1  # llm's
    assert store.clear_cache("agent-1") == 2  # live, new


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf"), True, "60"])
def test_a_bad_ttl_is_refused(store: SqlTaskStore, ttl: Any) -> None:
    """A ttl that is not a finite number > 0 is invalid_argument; nothing is written."""
    with pytest.raises(StoreError) as refused:
        store.cache_put("agent-1", "embed", "k1", {"v": 1}, ttl=ttl)
    assert refused.value.code == "invalid_argument"
    assert store.cache_get("agent-1", "embed", "k1") is None


def test_an_unencodable_result_is_refused_before_writing(store: SqlTaskStore) -> None:
    with pytest.raises(EncodingError) as refused:
        store.cache_put("agent-1", "embed", "k1", {"v": object()}, ttl=10)
    assert refused.value.details["key"] == "result.v"
    assert store.cache_get("agent-1", "embed", "k1") is None


def test_the_cache_survives_reopening_the_store(store_url: str, clock: FakeClock) -> None:
    """Entries are committed: another store object (another process) reads them."""
    with SqlTaskStore(store_url, clock=clock) as first:
        first.cache_put("agent-1", "embed", "k1", {"v": 1}, ttl=10)
    with SqlTaskStore(store_url, clock=clock) as second:
        hit = second.cache_get("agent-1", "embed", "k1")
        assert hit is not None and hit.result == {"v": 1}


def test_complete_cached_records_a_completed_cached_task(store: SqlTaskStore,
                                                         clock: FakeClock) -> None:
    """The record is completed, cached, started and finished now, with the result;
    a task an edge recorded is not cached."""
    token = store.create_invocation(invocation(), owner="o1")
    t = task("a")
    done = store.complete_cached(t, token=token, result={"r": 1}, attempt=1,
                                 system_instance="s")
    assert done == store.get_task(t.task_id)
    assert (done.status, done.cached, done.result, done.attempt, done.resolved) == (
        "completed", True, {"r": 1}, 1, False)
    assert done.started_at == done.finished_at == clock.now
    ran = task("b", branch=1)
    store.mark_started(ran.task_id, token=token, system_instance="s", attempt=1, task=ran)
    store.mark_completed(ran.task_id, token=token, result={"r": 2})
    stored = store.get_task(ran.task_id)
    assert stored is not None and stored.status == "completed" and not stored.cached
    with pytest.raises(StoreError) as again:
        store.mark_started(t.task_id, token=token, system_instance="s", attempt=2, task=t)
    assert again.value.code == "task_finished"


def test_complete_cached_commits_the_folded_checkpoint_with_it(store: SqlTaskStore) -> None:
    """With a checkpoint: the invocation reads as if save_checkpoint had run."""
    token = store.create_invocation(invocation(), owner="o1")
    t = task("a", step=1, execution_id="ex-1")
    store.complete_cached(t, token=token, result={"r": 1}, attempt=1, system_instance="s",
                          checkpoint=_step(1))
    record = store.get_invocation("inv-1")
    assert record is not None
    assert (record.step, record.state, record.last_result) == (1, {"n": 1}, {"r": 1})
    assert record.active_execution == ActiveExecution("ex-1", 1, ("a",), {"x": 1}, False)


def test_a_fenced_complete_cached_writes_nothing(store: SqlTaskStore) -> None:
    """A stale token: StaleWriter; neither the task nor the checkpoint lands."""
    store.create_invocation(invocation(), owner="o1")
    token = store.claim_invocation("inv-1", owner="o2")
    before = store.get_invocation("inv-1")
    t = task("a", step=1, execution_id="ex-1")
    with pytest.raises(StaleWriter):
        store.complete_cached(t, token=token - 1, result={"r": 1}, attempt=1,
                              system_instance="s", checkpoint=_step(1))
    assert store.get_task(t.task_id) is None
    assert store.get_invocation("inv-1") == before


def test_complete_cached_is_refused_once_the_invocation_ended(store: SqlTaskStore) -> None:
    token = store.create_invocation(invocation(), owner="o1")
    store.finish_invocation("inv-1", token=token, status="failed", error={"code": "x"})
    t = task("a")
    with pytest.raises(StoreError) as refused:
        store.complete_cached(t, token=token, result={"r": 1}, attempt=1, system_instance="s")
    assert refused.value.code == "invocation_finished"
    assert store.get_task(t.task_id) is None


def test_a_retry_completes_from_the_cache_after_a_recorded_failure(
        store: SqlTaskStore) -> None:
    """From failed: accepted with retry and a higher attempt, else task_finished;
    from started: the attempt must increase (an idempotent re-run)."""
    token = store.create_invocation(invocation(), owner="o1")
    t = task("a")
    store.mark_started(t.task_id, token=token, system_instance="s", attempt=1, task=t)
    store.mark_failed(t.task_id, token=token, error={"code": "node_failed"})
    with pytest.raises(StoreError) as refused:
        store.complete_cached(t, token=token, result={"r": 1}, attempt=2, system_instance="s")
    assert refused.value.code == "task_finished"
    done = store.complete_cached(t, token=token, result={"r": 1}, attempt=2,
                                 system_instance="s", retry=True)
    assert (done.status, done.cached, done.error, done.attempt) == ("completed", True, None, 2)
    u = task("b", branch=1)
    store.mark_started(u.task_id, token=token, system_instance="s", attempt=1, task=u)
    with pytest.raises(StoreError) as same:
        store.complete_cached(u, token=token, result={"r": 2}, attempt=1, system_instance="s")
    assert same.value.code == "attempt_not_increasing"
    rerun = store.complete_cached(u, token=token, result={"r": 2}, attempt=2,
                                  system_instance="s")
    assert (rerun.status, rerun.cached) == ("completed", True)
