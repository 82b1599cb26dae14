"""The SQLite store's own filesystem, and the disk-full fault on it.

The campaign's SQLite database lives on a tmpfs of its own (:func:`tmpfs`,
mounted for the campaign and unmounted at its end, also on failure), so the
fault can fill that filesystem and free it again without touching the
machine's disks. Mounting needs root (CI runs as root): as root a refused
mount fails the campaign with :class:`MountRefused`, never a skip; a user who
is not root (a laptop) gets the campaign without these two faults, and the
tests that need the mount are skipped with :data:`NOT_ROOT` as the reason
(shown in pytest's summary).

The read-only fault (:func:`read_only`) comes with a crash, as a read-only
disk usually does (a filesystem remounted ``ro`` after errors, a host
rebooted onto it): Linux refuses ``mount -o remount,ro`` (``EBUSY``) while
any file on the filesystem is open for writing, and every process of a live
system keeps its SQLite connections open read-write (``chmod`` does not stop
root, ``chattr +i`` only new opens), so the whole system is SIGKILLed first.
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

import hayata_py as hy
from supervisors._system import STARTED_SESSIONS
from tests.chaos.campaign import Campaign, CampaignError, Run, poll, read_effects

SIZE = "64m"    # the tmpfs: room for a long campaign's database (~1 MB per 25 faults)
FULL_S = 0.6    # how long the disk stays full (the agent's writes come every few ms)
FILLER = "filler"
REMOUNT_S = 10.0  # deadline for the killed system's files to be closed (remount ro)


ROOT = os.geteuid() == 0
"""Whether this user may mount the store's tmpfs (and so run the disk-full and
read-only faults)."""
NOT_ROOT = ("needs root to mount a tmpfs (the disk-full and read-only store faults); "
            "CI runs as root")


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


def _remount(where: Path, mode: str) -> subprocess.CompletedProcess[str]:
    return _run("mount", "-o", f"remount,{mode}", str(where))


def _contents(where: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(where.iterdir()) if p.is_file()}


def writers(where: Path) -> list[tuple[int, str]]:
    """(pid, path) of every file under ``where`` some process holds open for
    writing (what makes ``remount,ro`` fail with ``EBUSY``)."""
    out = []
    for pid in (name for name in os.listdir("/proc") if name.isdigit()):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue  # the process went away meanwhile (pathlib's glob raised here)
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                with open(f"/proc/{pid}/fdinfo/{fd}") as info:
                    flags = int(info.read().split()[3], 8)
            except (OSError, IndexError, ValueError):
                continue  # the process or the descriptor went away meanwhile
            if target.startswith(f"{where}/") and flags & (os.O_WRONLY | os.O_RDWR):
                out.append((int(pid), target))
    return out


def read_only(campaign: Campaign, run: Run) -> str:
    """The whole system SIGKILLed, the SQLite store's filesystem remounted
    read-only, a new system started on it: refused at once
    (``read_only_storage``, naming the store) with no process started and
    nothing changed; then remounted read-write and started (the campaign
    recovers the run)."""
    where = store_dir(campaign)
    campaign.sys.kill()
    campaign.sys.store.close()  # this process's own connections, open read-write
    try:
        poll(lambda: not writers(where), REMOUNT_S, f"no file under {where} open for writing")
    except CampaignError as exc:
        raise CampaignError(f"{exc}: {writers(where)}") from None
    remounted = _remount(where, "ro")
    if remounted.returncode != 0:
        raise MountRefused(f"remount,ro of {where} failed: {remounted.stderr.strip()}")
    try:
        store, effects = _contents(where), read_effects(run.effects)
        sessions = len(STARTED_SESSIONS)
        try:
            started = hy.AgentSystem(campaign.data, store_url=campaign.store_url)
        except hy.ReadOnlyStorage as exc:
            if str(where) not in exc.message or exc.code != "read_only_storage":
                raise CampaignError(f"the refusal names no store: {exc.code}: {exc}") from exc
        else:
            started.shutdown()
            raise CampaignError("a system started on a read-only store")
        if len(STARTED_SESSIONS) != sessions:
            raise CampaignError("the refused start left an actor system behind")
        if _contents(where) != store or read_effects(run.effects) != effects:
            raise CampaignError("the store or the side-effect file changed while read-only")
    finally:
        remounted = _remount(where, "rw")
        if remounted.returncode != 0:
            raise MountRefused(f"remount,rw of {where} failed: {remounted.stderr.strip()}")
    campaign.start()
    return "sqlite read-only"
