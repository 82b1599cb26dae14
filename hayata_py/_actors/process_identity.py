"""A process known by pid *and* start time, so that a reused pid is never taken
for the process it replaced."""

from __future__ import annotations

import os

import psutil

Identity = tuple[int, float]


def identity(pid: int) -> Identity | None:
    """``pid`` with its start time, or None if it is gone already."""
    try:
        return pid, psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return None


def running(who: Identity | None, *, child: bool = False) -> bool:
    """True while that very process runs (not a zombie; with ``child``, still a
    child of this process)."""
    if who is None:
        return False
    try:
        proc = psutil.Process(who[0])
        return (proc.create_time() == who[1] and proc.status() != psutil.STATUS_ZOMBIE
                and (not child or proc.ppid() == os.getpid()))
    except psutil.NoSuchProcess:
        return False
