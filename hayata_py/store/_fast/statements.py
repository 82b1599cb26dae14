"""The fast write path's statements: each hot write's happy path as prepared
driver SQL with its fencing check folded in, and the builders that put them
together.

Each statement folds the fencing check into the write itself (``... WHERE
token = ? AND status = 'running'`` or ``EXISTS (SELECT 1 FROM invocations
WHERE ... FOR UPDATE)``), so the happy path is one statement (or a few) in one
transaction: :func:`~hayata_py.store._fast.transaction.write_transaction`
commits it if each statement changed exactly one row and rolls it back
otherwise. A rolled-back attempt wrote nothing; the caller then runs the
general (SQLAlchemy) path, which re-checks everything in a fresh transaction
and raises the precise error - or applies the write, for the legitimate cases
the fast statement does not cover (a replayed start, a task created by
``schedule_tasks``, a repeated identical finish).

The builders below are the one place each write's statements are put
together, whichever writer runs them (the store's
:meth:`~hayata_py.store._sql.engine.EngineHolder.write_all` or the edge's
:class:`~hayata_py.store._fast.writer.TaskWriter`): :func:`start_statements`
(a task's first start, with the step's checkpoint when one rides along),
:func:`end_statement`, :func:`checkpoint_statement`, :func:`create_statements`
and :func:`finish_statements`.

Locking matches the general path: SQLite writes start with ``BEGIN
IMMEDIATE`` (the write lock covers every row); PostgreSQL locks the
invocation row (``FOR UPDATE``, or the ``UPDATE`` of the row itself) before
the task row, so a concurrent ``claim_invocation`` either waits for the write
to commit or makes its fencing check fail.

Invocations on a thread write the thread row in the same transaction
(:func:`create_statements`, :func:`finish_statements`): every
statement must change exactly one row or the whole transaction is rolled
back, and each condition that matters under concurrency is on the row the
statement writes (rechecked by PostgreSQL after waiting for its lock), not in
a subquery read from the statement's snapshot. The agent's advisory lock
(:data:`PG_AGENT_LOCK`) is the one exception, by design: it runs as its own
statement, before the insert that counts.

The texts are written with ``?`` placeholders; :class:`Stmt` keeps the
PostgreSQL (``%s``) variant next to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hayata_py._codec import FORMAT_VERSION, encode

__all__ = [
    "CHECKPOINT",
    "COMPLETE_TASK",
    "CREATE_INVOCATION",
    "CREATE_INVOCATION_LIMITED",
    "CREATE_INVOCATION_UNLIMITED",
    "FAIL_TASK",
    "FINISH_INVOCATION",
    "FINISH_INVOCATION_WITH_STATE",
    "FINISH_ON_THREAD",
    "FINISH_ON_THREAD_WITH_STATE",
    "FREE_THREAD_COMPLETED",
    "FREE_THREAD_FAILED",
    "INSERT_EVENT",
    "PG_AGENT_LOCK",
    "PG_AGENT_LOCK_KEY",
    "START_NEW_TASK",
    "TAKE_THREAD",
    "Statements",
    "Stmt",
    "checkpoint_statement",
    "create_statements",
    "end_statement",
    "finish_statements",
    "start_statements",
]


class Stmt:
    """One statement's text for SQLite (qmark) and PostgreSQL (format paramstyle)."""

    __slots__ = ("postgresql", "sqlite")

    def __init__(self, sql: str, *, pg_lock: str = "") -> None:
        text = " ".join(sql.split())
        self.sqlite = text.replace(" {lock}", "")
        self.postgresql = text.replace("%", "%%").replace("?", "%s").replace("{lock}", pg_lock)

    def text(self, is_sqlite: bool) -> str:
        """The text for SQLite (``is_sqlite``) or PostgreSQL."""
        return self.sqlite if is_sqlite else self.postgresql


Statements = list[tuple[Stmt, Sequence[Any]]]
"""Statements of one transaction, each with its parameters."""

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
"""Create a started task; params: task columns (see :func:`start_statements`),
then iid, token."""

_TASK_FENCE = f"""
    AND EXISTS (SELECT 1 FROM hayata_invocations
                WHERE hayata_invocations.invocation_id = hayata_tasks.invocation_id
                AND hayata_invocations.token = ?
                AND hayata_invocations.status = 'running'
                AND hayata_invocations.{_FORMAT} {{lock}})
"""
"""A task's result lands only while its invocation runs under the writer's token:
once the invocation has ended (a timed-out task's edge that was frozen, say) its
task records never change again."""

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
        AND thread_id IS {{thread}}
"""
FINISH_INVOCATION = Stmt(_FINISH.format(state="", thread="NULL"))
"""Finish an invocation without a thread. Params: status, updated_at, result,
error, iid, token."""
FINISH_INVOCATION_WITH_STATE = Stmt(_FINISH.format(state=", state = ?", thread="NULL"))
"""Params: status, updated_at, result, error, state, iid, token."""
FINISH_ON_THREAD = Stmt(_FINISH.format(state="", thread="NOT NULL"))
"""The invocation half of finishing one on a thread; :data:`FREE_THREAD_COMPLETED`
or :data:`FREE_THREAD_FAILED` follows in the same transaction. Params as
:data:`FINISH_INVOCATION`."""
FINISH_ON_THREAD_WITH_STATE = Stmt(_FINISH.format(state=", state = ?", thread="NOT NULL"))
"""Params as :data:`FINISH_INVOCATION_WITH_STATE`."""

INSERT_EVENT = Stmt("""
    INSERT INTO hayata_events (invocation_id, seq, type, data, created_at)
    VALUES (?, ?, ?, ?, ?) ON CONFLICT (invocation_id, seq) DO NOTHING
""")
"""One event of the log, written with the finish of its invocation (an event
already stored changes no row: the fast transaction then rolls back and the
general path writes). Params: iid, seq, type, data, created_at."""

_FREE_THREAD = """
    UPDATE hayata_threads SET {carry} running_invocation_id = NULL, updated_at = ?
    WHERE agent_id = (SELECT agent_id FROM hayata_invocations WHERE invocation_id = ?)
        AND thread_id = (SELECT thread_id FROM hayata_invocations WHERE invocation_id = ?)
        AND running_invocation_id = ? AND queue_length = 0
"""
# ``queue_length = 0`` is a column of the row being updated, so on PostgreSQL a
# concurrent enqueue (which increments it) is seen even when this statement
# waited for that enqueue's row lock; a NOT EXISTS on the queue table would be
# evaluated on the statement's older snapshot. A thread with queued runs
# changes nothing here: the general path starts the next one.
FREE_THREAD_COMPLETED = Stmt(_FREE_THREAD.format(carry="""
    state = (SELECT state FROM hayata_invocations WHERE invocation_id = ?),
    version = version + 1,"""))
"""After :data:`FINISH_ON_THREAD`: the invocation's (just written) state
becomes the thread's, version + 1, the thread is freed. Params: iid,
updated_at, iid, iid, iid."""
FREE_THREAD_FAILED = Stmt(_FREE_THREAD.format(carry=""))
"""After :data:`FINISH_ON_THREAD` of a failed invocation: the thread is freed,
its state kept. Params: updated_at, iid, iid, iid."""

TAKE_THREAD = Stmt(
    """
    INSERT INTO hayata_threads (agent_id, thread_id, state, version, running_invocation_id,
        queue_length, created_at, updated_at)
    SELECT ?, ?, ?, 0, ?, 0, ?, ?
    WHERE coalesce(?, 0) = 0
        OR EXISTS (SELECT 1 FROM hayata_threads WHERE agent_id = ? AND thread_id = ?)
    ON CONFLICT (agent_id, thread_id) DO UPDATE
        SET running_invocation_id = excluded.running_invocation_id,
            updated_at = excluded.updated_at
        WHERE hayata_threads.running_invocation_id IS NULL
            AND hayata_threads.version = coalesce(?, hayata_threads.version)
    """
)
"""Create the thread running the new invocation, or make a free thread at the
expected version (``NULL``: any) run it; changes no row if the thread is busy
or at another version (an absent thread is at version 0). The conditions are
on the row itself, rechecked on PostgreSQL after waiting for a concurrent
writer of it. Params: agent_id, thread_id, state, iid, created_at, updated_at,
thread_version, agent_id, thread_id, thread_version."""

_CREATE = """
    INSERT INTO hayata_invocations (invocation_id, agent_id, status, format_version,
        created_at, updated_at, token, owner, lease_expires_at, step, state, input,
        active_execution, parallel_results, last_result, result, error, thread_id)
    SELECT ?, ?, 'running', ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
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
``invocation_values``), thread_id, iid, agent_id. On PostgreSQL it runs
after :data:`PG_AGENT_LOCK` in one transaction: nothing else (no unique index
since ``0002_threads``) keeps two concurrent creates from both seeing the
agent free."""
CREATE_INVOCATION_LIMITED = Stmt(_CREATE.format(check="""
    AND (SELECT count(*) FROM hayata_invocations
         WHERE agent_id = ? AND status = 'running') < ?"""))
"""Create unless the agent runs ``max_running`` (> 1) invocations: the params of
:data:`CREATE_INVOCATION`, then max_running; after :data:`PG_AGENT_LOCK` on
PostgreSQL."""
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


def create_statements(
    is_sqlite: bool, iid: str, agent_id: str, thread_id: str | None, values: dict[str, Any],
    *, owner: str, now: float, expires: float | None, max_running: int | None,
    thread_version: int | None,
) -> Statements:
    """The fast create as one transaction: take the thread (if any), lock the
    agent (PostgreSQL, with a limit), insert. ``values``: the eight encoded
    value columns (``invocation_values``)."""
    params = (iid, agent_id, FORMAT_VERSION, now, now, owner, expires, values["step"],
              values["state"], values["input"], values["active_execution"],
              values["parallel_results"], values["last_result"], values["result"],
              values["error"], thread_id, iid)
    out: Statements = []
    if thread_id is not None:
        out.append((TAKE_THREAD, (
            agent_id, thread_id, values["state"], iid, now, now, thread_version,
            agent_id, thread_id, thread_version)))
    if max_running is None:
        out.append((CREATE_INVOCATION_UNLIMITED, params))
        return out
    if not is_sqlite:
        out.append((PG_AGENT_LOCK, (agent_id,)))
    if max_running == 1:
        out.append((CREATE_INVOCATION, (*params, agent_id)))
    else:
        out.append((CREATE_INVOCATION_LIMITED, (*params, agent_id, max_running)))
    return out


def checkpoint_statement(iid: str, token: int, values: dict[str, Any], now: float
                         ) -> tuple[Stmt, Sequence[Any]]:
    """The fenced overwrite of a running invocation's checkpoint. ``values``: the
    five encoded checkpoint columns (``checkpoint_values``)."""
    return (CHECKPOINT, (now, values["step"], values["state"], values["active_execution"],
                         values["parallel_results"], values["last_result"], iid, token))


def finish_statements(iid: str, token: int, status: str, now: float, values: dict[str, Any],
                      *, on_thread: bool) -> Statements:
    """The fast finish of an invocation as one transaction: the invocation's row,
    and for one on a thread whose queue is empty (``on_thread``) the thread's
    row too. ``values``: encoded result, error and (optional) state
    (``finish_values``)."""
    params = (status, now, *values.values(), iid, token)
    if not on_thread:
        stmt = FINISH_INVOCATION if "state" not in values else FINISH_INVOCATION_WITH_STATE
        return [(stmt, params)]
    stmt = FINISH_ON_THREAD if "state" not in values else FINISH_ON_THREAD_WITH_STATE
    if status == "completed":
        return [(stmt, params), (FREE_THREAD_COMPLETED, (iid, now, iid, iid, iid))]
    return [(stmt, params), (FREE_THREAD_FAILED, (now, iid, iid, iid))]


def start_statements(row: dict[str, Any], *, token: int, attempt: int,
                     system_instance: str | None, now: float,
                     checkpoint: dict[str, Any] | None = None) -> Statements:
    """A task's first start: the fenced insert of its ``started`` row, after the
    step's checkpoint when one rides along (both or neither). ``row``: the
    task's encoded columns (``task_values``); ``checkpoint``: the encoded
    checkpoint columns, checked against the task (``start_checkpoint_values``).
    Every path that records a start builds it here."""
    iid = row["invocation_id"]
    params = (row["task_id"], iid, row["execution_id"], row["step"], row["node_id"],
              row["branch_index"], row["input"], row["result"], row["error"], attempt, now,
              system_instance, False, iid, token)
    start = (START_NEW_TASK, params)
    if checkpoint is None:
        return [start]
    return [checkpoint_statement(iid, token, checkpoint, now), start]


def end_statement(task_id: str, token: int, ok: bool, value: Any, now: float
                  ) -> tuple[Stmt, Sequence[Any]]:
    """The fenced statement of a task's end: completed with ``value`` as its
    result (``ok``), or failed with ``value`` as its error dict."""
    column = "result" if ok else "error"
    return ((COMPLETE_TASK if ok else FAIL_TASK),
            (now, encode(value, key=column), task_id, token))
