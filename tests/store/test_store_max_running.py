"""Conformance: how many invocations an agent may run (``create_invocation(max_running=)``)."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from hayata_py._errors import StoreError
from hayata_py.store import SqlTaskStore
from tests.helpers import race
from tests.store.conftest import FakeClock
from tests.store.test_store_threads import on_thread
from tests.store.util import invocation


def test_default_keeps_one_running_invocation(store: SqlTaskStore) -> None:
    """max_running=1 (the default): agent_busy names the running one."""
    store.create_invocation(invocation("inv-1"), owner="o1")
    with pytest.raises(StoreError) as info:
        store.create_invocation(invocation("inv-2"), owner="o1", max_running=1)
    assert info.value.code == "agent_busy"
    assert info.value.details == {"agent_id": "agent-1", "invocation_id": "inv-1",
                                  "running": 1, "max_running": 1}
    assert store.get_invocation("inv-2") is None


def test_limit_n_refuses_when_n_are_running(store: SqlTaskStore) -> None:
    """max_running=3: three run at once, a fourth is refused until one ends;
    invocations on threads count too, and a refused threaded create leaves no thread."""
    tokens = [store.create_invocation(invocation("inv-0"), owner="o1", max_running=3)]
    tokens += [store.create_invocation(on_thread(f"inv-{n}", f"t{n}"), owner="o1",
                                       max_running=3) for n in (1, 2)]
    for record in (invocation("inv-3"), on_thread("inv-3", "t3")):
        with pytest.raises(StoreError) as info:
            store.create_invocation(record, owner="o1", max_running=3)
        assert info.value.code == "agent_busy"
        assert info.value.details == {"agent_id": "agent-1", "running": 3, "max_running": 3}
    assert store.get_invocation("inv-3") is None and store.get_thread("agent-1", "t3") is None
    store.create_invocation(invocation("other", agent_id="agent-2"), owner="o1", max_running=3)
    store.finish_invocation("inv-1", token=tokens[1], status="failed", error={"e": 1})
    assert store.create_invocation(on_thread("inv-3", "t3"), owner="o1", max_running=3) == 1
    assert len(store.unfinished_invocations("agent-1")) == 3


def test_none_skips_the_check(store: SqlTaskStore, fast_commits: list[bool]) -> None:
    """max_running=None: no per-agent check (one committed statement each); a
    later max_running=1 create still sees them all."""
    for n in range(5):
        assert store.create_invocation(invocation(f"inv-{n}"), owner="o1",
                                       max_running=None) == 1
    assert fast_commits == [True] * 5
    assert [r.invocation_id for r in store.unfinished_invocations("agent-1")] == [
        f"inv-{n}" for n in range(5)]
    for limit in (1, 5):
        with pytest.raises(StoreError) as info:
            store.create_invocation(invocation("inv-x"), owner="o1", max_running=limit)
        assert info.value.code == "agent_busy"
    with pytest.raises(StoreError) as exists:
        store.create_invocation(invocation("inv-0"), owner="o1", max_running=None)
    assert exists.value.code == "invocation_exists"


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_invalid_max_running(store: SqlTaskStore, bad: Any) -> None:
    with pytest.raises(StoreError) as info:
        store.create_invocation(invocation("inv-1"), owner="o1", max_running=bad)
    assert info.value.code == "invalid_argument"
    assert store.get_invocation("inv-1") is None


@pytest.mark.parametrize("limit", [1, 2])
def test_concurrent_creates_respect_the_limit(
    store_url: str, clock: FakeClock, limit: int
) -> None:
    """Four stores (own connections, as four hosts would have) create on one agent
    at once: exactly ``limit`` win, the others are refused agent_busy; 8 rounds."""
    racers = [SqlTaskStore(store_url, clock=clock) for _ in range(4)]
    try:
        for n in range(8):
            outcomes = race(*(
                partial(racers[i].create_invocation,
                        invocation(f"inv-{n}-{i}", agent_id=f"agent-{n}"),
                        owner=f"r{i}", max_running=limit)
                for i in range(4)))
            won = [o for o in outcomes if o == 1]
            busy = [o.code for o in outcomes if isinstance(o, StoreError)]
            assert len(won) == limit and busy == ["agent_busy"] * (4 - limit), outcomes
            assert len(racers[0].unfinished_invocations(f"agent-{n}")) == limit
    finally:
        for racer in racers:
            racer.close()
