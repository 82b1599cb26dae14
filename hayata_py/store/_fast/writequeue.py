"""A queue for SQLite's writers on one host: the next starts when the last commits.

SQLite has one write lock per database and no queue for it. A writer that
finds it taken polls (:func:`~hayata_py.store._fast.transaction._begin_immediate`,
every 0.1-2 ms), so after each commit the lock often sits free until a
sleeper wakes. The edges of parallel branches record their tasks at the same
moment: eight writers, sixteen commits, each waiting out a sleep (py-spy on
the edges of fanout8: 42% of their busy time asleep in that poll).

Each fast writer (the edge's :class:`~hayata_py.store._fast.writer.TaskWriter`,
the store's :meth:`~hayata_py.store._sql.engine.EngineHolder.write_all`) takes an
exclusive ``flock`` on ``<database>-wlock`` around its write transaction, and
the kernel wakes the next waiter the moment it is released. SQLite's lock
stays the only guard of the data: a writer that does not queue (the store's
general path, another program) still takes turns through it, and a queue
file that cannot be opened (a read-only or full filesystem) is skipped.

The kernel drops the lock of a process that dies. The holder writes its pid
into the file; a writer that finds the queue held by a stopped process
(SIGSTOP, a debugger: ``/proc/<pid>/stat``) does not wait for it and goes
straight to SQLite's lock, whose wait has a deadline. One stopped while
others already wait holds them until it goes on. Each thread of each
process opens the file on its own (its own open file description: ``flock``
excludes between those, not within one), so threads queue too and a forked
child never shares its parent's hold.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator

__all__ = ["WriteQueue", "queue_for"]


class _Fd:
    """One thread's open lock file (-1: it cannot be opened; no queue)."""

    __slots__ = ("fd", "pid")

    def __init__(self, fd: int, pid: int) -> None:
        self.fd, self.pid = fd, pid

    def __del__(self) -> None:  # the thread ended, or a forked child replaced it
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)  # a copy inherited over fork: the parent's stays


class WriteQueue:
    """The queue of one database file's writers."""

    def __init__(self, database: str) -> None:
        self.path = f"{database}-wlock"
        self._local = threading.local()

    def _fd(self) -> int:
        got: _Fd | None = getattr(self._local, "fd", None)
        pid = os.getpid()
        if got is None or got.pid != pid:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError:
                fd = -1
            got = self._local.fd = _Fd(fd, pid)
        return got.fd

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Wait for this writer's turn; it ends when the block does."""
        fd = self._fd()
        try:
            if fd >= 0:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    if _holder_stopped(fd):
                        fd = -1  # never wait on a frozen process: SQLite's lock alone
                    else:
                        fcntl.flock(fd, fcntl.LOCK_EX)
                if fd >= 0:
                    os.pwrite(fd, b"%10d" % os.getpid(), 0)  # who holds it
        except OSError:
            fd = -1  # no queue this time: SQLite's lock alone
        try:
            yield
        finally:
            if fd >= 0:
                fcntl.flock(fd, fcntl.LOCK_UN)


def _holder_stopped(fd: int) -> bool:
    """The process that holds the queue (its pid, written in the file by the
    holder) is stopped (state T or t)."""
    try:
        pid = int(os.pread(fd, 10, 0) or b"0")
        if pid <= 0:
            return False
        with open(f"/proc/{pid}/stat", "rb") as stat:
            state = stat.read().rpartition(b")")[2].split()[0]
    except (OSError, ValueError, IndexError):
        return False
    return state in (b"T", b"t")


_QUEUES: dict[str, WriteQueue] = {}
_QUEUES_LOCK = threading.Lock()


def queue_for(database: str) -> WriteQueue:
    """The queue of ``database`` (a file path) in this process."""
    queue = _QUEUES.get(database)
    if queue is None:
        with _QUEUES_LOCK:
            queue = _QUEUES.setdefault(database, WriteQueue(database))
    return queue
