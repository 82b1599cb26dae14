"""What ``hayata serve`` keeps beside the runtime's records.

* ``hayata_serve_threads``: a LangGraph-API thread (it exists before any run,
  so before any hayata thread): its metadata, status and the graph it runs.
* ``hayata_serve_runs``: a run as the API shows it (status, kwargs, metadata),
  recorded before the response that accepts it; ``pending`` rows are the
  durable queue of each thread.
* ``hayata_serve_run_events``: each SSE event of a run with its sequence
  (1, 2, ... without gaps): the ``id:`` a client resumes from.
* ``hayata_serve_store_items``: the API's store (``/store/items``): a JSON
  value under a namespace (its labels joined by ``.``, which labels cannot
  hold) and a key.

Revision ID: 0005_serve
Revises: 0004_events
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_serve"
down_revision: str | None = "0004_events"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "hayata_serve_threads",
        sa.Column("thread_id", sa.String(), primary_key=True),
        sa.Column("graph_id", sa.String(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("metadata", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
    )
    op.create_table(
        "hayata_serve_runs",
        sa.Column("run_id", sa.String(), primary_key=True),
        sa.Column("thread_id", sa.String(), nullable=False),
        sa.Column("assistant_id", sa.String(), nullable=False),
        sa.Column("graph_id", sa.String(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("multitask_strategy", sa.String(16), nullable=False),
        sa.Column("kwargs", sa.Text(), nullable=False),
        sa.Column("metadata", sa.Text(), nullable=False),
        sa.Column("not_before", sa.Double(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
    )
    op.create_index("ix_hayata_serve_runs_thread", "hayata_serve_runs",
                    ["thread_id", "created_at"])
    op.create_index("ix_hayata_serve_runs_status", "hayata_serve_runs", ["status"])
    op.create_table(
        "hayata_serve_run_events",
        sa.Column("run_id", sa.String(), primary_key=True),
        sa.Column("seq", sa.BigInteger(), primary_key=True),
        sa.Column("event", sa.String(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
    )
    op.create_table(
        "hayata_serve_store_items",
        sa.Column("namespace", sa.String(), primary_key=True),
        sa.Column("key", sa.String(), primary_key=True),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("hayata_serve_store_items")
    op.drop_table("hayata_serve_run_events")
    op.drop_index("ix_hayata_serve_runs_status", "hayata_serve_runs")
    op.drop_index("ix_hayata_serve_runs_thread", "hayata_serve_runs")
    op.drop_table("hayata_serve_runs")
    op.drop_table("hayata_serve_threads")
