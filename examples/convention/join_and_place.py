# ruff: noqa: E501
"""Measure: a member joins a leader; an actor created on the leader lands on the member.

Run from the repository root::

    .venv/bin/python examples/convention/join_and_place.py

Prints join time, placement (pid/ppid/session of the remote actor versus the
member's admin and session), round trips both ways, what happens when no
system satisfies the placement, and whether supervisors can place children
remotely.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from examples.convention import _harness as h

h.configure(rereg="0:02")

from examples.convention._actors import Ping, Probe, Spawn  # noqa: E402
from supervisors import ChildSpec, Start, Strategy, SupervisorFlags  # noqa: E402


def main() -> None:
    leader = member = None
    try:
        leader = h.start_leader()
        probe = leader.thespian.createActor(Probe)
        assert leader.ask(probe, "watch", 5) == "ok"

        # 1. join
        t0 = time.time()
        member = h.start_member(leader.admin_port, gpu=True)
        t_started = time.time()
        joined = h.wait_for(lambda: h.first(h.events(leader, probe), "convention_update"), 10, 0.01)
        print(f"member System() returned in {t_started - t0:.3f}s; "
              f"leader saw the member {joined[0] - t0:.3f}s after start" if joined
              else "member never joined")
        print(f"leader admin pid {leader.admin_pid} sid {leader.session_id}; "
              f"member admin pid {member.admin_pid} sid {member.session_id}")

        # 2. placement of a plain actor by a capability only the member has
        for cls in ("examples.convention._actors.Worker",):
            t1 = time.time()
            info = leader.ask(probe, Spawn(cls), 10)
            print(f"{cls.rsplit('.', 1)[1]} created+answered in {(time.time() - t1) * 1000:.1f} ms: "
                  f"{info}; in member session: {info and info['sid'] == member.session_id}; "
                  f"parent is member admin: {info and info['ppid'] == member.admin_pid}")

        # 3. messages both ways (leader actor <-> remote actor, and external ask)
        worker = leader.thespian.createActor("examples.convention._actors.Worker")
        rtts = []
        for i in range(200):
            t = time.perf_counter()
            leader.ask(worker, Ping(i, 0.0), 5)
            rtts.append((time.perf_counter() - t) * 1000)
        print(f"external ask leader->remote: median {statistics.median(rtts):.2f} ms, "
              f"p95 {sorted(rtts)[189]:.2f} ms")
        leader.ask(probe, "callback", 5)
        cb = h.wait_for(lambda: h.first(h.events(leader, probe), "callback_pong"), 5)
        print(f"leader actor -> remote -> leader actor: {cb[1] * 1000:.2f} ms" if cb else "no callback")

        # 4. generic placement by requirements (targetActorRequirements)
        info = leader.ask(probe, Spawn("examples.convention._actors.PlacedWorker", {"gpu": True}), 10)
        # PlacedWorker is a SupervisedActor; unstarted, it still passes 'info' to on_receive.
        print(f"PlacedWorker(targetActorRequirements={{'gpu': True}}): {info}; "
              f"in member session: {info and info['sid'] == member.session_id}")

        # 5. no system satisfies the placement
        t2 = time.time()
        info = leader.ask(probe, Spawn("examples.convention._actors.PlacedWorker", {"tpu": True}), 3)
        print(f"no-match placement from an actor: createActor returned an address; the parent got "
              f"{info!r} after {(time.time() - t2) * 1000:.0f} ms")
        try:
            t3 = time.time()
            addr = leader.thespian.createActor("examples.convention._actors.Worker",
                                               targetActorRequirements={"tpu": True})
            print(f"external createActor(no match) returned {addr}")
        except Exception as exc:  # noqa: BLE001
            print(f"external createActor(no match) raised {type(exc).__name__}: {exc} "
                  f"after {(time.time() - t3) * 1000:.0f} ms")

        # 6. a supervised child placed remotely by an unmodified Supervisor
        t4 = time.time()
        sup = leader.start_supervisor(
            "sup", SupervisorFlags(Strategy.ONE_FOR_ONE, intensity=5, period=10),
            [ChildSpec("gpu", Start("examples.convention._actors.GpuChild"), shutdown=1.0)],
            timeout=10)
        child = sup.child("gpu")
        print(f"supervisor started with remote child in {(time.time() - t4) * 1000:.0f} ms; "
              f"child pid {child.pid} sid {os.getsid(child.pid)} "
              f"(member sid {member.session_id}), ppid {_ppid(child.pid)} "
              f"(member admin {member.admin_pid})")
        # SIGKILL the remote child alone: does the supervisor restart it?
        t5 = time.time()
        os.kill(child.pid, 9)
        again = h.wait_for(lambda: (lambda c: c if c.pid not in (None, child.pid) else None)(
            sup.child("gpu", timeout=5)), 10, 0.01)
        print(f"remote supervised child SIGKILLed: restarted in {(time.time() - t5) * 1000:.0f} ms"
              if again else "remote supervised child not restarted within 10 s")
        if again:
            print(f"  new pid {again.pid} in member session: {os.getsid(again.pid) == member.session_id}")
            # crash it (exception in a handler): the supervisor's kill_child_process
            # only kills its *own* children, so a remote crashed child is never killed.
            t6 = time.time()
            leader.tell(again.address, "crash")
            third = h.wait_for(lambda: (lambda c: c if c.pid not in (None, again.pid) else None)(
                sup.child("gpu", timeout=5)), 5, 0.05)
            print(f"remote supervised child crashed: restarted in {(time.time() - t6) * 1000:.0f} ms"
                  if third else f"remote crashed child NOT restarted within 5 s "
                  f"(pid {again.pid} alive: {_alive(again.pid)}, status {sup.child('gpu').status})")
    finally:
        h.cleanup(leader, member)


def _ppid(pid: int) -> int:
    import psutil
    return psutil.Process(pid).ppid()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


if __name__ == "__main__":
    main()
