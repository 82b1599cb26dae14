"""The OS processes of an actor system: found by session and listening port,
killed and waited for as a group.

The admin double-forks and calls ``setsid()``, so it and every actor it
forks live in a session of their own: the session id names a system's
processes, whatever else runs on the machine.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable

import psutil


def listener_pid(port: int) -> int | None:
    """The admin's pid, found through the process listening on ``port``.

    The admin's logger inherits the listening socket and psutil names only one
    owner, so the listener may be the logger: the admin is found in the
    listener's session (:func:`session_admin`)."""
    owner = next(
        (conn.pid for conn in psutil.net_connections(kind="tcp")
         if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port
         and conn.pid is not None),
        None,
    )
    if owner is None:
        return None
    try:
        session = os.getsid(owner)
    except ProcessLookupError:
        return None
    return session_admin(session) or int(owner)


def session_admin(session_id: int) -> int | None:
    """The admin of the actor system in session ``session_id``: the session's
    process whose parent is the session's leader or outside the session.

    Thespian starts the admin in a process that calls ``setsid()`` (so it
    leads the session), forks the admin and exits; the leader is never the
    admin, though until it has exited it too has its parent outside the
    session. The admin's logger and actors have their parent inside it."""
    for proc in session_processes(session_id):
        try:
            if proc.pid == session_id:
                continue  # the leader: the process that forked the admin, exiting
            parent = proc.ppid()
            if parent <= 1 or parent == session_id or os.getsid(parent) != session_id:
                return int(proc.pid)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return None


def listener_address(port: int) -> str | None:
    """The IP address something listens on at ``port`` (None if unknown or any)."""
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
            ip = str(conn.laddr.ip)
            return None if ip in ("0.0.0.0", "::", "") else ip
    return None


def session_processes(session_id: int) -> list[psutil.Process]:
    """Every live (non-zombie) process of the session ``session_id``."""
    found = []
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == session_id and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (ProcessLookupError, PermissionError, psutil.NoSuchProcess):
            continue
    return found




def kill_all(procs: Iterable[psutil.Process]) -> None:
    for proc in procs:
        try:
            proc.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            continue


def wait_gone(procs: Iterable[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until every process exited (or is a zombie); return those left."""
    deadline = time.monotonic() + timeout
    left = list(procs)
    while left and time.monotonic() < deadline:
        _gone, left = psutil.wait_procs(left, timeout=min(0.05, deadline - time.monotonic()))
        left = [p for p in left if _alive(p)]
    return left


def _alive(proc: psutil.Process) -> bool:
    try:
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
