"""Where OTP's supervisor semantics are easy to miss, on real processes:
temporary bystanders, count_children of simple_one_for_one, restarts that
fail, significant children and auto_shutdown."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from supervisors import (
    AutoShutdown,
    ChildCounts,
    ChildSpec,
    InvalidSpec,
    Kind,
    Restart,
    Start,
    StopNormally,
    Strategy,
    SupervisorError,
    SupervisorFlags,
    SupervisorRef,
    System,
)
from tests.helpers import alive, eventually, in_thread
from tests.sup_actors import Echo, EventRecorder, StartsUntilFlagged


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


# -- 1. temporary bystanders ---------------------------------------------------------


@pytest.mark.parametrize("strategy", [Strategy.ONE_FOR_ALL, Strategy.REST_FOR_ONE])
def test_a_temporary_bystander_is_stopped_dropped_and_not_restarted(
    system: System, tmp_path: Path, strategy: Strategy
) -> None:
    starts = tmp_path / "starts"
    kw = {"start_log": str(starts)}
    sup = system.start_supervisor("top", SupervisorFlags(strategy, intensity=5), [
        ChildSpec("a", Start(Echo, kwargs=kw)),
        ChildSpec("t", Start(Echo, kwargs=kw), restart=Restart.TEMPORARY),
        ChildSpec("c", Start(Echo, kwargs=kw)),
    ])
    before = {c.id: c.pid for c in sup.which_children()}
    os.kill(before["a"] or 0, signal.SIGKILL)

    def restarted() -> list[str] | None:
        rows = sup.which_children()
        ok = all(r.status == "running" and r.pid != before[r.id] for r in rows)
        return [r.id for r in rows] if ok and len(rows) == 2 else None

    assert eventually(restarted, message="a and c restarted, t dropped") == ["a", "c"]
    assert not alive(before["t"] or 0)
    assert [line.split()[1] for line in _lines(starts)] == ["a", "t", "c", "a", "c"]
    assert sup.count_children() == ChildCounts(2, 2, 0, 2)


# -- 2. count_children of simple_one_for_one ---------------------------------------------


def test_simple_one_for_one_counts_its_template_as_the_one_spec(system: System) -> None:
    sup = system.start_supervisor(
        "pool", SupervisorFlags(Strategy.SIMPLE_ONE_FOR_ONE, intensity=5),
        [ChildSpec("w", Echo, kind=Kind.SUPERVISOR, shutdown=5.0)])
    assert sup.count_children() == ChildCounts(1, 0, 0, 0)
    for n in range(3):
        sup.start_child((n,))
    assert sup.count_children() == ChildCounts(1, 3, 3, 0)


# -- 3. a restart that fails is retried, and every attempt counts -------------------------


@pytest.mark.parametrize("then", ["raise", "hang"])
def test_a_child_that_can_no_longer_start_escalates(
    tmp_path: Path, log_file: Path, then: str
) -> None:
    """Each failed attempt is a restart (OTP's try_again_restart): with
    intensity 2 the supervisor makes 2 attempts, then gives up and exits."""
    flag, starts = tmp_path / "flag", tmp_path / "starts"
    kw = {"flag": str(flag), "then": then, "start_log": str(starts)}
    # A start that hangs is cut short only for a placed child (requirements).
    start = Start(StartsUntilFlagged, kwargs=kw,
                  requirements={"zone": "here"} if then == "hang" else {})
    with System(log_file=log_file, capabilities={"zone": "here"}) as system:
        sup = system.start_supervisor(
            "top", SupervisorFlags(intensity=2, period=600.0, heartbeat=0.01,
                                   heartbeat_misses=1), [ChildSpec("c", start)])
        first = sup.child("c")
        flag.touch()
        os.kill(first.pid or 0, signal.SIGKILL)
        eventually(lambda: not alive(sup.pid), timeout=30, message="supervisor gave up")
    assert len(_lines(starts)) == 1 + 2
    events = [line for line in _lines(log_file) if '"restart_failed"' in line]
    assert len(events) == 2
    assert "restart_intensity_exceeded" in log_file.read_text()


# -- 4. significant children and auto_shutdown ----------------------------------------------


def _inner(auto: AutoShutdown, *children: ChildSpec) -> Start:
    return Start("supervisors.Supervisor", (SupervisorFlags(auto_shutdown=auto, intensity=5),
                                            list(children)))


def _exits(events: Path, child_id: str) -> list[str]:
    return [exit for kind, cid, exit in (line.split() for line in _lines(events))
            if kind == "exited" and cid == child_id]


@pytest.mark.parametrize("restart", [Restart.TRANSIENT, Restart.TEMPORARY])
def test_any_significant_exit_shuts_the_supervisor_down_normally(
    system: System, tmp_path: Path, restart: Restart
) -> None:
    events = tmp_path / "events"
    inner = _inner(AutoShutdown.ANY_SIGNIFICANT,
                   ChildSpec("job", Echo, restart=restart, significant=True),
                   ChildSpec("helper", Echo))
    top = system.start_supervisor(
        "top", SupervisorFlags(intensity=5),
        [ChildSpec("inner", inner, restart=Restart.TRANSIENT, kind=Kind.SUPERVISOR)],
        actor=EventRecorder, extra_args=(str(events),))
    info = top.child("inner")
    sub = SupervisorRef(system, info.address, "inner", info.pid or 0)
    pids = [c.pid or 0 for c in sub.which_children()]
    system.tell(sub.child("job").address, StopNormally())
    eventually(lambda: _exits(events, "inner"), message="inner exited")
    assert _exits(events, "inner") == ["normal"]
    eventually(lambda: not any(alive(p) for p in [*pids, info.pid or 0]),
               message="inner and its children gone")
    assert top.child("inner").status == "terminated"  # transient: a normal exit stays down


def test_all_significant_waits_for_the_last_significant_child(
    system: System, tmp_path: Path
) -> None:
    events = tmp_path / "events"
    inner = _inner(AutoShutdown.ALL_SIGNIFICANT,
                   ChildSpec("one", Echo, restart=Restart.TEMPORARY, significant=True),
                   ChildSpec("two", Echo, restart=Restart.TRANSIENT, significant=True))
    top = system.start_supervisor(
        "top", SupervisorFlags(intensity=5),
        [ChildSpec("inner", inner, restart=Restart.TEMPORARY, kind=Kind.SUPERVISOR)],
        actor=EventRecorder, extra_args=(str(events),))
    info = top.child("inner")
    sub = SupervisorRef(system, info.address, "inner", info.pid or 0)
    two = sub.child("two")
    os.kill(two.pid or 0, signal.SIGKILL)  # abnormal: a transient child is restarted
    eventually(lambda: (c := sub.child("two")).status == "running" and c.pid != two.pid,
               message="two restarted")
    system.tell(sub.child("one").address, StopNormally())
    eventually(lambda: [c.id for c in sub.which_children()] == ["two"], message="one gone")
    assert alive(info.pid or 0) and _exits(events, "inner") == []
    system.tell(sub.child("two").address, StopNormally())
    eventually(lambda: _exits(events, "inner"), message="inner exited")
    assert _exits(events, "inner") == ["normal"]
    assert top.which_children() == []  # temporary: dropped, not restarted


def test_significant_children_are_validated_before_anything_starts(system: System) -> None:
    with pytest.raises(InvalidSpec) as err:
        ChildSpec("p", Echo, significant=True)  # permanent by default
    assert err.value.details["field"] == "significant"
    with pytest.raises(InvalidSpec) as err:
        ChildSpec("p", Echo, restart=Restart.TRANSIENT, significant="yes")  # type: ignore[arg-type]
    assert err.value.details["field"] == "significant"
    with pytest.raises(InvalidSpec) as err:
        SupervisorFlags(auto_shutdown="sometimes")  # type: ignore[arg-type]
    assert err.value.details["field"] == "auto_shutdown"

    before = {p.pid for p in system.processes()}
    significant = ChildSpec("s", Echo, restart=Restart.TRANSIENT, significant=True)
    with pytest.raises(InvalidSpec) as err:
        system.start_supervisor("top", SupervisorFlags(), [ChildSpec("a", Echo), significant])
    assert err.value.details["field"] == "significant"
    assert "auto_shutdown" in str(err.value)
    assert {p.pid for p in system.processes()} == before  # nothing started

    sup = system.start_supervisor("top", SupervisorFlags(), [ChildSpec("a", Echo)])
    with pytest.raises(SupervisorError) as err2:
        sup.start_child(significant)
    assert err2.value.code == "invalid_spec"
    assert err2.value.details["field"] == "significant"
    assert [c.id for c in sup.which_children()] == ["a"]


# -- control calls during a restart, a shutdown, on simple_one_for_one ----------------


@pytest.mark.parametrize("call", ["restart_child", "delete_child"])
def test_a_child_whose_restart_is_failing_is_not_taken_over_by_a_control_call(
        system: System, tmp_path: Path, call: str) -> None:
    """OTP answers {error, restarting}: the supervisor keeps retrying the child
    (here: until its start works again) instead of one failed manual attempt
    leaving a permanent child terminated for good, or delete_child dropping it."""
    flag = tmp_path / "flag"
    sup = system.start_supervisor("top", SupervisorFlags(intensity=100000, period=600.0), [
        ChildSpec("c", Start(StartsUntilFlagged, kwargs={"flag": str(flag)}))])
    first = sup.child("c")
    flag.touch()  # from now on every start fails
    os.kill(first.pid, signal.SIGKILL)
    eventually(lambda: sup.child("c").status == "restarting", timeout=30,
               message="the child restarting")
    with pytest.raises(SupervisorError) as err:
        getattr(sup, call)("c")
    assert err.value.code == "restarting"
    flag.unlink()  # its start works again: the supervisor's own retries bring it back
    back = eventually(lambda: (c := sup.child("c")).status == "running" and c, timeout=30,
                      message="the child restarted by its supervisor")
    assert back.pid not in (None, first.pid) and alive(back.pid)


def test_a_request_running_when_the_supervisor_is_stopped_is_answered_at_once(
        system: System, tmp_path: Path) -> None:
    flag, log = tmp_path / "flag", tmp_path / "starts"
    flag.touch()  # the new child's start hangs
    inner = Start("supervisors.Supervisor", (SupervisorFlags(), [ChildSpec("w", Echo)]))
    top = system.start_supervisor("top", SupervisorFlags(), [
        ChildSpec("inner", inner, kind=Kind.SUPERVISOR)])
    info = top.child("inner")
    sub = SupervisorRef(system, info.address, "inner", info.pid)
    slow = ChildSpec("slow", Start(StartsUntilFlagged, kwargs={
        "flag": str(flag), "then": "hang", "start_log": str(log)}))
    starting = in_thread(lambda: sub.start_child(slow, timeout=60))
    eventually(lambda: any(line.startswith("start ") for line in _lines(log)), timeout=30,
               message="the slow child starting")
    top.terminate_child("inner")
    err = starting.exception(timeout=20)  # not the caller's own 60 s timeout
    assert isinstance(err, SupervisorError) and err.code == "shutting_down", err


def test_simple_one_for_one_refuses_a_child_spec(system: System) -> None:
    sup = system.start_supervisor(
        "pool", SupervisorFlags(Strategy.SIMPLE_ONE_FOR_ONE), [ChildSpec("w", Echo)])
    with pytest.raises(SupervisorError) as err:
        sup.start_child(ChildSpec("other", Echo))
    assert err.value.code == "invalid_spec"
    assert sup.which_children() == []  # nothing was started from the template


def test_stop_normally_to_a_top_level_supervisor_stops_children_right_to_left(
        system: System, tmp_path: Path) -> None:
    log = tmp_path / "events"
    sup = system.start_supervisor("top", SupervisorFlags(), [
        ChildSpec(name, Start(Echo, kwargs={"stop_log": str(log)})) for name in ("a", "b", "c")])
    pids = [c.pid for c in sup.which_children()]
    system.tell(sup.address, StopNormally())
    eventually(lambda: not alive(sup.pid) and not any(alive(p) for p in pids), timeout=30,
               message="the supervisor and its children gone")
    stops = [line.split()[1] for line in _lines(log) if line.startswith("stop ")]
    assert stops == ["c", "b", "a"]
