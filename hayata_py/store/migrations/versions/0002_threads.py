"""Conversation threads and many running invocations per agent.

* ``hayata_invocations.thread_id`` (nullable: invocations without a thread,
  and every row written before this revision, have none).
* The unique index "one running invocation per agent" is dropped: an agent may
  now run several (``create_invocation(max_running=...)`` enforces the limit it
  is given, under a per-agent lock). Replaced by plain indexes for the running
  count and for a thread's invocations.
* ``hayata_threads`` (one row per agent and thread: its state, the version
  counting its completed invocations, its running invocation, the length of
  its queue, kept on the row so that a finish and an enqueue conflict on it) and
  ``hayata_thread_queue`` (runs waiting for their thread, in ``seq`` order).

Revision ID: 0002_threads
Revises: 0001_baseline
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_threads"
down_revision: str | None = "0001_baseline"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("hayata_invocations", sa.Column("thread_id", sa.String(), nullable=True))
    op.drop_index("uq_hayata_invocations_running_agent", table_name="hayata_invocations")
    op.create_index(
        "ix_hayata_invocations_agent_status", "hayata_invocations", ["agent_id", "status"]
    )
    op.create_index(
        "ix_hayata_invocations_agent_thread_created",
        "hayata_invocations",
        ["agent_id", "thread_id", "created_at"],
    )
    op.create_table(
        "hayata_threads",
        sa.Column("agent_id", sa.String(), primary_key=True),
        sa.Column("thread_id", sa.String(), primary_key=True),
        sa.Column("state", sa.LargeBinary(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("running_invocation_id", sa.String(), nullable=True),
        sa.Column("queue_length", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
    )
    op.create_table(
        "hayata_thread_queue",
        sa.Column("agent_id", sa.String(), primary_key=True),
        sa.Column("thread_id", sa.String(), primary_key=True),
        sa.Column("seq", sa.BigInteger(), primary_key=True),
        sa.Column("invocation_id", sa.String(), nullable=False),
        sa.Column("input", sa.LargeBinary(), nullable=False),
        sa.Column("stream", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id", "thread_id"],
            ["hayata_threads.agent_id", "hayata_threads.thread_id"],
            ondelete="CASCADE",
        ),
        sa.UniqueConstraint("invocation_id", name="uq_hayata_thread_queue_invocation"),
    )


def downgrade() -> None:
    op.drop_table("hayata_thread_queue")
    op.drop_table("hayata_threads")
    op.drop_index("ix_hayata_invocations_agent_thread_created", table_name="hayata_invocations")
    op.drop_index("ix_hayata_invocations_agent_status", table_name="hayata_invocations")
    op.create_index(
        "uq_hayata_invocations_running_agent",
        "hayata_invocations",
        ["agent_id"],
        unique=True,
        sqlite_where=sa.text("status = 'running'"),
        postgresql_where=sa.text("status = 'running'"),
    )
    with op.batch_alter_table("hayata_invocations") as batch:
        batch.drop_column("thread_id")
