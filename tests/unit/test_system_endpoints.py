"""A system's private per-thread endpoints: a thread's is closed once the
thread has ended (by the next new one), without a scan of every thread, and
a thread that outlives its system does not keep the system alive. No actor
system: the endpoints are stand-ins."""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any

import pytest

from supervisors._system import System

pytestmark = pytest.mark.timeout(30)


class Endpoint:
    def __init__(self) -> None:
        self.closed = False

    def exit_clone(self) -> None:
        self.closed = True


class Bookkeeping(System):
    """A :class:`System` with its endpoint bookkeeping only."""

    def __init__(self) -> None:  # no actor system
        self._init_endpoints()
        self._asys = Endpoint()  # the owner thread's (stands in for Thespian's handle)
        self.made: list[Endpoint] = []

    def new_endpoint(self) -> Any:
        self.made.append(Endpoint())
        return self.made[-1]


def _in_thread(fn: Any) -> None:
    thread = threading.Thread(target=fn)
    thread.start()
    thread.join(10)
    assert not thread.is_alive()


def test_an_ended_threads_endpoint_is_closed_by_the_next_new_one() -> None:
    system = Bookkeeping()
    assert system.endpoint() is not None and system.made == []  # the owner's own
    _in_thread(lambda: (system.endpoint(), system.endpoint()))  # one per thread
    [first] = system.made
    assert not first.closed and system._clones == {}  # its end noticed, not closed yet
    _in_thread(system.endpoint)
    assert first.closed and not system.made[1].closed


def test_a_dropped_endpoint_is_closed_at_once_and_a_new_one_made() -> None:
    system = Bookkeeping()
    seen: list[Any] = []

    def work() -> None:
        seen.append(system.endpoint())
        system.drop_endpoint()
        seen.append(system.endpoint())
    _in_thread(work)
    assert seen[0].closed and seen[0] is not seen[1] and not seen[1].closed


def test_a_thread_that_outlives_its_system_does_not_keep_it_alive() -> None:
    given = [Bookkeeping()]
    gone = weakref.ref(given[0])
    release, holding = threading.Event(), threading.Event()

    def hold() -> None:
        given.pop().endpoint()  # the thread keeps its endpoint, not the system
        holding.set()
        release.wait(10)
    thread = threading.Thread(target=hold)
    thread.start()
    assert holding.wait(10)
    gc.collect()
    try:
        assert gone() is None
    finally:
        release.set()
        thread.join(10)
