"""Every child process's end seen: each reaped child reported, each admin's
launcher waited for.

- **Every child's death is reported** (the ``child_exits`` patch). Thespian
  4.0.1 reaps, while handling one ``ChildActorExited``, every other child
  process that is dead by then, and never reports those: two children killed
  a few milliseconds apart leave their parent believing one still runs.
  :func:`child_exited` reports each one it reaps.
- **No zombie per system start** (the ``launcher_reap`` patch). Thespian starts
  an admin through a process that forks the admin and exits, and detaches it
  from ``multiprocessing``, so nothing waits for it: each start left a zombie
  in the caller's process. :func:`detach_and_reap` waits for it, and notes
  it for :func:`admin_starters` (a start that fails kills what it began).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import thespian.system.multiprocCommon as _multiproc
from thespian.actors import ChildActorExited
from thespian.system.addressManager import CannotPickleAddress
from thespian.system.transport import TransmitIntent
from thespian.system.utilis import partition

__all__ = ["admin_starters", "child_exited", "detach_and_reap"]


def child_exited(self: Any, child_address: Any) -> None:
    """``MultiProcReplicator._childExited`` that loses no exit.

    Thespian calls it after the actor handled ``ChildActorExited(child_address)``
    and drops every dead child process from its table there. Its own version
    drops them silently; the ``SIGCHLD`` handler (``childDied``), which would
    have reported them, then finds nothing left to report. Here each dead child
    other than ``child_address`` gets its ``ChildActorExited``, exactly as
    ``childDied`` sends it: a child leaves the table only with its exit sent.
    """
    children = getattr(self, "_child_procs", [])
    self._child_procs, dead = partition(self._checkChildLiveness, children)
    for each in dead:
        address = getattr(each, "childRealAddr", each.childAddr)
        if address == child_address or each.childAddr == child_address:
            continue
        try:
            self.transport.scheduleTransmit(
                None, TransmitIntent(self.transport.myAddress, ChildActorExited(address)))
        except CannotPickleAddress:
            continue  # a child that never got a real address: nobody knows it


_THESPIAN_DETACH = _multiproc.detach_child
"""Thespian's own ``detach_child``, as imported (the ``launcher_reap`` patch replaces it)."""


def detach_and_reap(child: Any) -> None:
    """``detach_child`` that still waits, in a thread, for the admin's launcher
    (it exits as soon as it has forked the admin); actors' children are left to
    Thespian, which reaps them."""
    _THESPIAN_DETACH(child)
    if getattr(child, "name", None) == "ThespianAdmin":
        for noted in getattr(_STARTING, "lists", ()):
            noted.append(int(child.pid))
        threading.Thread(target=child.join, name="supervisors-reap", daemon=True).start()


_STARTING = threading.local()


@contextlib.contextmanager
def admin_starters() -> Iterator[list[int]]:
    """The pids of the processes Thespian forks in this thread, while in the
    block, to start an admin: each calls ``setsid()`` (so it leads the session
    of the admin it forks) and exits. Noted by the ``launcher_reap`` patch
    (none under ``SUPERVISORS_PLAIN_THESPIAN=1``)."""
    noted: list[int] = []
    lists: list[list[int]] = getattr(_STARTING, "lists", [])
    _STARTING.lists = [*lists, noted]
    try:
        yield noted
    finally:
        _STARTING.lists = lists
