"""Conformance: a retried task's next attempt starts from its recorded failure."""

from __future__ import annotations

import pytest

from hayata_py._errors import StoreError
from hayata_py.store import SqlTaskStore
from tests.store.util import invocation, task

ERROR = {"code": "node_failed", "message": "Transient: x",
         "details": {"type": "Transient", "retryable": True, "attempts": ["Transient"]}}


def test_a_retry_starts_the_next_attempt_of_a_failed_task(store: SqlTaskStore) -> None:
    token = store.create_invocation(invocation(), owner="o1")
    t = task("a")
    store.mark_started(t.task_id, token=token, system_instance="s", attempt=1, task=t)
    store.mark_failed(t.task_id, token=token, error=ERROR)
    # Without retry=True a failed task stays failed.
    with pytest.raises(StoreError) as err:
        store.mark_started(t.task_id, token=token, system_instance="s", attempt=2)
    assert err.value.code == "task_finished"
    # The same attempt again is no retry.
    with pytest.raises(StoreError) as err:
        store.mark_started(t.task_id, token=token, system_instance="s", attempt=1, retry=True)
    assert err.value.code == "task_finished"
    started = store.mark_started(t.task_id, token=token, system_instance="s", attempt=2,
                                 retry=True)
    assert (started.status, started.attempt, started.error) == ("started", 2, None)
    store.mark_completed(t.task_id, token=token, result={"a": 2})
    done = store.get_task(t.task_id)
    assert done is not None and (done.status, done.attempt, done.error) == (
        "completed", 2, None)
    # A completed task is never retried.
    with pytest.raises(StoreError) as err:
        store.mark_started(t.task_id, token=token, system_instance="s", attempt=3, retry=True)
    assert err.value.code == "task_finished"


def test_a_retry_is_fenced_like_any_start(store: SqlTaskStore) -> None:
    token = store.create_invocation(invocation(), owner="o1")
    t = task("a")
    store.mark_started(t.task_id, token=token, system_instance="s", attempt=1, task=t)
    store.mark_failed(t.task_id, token=token, error=ERROR)
    newer = store.claim_invocation(t.invocation_id, owner="o1")
    with pytest.raises(StoreError) as err:
        store.mark_started(t.task_id, token=token, system_instance="s", attempt=2, retry=True)
    assert err.value.code == "stale_writer"
    assert store.mark_started(t.task_id, token=newer, system_instance="s", attempt=2,
                              retry=True).attempt == 2
