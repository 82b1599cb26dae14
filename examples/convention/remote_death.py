# ruff: noqa: E501
"""Measure what the leader notices when a remote child, or its whole host, dies.

Run from the repository root (the knobs are Thespian's environment variables)::

    .venv/bin/python examples/convention/remote_death.py [--rereg 0:01] [--miss 3]

Scenario A: SIGKILL the remote child process alone.
Scenario B: SIGKILL every process of member 1's session (System.kill(), a host
crash) while member 2 (also gpu=True) is alive; a supervisor on the leader
has a remote child on member 1: is it told, and is the child restarted on
member 2? A Probe on the leader (a plain actor and dead-letter handler)
records ChildActorExited / DeadEnvelope / PoisonMessage / convention updates.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from examples.convention import _harness as h

ap = argparse.ArgumentParser()
ap.add_argument("--rereg", default="0:01", help="CONVENTION_REREGISTRATION_PERIOD (M:S)")
ap.add_argument("--miss", type=int, default=3, help="CONVENTION_REGISTRATION_MISS_MAX")
ap.add_argument("--restart", default=None,
                help="CONVENTION_RESTART_PERIOD (M:S; default = --rereg; 3:22 is Thespian's default "
                     "and makes healthy members miss their re-registrations)")
ap.add_argument("--wait", type=float, default=0.0, help="seconds to wait for detection (default 3*rereg*miss+3)")
ARGS = ap.parse_args()
LOG = h.configure(rereg=ARGS.rereg, miss_max=ARGS.miss, restart=ARGS.restart)

from examples.convention._actors import Probe, Spawn  # noqa: E402
from supervisors import ChildSpec, Start, Strategy, SupervisorFlags  # noqa: E402

WORKER = "examples.convention._actors.Worker"


def show(evts: list, since: float, label: str) -> None:
    for t, name, value in evts:
        if t >= since:
            print(f"  {label} +{(t - since) * 1000:8.1f} ms  {name} {value if value is not None else ''}")


def main() -> None:
    m, s = (int(x) for x in ARGS.rereg.split(":"))
    period = m * 60 + s
    wait = ARGS.wait or period * ARGS.miss + 3
    print(f"CONVENTION_REREGISTRATION_PERIOD={ARGS.rereg} CONVENTION_REGISTRATION_MISS_MAX={ARGS.miss}"
          f" CONVENTION_RESTART_PERIOD={ARGS.restart or ARGS.rereg}"
          f" (thespian log: {LOG})")
    leader = m1 = m2 = None
    try:
        leader = h.start_leader()
        m1 = h.start_member(leader.admin_port, gpu=True, host="m1")
        probe = leader.thespian.createActor(Probe)
        leader.ask(probe, "watch", 5)

        # -- A: the remote child alone ------------------------------------------
        info = leader.ask(probe, Spawn(WORKER), 10)
        assert info and info["sid"] == m1.session_id, info
        t0 = time.time()
        os.kill(info["pid"], 9)
        got = h.wait_for(lambda: h.first(h.events(leader, probe), "ChildActorExited", t0), 5, 0.002)
        print(f"A. remote child SIGKILLed: parent got ChildActorExited after "
              f"{(got[0] - t0) * 1000:.1f} ms" if got else "A. no ChildActorExited within 5 s")
        t1 = time.time()
        leader.ask(probe, "send_to_child", 5)
        time.sleep(0.5)
        show(h.events(leader, probe), t1, "A. send to dead child:")

        # -- B: the whole member host ---------------------------------------------
        m2 = h.start_member(leader.admin_port, gpu=True, host="m2")
        time.sleep(0.3)
        info = leader.ask(probe, Spawn(WORKER), 10)
        # make sure the probe's child is on m1 (placement balances by #remote actors)
        tries = 0
        while info["sid"] != m1.session_id and tries < 6:
            info = leader.ask(probe, Spawn(WORKER), 10)
            tries += 1
        print(f"B. probe child pid {info['pid']} on {'m1' if info['sid'] == m1.session_id else 'm2'}")
        sup = leader.start_supervisor(
            "sup", SupervisorFlags(Strategy.ONE_FOR_ONE, intensity=5, period=30),
            [ChildSpec("gpu", Start("examples.convention._actors.GpuChild"), shutdown=1.0)],
            timeout=10)
        child = sup.child("gpu")
        # Move the supervised child to m1 if it landed on m2.
        while os.getsid(child.pid) != m1.session_id and tries < 12:
            os.kill(child.pid, 9)
            time.sleep(0.2)
            child = sup.child("gpu")
            tries += 1
        on = "m1" if os.getsid(child.pid) == m1.session_id else "m2"
        print(f"B. supervised child pid {child.pid} on {on}")
        t2 = time.time()
        killed = m1.kill()
        print(f"B. killed m1 session: {len(killed)} processes")
        leader.ask(probe, "send_to_child", 5)
        restarted = None
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            c = sup.child("gpu", timeout=5)
            if c.pid not in (None, child.pid) and restarted is None:
                restarted = (time.time() - t2, c.pid, os.getsid(c.pid) == m2.session_id)
            if restarted and h.first(h.events(leader, probe), "ChildActorExited", t2):
                break
            time.sleep(0.05)
        show(h.events(leader, probe), t2, "B.")
        print(f"B. supervised child restarted after {restarted[0] * 1000:.0f} ms on "
              f"{'m2' if restarted[2] else '??'} (pid {restarted[1]})" if restarted
              else f"B. supervised child NOT restarted within {wait:.0f} s "
              f"(status {sup.child('gpu').status}, pid {sup.child('gpu').pid})")
    finally:
        h.cleanup(leader, m2, m1)


if __name__ == "__main__":
    main()
