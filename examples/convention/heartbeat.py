# ruff: noqa: E501
"""Measure a runtime heartbeat: detection latency of a dead host and its CPU cost.

Run from the repository root::

    .venv/bin/python examples/convention/heartbeat.py [--period 0.2] [--misses 3] [--seconds 10]

A Probe on the leader pings its remote child (on the member) every
``period`` seconds (``wakeupAfter``); a child is declared dead after
``period * misses`` seconds without a Pong. Prints CPU seconds used by both
systems over ``--seconds`` without and with the heartbeat, then SIGKILLs the
member's session and prints how long the heartbeat took to notice (and, for
comparison, when Thespian's convention noticed).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from examples.convention import _harness as h

ap = argparse.ArgumentParser()
ap.add_argument("--period", type=float, default=0.2)
ap.add_argument("--misses", type=int, default=3)
ap.add_argument("--seconds", type=float, default=10.0)
ARGS = ap.parse_args()
h.configure(rereg="0:01", miss_max=3)

import psutil  # noqa: E402

from examples.convention._actors import Heartbeat, Probe, Spawn  # noqa: E402
from supervisors._system import session_processes  # noqa: E402


def cpu(sessions: list[int]) -> float:
    total = 0.0
    for sid in sessions:
        for p in session_processes(sid):
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.NoSuchProcess:
                pass
    return total


def main() -> None:
    leader = member = None
    try:
        leader = h.start_leader()
        member = h.start_member(leader.admin_port, gpu=True)
        probe = leader.thespian.createActor(Probe)
        leader.ask(probe, "watch", 5)
        info = leader.ask(probe, Spawn("examples.convention._actors.Worker"), 10)
        assert info and info["sid"] == member.session_id, info
        sessions = [leader.session_id, member.session_id]
        time.sleep(1.0)
        c0 = cpu(sessions)
        time.sleep(ARGS.seconds)
        idle = cpu(sessions) - c0
        assert leader.ask(probe, Heartbeat(ARGS.period, ARGS.misses), 5) == "ok"
        c1 = cpu(sessions)
        time.sleep(ARGS.seconds)
        busy = cpu(sessions) - c1
        n = ARGS.seconds / ARGS.period
        print(f"CPU over {ARGS.seconds:.0f}s, both systems: idle {idle:.3f}s "
              f"({idle / ARGS.seconds * 100:.2f}% of one core), with {ARGS.period * 1000:.0f} ms pings "
              f"{busy:.3f}s ({busy / ARGS.seconds * 100:.2f}%); "
              f"~{(busy - idle) / n * 1e6:.0f} us CPU per ping round trip")
        t0 = time.time()
        member.kill()
        got = h.wait_for(lambda: h.first(h.events(leader, probe), "heartbeat_dead", t0), 10, 0.01)
        conv = h.wait_for(lambda: [e for e in h.events(leader, probe)
                                   if e[1] == "convention_update" and e[0] >= t0], 6, 0.05)
        print(f"member SIGKILLed: heartbeat ({ARGS.period * 1000:.0f} ms x {ARGS.misses}) declared the "
              f"child dead after {(got[0] - t0) * 1000:.0f} ms" if got else "heartbeat never fired")
        print(f"  convention (1 s x 3) noticed after {(conv[0][0] - t0) * 1000:.0f} ms"
              if conv else "  convention did not notice within 6 s")
    finally:
        h.cleanup(leader, member)


if __name__ == "__main__":
    main()
