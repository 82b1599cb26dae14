"""Ownership of an invocation in :class:`~hayata_py.store._sql.store.SqlTaskStore`:
the "ownership" section of the contract, claims and leases.

A claim takes the invocation over with the next fencing token; a lease keeps
other owners from claiming until it expires. Renewals and releases are fenced
(token, owner) like every other write; :meth:`Leases.renew_leases`
renews many invocations in one transaction (one ``executemany`` when every
renewal lands).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from hayata_py._errors import InvocationBusy, StaleWriter, StoreError
from hayata_py.store._records import TERMINAL_INVOCATION_STATUSES
from hayata_py.store._rows import invocation_from_row
from hayata_py.store._sql.base import SqlBase, fence, lock_invocation
from hayata_py.store._sql.schema import invocations as inv

__all__ = ["Leases"]

_RENEW = sa.text(
    "UPDATE hayata_invocations SET lease_expires_at = :e WHERE invocation_id = :i "
    "AND token = :t AND owner = :o AND status = 'running'")
"""One lease renewal, fenced (token, owner, running), for executemany."""


class Leases(SqlBase):
    """Claims, lease renewals and releases."""

    def claim_invocation(
        self, invocation_id: str, *, owner: str, lease_seconds: float | None = None
    ) -> int:
        def write(conn: Connection) -> int:
            row = lock_invocation(conn, invocation_id)
            # The new owner will read the record: a corrupt one is refused now,
            # before its token changes.
            invocation_from_row(conn.execute(sa.select(inv).where(
                inv.c.invocation_id == invocation_id)).one())
            if row.status in TERMINAL_INVOCATION_STATUSES:
                raise StoreError(
                    f"invocation {invocation_id} is {row.status}; it cannot be claimed",
                    code="invocation_finished",
                    invocation_id=invocation_id,
                    status=row.status,
                )
            self._refuse_if_leased(invocation_id, row.owner, row.lease_expires_at, owner)
            token = int(row.token) + 1
            conn.execute(
                inv.update()
                .where(inv.c.invocation_id == invocation_id)
                .values(token=token, owner=owner, lease_expires_at=self._expiry(lease_seconds))
            )
            if row.thread_id is not None:
                self._threaded.note(invocation_id)
            return token

        return self._db.run(write, write=True)

    def check_claimable(self, invocation_id: str, *, owner: str) -> None:
        def read(conn: Connection) -> None:
            row = conn.execute(sa.select(inv.c.owner, inv.c.lease_expires_at).where(
                inv.c.invocation_id == invocation_id)).one_or_none()
            if row is not None:
                self._refuse_if_leased(invocation_id, row.owner, row.lease_expires_at, owner)

        self._db.run(read, write=False)

    def _refuse_if_leased(self, invocation_id: str, holder: str | None,
                          expires: float | None, owner: str) -> None:
        now = self.clock()
        if holder not in (None, owner) and expires is not None and expires > now:
            raise InvocationBusy(
                f"invocation {invocation_id} is leased by {holder} "
                f"for another {expires - now:.3f} s",
                invocation_id=invocation_id,
                owner=holder,
                lease_expires_at=expires,
            )

    def _lease_write(
        self, invocation_id: str, owner: str, token: int, values: Callable[[], dict[str, Any]]
    ) -> None:
        def write(conn: Connection) -> None:
            row = fence(conn, invocation_id, token)
            if row.owner != owner:
                raise StaleWriter(
                    f"invocation {invocation_id} is owned by {row.owner}, not {owner}",
                    invocation_id=invocation_id,
                    owner=row.owner,
                )
            conn.execute(
                inv.update().where(inv.c.invocation_id == invocation_id).values(**values())
            )

        self._db.run(write, write=True)

    def renew_lease(
        self, invocation_id: str, *, owner: str, token: int, lease_seconds: float | None
    ) -> None:
        self._lease_write(
            invocation_id, owner, token, lambda: {"lease_expires_at": self._expiry(lease_seconds)}
        )

    def renew_leases(
        self, tokens: dict[str, int], *, owner: str, lease_seconds: float | None
    ) -> set[str]:
        if not tokens:
            return set()
        ordered = sorted(tokens.items())  # one lock order for every writer (PostgreSQL)

        def write(conn: Connection) -> set[str]:
            expiry = self._expiry(lease_seconds)
            if conn.dialect.supports_sane_multi_rowcount:
                # One executemany: every row renewed (the common case) is one call.
                rows = [{"e": expiry, "i": i, "t": t, "o": owner} for i, t in ordered]
                if conn.execute(_RENEW, rows).rowcount == len(rows):
                    return set()
            refused = set()
            for invocation_id, token in ordered:
                changed = conn.execute(
                    inv.update()
                    .where(inv.c.invocation_id == invocation_id, inv.c.token == token,
                           inv.c.owner == owner, inv.c.status == "running")
                    .values(lease_expires_at=expiry)
                ).rowcount
                if changed != 1:
                    refused.add(invocation_id)
            return refused

        result: set[str] = self._db.run(write, write=True)
        return result

    def release(self, invocation_id: str, *, owner: str, token: int) -> None:
        self._lease_write(
            invocation_id, owner, token, lambda: {"owner": None, "lease_expires_at": None}
        )
