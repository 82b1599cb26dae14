"""The few OS facts supervision needs: parent-death signal, pids, kills."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

import psutil

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent process dies.

    This is the Erlang link between a supervisor and its children: when a
    supervisor is killed (even by SIGKILL), its whole subtree dies with it, so
    a restarted supervisor never finds an old set of children still running.
    Linux only; elsewhere a no-op. If the parent died before this call, the
    process exits at once.
    """
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if parent == 1 or os.getppid() != parent:
        os._exit(70)


def host_id() -> str:
    """Identifies this host (its boot id): pids compare only on the same host."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        import socket

        return socket.gethostname()


def admin_reachable(admin: str, timeout: float = 0.25) -> bool:
    """True if something accepts a TCP connection at ``admin`` (``host:port``)."""
    import socket

    host, _, port = admin.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def _stat(pid: int) -> tuple[str, int, int] | None:
    """State letter, parent pid and start time (clock ticks since boot) of
    ``pid`` from ``/proc`` (one read), or None if it is gone or unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(b")") + 2:].split()
    return fields[0].decode(), int(fields[1]), int(fields[19])


def child_alive(pid: int | None, started: int = 0) -> bool:
    """True while ``pid`` is a running (non-zombie) child of this process and,
    if ``started`` (:func:`started_at`) is given, still the process that
    started then (the pid of a reaped child may be reused)."""
    if pid is None:
        return False
    if not sys.platform.startswith("linux"):
        try:
            proc = psutil.Process(pid)
            return proc.ppid() == os.getpid() and proc.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
    stat = _stat(pid)
    return (stat is not None and stat[0] not in ("Z", "X") and stat[1] == os.getpid()
            and (not started or stat[2] == started))


def process_alive(pid: int) -> bool:
    """True while process ``pid`` (any process, not only a child) runs and is
    not a zombie: PID 1 of a container may never reap one. One read of
    ``/proc`` on Linux, psutil elsewhere."""
    if not sys.platform.startswith("linux"):
        try:
            return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
        except psutil.NoSuchProcess:
            return False
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def started_at(pid: int) -> int:
    """When process ``pid`` started, in clock ticks since boot (0 if gone or
    unknown): with the pid, it names one process for good."""
    stat = _stat(pid) if sys.platform.startswith("linux") else None
    return 0 if stat is None else stat[2]


def wait_child_exit(pid: int | None, timeout: float) -> bool:
    """Wait until child ``pid`` has exited (zombie or reaped); SIGKILL it at ``timeout``.

    A child that said goodbye exits within milliseconds; waiting here (without
    reaping, which Thespian does) lets "stopped" mean "no process left".
    Returns whether the process exited by itself.
    """
    if pid is None:
        return True
    deadline = time.monotonic() + timeout
    while True:
        try:
            proc = psutil.Process(pid)
            if proc.ppid() != os.getpid() or proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= deadline:
            kill_child_process(pid)
            return False
        time.sleep(0.001)


def kill_child_process(pid: int | None) -> bool:
    """SIGKILL ``pid`` if it is still a live child of this process.

    The parent check guards against pid reuse: a pid is only killed while it
    still belongs to the child we started. Returns whether a signal was sent.
    """
    if pid is None:
        return False
    try:
        proc = psutil.Process(pid)
        if proc.ppid() != os.getpid() or proc.status() == psutil.STATUS_ZOMBIE:
            return False
        os.kill(pid, signal.SIGKILL)
        return True
    except (psutil.NoSuchProcess, ProcessLookupError):
        return False
