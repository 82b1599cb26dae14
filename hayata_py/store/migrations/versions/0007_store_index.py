"""Each store item says which of its fields semantic search embeds.

* ``hayata_serve_store_items.index_fields``: NULL embeds the item at the
  store's own index fields (every item written before this revision); the
  JSON ``false`` keeps it out of semantic search; a JSON list of paths embeds
  the item at those fields (LangGraph's ``put(..., index=...)``).

Revision ID: 0007_store_index
Revises: 0006_serve_owners
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_store_index"
down_revision: str | None = "0006_serve_owners"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("hayata_serve_store_items") as batch:
        batch.add_column(sa.Column("index_fields", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("hayata_serve_store_items") as batch:
        batch.drop_column("index_fields")
