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


def child_alive(pid: int | None) -> bool:
    """True while ``pid`` is a running (non-zombie) child of this process."""
    if pid is None:
        return False
    try:
        proc = psutil.Process(pid)
        return proc.ppid() == os.getpid() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


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
