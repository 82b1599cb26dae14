"""Conformance: invocation checkpoints, ownership, leases and fencing."""

from __future__ import annotations

import dataclasses

import pytest

from hayata_py._errors import EncodingError, InvocationBusy, StaleWriter, StoreError
from hayata_py.store import SqlTaskStore
from tests.store.conftest import FakeClock
from tests.store.util import invocation


def test_create_get_roundtrip(store: SqlTaskStore, clock: FakeClock) -> None:
    """A created invocation reads back field for field, stamped by the store's clock."""
    record = invocation()
    assert store.create_invocation(record, owner="o1") == 1
    got = store.get_invocation("inv-1")
    expected = dataclasses.replace(record, created_at=clock.now, updated_at=clock.now)
    assert got == expected


def test_get_unknown_is_none(store: SqlTaskStore) -> None:
    """Reading an unknown invocation returns None."""
    assert store.get_invocation("nope") is None


def test_create_existing_id_refused(store: SqlTaskStore) -> None:
    """Creating an id that exists raises invocation_exists, even for another agent."""
    store.create_invocation(invocation(), owner="o1")
    with pytest.raises(StoreError) as info:
        store.create_invocation(invocation(agent_id="agent-2"), owner="o1")
    assert info.value.code == "invocation_exists"


def test_create_agent_busy(store: SqlTaskStore) -> None:
    """An agent with a running invocation cannot start another (agent_busy)."""
    store.create_invocation(invocation("inv-1"), owner="o1")
    with pytest.raises(StoreError) as info:
        store.create_invocation(invocation("inv-2"), owner="o1")
    assert info.value.code == "agent_busy"
    assert store.get_invocation("inv-2") is None


def test_agent_free_after_finish(store: SqlTaskStore) -> None:
    """Once its invocation is terminal the agent can start a new one."""
    token = store.create_invocation(invocation("inv-1"), owner="o1")
    store.finish_invocation("inv-1", token=token, status="completed", result=1)
    assert store.create_invocation(invocation("inv-2"), owner="o1") == 1


def test_claim_increments_token(store: SqlTaskStore) -> None:
    """Each claim returns the next token, strictly increasing."""
    store.create_invocation(invocation(), owner="o1")
    assert [store.claim_invocation("inv-1", owner=o) for o in ("o2", "o3", "o2")] == [2, 3, 4]


def test_claim_unknown(store: SqlTaskStore) -> None:
    """Claiming an unknown invocation raises invocation_not_found."""
    with pytest.raises(StoreError) as info:
        store.claim_invocation("nope", owner="o1")
    assert info.value.code == "invocation_not_found"


def test_stale_checkpoint_refused_nothing_written(store: SqlTaskStore) -> None:
    """After a new claim, the old owner's checkpoint is refused and not stored."""
    old = store.create_invocation(invocation(), owner="o1")
    store.claim_invocation("inv-1", owner="o2")
    with pytest.raises(StaleWriter) as info:
        store.save_checkpoint(invocation(step=7, state={"stale": True}), token=old)
    assert info.value.code == "stale_writer"
    got = store.get_invocation("inv-1")
    assert got is not None and got.step == 0 and got.state == invocation().state


def test_checkpoint_saved_with_current_token(store: SqlTaskStore, clock: FakeClock) -> None:
    """A current-token checkpoint overwrites the record; created_at is kept."""
    store.create_invocation(invocation(), owner="o1")
    token = store.claim_invocation("inv-1", owner="o2")
    created = clock.now
    clock.advance(5)
    new = invocation(step=3, state={"k": [1]}, active_execution=None, parallel_results=None)
    store.save_checkpoint(new, token=token)
    got = store.get_invocation("inv-1")
    assert got == dataclasses.replace(new, created_at=created, updated_at=clock.now)


def test_checkpoint_never_rewrites_the_input(store: SqlTaskStore) -> None:
    """The input is written once, at creation; a checkpoint leaves it as it was."""
    token = store.create_invocation(invocation(), owner="o1")
    store.save_checkpoint(invocation(step=2, input={"other": "input"}), token=token)
    got = store.get_invocation("inv-1")
    assert got is not None and got.step == 2 and got.input == invocation().input


def test_lease_busy_for_other_owner(store: SqlTaskStore, clock: FakeClock) -> None:
    """Another owner cannot claim while the lease is unexpired."""
    store.create_invocation(invocation(), owner="o1", lease_seconds=10)
    clock.advance(9.9)
    with pytest.raises(InvocationBusy) as info:
        store.claim_invocation("inv-1", owner="o2")
    assert info.value.details["owner"] == "o1"


def test_lease_claimable_after_expiry(store: SqlTaskStore, clock: FakeClock) -> None:
    """After the lease expires another owner can claim and gets the next token."""
    store.create_invocation(invocation(), owner="o1", lease_seconds=10)
    clock.advance(10.01)
    assert store.claim_invocation("inv-1", owner="o2", lease_seconds=10) == 2


def test_check_claimable_says_what_a_claim_would_and_writes_nothing(
        store: SqlTaskStore, clock: FakeClock) -> None:
    store.create_invocation(invocation(), owner="o1", lease_seconds=10)
    with pytest.raises(InvocationBusy) as info:
        store.check_claimable("inv-1", owner="o2")
    assert info.value.details["owner"] == "o1"
    store.check_claimable("inv-1", owner="o1")  # its own lease: claimable
    clock.advance(10.01)
    store.check_claimable("inv-1", owner="o2")  # expired: claimable
    assert store.claim_invocation("inv-1", owner="o2") == 2  # the token was not touched


def test_same_owner_reclaims_during_lease(store: SqlTaskStore) -> None:
    """The lease holder may re-claim at any time."""
    store.create_invocation(invocation(), owner="o1", lease_seconds=10)
    assert store.claim_invocation("inv-1", owner="o1", lease_seconds=10) == 2


def test_no_lease_means_claimable(store: SqlTaskStore) -> None:
    """Without a lease any owner may claim at once."""
    store.create_invocation(invocation(), owner="o1")
    assert store.claim_invocation("inv-1", owner="o2") == 2


def test_renew_extends_lease(store: SqlTaskStore, clock: FakeClock) -> None:
    """A renewed lease still blocks others past the original expiry."""
    token = store.create_invocation(invocation(), owner="o1", lease_seconds=10)
    clock.advance(8)
    store.renew_lease("inv-1", owner="o1", token=token, lease_seconds=10)
    clock.advance(8)
    with pytest.raises(InvocationBusy):
        store.claim_invocation("inv-1", owner="o2")


def test_renew_with_stale_token_refused(store: SqlTaskStore) -> None:
    """Renewing with a superseded token raises StaleWriter."""
    old = store.create_invocation(invocation(), owner="o1")
    store.claim_invocation("inv-1", owner="o2", lease_seconds=10)
    with pytest.raises(StaleWriter):
        store.renew_lease("inv-1", owner="o1", token=old, lease_seconds=10)


def test_release_lets_others_claim(store: SqlTaskStore) -> None:
    """After release another owner claims without waiting for expiry."""
    token = store.create_invocation(invocation(), owner="o1", lease_seconds=100)
    store.release("inv-1", owner="o1", token=token)
    assert store.claim_invocation("inv-1", owner="o2") == 2


def test_release_by_non_owner_refused(store: SqlTaskStore) -> None:
    """Only the recorded owner can release, even with the current token."""
    token = store.create_invocation(invocation(), owner="o1", lease_seconds=100)
    with pytest.raises(StaleWriter):
        store.release("inv-1", owner="o2", token=token)


def test_terminal_cannot_be_claimed(store: SqlTaskStore) -> None:
    """Claiming a finished invocation raises invocation_finished."""
    token = store.create_invocation(invocation(), owner="o1")
    store.finish_invocation("inv-1", token=token, status="failed", error={"code": "x"})
    with pytest.raises(StoreError) as info:
        store.claim_invocation("inv-1", owner="o2")
    assert info.value.code == "invocation_finished"


def test_terminal_refuses_checkpoint(store: SqlTaskStore) -> None:
    """A finished invocation refuses checkpoints and keeps its final record."""
    token = store.create_invocation(invocation(), owner="o1")
    store.finish_invocation("inv-1", token=token, status="completed", result={"r": 1})
    with pytest.raises(StoreError) as info:
        store.save_checkpoint(invocation(step=9), token=token)
    assert info.value.code == "invocation_finished"
    got = store.get_invocation("inv-1")
    assert got is not None and got.step == 0 and got.result == {"r": 1}


def test_checkpoint_requires_running_status(store: SqlTaskStore) -> None:
    """save_checkpoint with a terminal status is refused (invalid_status)."""
    token = store.create_invocation(invocation(), owner="o1")
    with pytest.raises(StoreError) as info:
        store.save_checkpoint(invocation(status="completed"), token=token)
    assert info.value.code == "invalid_status"


def test_finish_records_outcome(store: SqlTaskStore) -> None:
    """finish_invocation stores status, result, error and the final state."""
    token = store.create_invocation(invocation(), owner="o1")
    error = {"code": "boom", "message": "m", "details": {"n": 1}}
    store.finish_invocation("inv-1", token=token, status="failed", error=error, state={"s": 2})
    got = store.get_invocation("inv-1")
    assert got is not None
    assert (got.status, got.error, got.state, got.result) == ("failed", error, {"s": 2}, None)


def test_finish_idempotent_only_if_identical(store: SqlTaskStore) -> None:
    """Repeating the identical finish is a no-op; a different one is refused."""
    token = store.create_invocation(invocation(), owner="o1")
    store.finish_invocation("inv-1", token=token, status="completed", result=[1])
    store.finish_invocation("inv-1", token=token, status="completed", result=[1])
    with pytest.raises(StoreError) as info:
        store.finish_invocation("inv-1", token=token, status="completed", result=[2])
    assert info.value.code == "invocation_finished"
    got = store.get_invocation("inv-1")
    assert got is not None and got.result == [1]


def test_finish_with_stale_token_refused(store: SqlTaskStore) -> None:
    """A stale finish is refused and the invocation stays running."""
    old = store.create_invocation(invocation(), owner="o1")
    store.claim_invocation("inv-1", owner="o2")
    with pytest.raises(StaleWriter):
        store.finish_invocation("inv-1", token=old, status="completed", result=1)
    got = store.get_invocation("inv-1")
    assert got is not None and got.status == "running"


def test_unfinished_invocation(store: SqlTaskStore) -> None:
    """unfinished_invocation returns the running one, then None once finished."""
    assert store.unfinished_invocation("agent-1") is None
    token = store.create_invocation(invocation(), owner="o1")
    got = store.unfinished_invocation("agent-1")
    assert got is not None and got.invocation_id == "inv-1"
    store.finish_invocation("inv-1", token=token, status="completed")
    assert store.unfinished_invocation("agent-1") is None


def test_list_invocations_newest_first(store: SqlTaskStore, clock: FakeClock) -> None:
    """list_invocations returns the agent's invocations newest first, up to limit."""
    for i in range(3):
        token = store.create_invocation(invocation(f"inv-{i}"), owner="o1")
        store.finish_invocation(f"inv-{i}", token=token, status="completed")
        clock.advance(1)
    store.create_invocation(invocation("other", agent_id="agent-2"), owner="o1")
    ids = [r.invocation_id for r in store.list_invocations("agent-1", limit=2)]
    assert ids == ["inv-2", "inv-1"]


def test_encoding_error_names_key_and_writes_nothing(store: SqlTaskStore) -> None:
    """An unencodable state raises EncodingError naming its path; nothing is created."""
    bad = invocation(state={"customer": {"created_at": object()}})
    with pytest.raises(EncodingError) as info:
        store.create_invocation(bad, owner="o1")
    assert info.value.details["key"] == "state.customer.created_at"
    assert "state.customer.created_at" in str(info.value)
    assert store.get_invocation("inv-1") is None


def test_checkpoint_encoding_error_keeps_old_record(store: SqlTaskStore) -> None:
    """An unencodable checkpoint leaves the stored checkpoint unchanged."""
    token = store.create_invocation(invocation(), owner="o1")
    with pytest.raises(EncodingError) as info:
        store.save_checkpoint(invocation(step=5, last_result={"x": {1, 2}}), token=token)
    assert info.value.details["key"] == "last_result.x"
    got = store.get_invocation("inv-1")
    assert got is not None and got.step == 0 and got.last_result == {"answer": 42}
