"""Several ``hayata serve`` servers on one store: who carries out each run.

* ``hayata_serve_servers``: one row per server (its stable id) with the expiry
  of its lease, renewed while it runs. A server whose lease expired is dead
  to the others: its running runs are taken over.
* ``hayata_serve_runs.owner``: the server carrying out a running run (NULL for
  a pending run, and for runs recorded before this revision).

Revision ID: 0006_serve_owners
Revises: 0005_serve
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_serve_owners"
down_revision: str | None = "0005_serve"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "hayata_serve_servers",
        sa.Column("server_id", sa.String(), primary_key=True),
        sa.Column("url", sa.String(), nullable=False),
        sa.Column("lease_expires_at", sa.Double(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=False),
    )
    with op.batch_alter_table("hayata_serve_runs") as batch:
        batch.add_column(sa.Column("owner", sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("hayata_serve_runs") as batch:
        batch.drop_column("owner")
    op.drop_table("hayata_serve_servers")
