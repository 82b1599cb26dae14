"""Restart types x exit reasons, strategies and intensity, on real processes."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from thespian.actors import ActorExitRequest

from supervisors import (
    ChildInfo,
    ChildSpec,
    Kind,
    Restart,
    Start,
    StopNormally,
    Strategy,
    SupervisorFlags,
    SupervisorRef,
    System,
)
from tests.helpers import alive, eventually
from tests.sup_actors import CLOCK_ENV, CountingCrasher, Echo, FileClock


def replaced(sup: SupervisorRef, child_id: str, old_pid: int | None) -> ChildInfo | None:
    """The child's info once it runs again under a pid other than ``old_pid``."""
    for info in sup.which_children():
        if info.id == child_id and info.status == "running" and info.pid != old_pid:
            return info
    return None


def cause_exit(system: System, info: ChildInfo, reason: str) -> None:
    assert info.pid is not None
    if reason == "normal":
        system.tell(info.address, StopNormally())
    elif reason == "exit_request":
        system.tell(info.address, ActorExitRequest())
    elif reason == "raised":
        system.tell(info.address, ("raise", "boom"))
    else:
        os.kill(info.pid, signal.SIGKILL)


EXPECT_RESTART = {
    (Restart.PERMANENT, "normal"): True,
    (Restart.PERMANENT, "exit_request"): True,
    (Restart.PERMANENT, "raised"): True,
    (Restart.PERMANENT, "killed"): True,
    (Restart.TRANSIENT, "normal"): False,
    (Restart.TRANSIENT, "exit_request"): False,
    (Restart.TRANSIENT, "raised"): True,
    (Restart.TRANSIENT, "killed"): True,
    (Restart.TEMPORARY, "normal"): False,
    (Restart.TEMPORARY, "exit_request"): False,
    (Restart.TEMPORARY, "raised"): False,
    (Restart.TEMPORARY, "killed"): False,
}


@pytest.mark.parametrize("reason", ["normal", "exit_request", "raised", "killed"])
@pytest.mark.parametrize("restart", list(Restart))
def test_restart_type_by_exit_reason(system: System, restart: Restart, reason: str) -> None:
    sup = system.start_supervisor(
        "top", SupervisorFlags(intensity=5), [ChildSpec("c", Echo, restart=restart),
                                             ChildSpec("other", Echo)]
    )
    before = sup.child("c")
    other = sup.child("other")
    assert before.pid is not None and system.ask(before.address, ("pid",), 5) == before.pid
    cause_exit(system, before, reason)

    if EXPECT_RESTART[(restart, reason)]:
        after = eventually(lambda: replaced(sup, "c", before.pid), message="restart")
        assert after.restarts == 1
        assert system.ask(after.address, ("pid",), 5) == after.pid
    else:
        def settled() -> list[ChildInfo] | None:
            rows = sup.which_children()
            mine = [r for r in rows if r.id == "c"]
            return rows if not mine or mine[0].status == "terminated" else None

        rows = eventually(settled, message="child terminated")
        mine = [r for r in rows if r.id == "c"]
        if restart is Restart.TEMPORARY:
            assert mine == []
        else:
            assert mine[0].pid is None and mine[0].restarts == 0
    eventually(lambda: not alive(before.pid or 0), message="old process gone")
    assert sup.child("other").pid == other.pid


def test_a_raising_handler_runs_once_and_is_not_retried(system: System, tmp_path: Path) -> None:
    counter = tmp_path / "count"
    sup = system.start_supervisor("top", SupervisorFlags(), [ChildSpec("c", CountingCrasher)])
    before = sup.child("c")
    system.tell(before.address, ("count-and-raise", str(counter)))
    eventually(lambda: replaced(sup, "c", before.pid), message="restart")
    assert counter.read_text().splitlines() == [str(before.pid)]


def _three(sup_strategy: Strategy) -> tuple[SupervisorFlags, list[ChildSpec]]:
    return SupervisorFlags(sup_strategy, intensity=5), [
        ChildSpec(name, Echo) for name in ("a", "b", "c")
    ]


@pytest.mark.parametrize(
    ("strategy", "restarted"),
    [
        (Strategy.ONE_FOR_ONE, {"b"}),
        (Strategy.ONE_FOR_ALL, {"a", "b", "c"}),
        (Strategy.REST_FOR_ONE, {"b", "c"}),
    ],
)
def test_strategy_restarts_exactly_the_right_children(
    system: System, strategy: Strategy, restarted: set[str]
) -> None:
    sup = system.start_supervisor("top", *_three(strategy))
    before = {info.id: info.pid for info in sup.which_children()}
    os.kill(before["b"] or 0, signal.SIGKILL)

    def all_running_again() -> list[ChildInfo] | None:
        rows = sup.which_children()
        changed = {r.id for r in rows if r.pid != before[r.id]}
        ok = all(r.status == "running" for r in rows) and changed >= restarted
        return rows if ok else None

    rows = eventually(all_running_again, message="restart")
    after = {r.id: r.pid for r in rows}
    assert {cid for cid in after if after[cid] != before[cid]} == restarted
    for cid in restarted:
        assert not alive(before[cid] or 0)
    for cid in set(before) - restarted:
        assert alive(before[cid] or 0)
    assert {r.id: r.restarts for r in rows} == {cid: int(cid in restarted) for cid in after}


def test_simple_one_for_one_starts_children_dynamically(system: System) -> None:
    sup = system.start_supervisor(
        "pool", SupervisorFlags(Strategy.SIMPLE_ONE_FOR_ONE, intensity=5),
        [ChildSpec("worker", Start(Echo, ("base",)))],
    )
    assert sup.which_children() == []
    infos = [sup.start_child((n,)) for n in range(3)]
    assert [i.id for i in infos] == ["worker-1", "worker-2", "worker-3"]
    assert system.ask(infos[1].address, ("args",), 5) == ("base", 1)
    os.kill(infos[1].pid or 0, signal.SIGKILL)
    again = eventually(lambda: replaced(sup, "worker-2", infos[1].pid), message="restart")
    assert system.ask(again.address, ("args",), 5) == ("base", 1)
    assert {i.id: i.pid for i in sup.which_children()} == {
        "worker-1": infos[0].pid, "worker-2": again.pid, "worker-3": infos[2].pid}
    sup.terminate_child("worker-3")
    assert [i.id for i in sup.which_children()] == ["worker-1", "worker-2"]
    assert not alive(infos[2].pid or 0)


# -- restart intensity and escalation -------------------------------------------


@pytest.fixture
def clock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "clock"
    path.write_text("100.0")
    monkeypatch.setenv(CLOCK_ENV, str(path))
    return path


def _nested(system: System) -> tuple[SupervisorRef, ChildInfo]:
    inner = Start(FileClock, (SupervisorFlags(Strategy.ONE_FOR_ONE, intensity=2, period=5.0),
                              [ChildSpec("w", Echo)]))
    top = system.start_supervisor(
        "top", SupervisorFlags(intensity=5),
        [ChildSpec("sub", inner, kind=Kind.SUPERVISOR)],
    )
    return top, top.child("sub")


def _crash_worker(system: System, sub: SupervisorRef) -> None:
    worker = sub.child("w")
    system.tell(worker.address, ("raise", "boom"))
    eventually(lambda: replaced(sub, "w", worker.pid), message="worker restart")


def test_third_crash_within_the_period_escalates(clock: Path, log_file: Path) -> None:
    with System(log_file=log_file) as system:
        top, sub_info = _nested(system)
        sub = SupervisorRef(system, sub_info.address, "sub", sub_info.pid or 0)
        _crash_worker(system, sub)
        _crash_worker(system, sub)
        worker = sub.child("w")
        system.tell(worker.address, ("raise", "boom"))
        new_sub = eventually(lambda: replaced(top, "sub", sub_info.pid), message="sub restart")
        assert new_sub.restarts == 1
        assert not alive(sub_info.pid or 0) and not alive(worker.pid or 0)
        fresh = SupervisorRef(system, new_sub.address, "sub", new_sub.pid or 0)
        assert [(c.id, c.restarts, c.status) for c in fresh.which_children()] == [
            ("w", 0, "running")]
    assert "restart_intensity_exceeded" in log_file.read_text()


def test_restarts_spread_beyond_the_period_keep_going(clock: Path) -> None:
    with System() as system:
        top, sub_info = _nested(system)
        sub = SupervisorRef(system, sub_info.address, "sub", sub_info.pid or 0)
        for step in range(1, 5):
            clock.write_text(str(100.0 + 6.0 * step))
            _crash_worker(system, sub)
        assert sub.child("w").restarts == 4
        assert top.child("sub").pid == sub_info.pid
        assert top.child("sub").restarts == 0


def test_top_level_supervisor_exceeding_intensity_exits(system: System) -> None:
    sup = system.start_supervisor(
        "top", SupervisorFlags(intensity=0), [ChildSpec("a", Echo), ChildSpec("b", Echo)])
    pids = [i.pid or 0 for i in sup.which_children()]
    os.kill(pids[0], signal.SIGKILL)
    eventually(lambda: not alive(sup.pid), message="supervisor exit")
    eventually(lambda: not any(alive(p) for p in pids), message="children gone")
