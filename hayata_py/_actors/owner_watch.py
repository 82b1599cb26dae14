"""No actor system outlives the process that owns it (``exit_with_owner``).

The admin double-forks into a session of its own, so no kernel link ties the
actor processes to the process that started the system: a kill -9 of that
process alone would leave them running. The top supervisor watches the owner
(by pid *and* start time, so a reused pid is never mistaken for it) from a
thread: on Linux through a pidfd, readable the moment the owner exits (a
zombie counts as gone), elsewhere by polling. Once the owner is gone it logs
``owner_gone`` and SIGKILLs every process of the system's session, itself
last.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
import time
from typing import Any

import psutil

__all__ = ["owner_identity", "watch_owner"]

POLL_SECONDS = 0.2
"""How often the owner is looked at where no pidfd tells at once."""


def owner_identity(pid: int | None = None) -> tuple[int, float]:
    """``(pid, start time)`` of process ``pid`` (default: this one)."""
    proc = psutil.Process(pid or os.getpid())
    return proc.pid, proc.create_time()


def _alive(owner: tuple[int, float]) -> bool:
    try:
        proc = psutil.Process(owner[0])
        return abs(proc.create_time() - owner[1]) < 0.01 \
            and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _wait_gone(owner: tuple[int, float]) -> None:
    """Return once the owner has exited."""
    fd: int | None = None
    with contextlib.suppress(OSError, AttributeError):
        fd = os.pidfd_open(owner[0])  # type: ignore[attr-defined,unused-ignore]
    try:
        # checked after opening: a pidfd of a reused pid would wait for a stranger
        if not _alive(owner):
            return
        if fd is not None:
            select.select([fd], [], [])
            return
        while _alive(owner):
            time.sleep(POLL_SECONDS)
    finally:
        if fd is not None:
            os.close(fd)


def _kill_session() -> None:
    """SIGKILL every process of this process's session, this one last."""
    me, session = os.getpid(), os.getsid(0)
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if proc.pid != me and os.getsid(proc.pid) == session \
                    and os.getpgid(proc.pid) != session:
                proc.send_signal(signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.killpg(session, signal.SIGKILL)  # the session's group: everyone at once
    os.kill(me, signal.SIGKILL)


def _watch(owner: tuple[int, float], log: Any) -> None:
    _wait_gone(owner)
    log.error("owner_gone", owner_pid=owner[0],
              message="the process that owns this actor system exited; ending every "
                      "process of the system")
    _kill_session()


def watch_owner(owner: tuple[int, float], log: Any) -> None:
    """Start the thread that ends this session once ``owner`` has exited."""
    threading.Thread(target=_watch, args=(owner, log), name="hayata-owner-watch",
                     daemon=True).start()
