"""One ``select.poll`` set per thread, kept across turns of Thespian's
transport loop: what ``TCPTransport`` uses of a selector.

``TCPTransport._runWithExpiry`` built a ``selectors.DefaultSelector`` (an
epoll: one ``epoll_create``, one ``epoll_ctl`` per socket, a ``close``) on
every turn of its loop, about 36 us a turn. The ``poll_selector`` patch hands
that module :data:`SELECTORS` instead of ``selectors``: a selector that keeps
one ``select.poll`` object per thread and only tells it what changed since
the last turn (see :class:`_ReusedSelector`)."""

from __future__ import annotations

import errno
import math
import os
import select
import selectors
import threading
import types
from typing import Any

_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE
_POLL_MASK = {_READ: select.POLLIN, _WRITE: select.POLLOUT,
              _READ | _WRITE: select.POLLIN | select.POLLOUT}
_EVENTS = {mask: events for events, mask in _POLL_MASK.items()}


def _fileno(fileobj: Any) -> int:
    """The descriptor, or ValueError, as ``selectors`` finds it."""
    fd = fileobj if isinstance(fileobj, int) else int(fileobj.fileno())
    if fd < 0:
        raise ValueError(f"Invalid file descriptor: {fd}")
    return fd


class _ReusedSelector:
    """What ``TCPTransport`` uses of a selector, on one ``select.poll`` kept
    for the life of the thread.

    Thespian's loop does, each turn: ``DefaultSelector()``, ``register`` each
    socket it waits on, ``select(delay)``, ``close()``. Here
    ``DefaultSelector()`` returns the thread's instance with this turn's
    registrations cleared; ``select`` first brings the poll set in line with
    them (unregister what is gone, register what is new or changed: no system
    call, a poll set lives in the process) and then makes the one ``poll``
    system call. Because a poll set holds descriptor numbers, not open files,
    a socket closed and its number reused by a new one between two turns is
    simply polled as the new one (an epoll kept across turns would have
    dropped it silently). Semantics kept from ``selectors``: a second
    registration of a descriptor raises ``KeyError``, a negative one
    ``ValueError``, the timeout is rounded up to the millisecond, hang-up and
    error count as both readable and writable; a closed descriptor raises
    ``OSError(EBADF)`` (epoll raised it at ``register``; both are inside the
    same ``try`` of Thespian's loop, whose ``EBADF`` path finds and drops the
    bad descriptor, and ``_check_fd`` relies on it).
    """

    _local = threading.local()

    def __init__(self) -> None:
        self._poll = select.poll()
        self._polled: dict[int, int] = {}  # fd -> poll mask, as the poll set holds it
        self._wanted: dict[int, int] = {}  # fd -> poll mask, this turn

    @classmethod
    def for_thread(cls) -> _ReusedSelector:
        sel: _ReusedSelector | None = getattr(cls._local, "selector", None)
        if sel is None:
            sel = cls._local.selector = cls()
        sel._wanted = {}
        return sel

    def register(self, fileobj: Any, events: int, data: Any = None) -> None:
        """As ``selectors`` registers, without building the key Thespian never reads."""
        mask = _POLL_MASK.get(events)
        if mask is None:
            raise ValueError(f"Invalid events: {events!r}")
        fd = _fileno(fileobj)
        if fd in self._wanted:
            raise KeyError(f"{fileobj!r} (FD {fd}) is already registered")
        self._wanted[fd] = mask

    def register_all(self, readers: list[Any], writers: list[Any]) -> None:
        """``register`` each of ``readers`` for reading, then each of ``writers``
        for writing (the same checks and errors, in the same order)."""
        wanted = self._wanted
        for mask, files in ((_POLL_MASK[_READ], readers), (_POLL_MASK[_WRITE], writers)):
            for fileobj in files:
                fd = fileobj if type(fileobj) is int and fileobj >= 0 else _fileno(fileobj)
                if fd in wanted:
                    raise KeyError(f"{fileobj!r} (FD {fd}) is already registered")
                wanted[fd] = mask

    def select(self, timeout: float | None = None
               ) -> list[tuple[selectors.SelectorKey, int]]:
        wanted, polled, poll = self._wanted, self._polled, self._poll
        if wanted != polled:  # most turns wait on the same sockets as the last
            for fd in [fd for fd in polled if fd not in wanted]:
                del polled[fd]
                poll.unregister(fd)
            for fd, mask in wanted.items():
                if polled.get(fd) != mask:
                    poll.register(fd, mask)
                    polled[fd] = mask
        ms = None if timeout is None else 0 if timeout <= 0 else math.ceil(timeout * 1e3)
        ready = []
        for fd, revents in poll.poll(ms):
            if revents & select.POLLNVAL:
                raise OSError(errno.EBADF, os.strerror(errno.EBADF))
            events = (_WRITE if revents & ~select.POLLIN else 0) | \
                (_READ if revents & ~select.POLLOUT else 0)
            key = selectors.SelectorKey(fd, fd, _EVENTS[wanted[fd]], None)
            ready.append((key, events & key.events))
        return ready

    def close(self) -> None:
        self._wanted = {}  # the poll set stays: the next turn diffs against it


SELECTORS = types.SimpleNamespace(DefaultSelector=_ReusedSelector.for_thread,
                                        EVENT_READ=_READ, EVENT_WRITE=_WRITE)
"""What ``TCPTransport`` sees as ``selectors`` under the ``poll_selector`` patch."""
