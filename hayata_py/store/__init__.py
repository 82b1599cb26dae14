"""Durable task store for crash recovery.

:class:`TaskStore` is the contract (see its module docs for the guarantees);
:func:`open_store` returns the SQLAlchemy implementation for a SQLite or
PostgreSQL URL, and :func:`default_store_url` the SQLite file under a data
directory. :func:`classify_task` / :func:`classify_execution` turn task records
into recovery decisions without touching the database.
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
    from hayata_py.store._sqlalchemy import SqlTaskStore, default_store_url, open_store

_LAZY = {"SqlTaskStore", "default_store_url", "open_store"}


def __getattr__(name: str) -> Any:
    # SQLAlchemy costs ~0.5 s to import; load it only when a store is opened, so
    # that importing hayata_py (the CLI's --help, say) stays fast.
    if name in _LAZY:
        from hayata_py.store import _sqlalchemy

        return getattr(_sqlalchemy, name)
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
