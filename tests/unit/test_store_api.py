"""The store package's public surface and URL helpers (no database server)."""

from __future__ import annotations

from pathlib import Path

import hayata_py.store as store_pkg
from hayata_py.store import default_store_url
from hayata_py.store._connect import normalize_url


def test_exports_are_pinned() -> None:
    """hayata_py.store exports exactly this sorted list."""
    assert store_pkg.__all__ == [
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
    assert all(hasattr(store_pkg, name) for name in store_pkg.__all__)


def test_default_store_url_creates_directory(tmp_path: Path) -> None:
    """default_store_url makes the directory and names hayata.db by absolute path."""
    target = tmp_path / "a" / "b"
    url = default_store_url(target)
    assert target.is_dir()
    assert url == f"sqlite:///{target.resolve() / 'hayata.db'}"


def test_plain_postgresql_url_uses_psycopg() -> None:
    """A postgresql:// URL is driven by psycopg 3."""
    assert normalize_url("postgresql://u@h/db").drivername == "postgresql+psycopg"
    assert normalize_url("sqlite:///x.db").drivername == "sqlite"
