"""The restart rules and the child table: pure, no actors, no processes."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from supervisors import (
    AutoShutdown,
    ChildCounts,
    ChildSpec,
    Kind,
    Restart,
    Strategy,
    SupervisorFlags,
)
from supervisors._children import Child, ChildTable, Proc, Restarting, Running, Waiting
from supervisors._rules import (
    Escalate,
    RestartGroup,
    Row,
    Terminated,
    auto_shutdown,
    child_exited,
    plan,
    restart,
)
from tests.sup_actors import Echo

STATIC = [Strategy.ONE_FOR_ONE, Strategy.ONE_FOR_ALL, Strategy.REST_FOR_ONE]

RESTARTED = {  # (restart type, exit) -> restarted? (OTP's do_restart)
    (Restart.PERMANENT, "normal"): True,
    (Restart.PERMANENT, "abnormal"): True,
    (Restart.TRANSIENT, "normal"): False,
    (Restart.TRANSIENT, "abnormal"): True,
    (Restart.TEMPORARY, "normal"): False,
    (Restart.TEMPORARY, "abnormal"): False,
}

GROUP = {  # strategy -> the children a restart of "b" concerns, of a, b, c
    Strategy.ONE_FOR_ONE: ("b",),
    Strategy.ONE_FOR_ALL: ("a", "b", "c"),
    Strategy.REST_FOR_ONE: ("b", "c"),
}


@pytest.mark.parametrize("bystander", list(Restart))
@pytest.mark.parametrize("exit", ["normal", "abnormal"])
@pytest.mark.parametrize("restart_type", list(Restart))
@pytest.mark.parametrize("strategy", STATIC)
def test_exit_of_b_between_two_bystanders(strategy: Strategy, restart_type: Restart, exit: str,
                                          bystander: Restart) -> None:
    """Strategy x restart type x exit reason x bystander kind, for children a, b, c."""
    rows = [Row("a", bystander), Row("b", restart_type, alive=False), Row("c", bystander)]
    flags = SupervisorFlags(strategy, intensity=10)
    decision, restarts = child_exited(flags, rows, "b", exit == "normal", (), 100.0)
    if not RESTARTED[(restart_type, exit)]:
        assert decision == Terminated("b", remove=restart_type is Restart.TEMPORARY)
        assert restarts == ()
        return
    members = GROUP[strategy]
    siblings = tuple(m for m in members if m != "b")
    dropped = siblings if bystander is Restart.TEMPORARY else ()
    assert decision == RestartGroup("b", stop=tuple(reversed(siblings)), drop=dropped,
                                    start=tuple(m for m in members if m not in dropped))
    assert restarts == (100.0,)


def test_a_temporary_bystander_is_stopped_and_never_started_again() -> None:
    rows = [Row("a", Restart.PERMANENT), Row("t", Restart.TEMPORARY),
            Row("c", Restart.TRANSIENT)]
    assert plan(Strategy.ONE_FOR_ALL, rows, "a") == RestartGroup(
        "a", stop=("c", "t"), drop=("t",), start=("a", "c"))
    assert plan(Strategy.REST_FOR_ONE, rows, "a") == RestartGroup(
        "a", stop=("c", "t"), drop=("t",), start=("a", "c"))
    assert plan(Strategy.REST_FOR_ONE, rows, "c") == RestartGroup(
        "c", stop=(), drop=(), start=("c",))


def test_simple_one_for_one_restarts_only_the_child_and_forgets_the_rest() -> None:
    flags = SupervisorFlags(Strategy.SIMPLE_ONE_FOR_ONE, intensity=5)
    rows = [Row("w-1", Restart.TRANSIENT), Row("w-2", Restart.TRANSIENT)]
    assert child_exited(flags, rows, "w-2", False, (), 1.0)[0] == RestartGroup(
        "w-2", (), (), ("w-2",))
    assert child_exited(flags, rows, "w-2", True, (), 1.0, dynamic=True)[0] == Terminated(
        "w-2", remove=True)


def test_every_failed_attempt_counts_until_the_supervisor_escalates() -> None:
    """OTP's try_again_restart: each retry is a restart; a child that can never
    start exhausts the intensity instead of looping."""
    flags = SupervisorFlags(intensity=3, period=5.0)
    rows = [Row("c", Restart.PERMANENT)]
    decision, restarts = child_exited(flags, rows, "c", False, (), 10.0)
    outcomes = [decision]
    for step in range(1, 4):
        decision, restarts = restart(flags, rows, "c", restarts, 10.0 + step * 0.1)
        outcomes.append(decision)
    assert [type(o) for o in outcomes] == [RestartGroup] * 3 + [Escalate]
    assert outcomes[-1] == Escalate("c")


def test_restarts_outside_the_period_do_not_count() -> None:
    flags = SupervisorFlags(intensity=1, period=5.0)
    rows = [Row("c", Restart.PERMANENT)]
    restarts: tuple[float, ...] = ()
    for now in (0.0, 5.5, 11.0, 16.5):
        decision, restarts = restart(flags, rows, "c", restarts, now)
        assert isinstance(decision, RestartGroup)
    assert isinstance(restart(flags, rows, "c", restarts, 17.0)[0], Escalate)


def test_a_restart_exactly_period_old_still_counts() -> None:
    # OTP's add_restart keeps R >= Now - Period: the window includes its edge.
    flags = SupervisorFlags(intensity=1, period=5.0)
    rows = [Row("c", Restart.PERMANENT)]
    decision, restarts = restart(flags, rows, "c", (), 0.0)
    assert isinstance(decision, RestartGroup)
    assert isinstance(restart(flags, rows, "c", restarts, 5.0)[0], Escalate)


SHUTDOWN_CASES = [
    # auto_shutdown, exited (restart, significant), normal, other significant alive -> shutdown
    (AutoShutdown.NEVER, Restart.TRANSIENT, False, True, False, False),
    (AutoShutdown.ANY_SIGNIFICANT, Restart.TRANSIENT, True, True, True, True),
    (AutoShutdown.ANY_SIGNIFICANT, Restart.TRANSIENT, True, False, False, False),  # restarted
    (AutoShutdown.ANY_SIGNIFICANT, Restart.TEMPORARY, True, False, True, True),
    (AutoShutdown.ANY_SIGNIFICANT, Restart.TEMPORARY, False, True, False, False),
    (AutoShutdown.ALL_SIGNIFICANT, Restart.TEMPORARY, True, True, True, False),
    (AutoShutdown.ALL_SIGNIFICANT, Restart.TEMPORARY, True, True, False, True),
    (AutoShutdown.ALL_SIGNIFICANT, Restart.TRANSIENT, True, True, False, True),
    (AutoShutdown.ALL_SIGNIFICANT, Restart.TRANSIENT, True, False, False, False),
]


@pytest.mark.parametrize(("auto", "restart_type", "significant", "normal", "other_alive",
                          "shutdown"), SHUTDOWN_CASES)
def test_auto_shutdown(auto: AutoShutdown, restart_type: Restart, significant: bool,
                       normal: bool, other_alive: bool, shutdown: bool) -> None:
    flags = SupervisorFlags(Strategy.ONE_FOR_ONE, intensity=5, auto_shutdown=auto)
    rows = [Row("s", restart_type, significant, alive=False),
            Row("other", Restart.TEMPORARY, True, alive=other_alive),
            Row("plain", Restart.PERMANENT)]
    decision, _ = child_exited(flags, rows, "s", normal, (), 1.0)
    if isinstance(decision, Terminated):
        assert decision.shutdown is shutdown
    else:
        assert not shutdown and isinstance(decision, RestartGroup)


def test_all_significant_of_a_simple_one_for_one_waits_for_the_last_child() -> None:
    flags = SupervisorFlags(Strategy.SIMPLE_ONE_FOR_ONE, auto_shutdown="all_significant")
    last = Row("w-2", Restart.TEMPORARY, True, alive=False)
    assert auto_shutdown(flags, [Row("w-1", Restart.TEMPORARY, True)], last, True) is False
    assert auto_shutdown(flags, [], last, True) is True


ids = st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=8, unique=True)


@given(ids, st.data(), st.sampled_from(STATIC))
def test_plan_invariants(names: list[str], data: st.DataObject, strategy: Strategy) -> None:
    types = data.draw(st.lists(st.sampled_from(list(Restart)), min_size=len(names),
                               max_size=len(names)))
    rows = [Row(n, t) for n, t in zip(names, types, strict=True)]
    failed = data.draw(st.sampled_from(names))
    group = plan(strategy, rows, failed)
    kind = {r.id: r.restart for r in rows}
    assert failed in group.start and failed not in group.stop
    # Start left to right, stop right to left, a temporary sibling never again.
    assert list(group.start) == [n for n in names if n in group.start]
    assert list(group.stop) == [n for n in reversed(names) if n in group.stop]
    assert set(group.drop) == {n for n in group.stop if kind[n] is Restart.TEMPORARY}
    assert set(group.start) | set(group.drop) == set(group.stop) | {failed}
    if strategy is Strategy.ONE_FOR_ONE:
        assert group.stop == ()


# -- the child table -----------------------------------------------------------------


def _spec(child_id: str, **kw: object) -> ChildSpec:
    return ChildSpec(child_id, Echo, **kw)  # type: ignore[arg-type]


def test_simple_one_for_one_counts_one_spec_whatever_its_children() -> None:
    table = ChildTable((_spec("w", kind=Kind.SUPERVISOR),), dynamic=True)
    assert table.counts() == ChildCounts(1, 0, 0, 0)
    for n in range(3):
        child = table.new_dynamic((n,))
        child.state = Running(Proc(None, 1000 + n))
        table.add(child)
    table.children[1].state = Restarting()
    assert [c.spec.id for c in table] == ["w-1", "w-2", "w-3"]
    assert table.counts() == ChildCounts(1, 2, 3, 0)


def test_static_table_counts_and_forgets_like_otp() -> None:
    table = ChildTable((_spec("a"), _spec("t", restart=Restart.TEMPORARY)), dynamic=False)
    assert table.counts() == ChildCounts(2, 0, 0, 2)
    a, t = table.children
    for child in (a, t):
        child.state = Running(Proc(None, 1))
    table.forget(a)
    table.forget(t)
    assert [(c.spec.id, c.info().status) for c in table] == [("a", "terminated")]


def test_each_state_has_one_status() -> None:
    child = Child(_spec("c"))
    proc = Proc("addr", 7)
    seen = []
    for state in (Restarting(), Waiting("no host"), Running(proc)):
        child.state = state
        seen.append((child.info().status, child.info().pid, child.alive))
    assert seen == [("restarting", None, True), ("waiting_for_placement", None, True),
                    ("running", 7, True)]
    child.note_exit()
    assert isinstance(child.state, Running) and child.state.gone


def test_rows_follow_the_table_order() -> None:
    specs = tuple(_spec(n, restart=r) for n, r in zip("abc", itertools.cycle(
        [Restart.TRANSIENT, Restart.TEMPORARY]), strict=False))
    table = ChildTable(specs, dynamic=False)
    assert [(r.id, r.restart, r.alive) for r in table.rows()] == [
        ("a", Restart.TRANSIENT, False), ("b", Restart.TEMPORARY, False),
        ("c", Restart.TRANSIENT, False)]
