"""Schema migrations: checked and applied under a lock, in one transaction."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from hayata_py._errors import SchemaTooNew
from hayata_py.store._sql.engine import EngineHolder
from hayata_py.store._sql.schema import HEAD_REVISION

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = ["migrate"]

_MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
_PG_MIGRATION_LOCK = 0x48415941  # arbitrary constant key for pg_advisory_xact_lock


def _config(conn: Connection) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    cfg.attributes["connection"] = conn
    return cfg


def migrate(holder: EngineHolder) -> None:
    """Bring the schema to the newest revision this code knows.

    Under a lock (SQLite write lock / PostgreSQL advisory lock) and in one
    transaction: read ``alembic_version``; if it names a revision unknown to
    this code raise :class:`SchemaTooNew` and roll back (nothing changed);
    otherwise apply missing revisions. Concurrent first opens serialize on the
    lock, so the later one finds the schema current. A database already at
    :data:`HEAD_REVISION` is recognised with one read, without importing Alembic.
    """

    def current_is_head(conn: Connection) -> bool:
        if not sa.inspect(conn).has_table("alembic_version"):
            return False
        rows = conn.execute(sa.text("SELECT version_num FROM alembic_version")).all()
        return [tuple(r) for r in rows] == [(HEAD_REVISION,)]

    if holder.run(current_is_head, write=False):
        return

    def step(conn: Connection) -> None:
        from alembic import command
        from alembic.runtime.migration import MigrationContext
        from alembic.script import ScriptDirectory

        if not holder.is_sqlite:
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATION_LOCK})
        cfg = _config(conn)
        script = ScriptDirectory.from_config(cfg)
        current = set(MigrationContext.configure(conn).get_current_heads())
        known = {rev.revision for rev in script.walk_revisions()}
        unknown = sorted(current - known)
        if unknown:
            raise SchemaTooNew(
                f"the database schema is at revision {', '.join(unknown)}, written by a newer "
                f"hayata_py; this version knows up to {', '.join(script.get_heads())}. "
                "Upgrade hayata_py to open it (the database was not changed).",
                revisions=unknown,
                known_heads=list(script.get_heads()),
            )
        if current != set(script.get_heads()):
            command.upgrade(cfg, "heads")

    holder.run(step, write=True)
