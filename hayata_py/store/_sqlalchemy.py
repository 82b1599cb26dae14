"""SQLAlchemy implementation of :class:`TaskStore` for SQLite and PostgreSQL.

The hot writes (create, checkpoint, task started/completed, finish) first try
one fenced statement, or for an invocation on a thread one short transaction
of them (``_fast``); when it changes nothing, or for any other
write, :meth:`EngineHolder.run` runs one transaction (``BEGIN IMMEDIATE`` on
SQLite) that locks the invocation row (``SELECT ... FOR UPDATE``; SQLite's
write lock already covers it), checks the fencing token, then writes. Values are encoded before the
transaction opens. Timestamps are float unix seconds from ``clock``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection

from hayata_py._codec import FORMAT_VERSION, decode, encode
from hayata_py._errors import StoreError
from hayata_py.store import _fast
from hayata_py.store._batch import BatchWrites
from hayata_py.store._cache import CacheWrites
from hayata_py.store._contract import TaskStore
from hayata_py.store._engine import EngineHolder, normalize_url
from hayata_py.store._events import EventWrites, insert_events
from hayata_py.store._leases import LeaseWrites
from hayata_py.store._migrate import migrate
from hayata_py.store._records import (
    TERMINAL_INVOCATION_STATUSES,
    InvocationRecord,
    StoredEvent,
    TaskRecord,
)
from hayata_py.store._rows import (
    checkpoint_values,
    invocation_from_row,
    invocation_values,
    task_from_row,
)
from hayata_py.store._schema import invocations as inv
from hayata_py.store._schema import tasks as tk
from hayata_py.store._tasks import TaskWrites, fence
from hayata_py.store._threads import ThreadWrites, check_max_running

__all__ = ["SqlTaskStore", "default_store_url", "open_store"]

Clock = Callable[[], float]


def default_store_url(data_dir: str | Path) -> str:
    """Return ``sqlite:///<absolute data_dir>/hayata.db``, creating ``data_dir``."""
    path = Path(data_dir).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path / 'hayata.db'}"


def open_store(url: str | URL, *, clock: Clock = time.time) -> TaskStore:
    """Open (creating or upgrading the schema of) the store at ``url``.

    Raises :class:`SchemaTooNew` if the database was written by a newer schema.
    """
    return SqlTaskStore(url, clock=clock)


class SqlTaskStore(
    CacheWrites, EventWrites, LeaseWrites, TaskWrites, ThreadWrites, BatchWrites, TaskStore
):
    """:class:`TaskStore` on SQLite (file) or PostgreSQL; see the contract for guarantees.

    The constructor applies migrations (raising :class:`SchemaTooNew` for a
    database from a newer hayata_py) and then drops its connections, so the
    object can be created in one process and used in forked children; each
    process connects on first use. ``clock`` (default ``time.time``) supplies
    timestamps and lease expiry, so tests can move time without sleeping.
    """

    def __init__(
        self, url: str | URL, *, clock: Clock = time.time, retry_seconds: float = 60.0
    ) -> None:
        self.url = normalize_url(url)
        self.clock = clock
        self._db = EngineHolder(self.url, retry_seconds=retry_seconds)
        self._threaded: dict[str, bool] = {}
        try:
            migrate(self._db)
        finally:
            self._db.dispose()

    def __repr__(self) -> str:
        return f"SqlTaskStore({self.url.render_as_string(hide_password=True)!r})"

    def close(self) -> None:
        self._db.dispose()

    # -- helpers -----------------------------------------------------------

    def _expiry(self, lease_seconds: float | None) -> float | None:
        return None if lease_seconds is None else self.clock() + lease_seconds

    # -- invocations -------------------------------------------------------

    def create_invocation(
        self,
        record: InvocationRecord,
        *,
        owner: str,
        lease_seconds: float | None = None,
        max_running: int | None = 1,
        thread_version: int | None = None,
        durable: bool = True,
    ) -> int:
        check_max_running(max_running)
        if thread_version is not None and record.thread_id is None:
            raise StoreError(
                f"invocation {record.invocation_id}: thread_version needs a thread_id",
                code="invalid_argument",
                invocation_id=record.invocation_id,
            )
        values = invocation_values(record)
        iid = record.invocation_id
        if self._fast_create(record, values, owner, lease_seconds, max_running, thread_version,
                             durable):
            return 1

        def write(conn: Connection) -> int:
            self._refuse_existing(conn, iid)
            if record.thread_id is not None:
                self._take_thread(conn, record, values["state"], thread_version)
            if max_running is not None:
                self._check_agent_capacity(conn, record.agent_id, max_running)
            now = self.clock()
            conn.execute(
                inv.insert().values(
                    invocation_id=iid,
                    agent_id=record.agent_id,
                    status="running",
                    format_version=FORMAT_VERSION,
                    created_at=now,
                    updated_at=now,
                    token=1,
                    owner=owner,
                    lease_expires_at=self._expiry(lease_seconds),
                    thread_id=record.thread_id,
                    **values,
                )
            )
            return 1

        try:
            self._db.run(write, write=True)
        except sa.exc.IntegrityError as exc:
            # A concurrent create of the same id committed first (PostgreSQL).
            self._db.run(lambda conn: self._refuse_existing(conn, iid), write=False)
            raise StoreError(
                f"invocation {iid}: conflicting concurrent create", code="invocation_exists"
            ) from exc
        if record.thread_id is not None:
            self._note_threaded(iid)
        return 1

    def _fast_create(self, record: InvocationRecord, values: dict[str, Any], owner: str,
                     lease_seconds: float | None, max_running: int | None,
                     thread_version: int | None, durable: bool = True) -> bool:
        """The fast create (True: created); see :func:`_fast.create_statements`.
        The general path it falls back to is always synced."""
        statements = _fast.create_statements(
            self._db.is_sqlite, record.invocation_id, record.agent_id, record.thread_id,
            values, owner=owner, now=float(self.clock()), expires=self._expiry(lease_seconds),
            max_running=max_running, thread_version=thread_version)
        if not self._db.write_all(statements, durable=durable):
            return False
        if record.thread_id is not None:
            self._note_threaded(record.invocation_id)
        return True

    def save_checkpoint(self, record: InvocationRecord, *, token: int) -> None:
        if record.status != "running":
            raise StoreError(
                f"invocation {record.invocation_id}: save_checkpoint needs status 'running', "
                f"got {record.status!r}; use finish_invocation to end it",
                code="invalid_status",
                invocation_id=record.invocation_id,
            )
        values = checkpoint_values(record)
        fast = (
            float(self.clock()),
            values["step"],
            values["state"],
            values["active_execution"],
            values["parallel_results"],
            values["last_result"],
            record.invocation_id,
            token,
        )
        if self._db.write_one(_fast.CHECKPOINT.text(self._db.is_sqlite), fast):
            return

        def write(conn: Connection) -> None:
            fence(conn, record.invocation_id, token, running=True)
            conn.execute(
                inv.update()
                .where(inv.c.invocation_id == record.invocation_id)
                .values(updated_at=self.clock(), **values)
            )

        self._db.run(write, write=True)

    def finish_invocation(
        self,
        invocation_id: str,
        *,
        token: int,
        status: Literal["completed", "failed"],
        result: Any = None,
        error: dict[str, Any] | None = None,
        state: dict[str, Any] | None = None,
        lease_seconds: float | None = None,
        events: Sequence[StoredEvent] = (),
    ) -> InvocationRecord | None:
        if status not in TERMINAL_INVOCATION_STATUSES:
            raise StoreError(
                f"finish_invocation needs status 'completed' or 'failed', got {status!r}",
                code="invalid_status",
                invocation_id=invocation_id,
            )
        values: dict[str, Any] = {
            "result": encode(result, key="result"),
            "error": encode(error, key="error"),
        }
        if state is not None:
            values["state"] = encode(state, key="state")
        now = float(self.clock())
        logged = [(e.sequence, e.type, encode(e.data, key="data")) for e in events
                  if e.invocation_id == invocation_id]
        inserts = [(_fast.INSERT_EVENT.text(self._db.is_sqlite),
                    (invocation_id, seq, kind, data, now)) for seq, kind, data in logged]
        if self._threaded.pop(invocation_id, False):  # a hint: both paths check it
            if self._db.write_all([*_fast.finish_on_thread_statements(
                    self._db.is_sqlite, invocation_id, token, status, now, values), *inserts]):
                return None
        else:
            stmt = _fast.FINISH_INVOCATION if state is None else _fast.FINISH_INVOCATION_WITH_STATE
            fast = (status, now, *values.values(), invocation_id, token)
            if self._db.write_all([(stmt.text(self._db.is_sqlite), fast), *inserts]):
                return None

        def write(conn: Connection) -> InvocationRecord | None:
            row = fence(conn, invocation_id, token)
            if row.status in TERMINAL_INVOCATION_STATUSES:
                stored = conn.execute(
                    sa.select(inv.c.result, inv.c.error, inv.c.state).where(
                        inv.c.invocation_id == invocation_id
                    )
                ).one()
                where = f"invocation {invocation_id}"
                same = row.status == status and all(
                    decode(getattr(stored, col), record=where, column=col)
                    == decode(data, record=where, column=col)
                    for col, data in values.items()
                )
                if same:
                    return None  # the first finish did everything, the queue included
                raise StoreError(
                    f"invocation {invocation_id} already {row.status}; it cannot be changed",
                    code="invocation_finished",
                    invocation_id=invocation_id,
                    status=row.status,
                )
            conn.execute(
                inv.update()
                .where(inv.c.invocation_id == invocation_id)
                .values(
                    status=status,
                    updated_at=self.clock(),
                    owner=None,
                    lease_expires_at=None,
                    **values,
                )
            )
            insert_events(conn, self._db.is_sqlite,
                          [(invocation_id, *event) for event in logged], now)
            if row.thread_id is None:
                return None
            return self._end_on_thread(
                conn, row, invocation_id, status, values.get("state"), lease_seconds
            )

        started = self._db.run(write, write=True)
        if started is not None:
            self._note_threaded(started.invocation_id)
        return started

    def get_invocation(self, invocation_id: str) -> InvocationRecord | None:
        query = sa.select(inv).where(inv.c.invocation_id == invocation_id)
        row = self._db.run(lambda conn: conn.execute(query).first(), write=False)
        return None if row is None else invocation_from_row(row)

    def unfinished_invocation(self, agent_id: str) -> InvocationRecord | None:
        query = (
            sa.select(inv)
            .where(inv.c.agent_id == agent_id, inv.c.status == "running")
            .order_by(inv.c.created_at, inv.c.invocation_id)
            .limit(1)
        )
        row = self._db.run(lambda conn: conn.execute(query).first(), write=False)
        return None if row is None else invocation_from_row(row)

    def list_invocations(self, agent_id: str, limit: int = 50) -> list[InvocationRecord]:
        query = (
            sa.select(inv)
            .where(inv.c.agent_id == agent_id)
            .order_by(inv.c.created_at.desc(), inv.c.invocation_id.desc())
            .limit(limit)
        )
        rows = self._db.run(lambda conn: conn.execute(query).all(), write=False)
        return [invocation_from_row(r) for r in rows]

    def get_tasks(
        self, invocation_id: str, *, execution_id: str | None = None, step: int | None = None
    ) -> list[TaskRecord]:
        query = sa.select(tk).where(tk.c.invocation_id == invocation_id)
        if execution_id is not None:
            query = query.where(tk.c.execution_id == execution_id)
        if step is not None:
            query = query.where(tk.c.step == step)
        query = query.order_by(tk.c.step, tk.c.branch_index, tk.c.task_id)
        rows = self._db.run(lambda conn: conn.execute(query).all(), write=False)
        return [task_from_row(r) for r in rows]

    def get_task(self, task_id: str) -> TaskRecord | None:
        query = sa.select(tk).where(tk.c.task_id == task_id)
        row = self._db.run(lambda conn: conn.execute(query).first(), write=False)
        return None if row is None else task_from_row(row)
