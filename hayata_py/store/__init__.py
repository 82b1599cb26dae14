"""Durable task store for crash recovery.

:class:`TaskStore` is the contract (see its module docs for the guarantees);
:func:`open_store` returns the SQLAlchemy implementation for a SQLite or
PostgreSQL URL, and :func:`default_store_url` the SQLite file under a data
directory. :func:`classify_task` / :func:`classify_execution` turn task records
into recovery decisions without touching the database.

Layout, following the contract:

* ``_contract.py``: :class:`TaskStore`, the whole contract in one class, in
  sections (invocations with their group commit and retention, ownership,
  threads, task records, node result cache, event log, lifecycle).
* ``_records.py`` (the records), ``_classify.py`` (pure recovery decisions),
  ``_rows.py`` (records to and from table rows) and ``_connect.py`` (how every
  connection is opened): shared by both write paths.
* ``_sql/``: the general SQL path (SQLAlchemy). One class per section of the
  contract, one module each (``invocations``, ``leases``, ``threads``,
  ``tasks``, ``cache``, ``events``), joined in ``store.py`` as
  :class:`SqlTaskStore`; ``base.py`` declares the state they share, once;
  ``engine.py``, ``schema.py`` and ``migrate.py`` run the database.
* ``_fast/``: the fast write path. ``statements.py`` holds the fenced
  statements of the hot writes and the one builder of each write's statements
  (a task's start is built in one place, whoever records it);
  ``transaction.py`` the one transaction that runs them, shared by the
  engine and the edge's ``TaskWriter`` (``writer.py``); ``writequeue.py`` and
  ``walsync.py`` how SQLite's writers take turns and reach the disk.

Why :class:`SqlTaskStore` joins one class per section rather than being
composed of parts: its sections are one object's methods over one engine.
None of them owns state of its own (each is queries over the same engine and
clock), and their writes meet inside each other's transactions (a create
takes its thread and counts its agent's invocations, a finish frees the
thread and starts its next run, a cached completion is a task write), which
parts behind interfaces would have to pass connections across. So the state
is declared once, in ``_sql/base.py``'s ``SqlBase``, which every section's
class extends (none re-declares an attribute of another), and the state that
does have a life of its own is a part: the engine (``EngineHolder``) and the
thread hints (``ThreadHints``). What sections share inside a transaction
(fencing, a thread's part of a create or finish, a task write) are plain
functions of the connection.
"""

from typing import TYPE_CHECKING, Any

from hayata_py.store._classify import (
    ExecutionClassification,
    MapClassification,
    TaskClass,
    classify_execution,
    classify_map,
    classify_task,
)
from hayata_py.store._contract import TaskStore
from hayata_py.store._records import (
    ActiveExecution,
    CachedResult,
    InvocationRecord,
    PruneReport,
    QueuedRun,
    StoredEvent,
    TaskRecord,
    ThreadRecord,
    task_id_for,
)

if TYPE_CHECKING:
    from hayata_py.store._sql.store import SqlTaskStore, default_store_url, open_store

_LAZY = {"SqlTaskStore", "default_store_url", "open_store"}


def __getattr__(name: str) -> Any:
    # SQLAlchemy costs ~0.5 s to import; load it only when a store is opened, so
    # that importing hayata_py (the CLI's --help, say) stays fast.
    if name in _LAZY:
        from hayata_py.store._sql import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ActiveExecution",
    "CachedResult",
    "ExecutionClassification",
    "InvocationRecord",
    "MapClassification",
    "PruneReport",
    "QueuedRun",
    "SqlTaskStore",
    "StoredEvent",
    "TaskClass",
    "TaskRecord",
    "TaskStore",
    "ThreadRecord",
    "classify_execution",
    "classify_map",
    "classify_task",
    "default_store_url",
    "open_store",
    "task_id_for",
]
