"""Invocations of :class:`~hayata_py.store._sql.store.SqlTaskStore`: the
"invocations" section of the contract (create, checkpoint, finish, reads),
with its group commit and its retention (:meth:`Invocations.prune`).

The hot writes (create, checkpoint, finish) first try their fast statements
(:mod:`hayata_py.store._fast.statements`): one fenced statement, or for an
invocation on a thread one short transaction of them. When it changes
nothing, or for any other write, :meth:`EngineHolder.run` runs one
transaction (``BEGIN IMMEDIATE`` on SQLite) that locks the invocation row
(``SELECT ... FOR UPDATE``; SQLite's write lock already covers it), checks the
fencing token, then writes. Values are encoded before the transaction opens.
Timestamps are float unix seconds from ``clock``.

Group commit: an agent serving many invocations creates and finishes them in
bursts. :meth:`Invocations.create_invocations` and
:meth:`Invocations.finish_invocations` make a burst one transaction (one
fsync), each item with exactly the checks and effects of its single form. The
batch is all or nothing: if any one of them would not land as the happy path
(a busy thread, a stale token, a finish that starts a queued run), nothing of
the batch is written and each is done on its own, so a refusal names its own
invocation and the others land.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from hayata_py._codec import FORMAT_VERSION, decode, encode
from hayata_py._errors import EncodingError, StoreError
from hayata_py.store._contract import TaskStore
from hayata_py.store._fast.statements import (
    INSERT_EVENT,
    Statements,
    checkpoint_statement,
    create_statements,
    finish_statements,
)
from hayata_py.store._records import (
    TERMINAL_INVOCATION_STATUSES,
    InvocationRecord,
    PruneReport,
    StoredEvent,
)
from hayata_py.store._rows import (
    checkpoint_values,
    finish_values,
    invocation_from_row,
    invocation_values,
)
from hayata_py.store._sql.base import SqlBase, fence
from hayata_py.store._sql.events import insert_events
from hayata_py.store._sql.schema import events as ev
from hayata_py.store._sql.schema import invocations as inv
from hayata_py.store._sql.schema import tasks as tk
from hayata_py.store._sql.threads import (
    check_agent_capacity,
    check_max_running,
    end_on_thread,
    refuse_existing,
    take_thread,
)

__all__ = ["Invocations"]

Finish = tuple[str, int, str, Any, "dict[str, Any] | None", "dict[str, Any] | None"]
"""(invocation id, token, status, result, error, state) of one finish."""

_FINISHED = ("completed", "failed")


class Invocations(SqlBase):
    """Invocation checkpoints: create, checkpoint, finish (in groups too), read, prune."""

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
            refuse_existing(conn, iid)
            if record.thread_id is not None:
                take_thread(conn, self.clock, self._db.is_sqlite, record, values["state"],
                            thread_version)
            if max_running is not None:
                check_agent_capacity(conn, self._db.is_sqlite, record.agent_id, max_running)
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
            self._db.run(lambda conn: refuse_existing(conn, iid), write=False)
            raise StoreError(
                f"invocation {iid}: conflicting concurrent create", code="invocation_exists"
            ) from exc
        if record.thread_id is not None:
            self._threaded.note(iid)
        return 1

    def _fast_create(self, record: InvocationRecord, values: dict[str, Any], owner: str,
                     lease_seconds: float | None, max_running: int | None,
                     thread_version: int | None, durable: bool = True) -> bool:
        """The fast create (True: created); see :func:`create_statements`.
        The general path it falls back to is always synced."""
        statements = create_statements(
            self._db.is_sqlite, record.invocation_id, record.agent_id, record.thread_id,
            values, owner=owner, now=float(self.clock()), expires=self._expiry(lease_seconds),
            max_running=max_running, thread_version=thread_version)
        if not self._db.write_all(statements, durable=durable):
            return False
        if record.thread_id is not None:
            self._threaded.note(record.invocation_id)
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
        if self._db.write_all([checkpoint_statement(record.invocation_id, token, values,
                                                    float(self.clock()))]):
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
        values = finish_values(result, error, state)
        now = float(self.clock())
        logged = [(e.sequence, e.type, encode(e.data, key="data")) for e in events
                  if e.invocation_id == invocation_id]
        inserts: Statements = [(INSERT_EVENT, (invocation_id, seq, kind, data, now))
                               for seq, kind, data in logged]
        on_thread = self._threaded.forget(invocation_id)  # a hint: both paths check it
        if self._db.write_all([*finish_statements(invocation_id, token, status, now, values,
                                                  on_thread=on_thread), *inserts]):
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
            return end_on_thread(conn, self.clock, row, invocation_id, status,
                                 values.get("state"), lease_seconds)

        started = self._db.run(write, write=True)
        if started is not None:
            self._threaded.note(started.invocation_id)
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

    def unfinished_invocations(self, agent_id: str) -> list[InvocationRecord]:
        query = (
            sa.select(inv)
            .where(inv.c.agent_id == agent_id, inv.c.status == "running")
            .order_by(inv.c.created_at, inv.c.invocation_id)
        )
        rows = self._db.run(lambda conn: conn.execute(query).all(), write=False)
        return [invocation_from_row(r) for r in rows]

    def list_invocations(self, agent_id: str, limit: int = 50) -> list[InvocationRecord]:
        query = (
            sa.select(inv)
            .where(inv.c.agent_id == agent_id)
            .order_by(inv.c.created_at.desc(), inv.c.invocation_id.desc())
            .limit(limit)
        )
        rows = self._db.run(lambda conn: conn.execute(query).all(), write=False)
        return [invocation_from_row(r) for r in rows]

    # -- group commit ------------------------------------------------------

    def create_invocations(
        self, items: Sequence[tuple[InvocationRecord, int | None]], *, owner: str,
        lease_seconds: float | None = None, max_running: int | None = 1,
        durable: bool = True,
    ) -> list[int | StoreError]:
        if len(items) > 1 and all(v is None or r.thread_id is not None for r, v in items):
            try:
                now = float(self.clock())
                statements: Statements = []
                for record, version in items:
                    statements += create_statements(
                        self._db.is_sqlite, record.invocation_id, record.agent_id,
                        record.thread_id, invocation_values(record), owner=owner, now=now,
                        expires=self._expiry(lease_seconds), max_running=max_running,
                        thread_version=version)
            except EncodingError:
                statements = []  # each on its own says which
            if statements and self._db.write_all(statements, durable=durable):
                for record, _version in items:
                    if record.thread_id is not None:
                        self._threaded.note(record.invocation_id)
                return [1] * len(items)
        # Each on its own: the contract's plain loop.
        return TaskStore.create_invocations(self, items, owner=owner,
                                            lease_seconds=lease_seconds,
                                            max_running=max_running, durable=durable)

    def finish_invocations(
        self, items: Sequence[Finish], *, lease_seconds: float | None = None,
    ) -> list[InvocationRecord | StoreError | None]:
        if len(items) > 1 and self._batch_finish(items):
            return [None] * len(items)
        return TaskStore.finish_invocations(self, items, lease_seconds=lease_seconds)

    def _batch_finish(self, items: Sequence[Finish]) -> bool:
        """The happy path of every finish in one transaction (True: all landed)."""
        now = float(self.clock())
        statements: Statements = []
        try:
            for invocation_id, token, status, result, error, state in items:
                if status not in TERMINAL_INVOCATION_STATUSES:
                    return False
                statements += finish_statements(
                    invocation_id, token, status, now, finish_values(result, error, state),
                    on_thread=self._threaded.on_thread(invocation_id))
        except EncodingError:
            return False
        if not self._db.write_all(statements):
            return False
        for invocation_id, *_rest in items:
            self._threaded.forget(invocation_id)
        return True

    # -- retention ---------------------------------------------------------

    def prune(self, older_than: float, *, agent_id: str | None = None) -> PruneReport:
        if isinstance(older_than, bool) or not isinstance(older_than, (int, float)) \
                or not math.isfinite(older_than) or older_than < 0:
            raise StoreError(f"prune: older_than must be a finite number of seconds >= 0, "
                             f"got {older_than!r}", code="invalid_argument")
        cutoff = float(self.clock()) - float(older_than)
        chosen = sa.select(inv.c.invocation_id).where(
            inv.c.status.in_(_FINISHED), inv.c.updated_at < cutoff)
        if agent_id is not None:
            chosen = chosen.where(inv.c.agent_id == agent_id)

        def write(conn: Connection) -> PruneReport:
            ids = [r[0] for r in conn.execute(chosen).all()]
            counts = [0, 0, 0]
            for start in range(0, len(ids), 500):  # bounded IN lists
                part = ids[start:start + 500]
                counts[1] += conn.execute(sa.delete(tk).where(tk.c.invocation_id.in_(part))
                                          ).rowcount
                counts[2] += conn.execute(sa.delete(ev).where(ev.c.invocation_id.in_(part))
                                          ).rowcount
                counts[0] += conn.execute(sa.delete(inv).where(
                    inv.c.invocation_id.in_(part), inv.c.status.in_(_FINISHED))).rowcount
            return PruneReport(*counts)

        report: PruneReport = self._db.run(write, write=True)
        return report
