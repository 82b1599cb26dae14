# ruff: noqa: E501
"""Who is the parent of a remotely created actor, and what PR_SET_PDEATHSIG does there.

Run from the repository root::

    .venv/bin/python examples/convention/pdeathsig.py

A supervisor on the leader gets a remote child (GpuChild, a SupervisedActor,
which sets PR_SET_PDEATHSIG); a Probe gets a remote plain Worker (no
PDEATHSIG). Then only the member's *admin* is SIGKILLed.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from examples.convention import _harness as h

h.configure(rereg="0:01")

import psutil  # noqa: E402

from examples.convention._actors import Probe, Spawn  # noqa: E402
from supervisors import ChildSpec, Start, Strategy, SupervisorFlags  # noqa: E402


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def main() -> None:
    leader = member = None
    try:
        leader = h.start_leader()
        member = h.start_member(leader.admin_port, gpu=True)
        probe = leader.thespian.createActor(Probe)
        plain = leader.ask(probe, Spawn("examples.convention._actors.Worker"), 10)
        sup = leader.start_supervisor(
            "sup", SupervisorFlags(Strategy.ONE_FOR_ONE, intensity=5, period=30),
            [ChildSpec("gpu", Start("examples.convention._actors.GpuChild"), shutdown=1.0)],
            timeout=10)
        child = sup.child("gpu")
        print(f"supervisor pid {sup.pid} (leader session {leader.session_id}); remote supervised "
              f"child pid {child.pid}, ppid {psutil.Process(child.pid).ppid()}, member admin "
              f"{member.admin_pid}; plain remote worker pid {plain['pid']} ppid {plain['ppid']}")
        os.kill(member.admin_pid, 9)
        time.sleep(0.5)
        print(f"after SIGKILL of the member admin only: supervised child alive={alive(child.pid)} "
              f"(PDEATHSIG), plain worker alive={alive(plain['pid'])} "
              f"(orphan, ppid now {psutil.Process(plain['pid']).ppid() if alive(plain['pid']) else '-'})")
        left = [p.pid for p in member.processes()]
        print(f"member session processes left: {left}")
    finally:
        h.cleanup(leader, member)


if __name__ == "__main__":
    main()
