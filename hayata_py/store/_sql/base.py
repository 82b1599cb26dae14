"""What every part of :class:`~hayata_py.store._sql.store.SqlTaskStore` shares:
its state (declared once, in :class:`SqlBase`) and the fencing check each
write makes inside its transaction (:func:`fence`)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection

from hayata_py._errors import StaleWriter, StoreError
from hayata_py.store._connect import normalize_url
from hayata_py.store._contract import TaskStore
from hayata_py.store._records import TERMINAL_INVOCATION_STATUSES
from hayata_py.store._rows import check_control
from hayata_py.store._sql.engine import EngineHolder
from hayata_py.store._sql.migrate import migrate
from hayata_py.store._sql.schema import invocations as inv

__all__ = ["Clock", "SqlBase", "ThreadHints", "fence", "lock_invocation"]

Clock = Callable[[], float]

_MAX_HINTS = 100_000

# Built once: SQLAlchemy then reuses its cache key and compiled form.
_LOCK_INVOCATION = (
    sa.select(inv.c.token, inv.c.status, inv.c.owner, inv.c.lease_expires_at,
              inv.c.format_version, inv.c.agent_id, inv.c.thread_id)
    .where(inv.c.invocation_id == sa.bindparam("iid"))
    .with_for_update()
)


class ThreadHints:
    """Ids of invocations on a thread this store created, started or claimed: a
    hint for a finish to try the thread's fast statements first (and for a
    plain one, the plain statement). Never needed for correctness: every fast
    statement re-checks. Bounded: finishes made elsewhere never drop theirs."""

    def __init__(self) -> None:
        self._ids: dict[str, bool] = {}

    def note(self, invocation_id: str) -> None:
        """Remember that ``invocation_id`` runs on a thread."""
        hints = self._ids
        hints[invocation_id] = True
        if len(hints) > _MAX_HINTS:
            with contextlib.suppress(StopIteration, KeyError, RuntimeError):
                del hints[next(iter(hints))]

    def on_thread(self, invocation_id: str) -> bool:
        """Whether ``invocation_id`` was noted."""
        return self._ids.get(invocation_id, False)

    def forget(self, invocation_id: str) -> bool:
        """Drop the hint of ``invocation_id`` (it ended); return whether it was noted."""
        return self._ids.pop(invocation_id, False)


class SqlBase(TaskStore):
    """The state of a SQL task store, shared by the class of each part of the
    contract: the engine of this process (``_db``), the clock and the thread
    hints.

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
        self._threaded = ThreadHints()
        try:
            migrate(self._db)
        finally:
            self._db.dispose()

    def close(self) -> None:
        self._db.dispose()

    def _expiry(self, lease_seconds: float | None) -> float | None:
        """When a lease of ``lease_seconds`` from now ends (None: no lease)."""
        return None if lease_seconds is None else self.clock() + lease_seconds


def lock_invocation(conn: Connection, invocation_id: str) -> Any:
    """Lock the invocation row for this transaction and return its control columns.

    Refuses a row of a newer value format (:class:`SchemaTooNew`) or with an
    unknown status (:class:`CorruptRecord`): nothing is written to it.
    """
    row = conn.execute(_LOCK_INVOCATION, {"iid": invocation_id}).first()
    if row is None:
        raise StoreError(
            f"invocation {invocation_id} does not exist",
            code="invocation_not_found",
            invocation_id=invocation_id,
        )
    check_control(row, f"invocation {invocation_id}")
    return row


def fence(conn: Connection, invocation_id: str, token: int, *, running: bool = False) -> Any:
    """Lock the invocation; raise StaleWriter unless ``token`` is current.

    With ``running=True`` also raise ``invocation_finished`` if it is terminal.
    """
    row = lock_invocation(conn, invocation_id)
    if row.token != token:
        raise StaleWriter(
            f"invocation {invocation_id}: token {token} is not the current token "
            f"{row.token} (another owner has claimed it); nothing was written",
            invocation_id=invocation_id,
            token=token,
            current_token=row.token,
        )
    if running and row.status in TERMINAL_INVOCATION_STATUSES:
        raise StoreError(
            f"invocation {invocation_id} is {row.status}; it cannot be changed",
            code="invocation_finished",
            invocation_id=invocation_id,
            status=row.status,
        )
    return row
