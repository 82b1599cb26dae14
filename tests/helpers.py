"""Test helpers: waiting on conditions with a deadline, never sleeping blindly."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

import psutil

import hayata_py as hy

T = TypeVar("T")


def eventually(
    probe: Callable[[], T | None], timeout: float = 10.0, interval: float = 0.005,
    message: str = "condition", error: type[AssertionError] = AssertionError,
) -> T:
    """Call ``probe`` until it returns something truthy; return it.

    Fails the test with ``message`` and the last value when ``timeout`` seconds
    pass (raising ``error``: the chaos campaign names its own). ``interval`` is
    the polling period, not a guess at how long things take.
    """
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise error(f"{message} not reached within {timeout}s (last: {last!r})")
        time.sleep(interval)


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as gone)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def stopped(pids: Iterable[int]) -> bool:
    """Has every process of ``pids`` stopped (or exited)? ``kill(SIGSTOP)`` only
    queues the signal: a process running on the other core, or inside a system
    call (the write of a side-effect line), stops when it returns to user mode,
    and what is read of its files or its store before then may still change."""
    for pid in pids:
        try:
            status = psutil.Process(pid).status()
        except psutil.NoSuchProcess:
            continue
        if status not in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
            return False
    return True


def group_members(group: int) -> set[int]:
    """The processes of the process group ``group``."""
    members: set[int] = set()
    for pid in psutil.pids():
        with contextlib.suppress(ProcessLookupError):  # gone meanwhile: not a member
            if os.getpgid(pid) == group:
                members.add(pid)
    return members


def freeze(pid: int, timeout: float = 30.0) -> None:
    """SIGSTOP ``pid`` and return once it has stopped (:func:`stopped`)."""
    os.kill(pid, signal.SIGSTOP)
    eventually(lambda: stopped([pid]), timeout, message=f"pid {pid} stopped")


def pids(system: Any) -> set[int]:
    """Pids of every live process of ``system`` (a System or an AgentSystem)."""
    return {p.pid for p in system.processes()}


def walk(tree: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every row of an ``AgentSystem.tree()``, depth first."""
    yield tree
    for child in tree.get("children", []):
        yield from walk(child)


def find(tree: dict[str, Any], role: str, ident: str | None = None) -> dict[str, Any] | None:
    """The first row of ``tree`` with ``role`` (and id ``ident``), or None."""
    return next((r for r in walk(tree) if r["role"] == role
                 and (ident is None or r["id"] == ident)), None)


def lease_row(url: str, invocation_id: str) -> tuple[str, int, float | None]:
    """(owner, token, lease expiry) of an invocation, read from the database."""
    from tests.store.util import raw_execute

    rows = raw_execute(url, "SELECT owner, token, lease_expires_at FROM hayata_invocations "
                            "WHERE invocation_id = :i", i=invocation_id)
    assert rows, invocation_id
    owner, token, expires = rows[0]
    return str(owner), int(token), expires


def in_thread(call: Callable[[], Any]) -> Future[Any]:
    """Run ``call`` in a thread; its future holds what it returned or raised."""
    future: Future[Any] = Future()

    def run() -> None:
        try:
            future.set_result(call())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            future.set_exception(exc)

    threading.Thread(target=run, daemon=True).start()
    return future


def race(*calls: Callable[[], Any], timeout: float = 60.0) -> list[Any]:
    """Run ``calls`` in threads released at the same moment (a barrier); return
    what each returned or raised (the exception object), in order."""
    barrier = threading.Barrier(len(calls))

    def released(call: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            barrier.wait()
            return call()
        return run

    futures = [in_thread(released(call)) for call in calls]
    return [f.exception(timeout) or f.result() for f in futures]


def collect(agent: hy.AgentRef, inv: str, timeout: float = 60.0
            ) -> tuple[list[hy.AgentEvent], hy.AgentResult]:
    """The events of a streamed ``hy.CALLER`` run, in order, and its result (the last message)."""
    messages = list(agent.messages(inv, timeout=timeout))
    result = messages[-1]
    assert isinstance(result, hy.AgentResult), messages
    return [m for m in messages if isinstance(m, hy.AgentEvent)], result


def assert_logged(store: Any, invocation_id: str, events: Sequence[Any]) -> None:
    """The invocation's stored event log is gap-free from 1, and every event in
    ``events`` (what a live subscriber saw, in order: consecutive sequences) is in
    it, equal, under its sequence."""
    stored = {e.sequence: e for e in store.get_events(invocation_id)}
    assert sorted(stored) == list(range(1, len(stored) + 1)), sorted(stored)
    if events:
        first = events[0].sequence
        assert [e.sequence for e in events] == list(range(first, first + len(events)))
    for event in events:
        kept = stored.get(event.sequence)
        assert kept is not None, f"event {event.sequence} ({event.type}) is not in the log"
        assert (kept.type, kept.data) == (event.type, event.data), (kept, event)


def interruptible() -> None:
    """``preexec_fn`` of a child that a test stops with SIGINT (Ctrl-C): a shell
    without job control starts background jobs with SIGINT ignored, and a child
    inherits that, so a suite started in the background would send Ctrl-C to
    children that ignore it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
