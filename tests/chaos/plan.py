"""What a campaign runs: the fault kinds per store, and a campaign per store.

``run_campaign(store, faults_per_kind, seed, workdir)`` starts the store (a
SQLite file on a tmpfs of its own that the disk-full fault fills, or a
PostgreSQL server of its own that the restart faults may stop), one system on
it, and injects ``faults_per_kind`` faults of every kind, interleaved in a
seeded random order. Each kind picks its variant with the campaign's rng:

- ``kill_one``: SIGKILL of one process of a random role;
- ``kill_system``: SIGKILL of the whole system, started again;
- ``sigstop``: an edge frozen past the execution deadline, the agent past its
  lease, or the whole system past the lease while a second system takes the
  invocation over (``takeover.py``);
- ``store``: PostgreSQL restarted; SQLite locked past the busy timeout, its
  disk full, or (across a crash of the whole system) its filesystem read-only
  (``disk.py``);
- ``garbage``: garbage to every actor. Used by ``tests/chaos/test_campaign.py``
(short) and ``benchmarks/chaos.py`` (long).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.chaos import disk, faults, takeover
from tests.chaos.campaign import Campaign, Figures

KINDS = ("kill_one", "kill_system", "sigstop", "store", "garbage")
STOP_EDGE_S = 1.3   # an edge frozen past the execution deadline (campaign.EXECUTION_TIMEOUT)
STOP_AGENT_S = 0.7  # an agent frozen past its lease (campaign.LEASE_SECONDS)


def injector(kind: str, store: str, server: Any, rng: random.Random) -> faults.Inject:
    if kind == "kill_one":
        return faults.kill_one()
    if kind == "kill_system":
        return faults.kill_system
    if kind == "sigstop":
        return rng.choice((faults.freeze("edge", STOP_EDGE_S),
                           faults.freeze("agent", STOP_AGENT_S), takeover.takeover))
    if kind == "store":
        if store == "postgres":
            return faults.pg_restarted(server)
        if not disk.ROOT:  # no tmpfs of its own (disk.NOT_ROOT)
            return faults.sqlite_locked
        return rng.choice((faults.sqlite_locked, disk.disk_full, disk.read_only))
    if kind == "garbage":
        return faults.garbage
    raise ValueError(f"unknown fault kind {kind!r}")


@contextlib.contextmanager
def store_url(store: str, workdir: Path) -> Iterator[tuple[str, Any]]:
    """The store's URL, and the PostgreSQL server the campaign owns (or None)."""
    if store == "sqlite" and not disk.ROOT:
        yield f"sqlite:///{workdir / 'data' / 'hayata.db'}", None
        return
    if store == "sqlite":
        with disk.tmpfs(workdir / "db") as mount:
            yield f"sqlite:///{mount / 'hayata.db'}", None
        return
    from tests.pg import ThrowawayServer

    server = ThrowawayServer()
    try:
        yield server.server.url("postgres"), server
    finally:
        server.stop()


def run_campaign(store: str, faults_per_kind: int, seed: int, workdir: Path,
                 kinds: tuple[str, ...] = KINDS,
                 progress: Callable[[str], None] | None = None) -> Figures:
    rng = random.Random(seed)
    order = [kind for kind in kinds for _ in range(faults_per_kind)]
    rng.shuffle(order)
    with store_url(store, workdir) as (url, server):
        campaign = Campaign(workdir, url, store, seed)
        try:
            for n, kind in enumerate(order, 1):
                outcome = campaign.one(kind, injector(kind, store, server, campaign.rng))
                if progress is not None:
                    progress(f"{n}/{len(order)} {kind}/{store} {outcome.target}: "
                             f"{outcome.outcome} {outcome.seconds:.2f}s "
                             f"{[str(v) for v in outcome.violations]}")
        finally:
            campaign.close()
    campaign.figures.restarts = campaign.restarts  # type: ignore[attr-defined]
    return campaign.figures


def run_concurrent_campaign(store: str, faults_per_kind: int, seed: int, workdir: Path,
                            kinds: tuple[str, ...] = KINDS,
                            in_flight: tuple[int, int] = (8, 32),
                            progress: Callable[[str], None] | None = None) -> Figures:
    """The concurrent mode (``tests/chaos/concurrent.py``): each fault hits
    ``in_flight`` invocations of one service agent, on threads and enqueued."""
    from tests.chaos.concurrent import ConcurrentCampaign

    rng = random.Random(seed)
    order = [kind for kind in kinds for _ in range(faults_per_kind)]
    rng.shuffle(order)
    with store_url(store, workdir) as (url, server):
        campaign = ConcurrentCampaign(workdir, url, store, seed, in_flight)
        try:
            for n, kind in enumerate(order, 1):
                outcome = campaign.many(kind, injector(kind, store, server, campaign.rng))
                if progress is not None:
                    progress(f"{n}/{len(order)} concurrent {kind}/{store} {outcome.target}: "
                             f"{outcome.outcome} {dict(outcome.invocations)} "
                             f"{outcome.seconds:.2f}s {[str(v) for v in outcome.violations]}")
        finally:
            campaign.close()
    campaign.figures.restarts = campaign.restarts  # type: ignore[attr-defined]
    return campaign.figures
