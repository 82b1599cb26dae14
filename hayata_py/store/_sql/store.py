""":class:`SqlTaskStore`: the :class:`~hayata_py.store.TaskStore` contract on
SQLAlchemy, for SQLite and PostgreSQL, one class per section of the contract.
"""

from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy.engine import URL

from hayata_py.store._contract import TaskStore
from hayata_py.store._sql.base import Clock
from hayata_py.store._sql.cache import NodeCache
from hayata_py.store._sql.events import EventLog
from hayata_py.store._sql.invocations import Invocations
from hayata_py.store._sql.leases import Leases
from hayata_py.store._sql.tasks import TaskRecords
from hayata_py.store._sql.threads import Threads

__all__ = ["SqlTaskStore", "default_store_url", "open_store"]


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


class SqlTaskStore(Invocations, Leases, Threads, TaskRecords, NodeCache, EventLog):
    """:class:`TaskStore` on SQLite (file) or PostgreSQL; see the contract for guarantees.

    Each base implements one section of the contract over the state they all
    share, declared once in :class:`~hayata_py.store._sql.base.SqlBase`, whose
    constructor (``url``, ``clock``, ``retry_seconds``) applies migrations.
    """

    def __repr__(self) -> str:
        return f"SqlTaskStore({self.url.render_as_string(hide_password=True)!r})"
