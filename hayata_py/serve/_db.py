"""What ``hayata serve`` records beside the runtime's own records: the API's
threads, runs and each run's stream events (migration ``0005_serve``), and
which server carries out each running run under a lease (``0006_serve_owners``).

Every write is one transaction through the store's engine holder (retries on a
busy SQLite, BEGIN IMMEDIATE), so a run is in the database before the response
that accepts it, and an event before any client reads it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from hayata_py.store._sql.engine import EngineHolder

__all__ = ["RunLost", "RunRow", "ServeDB", "ThreadRow"]

_meta = sa.MetaData()

threads = sa.Table(
    "hayata_serve_threads", _meta,
    sa.Column("thread_id", sa.String(), primary_key=True),
    sa.Column("graph_id", sa.String(), nullable=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("metadata", sa.Text(), nullable=False),
    sa.Column("error", sa.Text(), nullable=True),
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.Column("updated_at", sa.Double(), nullable=False),
)

runs = sa.Table(
    "hayata_serve_runs", _meta,
    sa.Column("run_id", sa.String(), primary_key=True),
    sa.Column("thread_id", sa.String(), nullable=False),
    sa.Column("assistant_id", sa.String(), nullable=False),
    sa.Column("graph_id", sa.String(), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("multitask_strategy", sa.String(16), nullable=False),
    sa.Column("kwargs", sa.Text(), nullable=False),
    sa.Column("metadata", sa.Text(), nullable=False),
    sa.Column("not_before", sa.Double(), nullable=False),
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.Column("updated_at", sa.Double(), nullable=False),
    sa.Column("owner", sa.String(), nullable=True),
)

servers = sa.Table(
    "hayata_serve_servers", _meta,
    sa.Column("server_id", sa.String(), primary_key=True),
    sa.Column("url", sa.String(), nullable=False),
    sa.Column("lease_expires_at", sa.Double(), nullable=False),
    sa.Column("started_at", sa.Double(), nullable=False),
)

events = sa.Table(
    "hayata_serve_run_events", _meta,
    sa.Column("run_id", sa.String(), primary_key=True),
    sa.Column("seq", sa.BigInteger(), primary_key=True),
    sa.Column("event", sa.String(), nullable=False),
    sa.Column("data", sa.Text(), nullable=False),
    sa.Column("created_at", sa.Double(), nullable=False),
)

ACTIVE = ("pending", "running")

# The statements each run makes, built once: SQLAlchemy keeps a statement's
# cache key, so executing a prebuilt one skips building and hashing it again
# (about a third of a small statement's Python time). Parameters are ``p_*``.
_p = sa.bindparam
_THREAD = threads.select().where(threads.c.thread_id == _p("p_thread"))
_THREAD_ID = sa.select(threads.c.thread_id).where(threads.c.thread_id == _p("p_thread"))
_INSERT_THREAD = threads.insert()
_THREAD_TAKEN = threads.update().where(threads.c.thread_id == _p("p_thread")).values(
    status="busy", graph_id=_p("p_graph"), metadata=_p("p_metadata"),
    updated_at=_p("p_now"))
_THREAD_ENDED = threads.update().where(threads.c.thread_id == _p("p_thread")).values(
    status=_p("p_status"), error=_p("p_error"), updated_at=_p("p_now"))
_RUN = runs.select().where(runs.c.run_id == _p("p_run"))
_RUN_STATUS = sa.select(runs.c.status).where(runs.c.run_id == _p("p_run"))
_INSERT_RUN = runs.insert()
_ACTIVE_RUN = sa.select(runs.c.run_id).where(runs.c.thread_id == _p("p_thread"),
                                             runs.c.status.in_(ACTIVE)).limit(1)
_PENDING_RUN = sa.select(runs.c.run_id).where(runs.c.thread_id == _p("p_thread"),
                                              runs.c.status == "pending").limit(1)
_RUN_ENDED = runs.update().where(
    runs.c.run_id == _p("p_run"), runs.c.status == "running",
    runs.c.owner == _p("p_owner")).values(status=_p("p_status"), updated_at=_p("p_now"))
_CLAIM = {
    unowned: runs.update().where(
        runs.c.run_id == _p("p_run"), runs.c.status == _p("p_status"),
        runs.c.owner.is_(None) if unowned else runs.c.owner == _p("p_previous"))
    .values(status="running", owner=_p("p_owner"), updated_at=_p("p_now"))
    for unowned in (True, False)}
_HOLDERS = sa.select(runs.c.run_id, runs.c.owner, runs.c.status).where(
    runs.c.run_id.in_(_p("p_runs", expanding=True))).with_for_update()
_LAST_SEQS = sa.select(events.c.run_id, sa.func.max(events.c.seq)).where(
    events.c.run_id.in_(_p("p_runs", expanding=True))).group_by(events.c.run_id)
_INSERT_EVENTS = events.insert()


def _ready(of_graphs: bool) -> sa.Select[Any]:
    """The oldest pending run of each thread with no running run, that may
    start at ``p_now``, oldest first, at most ``p_limit`` (``of_graphs``: of
    the graphs ``p_graphs`` only)."""
    running = sa.select(runs.c.thread_id).where(runs.c.status == "running")
    older = runs.alias("older")
    first = ~sa.exists().where(
        older.c.thread_id == runs.c.thread_id, older.c.status == "pending",
        sa.or_(older.c.created_at < runs.c.created_at,
               sa.and_(older.c.created_at == runs.c.created_at,
                       older.c.run_id < runs.c.run_id)))
    query = runs.select().where(runs.c.status == "pending", runs.c.not_before <= _p("p_now"),
                                runs.c.thread_id.not_in(running), first)
    if of_graphs:
        query = query.where(runs.c.graph_id.in_(_p("p_graphs", expanding=True)))
    return query.order_by(runs.c.created_at, runs.c.run_id).limit(_p("p_limit"))


_READY = {of_graphs: _ready(of_graphs) for of_graphs in (False, True)}
_EVENTS_AFTER = sa.select(events.c.seq, events.c.event, events.c.data).where(
    events.c.run_id == _p("p_run"), events.c.seq > _p("p_after")
).order_by(events.c.seq).limit(_p("p_limit"))


@dataclass(frozen=True)
class ThreadRow:
    thread_id: str
    graph_id: str | None
    status: str
    metadata: dict[str, Any]
    error: Any
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class RunRow:
    run_id: str
    thread_id: str
    assistant_id: str
    graph_id: str
    status: str
    multitask_strategy: str
    kwargs: dict[str, Any]
    metadata: dict[str, Any]
    not_before: float
    created_at: float
    updated_at: float
    owner: str | None = None
    """The server carrying the run out (set when it starts; kept after it ends)."""


class RunLost(Exception):
    """The run is no longer this server's: another took it over (this one's lease
    expired), or it was deleted. Its worker stops recording anything."""


def _thread(row: Any) -> ThreadRow:
    return ThreadRow(row.thread_id, row.graph_id, row.status, json.loads(row.metadata),
                     json.loads(row.error) if row.error else None, row.created_at,
                     row.updated_at)


def _run(row: Any) -> RunRow:
    return RunRow(row.run_id, row.thread_id, row.assistant_id, row.graph_id, row.status,
                  row.multitask_strategy, json.loads(row.kwargs), json.loads(row.metadata),
                  row.not_before, row.created_at, row.updated_at, row.owner)


class ServeDB:
    """The serve tables, through one :class:`EngineHolder`."""

    def __init__(self, url: str) -> None:
        self.holder = EngineHolder(sa.engine.make_url(url))

    def close(self) -> None:
        self.holder.dispose()

    # -- threads -------------------------------------------------------------------

    def create_thread(self, thread_id: str, metadata: dict[str, Any]) -> ThreadRow | None:
        """A new idle thread; None when ``thread_id`` exists (nothing written)."""
        now = time.time()

        def write(conn: Connection) -> ThreadRow | None:
            if conn.execute(_THREAD_ID, {"p_thread": thread_id}).first():
                return None
            conn.execute(_INSERT_THREAD, {
                "thread_id": thread_id, "graph_id": None, "status": "idle",
                "metadata": json.dumps(metadata), "error": None, "created_at": now,
                "updated_at": now})
            return ThreadRow(thread_id, None, "idle", metadata, None, now, now)
        return self.holder.run(write, write=True)

    def get_thread(self, thread_id: str) -> ThreadRow | None:
        def read(conn: Connection) -> ThreadRow | None:
            row = conn.execute(_THREAD, {"p_thread": thread_id}).first()
            return _thread(row) if row is not None else None
        return self.holder.run(read, write=False)

    def update_thread(self, thread_id: str, *, metadata: dict[str, Any] | None = None,
                      status: str | None = None, graph_id: str | None = None,
                      error: Any = ..., ) -> ThreadRow | None:
        """Merge ``metadata`` into the thread's, set the other fields given."""
        def write(conn: Connection) -> ThreadRow | None:
            row = conn.execute(threads.select().where(threads.c.thread_id == thread_id)).first()
            if row is None:
                return None
            values: dict[str, Any] = {"updated_at": time.time()}
            if metadata is not None:
                values["metadata"] = json.dumps({**json.loads(row.metadata), **metadata})
            if status is not None:
                values["status"] = status
            if graph_id is not None:
                values["graph_id"] = graph_id
            if error is not ...:
                values["error"] = json.dumps(error) if error is not None else None
            conn.execute(threads.update().where(threads.c.thread_id == thread_id)
                         .values(**values))
            new = conn.execute(threads.select().where(threads.c.thread_id == thread_id)).one()
            return _thread(new)
        return self.holder.run(write, write=True)

    def delete_thread(self, thread_id: str, *, keep_runs: bool = False) -> bool:
        """Delete the thread, and its runs and their events unless ``keep_runs``."""
        def write(conn: Connection) -> bool:
            gone = conn.execute(threads.delete().where(threads.c.thread_id == thread_id))
            if keep_runs:
                return bool(gone.rowcount)
            run_ids = sa.select(runs.c.run_id).where(runs.c.thread_id == thread_id)
            conn.execute(events.delete().where(events.c.run_id.in_(run_ids)))
            conn.execute(runs.delete().where(runs.c.thread_id == thread_id))
            return bool(gone.rowcount)
        return self.holder.run(write, write=True)

    def search_threads(self, *, status: str | None, limit: int, offset: int
                       ) -> list[ThreadRow]:
        """Threads newest first (metadata/values filters are applied by the caller)."""
        def read(conn: Connection) -> list[ThreadRow]:
            query = threads.select().order_by(threads.c.created_at.desc())
            if status is not None:
                query = query.where(threads.c.status == status)
            return [_thread(r) for r in conn.execute(query)]
        return self.holder.run(read, write=False)

    # -- runs ----------------------------------------------------------------------

    def add_run(self, run: RunRow, *, reject_if_busy: bool) -> str:
        """Record ``run``; ``"busy"`` (nothing written) when ``reject_if_busy`` and
        the thread has a pending or running run, ``"ok"`` else. The thread turns busy."""
        def write(conn: Connection) -> str:
            if reject_if_busy and conn.execute(_ACTIVE_RUN,
                                               {"p_thread": run.thread_id}).first():
                return "busy"
            conn.execute(_INSERT_RUN, {
                "run_id": run.run_id, "thread_id": run.thread_id,
                "assistant_id": run.assistant_id, "graph_id": run.graph_id,
                "status": run.status, "multitask_strategy": run.multitask_strategy,
                "kwargs": json.dumps(run.kwargs), "metadata": json.dumps(run.metadata),
                "not_before": run.not_before, "created_at": run.created_at,
                "updated_at": run.updated_at, "owner": None})
            row = conn.execute(_THREAD, {"p_thread": run.thread_id}).one()
            meta = {**json.loads(row.metadata), "graph_id": run.graph_id,
                    "assistant_id": run.assistant_id}
            conn.execute(_THREAD_TAKEN, {"p_thread": run.thread_id, "p_graph": run.graph_id,
                                         "p_metadata": json.dumps(meta),
                                         "p_now": time.time()})
            return "ok"
        return self.holder.run(write, write=True)

    def get_run(self, run_id: str) -> RunRow | None:
        def read(conn: Connection) -> RunRow | None:
            row = conn.execute(_RUN, {"p_run": run_id}).first()
            return _run(row) if row is not None else None
        return self.holder.run(read, write=False)

    def list_runs(self, thread_id: str, *, status: str | None = None) -> list[RunRow]:
        """The thread's runs, newest first."""
        def read(conn: Connection) -> list[RunRow]:
            query = runs.select().where(runs.c.thread_id == thread_id).order_by(
                runs.c.created_at.desc(), runs.c.run_id.desc())
            if status is not None:
                query = query.where(runs.c.status == status)
            return [_run(r) for r in conn.execute(query)]
        return self.holder.run(read, write=False)

    def runs_with_status(self, statuses: Sequence[str], *, not_owned_by: str | None = None
                         ) -> list[RunRow]:
        """Runs in ``statuses``, oldest first (the queue's order);
        ``not_owned_by``: only those of another owner or of none."""
        def read(conn: Connection) -> list[RunRow]:
            query = runs.select().where(runs.c.status.in_(list(statuses)))
            if not_owned_by is not None:
                query = query.where(sa.or_(runs.c.owner.is_(None),
                                           runs.c.owner != not_owned_by))
            return [_run(r) for r in conn.execute(query.order_by(runs.c.created_at,
                                                                  runs.c.run_id))]
        return self.holder.run(read, write=False)

    def ready_runs(self, limit: int, *, now: float, graphs: Sequence[str] | None = None
                   ) -> list[RunRow]:
        """The pending runs that may start at ``now``: the oldest pending run
        of each thread with no running run, oldest first, at most ``limit``
        (one read of the rows it returns only); ``graphs``: of those graphs
        only. A run whose ``not_before`` is still ahead is not returned, and
        holds its thread's later runs back."""
        def read(conn: Connection) -> list[RunRow]:
            params: dict[str, Any] = {"p_now": now, "p_limit": limit}
            if graphs is not None:
                params["p_graphs"] = list(graphs)
            return [_run(r) for r in conn.execute(_READY[graphs is not None], params)]
        return self.holder.run(read, write=False)

    def set_run_status(self, run_id: str, status: str, *, only_from: Sequence[str] = (),
                       owner: str | None = None) -> bool:
        """Set the run's status (when it is in ``only_from``, if given, and
        carried out by ``owner``, if given)."""
        def write(conn: Connection) -> bool:
            query = runs.update().where(runs.c.run_id == run_id)
            if only_from:
                query = query.where(runs.c.status.in_(list(only_from)))
            if owner is not None:
                query = query.where(runs.c.owner == owner)
            return bool(conn.execute(query.values(status=status,
                                                  updated_at=time.time())).rowcount)
        return self.holder.run(write, write=True)

    def end_run(self, run_id: str, status: str, *, owner: str, thread_id: str,
                thread_status: str, error: Any) -> bool:
        """A run ``owner`` carried out ends ``status`` and its thread turns
        ``thread_status`` with ``error`` (``busy`` instead while another of its
        runs is pending), in one transaction. The thread is set whether or not
        the run still was ``owner``'s and ``running`` (deleted, cancelled or
        taken over meanwhile); True if the run's status was set."""
        def write(conn: Connection) -> bool:
            now = time.time()
            ended = bool(conn.execute(_RUN_ENDED, {"p_run": run_id, "p_owner": owner,
                                                   "p_status": status, "p_now": now}).rowcount)
            waiting = conn.execute(_PENDING_RUN, {"p_thread": thread_id}).first()
            conn.execute(_THREAD_ENDED, {
                "p_thread": thread_id,
                "p_status": "busy" if waiting is not None else thread_status,
                "p_error": json.dumps(error) if error is not None else None, "p_now": now})
            return ended
        return self.holder.run(write, write=True)

    def claim_run(self, run_id: str, owner: str, *, status: str,
                  previous: str | None) -> bool:
        """Make ``owner`` the run's server and the run ``running``, when it is
        still in ``status`` with ``previous`` as owner (compare-and-set: of
        servers claiming one run, one wins)."""
        def write(conn: Connection) -> bool:
            return bool(conn.execute(_CLAIM[previous is None], {
                "p_run": run_id, "p_status": status, "p_previous": previous,
                "p_owner": owner, "p_now": time.time()}).rowcount)
        return self.holder.run(write, write=True)

    # -- servers -------------------------------------------------------------------

    def renew_server(self, server_id: str, url: str, lease_seconds: float, *,
                     started: bool = False) -> None:
        """The server's lease runs until ``lease_seconds`` from now (its row made
        if missing; ``started``: it starts now)."""
        now = time.time()

        def write(conn: Connection) -> None:
            values: dict[str, Any] = {"lease_expires_at": now + lease_seconds, "url": url}
            if started:
                values["started_at"] = now
            if not conn.execute(servers.update().where(servers.c.server_id == server_id)
                                .values(**values)).rowcount:
                conn.execute(servers.insert().values(server_id=server_id, url=url,
                                                     lease_expires_at=now + lease_seconds,
                                                     started_at=now))
        self.holder.run(write, write=True)

    def expire_server(self, server_id: str) -> None:
        """End the server's lease now (a clean stop: others take its runs over)."""
        def write(conn: Connection) -> None:
            conn.execute(servers.update().where(servers.c.server_id == server_id)
                         .values(lease_expires_at=0.0))
        self.holder.run(write, write=True)

    def server_leases(self) -> dict[str, float]:
        """Every server's lease expiry (unix seconds)."""
        def read(conn: Connection) -> dict[str, float]:
            return {r.server_id: float(r.lease_expires_at) for r in conn.execute(
                sa.select(servers.c.server_id, servers.c.lease_expires_at))}
        return self.holder.run(read, write=False)

    def delete_run(self, run_id: str) -> bool:
        def write(conn: Connection) -> bool:
            conn.execute(events.delete().where(events.c.run_id == run_id))
            return bool(conn.execute(runs.delete().where(runs.c.run_id == run_id)).rowcount)
        return self.holder.run(write, write=True)

    def active_runs(self, thread_id: str) -> list[RunRow]:
        return [r for r in self.list_runs(thread_id) if r.status in ACTIVE]

    # -- events --------------------------------------------------------------------

    def append_events(self, run_id: str, items: Sequence[tuple[str, Any]], *,
                      owner: str | None = None) -> int:
        """Append ``(event, data)`` items after the run's last; the last sequence.
        With ``owner``: only while that server carries the run out and it runs
        (the run's row locked meanwhile), else :class:`RunLost` and nothing
        written (taken over, cancelled or deleted through any server)."""
        def write(conn: Connection) -> int:
            if owner is not None:
                holder = conn.execute(sa.select(runs.c.owner, runs.c.status)
                                      .where(runs.c.run_id == run_id)
                                      .with_for_update()).first()
                if holder is None:
                    raise RunLost(f"run {run_id} was deleted")
                if holder.owner != owner:
                    raise RunLost(f"run {run_id} is carried out by {holder.owner}, "
                                  f"not {owner}")
                if holder.status != "running":
                    raise RunLost(f"run {run_id} is {holder.status}")
            last = conn.execute(sa.select(sa.func.max(events.c.seq))
                                .where(events.c.run_id == run_id)).scalar() or 0
            now = time.time()
            for offset, (name, data) in enumerate(items, start=1):
                conn.execute(events.insert().values(run_id=run_id, seq=last + offset,
                                                    event=name, data=json.dumps(data),
                                                    created_at=now))
            return int(last) + len(items)
        return self.holder.run(write, write=True)

    def append_batch(self, batch: Sequence[tuple[str, Sequence[tuple[str, Any]], str]]
                     ) -> list[list[tuple[int, str, str]] | RunLost]:
        """:meth:`append_events` of several runs in one transaction: for each
        ``(run_id, items, owner)`` the rows written (``(seq, event, data as
        JSON text)``, as :meth:`events_after` reads them), or the
        :class:`RunLost` that run's items were refused with (the others are
        written all the same)."""
        def write(conn: Connection) -> list[list[tuple[int, str, str]] | RunLost]:
            ids = sorted({run_id for run_id, _, _ in batch})
            holders = {row.run_id: row for row in conn.execute(_HOLDERS, {"p_runs": ids})}
            lasts = dict(conn.execute(_LAST_SEQS, {"p_runs": ids}).all())
            now = time.time()
            rows: list[dict[str, Any]] = []
            out: list[list[tuple[int, str, str]] | RunLost] = []
            for run_id, items, owner in batch:
                holder = holders.get(run_id)
                if holder is None:
                    out.append(RunLost(f"run {run_id} was deleted"))
                    continue
                if holder.owner != owner:
                    out.append(RunLost(f"run {run_id} is carried out by {holder.owner}, "
                                       f"not {owner}"))
                    continue
                if holder.status != "running":
                    out.append(RunLost(f"run {run_id} is {holder.status}"))
                    continue
                last = int(lasts.get(run_id) or 0)
                written = [(last + offset, name, json.dumps(data))
                           for offset, (name, data) in enumerate(items, start=1)]
                rows.extend({"run_id": run_id, "seq": seq, "event": name, "data": text,
                             "created_at": now} for seq, name, text in written)
                lasts[run_id] = last + len(items)
                out.append(written)
            if rows:
                conn.execute(_INSERT_EVENTS, rows)
            return out
        return self.holder.run(write, write=True)

    def events_after(self, run_id: str, after: int, limit: int = 500
                     ) -> list[tuple[int, str, str]]:
        """``(seq, event, data as JSON text)`` after ``after``, in order."""
        def read(conn: Connection) -> list[tuple[int, str, str]]:
            rows = conn.execute(_EVENTS_AFTER, {"p_run": run_id, "p_after": after,
                                                "p_limit": limit})
            return [(int(r.seq), r.event, r.data) for r in rows]
        return self.holder.run(read, write=False)

    def run_tail(self, run_id: str, after: int, limit: int = 500
                 ) -> tuple[str | None, list[tuple[int, str, str]]]:
        """The run's status (None: no such run) and its events after ``after``
        (as :meth:`events_after`), in one read: the status is read first, so a
        terminal one comes with every event of the run after ``after`` (up to
        ``limit``)."""
        def read(conn: Connection) -> tuple[str | None, list[tuple[int, str, str]]]:
            status = conn.execute(_RUN_STATUS, {"p_run": run_id}).scalar()
            rows = conn.execute(_EVENTS_AFTER, {"p_run": run_id, "p_after": after,
                                                "p_limit": limit})
            return status, [(int(r.seq), r.event, r.data) for r in rows]
        return self.holder.run(read, write=False)

    def run_status(self, run_id: str) -> str | None:
        """The run's status, None if there is no such run."""
        def read(conn: Connection) -> str | None:
            return conn.execute(_RUN_STATUS, {"p_run": run_id}).scalar()
        return self.holder.run(read, write=False)

    def run_marks(self, run_ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        """Each run's last event sequence and status (one query): what a
        server following runs it does not carry out compares."""
        def read(conn: Connection) -> dict[str, tuple[int, str]]:
            last = (sa.select(sa.func.max(events.c.seq)).where(events.c.run_id == runs.c.run_id)
                    .scalar_subquery())
            rows = conn.execute(sa.select(runs.c.run_id, runs.c.status, last)
                                .where(runs.c.run_id.in_(list(run_ids))))
            return {r[0]: (int(r[2] or 0), r[1]) for r in rows}
        return self.holder.run(read, write=False)

    def last_seq(self, run_id: str) -> int:
        def read(conn: Connection) -> int:
            return int(conn.execute(sa.select(sa.func.max(events.c.seq))
                                    .where(events.c.run_id == run_id)).scalar() or 0)
        return self.holder.run(read, write=False)
