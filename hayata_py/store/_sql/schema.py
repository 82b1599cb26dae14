"""Table definitions the store code queries (SQLAlchemy Core).

The migrations in ``migrations/versions`` create these tables; this module
only describes them for queries. Keep both in step when adding a revision.

Value columns hold :mod:`hayata_py._codec` bytes (never NULL: ``None`` is
encoded too). Timestamps are double-precision unix seconds.
"""

from __future__ import annotations

import sqlalchemy as sa

__all__ = [
    "HEAD_REVISION", "cache", "events", "invocations", "metadata", "tasks", "thread_queue",
    "threads",
]

HEAD_REVISION = "0007_store_index"
"""The newest migration revision this code knows."""

metadata = sa.MetaData()

invocations = sa.Table(
    "hayata_invocations",
    metadata,
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
    sa.Column("thread_id", sa.String(), nullable=True),
)

tasks = sa.Table(
    "hayata_tasks",
    metadata,
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
    sa.Column("cached", sa.Boolean(), nullable=False, server_default=sa.false()),
)

threads = sa.Table(
    "hayata_threads",
    metadata,
    sa.Column("agent_id", sa.String(), primary_key=True),
    sa.Column("thread_id", sa.String(), primary_key=True),
    sa.Column("state", sa.LargeBinary(), nullable=False),
    sa.Column("version", sa.BigInteger(), nullable=False),
    sa.Column("running_invocation_id", sa.String(), nullable=True),
    sa.Column("queue_length", sa.BigInteger(), nullable=False),
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.Column("updated_at", sa.Double(), nullable=False),
)

thread_queue = sa.Table(
    "hayata_thread_queue",
    metadata,
    sa.Column("agent_id", sa.String(), primary_key=True),
    sa.Column("thread_id", sa.String(), primary_key=True),
    sa.Column("seq", sa.BigInteger(), primary_key=True),
    sa.Column("invocation_id", sa.String(), nullable=False, unique=True),
    sa.Column("input", sa.LargeBinary(), nullable=False),
    sa.Column("stream", sa.Boolean(), nullable=False),
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.ForeignKeyConstraint(
        ["agent_id", "thread_id"],
        ["hayata_threads.agent_id", "hayata_threads.thread_id"],
        ondelete="CASCADE",
    ),
)

cache = sa.Table(
    "hayata_cache",
    metadata,
    sa.Column("agent_id", sa.String(), primary_key=True),
    sa.Column("node_id", sa.String(), primary_key=True),
    sa.Column("key", sa.String(), primary_key=True),
    sa.Column("result", sa.LargeBinary(), nullable=False),
    sa.Column("created_at", sa.Double(), nullable=False),
    sa.Column("expires_at", sa.Double(), nullable=False),
)
"""Cached node results (``AgentConfig.cache``): one per agent, node and key."""

events = sa.Table(
    "hayata_events",
    metadata,
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
"""The event log: each event of an invocation under its sequence number."""
