"""Start, stop, shutdown timeouts, orphans, sockets, control requests, logs."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from supervisors import (
    BRUTAL_KILL,
    ChildSpec,
    Kind,
    Restart,
    Start,
    StartFailed,
    Strategy,
    SupervisorError,
    SupervisorFlags,
    SupervisorRef,
    System,
)
from tests.helpers import alive, eventually, in_thread
from tests.sup_actors import Echo, FailsToStart, SaysGoodbye, Stubborn, Tally


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_late_answer_to_an_earlier_ask_is_not_taken_for_a_start(system: System) -> None:
    """Found under load: a thread whose ask timed out got the late answer in
    its next call, a start, which failed with "no answer ('...')"."""
    echo, _pid = system.start_actor("echo", Start(Echo))
    assert system.ask(echo, ("block", 1.0), timeout=0.05) is None  # it comes later
    # another thread's answer from the echo comes after the late one was sent
    assert in_thread(lambda: system.ask(echo, ("pid",), timeout=30)).result(timeout=30)
    address, pid = system.start_actor("second", Start(Echo))
    assert pid and system.ask(address, ("pid",), timeout=30) == pid


def test_start_failure_stops_started_children_and_names_the_child(
    system: System, tmp_path: Path
) -> None:
    starts, stops = tmp_path / "starts", tmp_path / "stops"
    logs = {"start_log": str(starts), "stop_log": str(stops)}
    children = [
        ChildSpec("c1", Start(Echo, kwargs=logs)),
        ChildSpec("c2", FailsToStart),
        ChildSpec("c3", Start(Echo, kwargs=logs)),
    ]
    with pytest.raises(StartFailed) as err:
        system.start_supervisor("top", SupervisorFlags(), children)
    assert "'c2'" in str(err.value) and "refusing to start" in str(err.value)
    assert [line.split()[:2] for line in _lines(starts)] == [["start", "c1"]]
    assert [line.split()[:2] for line in _lines(stops)] == [["stop", "c1"]]
    c1_pid = int(_lines(starts)[0].split()[2])
    eventually(lambda: not alive(c1_pid), message="c1 gone")
    # Only the admin and its logger remain.
    eventually(lambda: len(system.processes()) == 2, message="supervisor gone")


def test_shutdown_stops_children_in_reverse_start_order(system: System, tmp_path: Path) -> None:
    stops = tmp_path / "stops"
    specs = [ChildSpec(n, Start(Echo, kwargs={"stop_log": str(stops)})) for n in "abcd"]
    sup = system.start_supervisor("top", SupervisorFlags(), specs)
    pids = [i.pid or 0 for i in sup.which_children()]
    sup.shutdown()
    assert [line.split()[1] for line in _lines(stops)] == ["d", "c", "b", "a"]
    eventually(lambda: not any(alive(p) for p in [*pids, sup.pid]), message="all gone")


def test_child_ignoring_stop_is_killed_after_its_shutdown_time(
    system: System, tmp_path: Path
) -> None:
    stops = tmp_path / "stops"
    kw = {"stop_log": str(stops)}
    sup = system.start_supervisor("top", SupervisorFlags(), [
        ChildSpec("first", Start(Echo, kwargs=kw)),
        ChildSpec("stubborn", Start(Stubborn, kwargs=kw), shutdown=0.3),
    ])
    stubborn = sup.child("stubborn").pid or 0
    began = time.monotonic()
    sup.shutdown()
    took = time.monotonic() - began
    assert took >= 0.3
    assert not alive(stubborn)
    assert [line.split()[1] for line in _lines(stops)] == ["stubborn", "first"]


def test_brutal_kill_skips_the_clean_stop(system: System, tmp_path: Path) -> None:
    stops = tmp_path / "stops"
    sup = system.start_supervisor("top", SupervisorFlags(), [
        ChildSpec("c", Start(Echo, kwargs={"stop_log": str(stops)}), shutdown=BRUTAL_KILL)])
    pid = sup.child("c").pid or 0
    sup.terminate_child("c")
    assert not alive(pid)
    assert _lines(stops) == []
    assert sup.child("c").status == "terminated"


def test_what_a_child_sends_as_it_stops_arrives_even_with_a_timer_due(
        system: System) -> None:
    """A child sends 50 messages to a sibling as it exits, right after arming a
    timer that is due at once. Thespian ended the exit's drain of the sends at
    that timer and the process exited with them unsent (as the end of a run
    an agent sends its subscriber as it stops was lost when the flush timer of
    its event log fell due); every one arrives, in order."""
    sup = system.start_supervisor("top", SupervisorFlags(), [
        ChildSpec("tally", Tally), ChildSpec("leaving", SaysGoodbye)])
    tally, leaving = sup.child("tally").address, sup.child("leaving").address
    assert system.ask(leaving, ("listen", tally, 50), timeout=10) == "listening"
    sup.terminate_child("leaving")
    deadline = time.monotonic() + 10
    got = system.ask(tally, ("tally",), timeout=10)
    while len(got) < 50 and time.monotonic() < deadline:  # until all arrived, or the deadline
        time.sleep(0.01)
        got = system.ask(tally, ("tally",), timeout=10)
    assert got == list(range(50)), f"{len(got)} of 50 arrived"


def test_killed_child_supervisor_leaves_no_orphans(system: System) -> None:
    inner = Start("supervisors.Supervisor", (SupervisorFlags(intensity=5),
                                             [ChildSpec(n, Echo) for n in "xyz"]))
    top = system.start_supervisor("top", SupervisorFlags(intensity=5),
                                  [ChildSpec("sub", inner, kind=Kind.SUPERVISOR)])
    sub_info = top.child("sub")
    sub = SupervisorRef(system, sub_info.address, "sub", sub_info.pid or 0)
    old = [c.pid or 0 for c in sub.which_children()]
    count_before = len(system.processes())
    assert count_before == 2 + 1 + 1 + 3  # admin, logger, top, sub, x y z

    os.kill(sub_info.pid or 0, signal.SIGKILL)

    def new_sub() -> SupervisorRef | None:
        info = top.child("sub")
        if info.status != "running" or info.pid == sub_info.pid:
            return None
        return SupervisorRef(system, info.address, "sub", info.pid or 0)

    fresh = eventually(new_sub, message="sub restarted")
    # The kernel sent each old child SIGKILL as its supervisor died
    # (PR_SET_PDEATHSIG); on a loaded machine a child may finish dying only
    # after the restart, but it runs nothing more: gone within the deadline.
    for pid in old:
        eventually(lambda pid=pid: not alive(pid), timeout=10,
                   message=f"orphan {pid} survived its supervisor")
    new = [c.pid for c in fresh.which_children()]
    assert len(new) == 3 and not set(new) & set(old)
    assert len(system.processes()) == count_before


def test_every_listening_socket_is_on_loopback(system: System) -> None:
    system.start_supervisor("top", SupervisorFlags(), [ChildSpec("a", Echo)])
    listening = []
    for proc in system.processes():
        for conn in proc.net_connections(kind="inet"):
            if conn.status == psutil.CONN_LISTEN:
                listening.append(conn.laddr.ip)
    assert len(listening) >= 4  # admin, logger, supervisor, child
    assert all(ipaddress.ip_address(ip).is_loopback for ip in listening), listening


def test_which_children_reports_real_pids(system: System) -> None:
    sup = system.start_supervisor("top", SupervisorFlags(), [ChildSpec("a", Echo)])
    info = sup.child("a")
    assert info.pid is not None and info.pid != os.getpid()
    assert psutil.Process(info.pid).ppid() == sup.pid
    assert system.ask(info.address, ("pid",), 5) == info.pid
    assert sup.count_children() == type(sup.count_children())(1, 1, 0, 1)


def test_control_requests_and_their_errors(system: System) -> None:
    sup = system.start_supervisor("top", SupervisorFlags(), [ChildSpec("a", Echo)])
    with pytest.raises(SupervisorError) as err:
        sup.terminate_child("nope")
    assert err.value.code == "not_found"
    with pytest.raises(SupervisorError) as err:
        sup.start_child(ChildSpec("a", Echo))
    assert err.value.code == "running"
    with pytest.raises(SupervisorError) as err:
        sup.delete_child("a")
    assert err.value.code == "running"
    with pytest.raises(SupervisorError) as err:
        sup.restart_child("a")
    assert err.value.code == "running"

    b = sup.start_child(ChildSpec("b", Echo, restart=Restart.TRANSIENT))
    assert b.status == "running" and system.ask(b.address, ("pid",), 5) == b.pid
    sup.terminate_child("b")
    assert sup.child("b").status == "terminated" and not alive(b.pid or 0)
    with pytest.raises(SupervisorError) as err:
        sup.start_child(ChildSpec("b", Echo))
    assert err.value.code == "already_present"
    again = sup.restart_child("b")
    assert again.pid != b.pid and again.status == "running"
    sup.terminate_child("b")
    sup.delete_child("b")
    assert [c.id for c in sup.which_children()] == ["a"]

    with pytest.raises(StartFailed) as err2:
        sup.start_child(ChildSpec("bad", FailsToStart))
    assert err2.value.details["child_id"] == "bad"
    assert [c.id for c in sup.which_children()] == ["a"]


def test_simple_one_for_one_refuses_restart_by_id(system: System) -> None:
    sup = system.start_supervisor("pool", SupervisorFlags(Strategy.SIMPLE_ONE_FOR_ONE),
                                  [ChildSpec("w", Echo)])
    sup.start_child(())
    with pytest.raises(SupervisorError) as err:
        sup.delete_child("w-1")
    assert err.value.code == "not_supported"


def test_decisions_are_logged_with_ids_pids_and_reasons(system: System, log_file: Path) -> None:
    sup = system.start_supervisor("top", SupervisorFlags(), [ChildSpec("a", Echo)])
    info = sup.child("a")
    system.tell(info.address, ("raise", "kaboom"))
    eventually(lambda: sup.child("a").pid not in (None, info.pid), message="restart")
    sup.shutdown()

    def events() -> list[dict[str, object]] | None:
        rows = [json.loads(line) for line in log_file.read_text().splitlines()]
        names = [r["event"] for r in rows]
        wanted = ("child_started", "child_exited", "child_restarted", "supervisor_shutdown")
        return rows if all(w in names for w in wanted) else None

    rows = eventually(events, message="log lines")
    exited = next(r for r in rows if r["event"] == "child_exited")
    assert exited["supervisor_id"] == "top" and exited["child"] == "a"
    assert exited["child_pid"] == info.pid and exited["reason"] == "RuntimeError: kaboom"
    assert all("pid" in r for r in rows)


def test_thespian_log_records_go_to_the_system_log_not_the_terminal(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """What Thespian logs (its own errors, an actor's ``logging``) is a
    ``thespian_log`` line of the system's log; nothing of it reaches the stderr
    the system inherited (started here, so it inherits capfd's)."""
    log_file = tmp_path / "system.jsonl"
    with System(log_file=log_file) as system:
        sup = system.start_supervisor("top", SupervisorFlags(), [ChildSpec("a", Echo)])
        info = sup.child("a")
        assert system.ask(info.address, ("log", "an actor's own error line")) == "logged"

        def logged() -> dict[str, object] | None:
            rows = [json.loads(line) for line in _lines(log_file)]
            return next((r for r in rows if r["event"] == "thespian_log"), None)

        row = eventually(logged, message="thespian_log line")
    assert row["message"] == "an actor's own error line" and row["level"] == "error"
    assert row["logger"] == "tests.sup_actors" and row["pid"] == info.pid
    assert "an actor's own error line" not in capfd.readouterr().err


def test_child_dying_while_its_siblings_are_stopped_does_not_wedge_shutdown(
    system: System, tmp_path: Path
) -> None:
    stops = tmp_path / "stops"
    kw = {"stop_log": str(stops)}
    sup = system.start_supervisor("top", SupervisorFlags(), [
        ChildSpec("a", Start(Echo, kwargs=kw), shutdown=1.0),
        ChildSpec("b", Start(Stubborn, kwargs=kw), shutdown=1.5),
    ])
    a = sup.child("a").pid or 0
    shut = in_thread(lambda: sup.shutdown(timeout=20))
    eventually(lambda: "stop b" in stops.read_text() if stops.exists() else False,
               message="b's stop began")
    os.kill(a, signal.SIGKILL)  # a dies while the supervisor waits for b
    assert shut.exception(timeout=20) is None
    assert not alive(a)
    eventually(lambda: not alive(sup.pid), message="supervisor exits after answering")


def test_exit_during_a_restart_group_stop_does_not_wedge(system: System, tmp_path: Path) -> None:
    stops = tmp_path / "stops"
    kw = {"stop_log": str(stops)}
    sup = system.start_supervisor("top", SupervisorFlags(Strategy.ONE_FOR_ALL, intensity=10), [
        ChildSpec("x", Start(Echo, kwargs=kw)),
        ChildSpec("b", Start(Echo, kwargs=kw)),
        ChildSpec("c", Start(Stubborn, kwargs=kw), shutdown=1.5),
    ])
    before = {c.id: c.pid for c in sup.which_children()}
    os.kill(before["x"] or 0, signal.SIGKILL)
    eventually(lambda: "stop c" in stops.read_text() if stops.exists() else False,
               message="c's stop began")
    os.kill(before["b"] or 0, signal.SIGKILL)  # b dies while c is being stopped

    def all_new() -> bool:
        rows = sup.which_children(timeout=10)
        return all(r.status == "running" and r.pid != before[r.id] for r in rows)

    eventually(all_new, timeout=20, message="all three restarted")
    assert not any(alive(pid or 0) for pid in before.values())


PLAIN_SYSTEM = """
import os, sys
import supervisors  # applies the loopback patch
from supervisors._thespian.system_config import free_port
from thespian.actors import Actor, ActorSystem

class Pong(Actor):
    def receiveMessage(self, message, sender):
        if message == "ping":
            self.send(sender, ("pong", os.environ.get("THESPIAN_BASE_IPADDR")))

asys = ActorSystem("multiprocTCPBase", {"Admin Port": free_port()})
try:
    print(asys.ask(asys.createActor(Pong), "ping", 20))
finally:
    asys.shutdown()
"""


def test_a_plain_thespian_system_works_after_importing_supervisors(tmp_path: Path) -> None:
    # Regression: the loopback bind with Thespian's outward advertised address
    # made a plain ActorSystem unreachable ("... is not a valid ActorSystem admin").
    script = tmp_path / "plain.py"
    script.write_text(PLAIN_SYSTEM)
    env = {k: v for k, v in os.environ.items()
           if k not in ("THESPIAN_BASE_IPADDR", "SUPERVISORS_BIND")}
    proc = subprocess.Popen([sys.executable, str(script)], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        # The whole session: a system that failed to start leaves its admin behind.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == 0, err[-2000:]
    assert out.strip() == "('pong', '127.0.0.1')", (out, err[-2000:])


def test_binding_all_interfaces_drops_the_defaulted_loopback_advertisement(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from supervisors._thespian import bind_address as T

    monkeypatch.delenv(T.ADVERTISE_ENV, raising=False)
    monkeypatch.setenv(T.BIND_ENV, "127.0.0.1")
    T.advertise_loopback_by_default()
    assert os.environ[T.ADVERTISE_ENV] == "127.0.0.1"  # defaulted at import
    T.prepare_environment("0.0.0.0")
    assert T.ADVERTISE_ENV not in os.environ  # Thespian finds the outward address
    monkeypatch.setenv(T.ADVERTISE_ENV, "10.1.2.3")  # a user's own choice stays
    T.prepare_environment("0.0.0.0")
    assert os.environ[T.ADVERTISE_ENV] == "10.1.2.3"
    T.prepare_environment("127.0.0.1")
    assert os.environ[T.ADVERTISE_ENV] == "127.0.0.1"


def test_a_process_started_after_a_moment_is_not_older_than_it() -> None:
    """Regression: the moment before a start was taken with ``time.time()`` and
    compared with ``psutil``'s ``create_time()``, whose clock is the boot time in
    whole seconds plus clock ticks: on a machine whose boot time had a fraction
    above half a second, every freshly started admin looked older than the start,
    and every ``System(admin_port=...)`` was refused as "port in use"."""
    from supervisors._system import _started_before, process_clock

    for _ in range(5):
        moment = process_clock()
        child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                                 stdin=subprocess.PIPE)
        try:
            assert not _started_before(child.pid, moment)
            assert abs(psutil.Process(child.pid).create_time() - moment) < 0.5
        finally:
            child.kill()
            child.wait(timeout=10)
    assert _started_before(os.getpid(), process_clock() + 1.0)


def test_starting_systems_leaves_no_zombie_in_the_caller() -> None:
    """Regression: Thespian launches each admin through a process that forks it and
    exits, detached from ``multiprocessing``: every start left a zombie here."""
    def zombies() -> set[int]:
        found = set()
        for child in psutil.Process().children():
            with contextlib.suppress(psutil.NoSuchProcess):
                if child.status() == psutil.STATUS_ZOMBIE:
                    found.add(child.pid)
        return found

    before = zombies()
    for _ in range(2):
        System().shutdown()
    eventually(lambda: not (zombies() - before), 10.0, 0.01, "the admins' launchers reaped")
