"""Node result caching.

* ``hayata_tasks.cached`` (false for every row written before this revision):
  the task completed from the cache, its node did not run.
* ``hayata_cache``: one cached result per agent, node and key, with the time
  it was stored and the time it expires.

Revision ID: 0003_cache
Revises: 0002_threads
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_cache"
down_revision: str | None = "0002_threads"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column(
        "hayata_tasks",
        sa.Column("cached", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.create_table(
        "hayata_cache",
        sa.Column("agent_id", sa.String(), primary_key=True),
        sa.Column("node_id", sa.String(), primary_key=True),
        sa.Column("key", sa.String(), primary_key=True),
        sa.Column("result", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("hayata_cache")
    with op.batch_alter_table("hayata_tasks") as batch:
        batch.drop_column("cached")
