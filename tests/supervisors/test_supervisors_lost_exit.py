"""Children that die together are each restarted: no exit is ever lost.

Thespian, after a parent handled one ``ChildActorExited``, reaps every other
child process dead by then without reporting it. A supervisor must learn of
every death however close together they come (OTP never loses an exit).
"""

from __future__ import annotations

import os
import signal
from functools import partial

import pytest

from supervisors import ChildInfo, ChildSpec, SupervisorFlags, SupervisorRef, System
from tests.helpers import alive, eventually
from tests.sup_actors import Echo

CHILDREN = 6
ROUNDS = 5


def _settled(sup: SupervisorRef, before: dict[str, int | None],
             replaced: set[str]) -> list[ChildInfo] | None:
    """The rows once every child runs under a live pid and each of ``replaced``
    has a new one (a lost exit leaves a row ``running`` with a dead pid)."""
    rows = sup.which_children()
    ok = len(rows) == CHILDREN and all(
        r.status == "running" and r.pid is not None and alive(r.pid) for r in rows
    ) and all(r.pid != before[r.id] for r in rows if r.id in replaced)
    return rows if ok else None


def _gone(pid: int) -> bool:
    return not alive(pid)


def _start(system: System) -> SupervisorRef:
    return system.start_supervisor(
        "top", SupervisorFlags(intensity=10 * CHILDREN * ROUNDS, period=5.0),
        [ChildSpec(f"c{i}", Echo) for i in range(CHILDREN)])


@pytest.mark.parametrize("killed", [2, 5, CHILDREN])
def test_children_killed_at_once_are_all_restarted(system: System, killed: int) -> None:
    sup = _start(system)
    for _round in range(ROUNDS):
        before = {r.id: r.pid for r in sup.which_children()}
        victims = set(list(before)[:killed])
        for child_id in sorted(victims):  # back to back: microseconds apart
            os.kill(before[child_id] or 0, signal.SIGKILL)
        rows = eventually(partial(_settled, sup, before, victims),
                          message=f"all {killed} killed children restarted")
        for row in rows:
            if row.id not in victims:
                assert row.pid == before[row.id], f"{row.id} was restarted needlessly"


def test_a_crash_and_a_kill_a_moment_later_are_both_restarted(system: System) -> None:
    """The crashed child is SIGKILLed by its supervisor; its sibling dies by
    another SIGKILL right after: both exits arrive within milliseconds."""
    sup = _start(system)
    for _round in range(ROUNDS):
        rows = sup.which_children()
        before = {r.id: r.pid for r in rows}
        crashed, killed = rows[1], rows[4]
        system.tell(crashed.address, ("raise", "boom"))
        eventually(partial(_gone, crashed.pid or 0), interval=0.0005,
                   message="crashed child killed")
        os.kill(killed.pid or 0, signal.SIGKILL)
        eventually(partial(_settled, sup, before, {crashed.id, killed.id}),
                   message="crashed and killed children restarted")
