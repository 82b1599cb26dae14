"""One agent ref shared by many threads (``hayata serve``'s thousand runs):
one look-up of the agent's process answers them all, and an agent that is
only slow to answer is not forgotten (every caller would then ask its
supervisor, and a caller could read the address while another cleared it)."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

import hayata_py as hy
from hayata_py._errors import TimeoutError_

pytestmark = pytest.mark.timeout(30)

THREADS = 20


class Endpoint:
    """An actor system endpoint whose agent never answers."""

    def ask(self, _address: Any, _message: Any, _timeout: float) -> Any:
        return None

    def listen(self, _timeout: float) -> Any:
        return None


class LookedUp:
    """A system whose supervisor answers a look-up once ``callers`` look-ups
    wait, or after ``hold`` s (a busy supervisor)."""

    def __init__(self, callers: int = 1, hold: float = 0.0) -> None:
        self._system = Endpoint()
        self.lookups = 0
        self.callers = callers
        self.hold = hold
        self.cond = threading.Condition()

    def _agent_address(self, agent_id: str, via: Any = None,
                       timeout: float = 30.0) -> tuple[Any, int | None]:
        with self.cond:
            self.lookups += 1
            self.cond.notify_all()
            self.cond.wait_for(lambda: self.lookups >= self.callers, self.hold)
        return f"address-of-{agent_id}", os.getpid()


def test_threads_sharing_a_ref_share_one_lookup() -> None:
    system = LookedUp(callers=THREADS, hold=1.0)
    ref = hy.AgentRef(system, "busy")  # type: ignore[arg-type]
    found: list[Any] = []
    started = threading.Barrier(THREADS)

    def call() -> None:
        started.wait(10)
        found.append(ref._current_address())

    threads = [threading.Thread(target=call) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert found == ["address-of-busy"] * THREADS
    assert system.lookups == 1


def test_an_agent_slow_to_answer_keeps_its_address() -> None:
    system = LookedUp()
    ref = hy.AgentRef(system, "slow")  # type: ignore[arg-type]
    with pytest.raises(TimeoutError_, match="did not answer"):
        ref.status_info(timeout=0.05)
    assert ref._address == "address-of-slow"
    assert system.lookups == 1
