"""Alembic environment: runs on the connection the store passes in.

The store opens a transaction (and takes a lock) before calling Alembic, so
migrations run inside it and commit or roll back together with the version
check. There is no alembic.ini; see ``hayata_py.store._sql.migrate``.
"""

from __future__ import annotations

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=None, transaction_per_migration=False)
with context.begin_transaction():
    context.run_migrations()
