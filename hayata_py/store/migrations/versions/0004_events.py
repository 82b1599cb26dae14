"""The durable event log.

* ``hayata_events``: every event of an invocation with its sequence number
  (1, 2, ... without gaps), its type and data; deleted with its invocation.

Revision ID: 0004_events
Revises: 0003_cache
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_events"
down_revision: str | None = "0003_cache"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "hayata_events",
        sa.Column(
            "invocation_id",
            sa.String(),
            sa.ForeignKey("hayata_invocations.invocation_id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("seq", sa.BigInteger(), primary_key=True),
        sa.Column("type", sa.String(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
    )
    op.create_index("ix_hayata_invocations_updated", "hayata_invocations",
                    ["status", "updated_at"])


def downgrade() -> None:
    op.drop_index("ix_hayata_invocations_updated", "hayata_invocations")
    op.drop_table("hayata_events")
