"""Refuse to start on storage nothing can be written to.

A system whose data directory or SQLite store sits on a read-only filesystem
(remounted ``ro`` after errors, a host booted onto a read-only disk) could
record nothing: no run, no task, no recovery. :func:`refuse_read_only` checks
both before anything opens the store or starts a process, and raises
:class:`ReadOnlyStorage` (``read_only_storage``) naming the path and the fix.
The check is the kernel's own answer (``access(2)`` with ``W_OK`` is refused
with ``EROFS`` on a read-only mount, for root too), so nothing is written to
find out.
"""

from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy as sa

from hayata_py._errors import ReadOnlyStorage


def sqlite_path(store_url: str) -> Path | None:
    """The database file of a SQLite ``store_url`` (None: another backend, or in memory)."""
    url = sa.make_url(store_url)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return Path(url.database).expanduser().resolve()


def _existing(path: Path) -> Path:
    """``path``, or its nearest existing ancestor (where it would be created)."""
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def refuse_read_only(data_dir: Path, store_url: str) -> None:
    """Raise :class:`ReadOnlyStorage` if ``data_dir`` (its logs) or the SQLite
    store of ``store_url`` (its database file and the directory SQLite writes
    its ``-wal``/``-shm`` files to) cannot be written."""
    db = sqlite_path(store_url)
    where = [("data directory", _existing(data_dir))]
    if db is not None:
        where.append(("SQLite store directory", _existing(db.parent)))
        if db.exists():
            where.append(("SQLite store", db))
    for what, path in where:
        if not os.access(path, os.W_OK):
            raise ReadOnlyStorage(
                f"cannot start: the {what} {path} is not writable (a read-only "
                f"filesystem?), so nothing could be recorded; the store was not changed. "
                f"Make it writable (e.g. mount -o remount,rw) or choose another data_dir "
                f"/ store_url, then start again (recover() finishes interrupted runs).",
                path=str(path), data_dir=str(data_dir), store_url=store_url)
