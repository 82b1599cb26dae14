"""Two ``hayata serve`` processes on one PostgreSQL store, each with its own
data dir: a run created on one is streamed from the other while the first
carries it out; the server carrying it out is SIGKILLed with its actors
mid-run, and the other takes the run over once the dead server's lease
(kept short with ``--lease-seconds``) has expired, with no completed node run
twice; a cancel or a rollback sent to the server that does not carry a run
out stops it where it runs. PostgreSQL: the machine's or a throwaway one (tests/pg.py).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import NotFoundError

from tests.pg import PgServer, fresh_database
from tests.serve.launch import Served, start, suite_workdir
from tests.serve_api.support import STEPS, wait_until

pytestmark = pytest.mark.timeout(240)

LEASE = 2.0
"""Each server's lease (and its graphs' invocations'), seconds."""
before = [f"{label}:{node}" for label in "wx" for node in ("first", "middle", "last")]
"""The thread's steps after its first two runs."""


@pytest.fixture
def store_url(pg_server: PgServer) -> Iterator[str]:
    with fresh_database(pg_server, "hayata_servha") as url:
        yield url


@contextlib.contextmanager
def two_servers(url: str) -> Iterator[list[Served]]:
    """Two servers of the suite's graphs on the store ``url``, stopped (with
    their actors) at the end whatever happened."""
    with suite_workdir() as one, suite_workdir() as two:
        servers: list[Served] = []
        try:
            for workdir in (one, two):
                servers.append(start(workdir, workdir / "data", workdir / "serve.log",
                                     args=("--database-url", url,
                                           "--lease-seconds", str(LEASE))))
            yield servers
        finally:
            for server in servers:
                server.stop()


def _query(url: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql"),
                         autocommit=True) as conn:
        return list(conn.execute(sql, args).fetchall())


def _owner(url: str, run_id: str) -> str | None:
    rows = _query(url, "SELECT owner FROM hayata_serve_runs WHERE run_id = %s", run_id)
    return rows[0][0] if rows else None


def _server_id(url: str, served: Served) -> str:
    """The id a server goes by in the store (its lease row names its URL)."""
    rows = _query(url, "SELECT server_id, url FROM hayata_serve_servers")
    return str(next(r[0] for r in rows if r[1] == served.url))


def test_a_run_is_streamed_from_another_server_and_taken_over_when_its_server_dies(
        store_url: str) -> None:
    """Created on one server, streamed live from the other; the carrier killed
    with its actors while the middle node runs: the other server takes the run
    over once the lease expired, its stream goes on (ids 1, 2, ... without a
    gap) and ends asking about the node the kill caught; answered, the
    thread's nodes ran once each."""
    with two_servers(store_url) as servers:
        with get_sync_client(url=servers[0].url, timeout=30.0) as client, \
                get_sync_client(url=servers[1].url, timeout=30.0) as client2:
            thread = client.threads.create()["thread_id"]
            # one thread, runs through either server, whichever carries them out
            client.runs.wait(thread, STEPS, input={"label": "w"})
            assert client2.runs.wait(thread, STEPS, input={"label": "x"})["steps"] == before
            carriers = [_owner(store_url, r["run_id"]) for r in client.runs.list(thread)]
            print(f"the first runs carried out by {carriers[::-1]}")
            run = client.runs.create(thread, STEPS, input={"label": "p", "delay": 3.0},
                                     stream_mode=["values", "updates"])
        run_id = run["run_id"]
        owner_id = wait_until(lambda: _owner(store_url, run_id), "the run claimed")
        carrier = next(s for s in servers if _server_id(store_url, s) == owner_id)
        other = next(s for s in servers if s is not carrier)

        parts: list[Any] = []
        ended = threading.Event()

        def follow() -> None:
            try:
                with get_sync_client(url=other.url, timeout=60.0) as watcher:
                    for part in watcher.runs.join_stream(thread, run_id,
                                                         last_event_id="-1"):
                        parts.append(part)
            finally:
                ended.set()

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        wait_until(lambda: _query(store_url, "SELECT 1 FROM hayata_tasks WHERE node_id = "
                                  "'middle' AND status = 'started'"),
                   "the middle node in flight")
        # the other server streams what the carrier logs, live
        wait_until(lambda: any(p.event == "updates" for p in parts),
                   "the first node's update streamed by the other server")
        carrier.kill()  # the server and its actors: a dead host
        killed = time.monotonic()
        carrier.process.wait(timeout=30)
        with get_sync_client(url=other.url, timeout=30.0) as client:
            wait_until(lambda: client.runs.get(thread, run_id)["status"] == "success",
                       "the run finished by the other server", timeout=60)
            took = time.monotonic() - killed
            assert ended.wait(30), "the other server's stream did not end"
            reader.join(timeout=5)
            ids = [int(str(p.id)) for p in parts]
            assert ids == list(range(1, len(ids) + 1)), f"ids not 1, 2, ...: {ids}"
            assert parts[0].event == "metadata"
            last: Any = parts[-1].data
            [asked] = last["__interrupt__"]
            assert asked["value"]["uncertain"]["node"] == "middle"
            assert last["steps"] == [*before, "p:first"]
            assert _owner(store_url, run_id) == _server_id(store_url, other)
            done: Any = client.runs.wait(thread, STEPS, command={"resume": {"rerun": True}})
            assert done["steps"] == [*before, "p:first", "p:middle", "p:last"]
        print(f"run created on server 1, carried out by server "
              f"{servers.index(carrier) + 1}, finished by server {servers.index(other) + 1} "
              f"{took:.2f}s after the kill (lease {LEASE}s)")


def _task_statuses(url: str, node: str) -> list[str]:
    return [r[0] for r in _query(url, "SELECT status FROM hayata_tasks WHERE node_id = %s",
                                 node)]


def test_a_run_cancelled_on_another_server_stops_where_it_runs(store_url: str) -> None:
    """A cancel sent to the server that does not carry the run out stops the
    run's invocation where it runs (its node in flight ends at once, not after
    its 60 s); the thread keeps what completed and its next run goes on. A
    rollback sent there deletes the run and takes the thread back to where
    it was before it."""
    with two_servers(store_url) as servers:
        with get_sync_client(url=servers[0].url, timeout=30.0) as client:
            thread = client.threads.create()["thread_id"]
            first = client.runs.create(thread, STEPS, input={"label": "c", "delay": 60.0})
        owner_id = wait_until(lambda: _owner(store_url, first["run_id"]), "the run claimed")
        carrier = next(s for s in servers if _server_id(store_url, s) == owner_id)
        other = next(s for s in servers if s is not carrier)
        wait_until(lambda: "started" in _task_statuses(store_url, "middle"),
                   "the middle node in flight")
        with get_sync_client(url=other.url, timeout=30.0) as client:
            began = time.monotonic()
            client.runs.cancel(thread, first["run_id"], wait=True)
            assert client.runs.get(thread, first["run_id"])["status"] == "interrupted"
            wait_until(lambda: "started" not in _task_statuses(store_url, "middle"),
                       "the middle node stopped where it ran", timeout=15)
            stopped = time.monotonic() - began
            assert _task_statuses(store_url, "last") == []
            done: Any = client.runs.wait(thread, STEPS, input={"label": "n", "delay": 0.0})
            assert done["steps"] == ["c:first", "n:first", "n:middle", "n:last"]

            second = client.runs.create(thread, STEPS, input={"label": "r", "delay": 60.0})
            second_owner = wait_until(lambda: _owner(store_url, second["run_id"]),
                                      "the second run claimed")
            wait_until(lambda: _task_statuses(store_url, "middle").count("started") == 1,
                       "the second run's middle node in flight")
            rolled: Any = None
            began = time.monotonic()
            for attempt in servers:  # the rollback sent to the server not carrying it
                if _server_id(store_url, attempt) != second_owner:
                    with get_sync_client(url=attempt.url, timeout=30.0) as sender:
                        rolled = sender.runs.wait(thread, STEPS,
                                                  input={"label": "b", "delay": 0.0},
                                                  multitask_strategy="rollback")
            assert rolled is not None
            print(f"cancel to stopped node {stopped:.2f}s; rollback to the next run's end "
                  f"{time.monotonic() - began:.2f}s (lease {LEASE}s)")
            assert rolled["steps"] == ["c:first", "n:first", "n:middle", "n:last",
                                       "b:first", "b:middle", "b:last"], \
                "the rolled-back run's first step is gone"
            assert "started" not in _task_statuses(store_url, "middle")
            with pytest.raises(NotFoundError):
                client.runs.get(thread, second["run_id"])
