"""The short chaos campaign (CI): every fault kind on SQLite and on PostgreSQL
(a server of the campaign's own, which the restart faults stop and start; the
SQLite database on a tmpfs of the campaign's own, which the disk-full fault
fills and the read-only fault remounts ``ro``: as root, which CI is; a user
who is not root gets the campaign without those two faults, and their own tests
are skipped, saying why). The kinds and their variants: ``tests/chaos/plan.py``.

``HAYATA_CHAOS_FAULTS`` faults of each kind per store (default 30: 150 faults
per store, about 2 min each on a quiet 2-core machine); ``HAYATA_CHAOS_SEED``
names the campaign. The long campaign is ``make chaos``.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.chaos import disk, faults
from tests.chaos.campaign import Campaign, Outcome
from tests.chaos.plan import KINDS, run_campaign, run_concurrent_campaign

FAULTS = int(os.environ.get("HAYATA_CHAOS_FAULTS", "30"))
CONCURRENT_FAULTS = int(os.environ.get("HAYATA_CHAOS_CONCURRENT_FAULTS", "3"))
SEED = int(os.environ.get("HAYATA_CHAOS_SEED", "20261201"))


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_short_campaign(store: str, tmp_path: Path) -> None:
    began = time.monotonic()
    figures = run_campaign(store, FAULTS, SEED, tmp_path, KINDS)
    table = figures.table()
    print({k: (r["runs"], dict(r["outcomes"]), dict(r["targets"])) for k, r in table.items()},
          f"{time.monotonic() - began:.1f}s")
    violations = figures.violations()
    assert violations == [], f"seed {SEED}:\n" + "\n".join(map(str, violations))
    assert {r["kind"] for r in table.values()} == set(KINDS)
    assert all(r["runs"] == FAULTS for r in table.values())


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_concurrent_campaign(store: str, tmp_path: Path) -> None:
    """Every fault kind with 8-32 invocations of one service agent in flight (on
    threads, enqueued behind each other, without a thread): every invariant per
    invocation and per thread (``tests/chaos/concurrent.py``).
    ``HAYATA_CHAOS_CONCURRENT_FAULTS`` faults of each kind per store (default 3:
    about 25 s a store on a 2-core machine; ``make chaos`` runs it long)."""
    began = time.monotonic()
    figures = run_concurrent_campaign(store, CONCURRENT_FAULTS, SEED, tmp_path, KINDS)
    table = figures.table()
    print({k: (r["runs"], dict(r["invocations"]), dict(r["targets"])) for k, r in table.items()},
          f"{time.monotonic() - began:.1f}s")
    violations = figures.violations()
    assert violations == [], f"seed {SEED}:\n" + "\n".join(map(str, violations))
    assert {r["kind"] for r in table.values()} == set(KINDS)
    assert all(r["runs"] == CONCURRENT_FAULTS for r in table.values())
    ended = Counter[str]()
    for r in table.values():
        ended.update(r["invocations"])
    queued = ended.pop("(queued behind a run at launch)", 0)
    assert sum(ended.values()) >= 8 * len(KINDS) * CONCURRENT_FAULTS
    assert queued > 0  # runs did wait behind a running one (counted once all were made)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_postgres_restart_mid_invocation_stays_recoverable(tmp_path: Path) -> None:
    """Found by the campaign: a write refused while PostgreSQL restarted ended the
    run with a terminal ``store_unavailable`` result while the store kept the
    invocation running (the agent then answered ``agent_busy`` to every run);
    and recover() then classified the step from the agent's guess, which named
    no step, so it ran a started task again. The run is now kept for recover()
    (as the store says), and recover() classifies the step the store names."""
    figures = run_campaign("postgres", 6, SEED, tmp_path, ("store",))
    violations = figures.violations()
    assert violations == [], f"seed {SEED}:\n" + "\n".join(map(str, violations))


@pytest.mark.timeout(120)
def test_node_drops_ensure_edges_with_a_huge_count(tmp_path: Path) -> None:
    """Found by the garbage faults: ``EnsureEdges(count=10**30)`` made a node fork
    edges without end."""
    from hayata_py._actor_messages import EnsureEdges

    campaign = Campaign(tmp_path, f"sqlite:///{tmp_path / 'data' / 'h.db'}", "sqlite", 1,
                        graphs=("sequential",))
    try:
        campaign.wait_whole()
        before = {p.pid for p in faults._procs(campaign.sys)}
        for pid, port in faults.actor_ports(campaign).items():
            if faults._kind(next(p for p in faults._procs(campaign.sys) if p.pid == pid)) \
                    == "NodeActor":
                campaign.sys._system.tell(faults.address(port), EnsureEdges(10 ** 30))
        # The node answers Describe after it handled EnsureEdges (one mailbox, in order
        # from one sender): then the edges it has are all it will have.
        rows = campaign.sys.tree()
        edges = [r for r in faults._walk(rows) if r["role"] == "edge"]
        assert len(edges) == 3
        assert {p.pid for p in faults._procs(campaign.sys)} == before
    finally:
        campaign.close()


@pytest.mark.timeout(120)
def test_garbage_leaves_every_actor_running(tmp_path: Path) -> None:
    campaign = Campaign(tmp_path, f"sqlite:///{tmp_path / 'data' / 'h.db'}", "sqlite", 5,
                        graphs=("sequential",))
    try:
        campaign.wait_whole()
        before = {p.pid for p in faults._procs(campaign.sys)}
        outcome = campaign.one("garbage", faults.garbage)
        assert outcome.violations == []
        assert {p.pid for p in faults._procs(campaign.sys)} == before
    finally:
        campaign.close()


def _sqlite_faults(tmp_path: Path, inject: faults.Inject, count: int) -> list[Outcome]:
    """``count`` faults of one store variant in a row, on the campaign's tmpfs."""
    from tests.chaos.plan import store_url

    with store_url("sqlite", tmp_path) as (url, _):
        campaign = Campaign(tmp_path, url, "sqlite", SEED)
        try:
            outcomes = [campaign.one("store", inject) for _ in range(count)]
        finally:
            campaign.close()
    assert [v for o in outcomes for v in o.violations] == [], f"seed {SEED}"
    return outcomes


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.skipif(not disk.ROOT, reason=disk.NOT_ROOT)
def test_sqlite_disk_full_keeps_the_run_for_recover(tmp_path: Path) -> None:
    """Found by the disk-full faults: an edge whose task record the store refused
    (``SQLITE_FULL``: ``store_unavailable``) made the run fail for good (5 of 20
    faults), though the store still held the invocation running and a recover()
    would have finished it. The run is now interrupted and kept for recover()."""
    outcomes = _sqlite_faults(tmp_path, disk.disk_full, 12)
    assert {o.target for o in outcomes} == {"sqlite disk full"}


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.skipif(not disk.ROOT, reason=disk.NOT_ROOT)
def test_sqlite_read_only_after_a_crash_refuses_then_recovers(tmp_path: Path) -> None:
    """The whole system killed mid-invocation and the store's filesystem remounted
    read-only: a new system is refused at once (``read_only_storage``), starts no
    process and changes nothing; remounted read-write, a new system recovers."""
    outcomes = _sqlite_faults(tmp_path, disk.read_only, 6)
    assert {o.target for o in outcomes} == {"sqlite read-only"}
    print("seconds per fault:", [round(o.seconds, 2) for o in outcomes],
          [o.outcome for o in outcomes])
