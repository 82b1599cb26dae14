"""Supervision across actor systems of one convention (several "hosts" on loopback).

Each system is a real Thespian system with its own admin port and session;
members join the leader's convention. A child whose ``requirements`` only a
member satisfies runs in that member (a *remote* child): these tests check it
is placed there, restarted when it dies or crashes, stopped when asked, and
restarted elsewhere when its whole system is SIGKILLed (heartbeats: Thespian
itself never tells the parent).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass

import psutil
import pytest

from supervisors import (
    ChildInfo,
    ChildSpec,
    Start,
    StartFailed,
    SupervisorFlags,
    SupervisorRef,
    System,
)
from supervisors._errors import SupervisorError
from tests.helpers import eventually, in_thread, pids
from tests.sup_actors import Echo, SlowStart, Stubborn

PERIOD = 1.0  # convention re-registration period (s)
HEARTBEAT = 0.1
MISSES = 3
FLAGS = SupervisorFlags(intensity=5, period=10, heartbeat=HEARTBEAT, heartbeat_misses=MISSES)


@dataclass
class Cluster:
    leader: System
    members: list[System]

    def member(self, capabilities: dict[str, object]) -> System:
        system = System(convention_leader=("127.0.0.1", self.leader.admin_port),
                        capabilities=capabilities, convention_period=PERIOD,
                        convention_misses=2)
        self.members.append(system)
        return system


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    leader = System(convention_period=PERIOD, convention_misses=2)
    c = Cluster(leader, [])
    try:
        yield c
    finally:
        # Leader first: its supervisors stop their remote children in order.
        for system in [leader, *c.members]:
            try:
                system.shutdown(timeout=10)
            except Exception:  # noqa: BLE001 - whatever failed, kill what is left
                system.kill()


def gpu_child(child_id: str = "w", actor: type = Echo, **spec: object) -> ChildSpec:
    return ChildSpec(child_id, Start(actor, requirements={"gpu": True}), **spec)  # type: ignore[arg-type]


def running(sup: SupervisorRef, child_id: str, not_pid: int | None = None) -> ChildInfo | None:
    for info in sup.which_children():
        if info.id == child_id and info.status == "running" and info.pid != not_pid:
            return info
    return None


def test_child_is_placed_on_the_member_that_has_the_capability(cluster: Cluster) -> None:
    member = cluster.member({"gpu": True})
    sup = cluster.leader.start_supervisor("top", FLAGS, [gpu_child(), ChildSpec("local", Echo)])
    remote, local = sup.which_children()
    assert remote.remote and remote.pid in pids(member)
    assert remote.pid not in pids(cluster.leader)
    assert not local.remote and local.pid in pids(cluster.leader)
    assert cluster.leader.ask(remote.address, ("pid",), 5) == remote.pid
    assert cluster.leader.ask(remote.address, "hello", 5) == "hello"


def test_a_matching_local_system_wins(cluster: Cluster) -> None:
    leader = System(capabilities={"gpu": True})
    try:
        sup = leader.start_supervisor("top", FLAGS, [gpu_child()])
        (info,) = sup.which_children()
        assert not info.remote and info.pid in pids(leader)
    finally:
        leader.shutdown()


def test_placement_no_system_satisfies_fails_fast_naming_the_requirements(
    cluster: Cluster,
) -> None:
    cluster.member({"gpu": True})
    sup = cluster.leader.start_supervisor("top", FLAGS, [])
    began = time.monotonic()
    with pytest.raises(StartFailed) as info:
        sup.start_child(ChildSpec("t", Start(Echo, requirements={"tpu": "v5"})), timeout=10)
    elapsed = time.monotonic() - began
    assert "no live actor system satisfies requirements {'tpu': 'v5'}" in str(info.value)
    assert elapsed < 2.0, elapsed
    assert sup.which_children() == []


def test_requirements_are_validated() -> None:
    with pytest.raises(SupervisorError, match=r"start\.requirements"):
        Start(Echo, requirements={"": 1})
    with pytest.raises(SupervisorError, match=r"start\.requirements"):
        Start(Echo, requirements=["gpu"])  # type: ignore[arg-type]
    with pytest.raises(SupervisorError, match="heartbeat"):
        SupervisorFlags(heartbeat=0)
    with pytest.raises(SupervisorError, match="convention_leader"):
        System(convention_leader=("127.0.0.1", "1900"))  # type: ignore[arg-type]


def test_sigkilled_remote_child_is_restarted_on_the_member(cluster: Cluster) -> None:
    member = cluster.member({"gpu": True})
    sup = cluster.leader.start_supervisor("top", FLAGS, [gpu_child()])
    (old,) = sup.which_children()
    assert old.pid is not None
    os.kill(old.pid, signal.SIGKILL)
    new = eventually(lambda: running(sup, "w", old.pid), message="remote child restarted")
    assert new.remote and new.pid in pids(member) and new.restarts == 1
    assert cluster.leader.ask(new.address, ("pid",), 5) == new.pid


def test_crashed_remote_child_is_killed_and_restarted(cluster: Cluster) -> None:
    """A pid kill from the leader cannot reach a remote child: it is told to exit."""
    member = cluster.member({"gpu": True})
    sup = cluster.leader.start_supervisor("top", FLAGS, [gpu_child()])
    (old,) = sup.which_children()
    assert old.pid is not None
    cluster.leader.tell(old.address, ("raise", "boom"))
    new = eventually(lambda: running(sup, "w", old.pid), message="crashed child restarted")
    assert new.pid in pids(member)
    eventually(lambda: old.pid not in pids(member), message="the crashed process is gone")


def test_stop_of_a_hung_remote_child_finishes(cluster: Cluster) -> None:
    member = cluster.member({"gpu": True})
    sup = cluster.leader.start_supervisor(
        "top", FLAGS, [gpu_child("s", Stubborn, shutdown=0.3)])
    (info,) = sup.which_children()
    began = time.monotonic()
    sup.terminate_child("s", timeout=10)
    assert time.monotonic() - began < 3.0
    eventually(lambda: info.pid not in pids(member), message="stubborn remote child gone")
    assert sup.which_children()[0].status == "terminated"


def test_whole_member_killed_child_restarts_on_another_member(cluster: Cluster) -> None:
    first = cluster.member({"gpu": True})
    sup = cluster.leader.start_supervisor("top", FLAGS, [gpu_child()])
    (old,) = sup.which_children()
    assert old.pid in pids(first)
    second = cluster.member({"gpu": True})
    killed_at = time.monotonic()
    first.kill()
    new = eventually(lambda: running(sup, "w", old.pid), timeout=10,
                     message="child restarted on the live member")
    detected = time.monotonic() - killed_at
    assert new.pid in pids(second)
    # Heartbeats: silent for HEARTBEAT * MISSES, checked every HEARTBEAT; plus a start.
    assert detected < HEARTBEAT * (MISSES + 1) + 2.0, detected
    assert cluster.leader.ask(new.address, ("pid",), 5) == new.pid


def test_child_waits_for_a_host_without_escalating(cluster: Cluster) -> None:
    """Its only host died: the restart waits for a system with the capability
    (a missing host is not a crash loop) and happens once one joins."""
    first = cluster.member({"gpu": True})
    sup = cluster.leader.start_supervisor(
        "top", SupervisorFlags(intensity=1, period=60, heartbeat=HEARTBEAT,
                               heartbeat_misses=MISSES),
        [gpu_child(), ChildSpec("local", Echo)])
    old, local = sup.which_children()
    first.kill()

    def waiting() -> bool:
        return sup.child("w").status == "waiting_for_placement"

    eventually(waiting, timeout=10, message="child waits for placement")
    assert sup.child("local").pid == local.pid  # nothing escalated
    second = cluster.member({"gpu": True})
    new = eventually(lambda: running(sup, "w", old.pid), timeout=15,
                     message="child placed on the new member")
    assert new.pid in pids(second)
    assert cluster.leader.ask(new.address, ("pid",), 5) == new.pid


def test_remote_child_exits_when_its_supervisor_host_dies(cluster: Cluster) -> None:
    """No orphans: a remote child whose supervisor stopped pinging exits by itself."""
    member = cluster.member({"gpu": True})
    sup = cluster.leader.start_supervisor("top", FLAGS, [gpu_child()])
    (info,) = sup.which_children()
    cluster.leader.kill()
    # The child's watchdog allows 2 * heartbeat * misses + 2 s of silence.
    eventually(lambda: info.pid not in pids(member), timeout=10,
               message="orphaned remote child exits")


def test_members_stay_registered_over_many_periods(cluster: Cluster) -> None:
    """Regression: with only the re-registration period lowered, Thespian's
    restart period (3 min 22 s) kept members from re-registering and the leader
    dropped healthy members after ``misses`` periods."""
    cluster.member({"gpu": True})
    sup = cluster.leader.start_supervisor("top", FLAGS, [])
    deadline = time.monotonic() + 4 * PERIOD * 2  # four times the drop threshold
    n = 0
    while time.monotonic() < deadline:
        n += 1
        info = sup.start_child(gpu_child(f"w{n}"), timeout=10)
        assert info.remote
        sup.terminate_child(f"w{n}", timeout=10)
        sup.delete_child(f"w{n}", timeout=10)
        time.sleep(PERIOD / 2)  # the test is about time passing, not waiting for an event
    assert n >= 8


def test_shutdown_stops_remote_children(cluster: Cluster) -> None:
    member = cluster.member({"gpu": True})
    sup = cluster.leader.start_supervisor("top", FLAGS, [gpu_child("a"), gpu_child("b")])
    remote_pids = {i.pid for i in sup.which_children()}
    assert remote_pids <= pids(member)
    sup.shutdown(timeout=10)
    eventually(lambda: not (remote_pids & pids(member)), message="remote children stopped")
    with contextlib.suppress(Exception):
        cluster.leader.shutdown()


def test_connect_reaches_a_system_bound_to_another_address() -> None:
    """Attaching talks to the admin where it listens; it never starts a second
    admin on the default address."""
    import psutil

    with System(bind="127.0.0.2") as owner:
        sup = owner.start_supervisor("top", FLAGS, [ChildSpec("e", Echo)])
        # As in another process, where nothing says 127.0.0.2:
        os.environ["SUPERVISORS_BIND"] = os.environ["THESPIAN_BASE_IPADDR"] = "127.0.0.1"
        attached = System.connect(owner.admin_port)
        try:
            ref = SupervisorRef(attached, sup.address, "top", sup.pid)
            assert [c.id for c in ref.which_children()] == ["e"]
            listeners = {c.laddr.ip for c in psutil.net_connections(kind="tcp")
                         if c.status == psutil.CONN_LISTEN and c.laddr
                         and c.laddr.port == owner.admin_port}
            assert listeners == {"127.0.0.2"}
        finally:
            attached.shutdown()


def test_a_placed_child_whose_system_dies_during_its_start_fails_the_start(
    cluster: Cluster,
) -> None:
    """Its system dies while the child starts: Thespian never reports it and
    heartbeats have not begun, so without a deadline the supervisor would wait
    forever. It fails the start after ten heartbeat windows."""
    member = cluster.member({"gpu": True})
    sup = cluster.leader.start_supervisor("top", FLAGS, [])
    started = in_thread(lambda: sup.start_child(gpu_child("slow", SlowStart), timeout=30))
    eventually(lambda: [p for p in member.processes() if "SlowStart" in command_line(p)],
               timeout=15, message="the child is starting on the member")
    killed = time.monotonic()
    member.kill()
    error = started.exception(timeout=30)
    elapsed = time.monotonic() - killed
    assert isinstance(error, StartFailed), error
    assert "no answer within 3 s" in str(error) and "its system may have died" in str(error)
    assert elapsed < 10, elapsed
    assert sup.which_children() == []  # and the supervisor answers again


def test_one_miss_allowed_does_not_restart_healthy_children(cluster: Cluster) -> None:
    """Misses are counted in unanswered pings, so even heartbeat_misses=1 gives a
    healthy child a whole period to answer each ping."""
    cluster.member({"gpu": True})
    flags = SupervisorFlags(intensity=50, period=10, heartbeat=0.1, heartbeat_misses=1)
    sup = cluster.leader.start_supervisor("top", flags, [gpu_child()])
    (before,) = sup.which_children()
    time.sleep(1.5)  # fifteen heartbeats: time passing is what is tested
    (after,) = sup.which_children()
    assert after.restarts == 0 and after.pid == before.pid


def command_line(process: psutil.Process) -> str:
    """The process's command line; empty once it has exited (a listed process
    can be gone by the time it is read)."""
    try:
        return " ".join(process.cmdline())
    except psutil.NoSuchProcess:
        return ""


def test_a_locally_placed_child_stuck_in_its_start_is_killed() -> None:
    """The start deadline of a child with requirements also covers a child the
    local system hosts: it is SIGKILLed, not left behind."""
    with System(capabilities={"gpu": True}) as system:
        sup = system.start_supervisor("top", FLAGS, [])
        began = time.monotonic()
        with pytest.raises(StartFailed) as info:
            sup.start_child(gpu_child("slow", SlowStart), timeout=30)
        assert "no answer to its start within 3 s (killed)" in str(info.value)
        assert time.monotonic() - began < 10
        eventually(lambda: not [p for p in system.processes()
                                if "SlowStart" in command_line(p)],
                   timeout=5, message="the stuck child was killed")
