"""Baseline: invocation checkpoints and task records.

Revision ID: 0001_baseline
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_baseline"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "hayata_invocations",
        sa.Column("invocation_id", sa.String(), primary_key=True),
        sa.Column("agent_id", sa.String(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("state", sa.LargeBinary(), nullable=False),
        sa.Column("input", sa.LargeBinary(), nullable=False),
        sa.Column("active_execution", sa.LargeBinary(), nullable=False),
        sa.Column("parallel_results", sa.LargeBinary(), nullable=False),
        sa.Column("last_result", sa.LargeBinary(), nullable=False),
        sa.Column("result", sa.LargeBinary(), nullable=False),
        sa.Column("error", sa.LargeBinary(), nullable=False),
        sa.Column("format_version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("token", sa.BigInteger(), nullable=False),
        sa.Column("owner", sa.String(), nullable=True),
        sa.Column("lease_expires_at", sa.Double(), nullable=True),
    )
    op.create_index(
        "ix_hayata_invocations_agent_created",
        "hayata_invocations",
        ["agent_id", "created_at"],
    )
    # At most one running invocation per agent, enforced by the database.
    op.create_index(
        "uq_hayata_invocations_running_agent",
        "hayata_invocations",
        ["agent_id"],
        unique=True,
        sqlite_where=sa.text("status = 'running'"),
        postgresql_where=sa.text("status = 'running'"),
    )
    op.create_table(
        "hayata_tasks",
        sa.Column("task_id", sa.String(), primary_key=True),
        sa.Column(
            "invocation_id",
            sa.String(),
            sa.ForeignKey("hayata_invocations.invocation_id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("execution_id", sa.String(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("node_id", sa.String(), nullable=False),
        sa.Column("branch_index", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("input", sa.LargeBinary(), nullable=False),
        sa.Column("result", sa.LargeBinary(), nullable=False),
        sa.Column("error", sa.LargeBinary(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=True),
        sa.Column("finished_at", sa.Double(), nullable=True),
        sa.Column("system_instance", sa.String(), nullable=True),
        sa.Column("resolved", sa.Boolean(), nullable=False),
    )
    op.create_index(
        "ix_hayata_tasks_invocation_step",
        "hayata_tasks",
        ["invocation_id", "step", "branch_index"],
    )


def downgrade() -> None:
    op.drop_table("hayata_tasks")
    op.drop_table("hayata_invocations")
