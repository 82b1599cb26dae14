"""Single-statement happy paths for the hot writes, as prepared driver SQL.

Each statement folds the fencing check into the write itself (``... WHERE
token = ? AND status = 'running'`` or ``EXISTS (SELECT 1 FROM invocations
WHERE ... FOR UPDATE)``), so the happy path is one statement in one
transaction: :meth:`EngineHolder.write_one` commits it if it changed exactly
one row and rolls it back otherwise. A rolled-back attempt wrote nothing; the
caller then runs the general (SQLAlchemy) path, which re-checks everything in
a fresh transaction and raises the precise error - or applies the write, for
the legitimate cases the fast statement does not cover (a replayed start, a
task created by ``schedule_tasks``, a repeated identical finish).

Locking matches the general path: SQLite writes start with ``BEGIN
IMMEDIATE`` (the write lock covers every row); PostgreSQL locks the
invocation row (``FOR UPDATE``, or the ``UPDATE`` of the row itself) before
the task row, so a concurrent ``claim_invocation`` either waits for the write
to commit or makes its fencing check fail.

The texts are written with ``?`` placeholders; :class:`Stmt` keeps the
PostgreSQL (``%s``) variant next to it.
"""

from __future__ import annotations

from hayata_py._codec import FORMAT_VERSION

__all__ = [
    "CHECKPOINT",
    "COMPLETE_TASK",
    "CREATE_INVOCATION",
    "CREATE_INVOCATION_UNLIMITED",
    "FAIL_TASK",
    "FINISH_INVOCATION",
    "FINISH_INVOCATION_WITH_STATE",
    "PG_AGENT_LOCK",
    "START_NEW_TASK",
    "Stmt",
]


class Stmt:
    """One statement's text for SQLite (qmark) and PostgreSQL (format paramstyle)."""

    __slots__ = ("postgresql", "sqlite")

    def __init__(self, sql: str, *, pg_lock: str = "") -> None:
        text = " ".join(sql.split())
        self.sqlite = text.replace(" {lock}", "")
        self.postgresql = text.replace("%", "%%").replace("?", "%s").replace("{lock}", pg_lock)

    def text(self, is_sqlite: bool) -> str:
        return self.sqlite if is_sqlite else self.postgresql


_FORMAT = f"format_version = {FORMAT_VERSION}"
"""Rows of another value format are left to the general path, which refuses them."""

_FENCE_RUNNING = (
    "FROM hayata_invocations WHERE invocation_id = ? AND token = ? AND status = 'running' "
    f"AND {_FORMAT}"
)

START_NEW_TASK = Stmt(
    f"""
    INSERT INTO hayata_tasks (task_id, invocation_id, execution_id, step, node_id,
        branch_index, status, input, result, error, attempt, started_at, finished_at,
        system_instance, resolved)
    SELECT ?, ?, ?, ?, ?, ?, 'started', ?, ?, ?, ?, ?, NULL, ?, ?
    {_FENCE_RUNNING} {{lock}}
    ON CONFLICT (task_id) DO NOTHING
    """,
    pg_lock="FOR UPDATE",
)
"""Create a started task; params: task columns (see _tasks), then iid, token."""

_TASK_FENCE = f"""
    AND EXISTS (SELECT 1 FROM hayata_invocations
                WHERE hayata_invocations.invocation_id = hayata_tasks.invocation_id
                AND hayata_invocations.token = ?
                AND hayata_invocations.{_FORMAT} {{lock}})
"""

COMPLETE_TASK = Stmt(
    f"""
    UPDATE hayata_tasks SET status = 'completed', finished_at = ?, result = ?
    WHERE task_id = ? AND status = 'started' {_TASK_FENCE}
    """,
    pg_lock="FOR UPDATE",
)
"""Params: finished_at, result bytes, task_id, token."""

FAIL_TASK = Stmt(
    f"""
    UPDATE hayata_tasks SET status = 'failed', finished_at = ?, error = ?
    WHERE task_id = ? AND status IN ('scheduled', 'started') {_TASK_FENCE}
    """,
    pg_lock="FOR UPDATE",
)
"""Params: finished_at, error bytes, task_id, token."""

CHECKPOINT = Stmt(
    f"""
    UPDATE hayata_invocations SET updated_at = ?, step = ?, state = ?,
        active_execution = ?, parallel_results = ?, last_result = ?
    WHERE invocation_id = ? AND token = ? AND status = 'running' AND {_FORMAT}
    """
)
"""Params: updated_at, the five checkpoint columns (see ``checkpoint_values``),
iid, token."""

_FINISH = f"""
    UPDATE hayata_invocations SET status = ?, updated_at = ?, owner = NULL,
        lease_expires_at = NULL, result = ?, error = ? {{state}}
    WHERE invocation_id = ? AND token = ? AND status = 'running' AND {_FORMAT}
        AND thread_id IS NULL
"""
# An invocation on a thread also updates its thread (and may start a queued
# run) in the same transaction: always the general path.
FINISH_INVOCATION = Stmt(_FINISH.format(state=""))
"""Params: status, updated_at, result, error, iid, token."""
FINISH_INVOCATION_WITH_STATE = Stmt(_FINISH.format(state=", state = ?"))
"""Params: status, updated_at, result, error, state, iid, token."""

_CREATE = """
    INSERT INTO hayata_invocations (invocation_id, agent_id, status, format_version,
        created_at, updated_at, token, owner, lease_expires_at, step, state, input,
        active_execution, parallel_results, last_result, result, error)
    SELECT ?, ?, 'running', ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
    WHERE NOT EXISTS (SELECT 1 FROM hayata_thread_queue WHERE invocation_id = ?)
    {check}
    ON CONFLICT (invocation_id) DO NOTHING
"""
CREATE_INVOCATION = Stmt(_CREATE.format(check="""
    AND NOT EXISTS (SELECT 1 FROM hayata_invocations
                      WHERE agent_id = ? AND status = 'running')"""))
"""Create unless the id is queued (``enqueue_run``) or the agent runs one
(``max_running=1``). Params: iid, agent_id, format_version, created_at,
updated_at, owner, lease_expires_at, the eight value columns (see
``invocation_values``), iid, agent_id. On PostgreSQL it runs
after :data:`PG_AGENT_LOCK` in one transaction: nothing else (no unique index
since ``0002_threads``) keeps two concurrent creates from both seeing the
agent free."""
CREATE_INVOCATION_UNLIMITED = Stmt(_CREATE.format(check=""))
"""Create without the per-agent check (``max_running=None``); the params of
:data:`CREATE_INVOCATION` without the last one (agent_id)."""

PG_AGENT_LOCK_KEY = 0x48594147
"""The first key of the per-agent advisory lock (the second: ``hashtext(agent_id)``)."""
PG_AGENT_LOCK = Stmt(f"SELECT pg_advisory_xact_lock({PG_AGENT_LOCK_KEY}, hashtext(?))")
"""Serialize, until commit, the writes that count an agent's running invocations
(PostgreSQL only; SQLite's ``BEGIN IMMEDIATE`` already serializes every write).
Under READ COMMITTED the statements after it see what the previous holder
committed. Params: agent_id."""
