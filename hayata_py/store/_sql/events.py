"""The event log of :class:`~hayata_py.store._sql.store.SqlTaskStore`: the
"event log" section of the contract, the ``hayata_events`` table.

Events are fenced like every write of an invocation: a batch carries each
writer's token, checked in the transaction that inserts (on PostgreSQL the
invocation rows are share-locked, so a claim waits for the batch's commit).
An insert of a sequence already stored is ignored: writing a batch again is
harmless.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from hayata_py._codec import decode, encode
from hayata_py.store._records import StoredEvent
from hayata_py.store._sql.base import SqlBase
from hayata_py.store._sql.schema import events as ev
from hayata_py.store._sql.schema import invocations as inv

__all__ = ["EventLog", "insert_events"]


def insert_events(conn: Connection, is_sqlite: bool,
                  logged: Sequence[tuple[str, int, str, bytes]], now: float) -> None:
    """Insert ``(invocation, sequence, type, encoded data)`` events (the caller has
    fenced their invocations); one already stored is left as it is."""
    if not logged:
        return
    dialect = sqlite if is_sqlite else postgresql
    conn.execute(dialect.insert(ev).on_conflict_do_nothing(
        index_elements=["invocation_id", "seq"]),
        [{"invocation_id": iid, "seq": seq, "type": kind, "data": data, "created_at": now}
         for iid, seq, kind, data in logged])


class EventLog(SqlBase):
    """Each invocation's events, numbered 1, 2, ..."""

    def append_events(self, events: Sequence[tuple[StoredEvent, int]]
                      ) -> set[tuple[str, int]]:
        if not events:
            return set()
        now = float(self.clock())
        rows = [(e, token, encode(e.data, key="data")) for e, token in events]
        ids = sorted({e.invocation_id for e, _ in events})

        def write(conn: Connection) -> set[tuple[str, int]]:
            query = sa.select(inv.c.invocation_id, inv.c.token).where(
                inv.c.invocation_id.in_(ids))
            if not self._db.is_sqlite:
                query = query.with_for_update(read=True)
            tokens = dict(conn.execute(query).all())
            # Per event: a batch may hold a replaced run's events (refused) and the
            # events of the run that took over, in the same process (written).
            current = [(e.invocation_id, e.sequence, e.type, data) for e, token, data in rows
                       if tokens.get(e.invocation_id) == token]
            insert_events(conn, self._db.is_sqlite, current, now)
            return {(e.invocation_id, token) for e, token, _ in rows
                    if tokens.get(e.invocation_id) != token}

        result: set[tuple[str, int]] = self._db.run(write, write=True)
        return result

    def get_events(self, invocation_id: str, *, after: int = 0,
                   limit: int | None = None) -> list[StoredEvent]:
        query = (sa.select(ev).where(ev.c.invocation_id == invocation_id, ev.c.seq > int(after))
                 .order_by(ev.c.seq))
        if limit is not None:
            query = query.limit(int(limit))
        found = self._db.run(lambda conn: conn.execute(query).all(), write=False)
        return [StoredEvent(r.invocation_id, int(r.seq), r.type,
                            decode(r.data, record=f"event {r.seq} of invocation "
                                   f"{r.invocation_id}", column="data"), r.created_at)
                for r in found]

    def last_event(self, invocation_id: str) -> int:
        query = sa.select(sa.func.max(ev.c.seq)).where(ev.c.invocation_id == invocation_id)
        last = self._db.run(lambda conn: conn.execute(query).scalar(), write=False)
        return int(last or 0)
