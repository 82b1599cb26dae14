"""Conformance: the lease and fencing rules scale-out relies on (SQLite and PostgreSQL).

The rules, as the runtime uses them:

1. An invocation is owned under a lease; a different owner may take it over
   only once the lease has expired (else ``InvocationBusy``).
2. A takeover hands out the next fencing token, strictly increasing.
3. After a takeover every write of the old owner is refused (``StaleWriter``)
   and changes nothing: renewal, checkpoint, task records, finish.
4. Of owners claiming an expired invocation at the same moment, exactly one
   wins; the others get ``InvocationBusy``.
5. The owner may renew an expired lease while nobody else has claimed it.
"""

from __future__ import annotations

from typing import Any

import pytest

from hayata_py._errors import InvocationBusy, StaleWriter
from hayata_py.store import SqlTaskStore
from tests.helpers import race
from tests.store.conftest import FakeClock
from tests.store.util import invocation, task


def _snapshot(store: SqlTaskStore, invocation_id: str) -> tuple[Any, ...]:
    return store.get_invocation(invocation_id), store.get_tasks(invocation_id)


def test_takeover_fences_every_write_of_the_old_owner(
    store: SqlTaskStore, clock: FakeClock
) -> None:
    old = store.create_invocation(invocation(), owner="A", lease_seconds=10)
    store.schedule_tasks([task("a"), task("b", branch=1)], token=old)
    store.mark_started(task("a").task_id, token=old, system_instance="A1", attempt=1)
    clock.advance(10.01)
    new = store.claim_invocation("inv-1", owner="B", lease_seconds=10)
    assert new == old + 1
    before = _snapshot(store, "inv-1")
    writes = [
        lambda: store.renew_lease("inv-1", owner="A", token=old, lease_seconds=10),
        lambda: store.save_checkpoint(invocation(step=9), token=old),
        lambda: store.schedule_tasks([task("c", branch=2)], token=old),
        lambda: store.mark_started(task("b", branch=1).task_id, token=old,
                                   system_instance="A1", attempt=1),
        lambda: store.mark_completed(task("a").task_id, token=old, result={"a": 1}),
        lambda: store.mark_failed(task("a").task_id, token=old, error={"code": "x"}),
        lambda: store.resolve_task(task("a").task_id, token=old, result={"a": 1}),
        lambda: store.release("inv-1", owner="A", token=old),
        lambda: store.finish_invocation("inv-1", token=old, status="completed", result=1),
    ]
    for write in writes:
        with pytest.raises(StaleWriter):
            write()
    assert _snapshot(store, "inv-1") == before
    # The new owner writes normally.
    store.mark_completed(task("a").task_id, token=new, result={"a": "new"})
    got = store.get_task(task("a").task_id)
    assert got is not None and got.result == {"a": "new"}


def test_new_owners_lease_blocks_the_old_owner(store: SqlTaskStore, clock: FakeClock) -> None:
    store.create_invocation(invocation(), owner="A", lease_seconds=5)
    clock.advance(5.01)
    store.claim_invocation("inv-1", owner="B", lease_seconds=5)
    clock.advance(4.9)
    with pytest.raises(InvocationBusy) as info:
        store.claim_invocation("inv-1", owner="A", lease_seconds=5)
    assert info.value.code == "invocation_busy" and info.value.details["owner"] == "B"


def test_tokens_strictly_increase_across_takeovers(
    store: SqlTaskStore, clock: FakeClock
) -> None:
    tokens = [store.create_invocation(invocation(), owner="o0", lease_seconds=1)]
    for i in range(1, 8):
        clock.advance(1.01)
        tokens.append(store.claim_invocation("inv-1", owner=f"o{i % 3}", lease_seconds=1))
    assert tokens == sorted(set(tokens)) and len(tokens) == 8


def test_owner_renews_an_expired_lease_nobody_claimed(
    store: SqlTaskStore, clock: FakeClock
) -> None:
    token = store.create_invocation(invocation(), owner="A", lease_seconds=2)
    clock.advance(3)
    store.renew_lease("inv-1", owner="A", token=token, lease_seconds=2)
    clock.advance(1.5)
    with pytest.raises(InvocationBusy):
        store.claim_invocation("inv-1", owner="B", lease_seconds=2)


def test_renewal_by_another_owner_with_the_current_token_is_refused(
    store: SqlTaskStore,
) -> None:
    token = store.create_invocation(invocation(), owner="A", lease_seconds=10)
    with pytest.raises(StaleWriter):
        store.renew_lease("inv-1", owner="B", token=token, lease_seconds=10)


def test_concurrent_claims_after_expiry_exactly_one_wins(
    store_url: str, clock: FakeClock
) -> None:
    """Two stores (own connections, as two hosts would have) race for each of
    20 expired invocations: every time exactly one wins."""
    setup = SqlTaskStore(store_url, clock=clock)
    racers = [SqlTaskStore(store_url, clock=clock) for _ in range(2)]
    try:
        for n in range(20):
            inv = f"inv-{n}"
            setup.create_invocation(invocation(inv, agent_id=f"agent-{n}"), owner="dead",
                                    lease_seconds=1)
        clock.advance(1.01)
        for n in range(20):
            inv = f"inv-{n}"
            outcomes = race(*(
                lambda i=i, inv=inv: racers[i].claim_invocation(
                    inv, owner=f"racer-{i}", lease_seconds=10)
                for i in range(2)))
            won = [o for o in outcomes if isinstance(o, int)]
            busy = [o for o in outcomes if isinstance(o, InvocationBusy)]
            assert won == [2] and len(busy) == 1, (inv, outcomes)
    finally:
        setup.close()
        for racer in racers:
            racer.close()


def test_renewing_many_leases_extends_ours_and_names_each_refusal(
    store: SqlTaskStore, clock: FakeClock
) -> None:
    """``renew_leases``: one transaction for an agent's running invocations; those
    another owner took over, or that ended, come back refused and change nothing."""
    for n in range(4):
        store.create_invocation(invocation(f"inv-{n}"), owner="A", lease_seconds=2,
                                max_running=None)
    assert store.renew_leases({f"inv-{n}": 1 for n in range(4)}, owner="A",
                              lease_seconds=2) == set()  # the one-call path
    clock.advance(2.5)
    taken = store.claim_invocation("inv-1", owner="B", lease_seconds=10)
    store.finish_invocation("inv-2", token=1, status="completed")
    refused = store.renew_leases({f"inv-{n}": 1 for n in range(4)}, owner="A",
                                 lease_seconds=2)
    assert refused == {"inv-1", "inv-2"}
    clock.advance(1.5)  # within the renewed leases of inv-0 and inv-3
    for iid in ("inv-0", "inv-3"):
        with pytest.raises(InvocationBusy):
            store.claim_invocation(iid, owner="B", lease_seconds=2)
    record = store.get_invocation("inv-1")
    assert record is not None and record.status == "running"
    with pytest.raises(StaleWriter):  # still B's: A's refused renewal wrote nothing
        store.renew_lease("inv-1", owner="A", token=taken, lease_seconds=2)
    assert store.renew_leases({}, owner="A", lease_seconds=2) == set()
