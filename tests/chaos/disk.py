"""The SQLite store's own filesystem, and the disk-full fault on it.

The campaign's SQLite database lives on a tmpfs of its own (:func:`tmpfs`,
mounted for the campaign and unmounted at its end, also on failure), so the
fault can fill that filesystem and free it again without touching the
machine's disks. Mounting needs root; without it the campaign fails (never
skips) with :class:`MountRefused`.

Why there is no read-only fault: Linux refuses ``mount -o remount,ro`` of a
filesystem (and of a bind mount of it) with ``EBUSY`` while any file on it is
open for writing, and every process of a running system keeps its pooled
SQLite connections (database, ``-wal``, ``-shm``) open read-write; ``chmod``
does not stop root, and ``chattr +i`` stops only new opens, not writes through
the descriptors already open. A read-only filesystem under a live system
would need a filesystem of our own (FUSE).
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from tests.chaos.campaign import Campaign, CampaignError, Run

SIZE = "64m"    # the tmpfs: room for a long campaign's database (~1 MB per 25 faults)
FULL_S = 0.6    # how long the disk stays full (the agent's writes come every few ms)
FILLER = "filler"


class MountRefused(CampaignError):
    """The tmpfs for the SQLite store could not be mounted (or unmounted)."""


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


@contextlib.contextmanager
def tmpfs(path: Path, size: str = SIZE) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` for the duration; unmounted after
    (lazily if something still holds it open), even when the body fails."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = _run("mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "hayata-chaos",
                   str(path))
    if mounted.returncode != 0:
        raise MountRefused(f"the SQLite store faults need a tmpfs of their own (root, "
                           f"mount -t tmpfs): mount {path} failed: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        if _run("umount", str(path)).returncode != 0:
            lazy = _run("umount", "-l", str(path))
            if lazy.returncode != 0:
                raise MountRefused(f"umount {path} failed: {lazy.stderr.strip()}")


def store_dir(campaign: Campaign) -> Path:
    """The tmpfs the campaign's SQLite database is on."""
    db = Path(campaign.store_url.removeprefix("sqlite:///"))
    if not os.path.ismount(db.parent):
        raise CampaignError(f"{db.parent} is no mount point: the disk faults need the SQLite "
                            "store on a tmpfs of its own (tests/chaos/plan.py store_url)")
    return db.parent


def fill(path: Path) -> None:
    """Write ``path`` until its filesystem has not one free block."""
    stat = os.statvfs(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with contextlib.suppress(OSError):  # ENOSPC: a writer took a block meanwhile
            os.posix_fallocate(fd, 0, stat.f_bavail * stat.f_frsize)
        block = b"\0" * stat.f_frsize
        while True:
            try:
                os.write(fd, block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
    finally:
        os.close(fd)
    if os.statvfs(path.parent).f_bavail != 0:
        raise CampaignError(f"{path.parent} still has free blocks after the filler")


def _truncate_wal(db: Path) -> None:
    """Checkpoint and truncate the WAL (when nobody is in the way), so the next
    commit must grow it: on a full disk a commit into a reused WAL would need
    no new block at all."""
    conn = sqlite3.connect(db, timeout=0.05, isolation_level=None)
    try:
        with contextlib.suppress(sqlite3.OperationalError):  # busy: the fault may not bite
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    finally:
        conn.close()


def disk_full(campaign: Campaign, run: Run) -> str:
    """The SQLite store's filesystem full for :data:`FULL_S`, then freed: a write
    refused (``SQLITE_FULL``) keeps the run for recover()."""
    where = store_dir(campaign)
    _truncate_wal(where / Path(campaign.store_url).name)
    filler = where / FILLER
    try:
        fill(filler)
        time.sleep(FULL_S)  # the fault's duration: the disk stays full this long
    finally:
        filler.unlink(missing_ok=True)
    return "sqlite disk full"
