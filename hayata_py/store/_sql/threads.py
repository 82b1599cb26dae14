"""Conversation threads of :class:`~hayata_py.store._sql.store.SqlTaskStore`:
the "threads" section of the contract, and the thread's and the agent's part
of an invocation's create and finish (:func:`take_thread`,
:func:`end_on_thread`, :func:`check_agent_capacity`), run inside those
writes' transactions.

A thread row (``hayata_threads``) holds the thread's state, its version (the
number of completed invocations) and its running invocation; its queue
(``hayata_thread_queue``) the runs waiting for it. Every write here locks the
thread row first (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite's ``BEGIN
IMMEDIATE`` holds the database), so a create, an enqueue and a finish of the
same thread serialize: a run is enqueued either before the finish that starts
it or after the thread is free (refused ``thread_free``), never in between.

Lock order, to rule out deadlocks on PostgreSQL: an invocation row (a finish)
before its thread row; a thread row before the per-agent advisory lock (a
create).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from hayata_py._codec import FORMAT_VERSION, decode, encode
from hayata_py._errors import StoreError
from hayata_py.store._fast.statements import PG_AGENT_LOCK_KEY
from hayata_py.store._records import InvocationRecord, QueuedRun, ThreadRecord
from hayata_py.store._rows import invocation_from_row, invocation_values, thread_from_row
from hayata_py.store._sql.base import SqlBase
from hayata_py.store._sql.schema import invocations as inv
from hayata_py.store._sql.schema import thread_queue as tq
from hayata_py.store._sql.schema import threads as th

__all__ = [
    "Threads", "check_agent_capacity", "check_max_running", "end_on_thread",
    "refuse_existing", "take_thread",
]

_AGENT_LOCK = sa.text(f"SELECT pg_advisory_xact_lock({PG_AGENT_LOCK_KEY}, hashtext(:agent))")


def check_max_running(max_running: int | None) -> None:
    """Refuse a ``max_running`` that is neither None nor a positive int (``invalid_argument``)."""
    if max_running is None:
        return
    if isinstance(max_running, bool) or not isinstance(max_running, int) or max_running < 1:
        raise StoreError(
            f"max_running must be None or a positive int, got {max_running!r}",
            code="invalid_argument",
            max_running=repr(max_running),
        )


def _thread_key(agent_id: str, thread_id: str) -> Any:
    return sa.and_(th.c.agent_id == agent_id, th.c.thread_id == thread_id)


def _queue_key(agent_id: str, thread_id: str) -> Any:
    return sa.and_(tq.c.agent_id == agent_id, tq.c.thread_id == thread_id)


# Reads made for every run, built once (SQLAlchemy keeps a statement's cache
# key): one thread, and the queued invocations of the threads read.
_THREAD = sa.select(th).where(th.c.agent_id == sa.bindparam("p_agent"),
                              th.c.thread_id == sa.bindparam("p_thread"))
_QUEUED = (sa.select(tq.c.thread_id, tq.c.invocation_id)
           .where(tq.c.agent_id == sa.bindparam("p_agent"),
                  tq.c.thread_id.in_(sa.bindparam("p_threads", expanding=True)))
           .order_by(tq.c.thread_id, tq.c.seq))
# A thread's invocations, newest first: their ids and statuses only (their
# inputs and results can be large, and a thread's view shows neither).
_THREAD_INVOCATIONS = (sa.select(inv.c.invocation_id, inv.c.status)
                       .where(inv.c.agent_id == sa.bindparam("p_agent"),
                              inv.c.thread_id == sa.bindparam("p_thread"))
                       .order_by(inv.c.created_at.desc(), inv.c.invocation_id.desc())
                       .limit(sa.bindparam("p_limit")))


def check_agent_capacity(conn: Connection, is_sqlite: bool, agent_id: str,
                         max_running: int) -> None:
    """Raise ``agent_busy`` if ``agent_id`` runs ``max_running`` invocations.

    On PostgreSQL an advisory lock per agent, held to commit, makes the
    count and the insert that follows atomic against concurrent creates.
    """
    if not is_sqlite:
        conn.execute(_AGENT_LOCK, {"agent": agent_id})
    running = sa.and_(inv.c.agent_id == agent_id, inv.c.status == "running")
    if max_running == 1:
        other = conn.execute(sa.select(inv.c.invocation_id).where(running).limit(1)).first()
        if other is None:
            return
        raise StoreError(
            f"agent {agent_id} already has a running invocation {other.invocation_id}",
            code="agent_busy",
            agent_id=agent_id,
            invocation_id=other.invocation_id,
            running=1,
            max_running=1,
        )
    count = conn.execute(sa.select(sa.func.count()).where(running)).scalar_one()
    if count >= max_running:
        raise StoreError(
            f"agent {agent_id} already runs {count} invocations (max_running {max_running})",
            code="agent_busy",
            agent_id=agent_id,
            running=int(count),
            max_running=max_running,
        )


def take_thread(
    conn: Connection, clock: Callable[[], float], is_sqlite: bool,
    record: InvocationRecord, state: bytes, thread_version: int | None,
) -> None:
    """Create the thread row if absent, check it is free (``thread_busy``) and
    at ``thread_version`` (``thread_changed``; an absent thread is at 0), and
    make ``record`` its running invocation."""
    agent_id, thread_id = record.agent_id, record.thread_id
    assert thread_id is not None
    now = clock()
    dialect = sqlite if is_sqlite else postgresql
    conn.execute(
        dialect.insert(th)
        .values(agent_id=agent_id, thread_id=thread_id, state=state, version=0,
                running_invocation_id=None, queue_length=0, created_at=now,
                updated_at=now)
        .on_conflict_do_nothing(index_elements=["agent_id", "thread_id"])
    )
    row = conn.execute(
        sa.select(th.c.version, th.c.running_invocation_id)
        .where(_thread_key(agent_id, thread_id))
        .with_for_update()
    ).one()
    if row.running_invocation_id is not None:
        raise StoreError(
            f"thread {thread_id} of agent {agent_id} is running invocation "
            f"{row.running_invocation_id}",
            code="thread_busy",
            agent_id=agent_id,
            thread_id=thread_id,
            invocation_id=row.running_invocation_id,
        )
    if thread_version is not None and thread_version != row.version:
        raise StoreError(
            f"thread {thread_id} of agent {agent_id} is at version {row.version}, "
            f"not {thread_version}: it changed since it was read",
            code="thread_changed",
            agent_id=agent_id,
            thread_id=thread_id,
            version=int(row.version),
            expected_version=thread_version,
        )
    conn.execute(
        th.update()
        .where(_thread_key(agent_id, thread_id))
        .values(running_invocation_id=record.invocation_id, updated_at=now)
    )


def end_on_thread(
    conn: Connection, clock: Callable[[], float], row: Any, invocation_id: str,
    status: str, state: bytes | None, lease_seconds: float | None,
) -> InvocationRecord | None:
    """The thread part of finishing ``invocation_id`` (``row``: its locked
    control columns, read before the finish cleared its owner): carry the
    final state (``completed``), free the thread, start its first queued run.
    Returns the started invocation, or None."""
    agent_id, thread_id = row.agent_id, row.thread_id
    thread = conn.execute(
        sa.select(th.c.state, th.c.version, th.c.running_invocation_id)
        .where(_thread_key(agent_id, thread_id))
        .with_for_update()
    ).first()
    if thread is None:  # not written by this store: nothing to carry or start
        return None
    now = clock()
    values: dict[str, Any] = {"updated_at": now, "running_invocation_id": None}
    new_state = thread.state
    if status == "completed":
        if state is None:
            state = conn.execute(
                sa.select(inv.c.state).where(inv.c.invocation_id == invocation_id)
            ).scalar_one()
        new_state = state
        values.update(state=state, version=thread.version + 1)
    if thread.running_invocation_id not in (None, invocation_id):
        values.pop("running_invocation_id")  # another one runs it: leave it
        nxt = None
    else:
        nxt = conn.execute(
            sa.select(tq.c.seq, tq.c.invocation_id, tq.c.input)
            .where(_queue_key(agent_id, thread_id))
            .order_by(tq.c.seq)
            .limit(1)
        ).first()
    started = None
    if nxt is not None:
        conn.execute(tq.delete().where(_queue_key(agent_id, thread_id), tq.c.seq == nxt.seq))
        values["queue_length"] = th.c.queue_length - 1
        fresh = invocation_values(InvocationRecord(nxt.invocation_id, agent_id, "running",
                                                   0, {}, None))
        conn.execute(inv.insert().values(
            invocation_id=nxt.invocation_id, agent_id=agent_id, status="running",
            format_version=FORMAT_VERSION, created_at=now, updated_at=now, token=1,
            owner=row.owner,
            lease_expires_at=None if lease_seconds is None else now + lease_seconds,
            thread_id=thread_id, **(fresh | {"state": new_state, "input": nxt.input}),
        ))
        values["running_invocation_id"] = nxt.invocation_id
        started = invocation_from_row(conn.execute(
            sa.select(inv).where(inv.c.invocation_id == nxt.invocation_id)).one())
    conn.execute(th.update().where(_thread_key(agent_id, thread_id)).values(**values))
    return started


def refuse_existing(conn: Connection, invocation_id: str) -> None:
    """Raise ``invocation_exists`` if the id is stored or queued."""
    stored = conn.execute(
        sa.select(inv.c.invocation_id).where(inv.c.invocation_id == invocation_id)
        .union_all(sa.select(tq.c.invocation_id).where(tq.c.invocation_id == invocation_id))
    ).first()
    if stored is not None:
        raise StoreError(
            f"invocation {invocation_id} already exists",
            code="invocation_exists",
            invocation_id=invocation_id,
        )


class Threads(SqlBase):
    """Threads: their queues of runs, and reads of their state and invocations."""

    def enqueue_run(
        self, agent_id: str, thread_id: str, invocation_id: str, input: Any, *,
        stream: bool = False,
    ) -> int:
        data = encode(input, key="input")

        def write(conn: Connection) -> int:
            refuse_existing(conn, invocation_id)
            # An UPDATE, not SELECT ... FOR UPDATE: a fast finish waiting for this
            # row rechecks its queue_length = 0 on the row this commits.
            taken = conn.execute(
                th.update()
                .where(_thread_key(agent_id, thread_id), th.c.running_invocation_id.is_not(None))
                .values(queue_length=th.c.queue_length + 1, updated_at=self.clock())
            ).rowcount
            if taken != 1:
                raise StoreError(
                    f"thread {thread_id} of agent {agent_id} runs no invocation: "
                    "start the run directly",
                    code="thread_free",
                    agent_id=agent_id,
                    thread_id=thread_id,
                )
            last = conn.execute(
                sa.select(sa.func.max(tq.c.seq), sa.func.count())
                .where(_queue_key(agent_id, thread_id))
            ).one()
            conn.execute(tq.insert().values(
                agent_id=agent_id, thread_id=thread_id, seq=(last[0] or 0) + 1,
                invocation_id=invocation_id, input=data, stream=bool(stream),
                created_at=self.clock(),
            ))
            return int(last[1]) + 1

        try:
            return self._db.run(write, write=True)
        except sa.exc.IntegrityError as exc:  # the same id enqueued concurrently (PostgreSQL)
            raise StoreError(
                f"invocation {invocation_id} already exists",
                code="invocation_exists",
                invocation_id=invocation_id,
            ) from exc

    def get_thread(self, agent_id: str, thread_id: str) -> ThreadRecord | None:
        threads = self._read_threads(_THREAD, agent_id, {"p_thread": thread_id})
        return threads[0] if threads else None

    def list_threads(
        self, agent_id: str, *, limit: int = 50, after: str | None = None
    ) -> list[ThreadRecord]:
        query = sa.select(th).where(th.c.agent_id == agent_id)
        if after is not None:
            query = query.where(th.c.thread_id > after)
        return self._read_threads(query.order_by(th.c.thread_id).limit(limit), agent_id)

    def _read_threads(self, query: Any, agent_id: str,
                      params: dict[str, Any] | None = None) -> list[ThreadRecord]:
        """The threads ``query`` reads (with ``params`` and ``p_agent``), each
        with its queued invocations."""
        def read(conn: Connection) -> list[ThreadRecord]:
            rows = conn.execute(query, {**(params or {}), "p_agent": agent_id}).all()
            queued: dict[str, list[str]] = {r.thread_id: [] for r in rows}
            if rows:
                for q in conn.execute(_QUEUED, {"p_agent": agent_id,
                                                "p_threads": list(queued)}):
                    queued[q.thread_id].append(q.invocation_id)
            return [thread_from_row(r, tuple(queued[r.thread_id])) for r in rows]

        return self._db.run(read, write=False)

    def thread_invocation_statuses(
        self, agent_id: str, thread_id: str, *, limit: int = 50
    ) -> list[tuple[str, str]]:
        rows = self._db.run(lambda conn: conn.execute(
            _THREAD_INVOCATIONS, {"p_agent": agent_id, "p_thread": thread_id, "p_limit": limit}
        ).all(), write=False)
        return [(r.invocation_id, r.status) for r in rows]

    def queued_run(self, invocation_id: str) -> QueuedRun | None:
        def read(conn: Connection) -> QueuedRun | None:
            row = conn.execute(sa.select(tq).where(tq.c.invocation_id == invocation_id)).first()
            if row is None:
                return None
            ahead = conn.execute(
                sa.select(sa.func.count())
                .where(_queue_key(row.agent_id, row.thread_id), tq.c.seq < row.seq)
            ).scalar_one()
            where = f"queued run {invocation_id}"
            return QueuedRun(
                agent_id=row.agent_id,
                thread_id=row.thread_id,
                invocation_id=invocation_id,
                input=decode(row.input, record=where, column="input"),
                stream=bool(row.stream),
                position=int(ahead) + 1,
            )

        return self._db.run(read, write=False)
