"""Child specs, flags and the restart-intensity function: pure, no actors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from supervisors import (
    BRUTAL_KILL,
    INFINITY,
    ChildSpec,
    InvalidSpec,
    Kind,
    Restart,
    Start,
    Strategy,
    SupervisorFlags,
    add_restart,
)
from supervisors._spec import validate_children
from tests.sup_actors import Echo


def test_defaults_follow_otp() -> None:
    flags = SupervisorFlags()
    assert (flags.strategy, flags.intensity, flags.period) == (Strategy.ONE_FOR_ONE, 1, 5.0)
    worker = ChildSpec("w", Echo)
    assert worker.restart is Restart.PERMANENT and worker.kind is Kind.WORKER
    assert worker.shutdown == 5.0
    assert ChildSpec("s", Echo, kind=Kind.SUPERVISOR).shutdown is INFINITY


def test_start_forms_are_normalised() -> None:
    assert ChildSpec("a", Echo).start == Start(Echo)
    assert ChildSpec("a", "tests.sup_actors.Echo").start.actor_path == "tests.sup_actors.Echo"
    assert ChildSpec("a", (Echo, 1, 2)).start.args == (1, 2)
    assert ChildSpec("a", Echo, restart="transient", kind="supervisor").restart is Restart.TRANSIENT
    assert ChildSpec("a", Echo, shutdown="brutal_kill").shutdown is BRUTAL_KILL


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"id": ""}, "id"),
        ({"id": 3}, "id"),
        ({"restart": "sometimes"}, "restart"),
        ({"kind": "manager"}, "kind"),
        ({"shutdown": 0}, "shutdown"),
        ({"shutdown": -1.0}, "shutdown"),
        ({"shutdown": float("nan")}, "shutdown"),
        ({"shutdown": True}, "shutdown"),
        ({"shutdown": "later"}, "shutdown"),
        ({"start": "nodots"}, "start.actor"),
        ({"start": "tests.no_such_module.Actor"}, "start.actor"),
        ({"start": "tests.sup_actors.Missing"}, "start.actor"),
        ({"start": int}, "start.actor"),
        ({"start": 42}, "start"),
    ],
)
def test_invalid_child_spec_names_the_field(kwargs: dict[str, object], field: str) -> None:
    base: dict[str, object] = {"id": "c", "start": Echo}
    with pytest.raises(InvalidSpec) as err:
        ChildSpec(**{**base, **kwargs})  # type: ignore[arg-type]
    assert err.value.details["field"] == field
    assert err.value.code == "invalid_spec"
    assert str(err.value).startswith(field)


def test_unpicklable_start_args_are_refused() -> None:
    with pytest.raises(InvalidSpec) as err:
        Start(Echo, (lambda: 1,))
    assert err.value.details["field"] == "start.args"


def test_actor_class_defined_in_a_function_is_refused() -> None:
    from supervisors import SupervisedActor

    class Local(SupervisedActor):
        pass

    with pytest.raises(InvalidSpec, match="inside a function"):
        ChildSpec("c", Local)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"strategy": "one_for_some"}, "strategy"),
        ({"intensity": -1}, "intensity"),
        ({"intensity": 1.5}, "intensity"),
        ({"period": 0}, "period"),
        ({"period": -5}, "period"),
        ({"period": float("inf")}, "period"),
    ],
)
def test_invalid_flags_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidSpec) as err:
        SupervisorFlags(**kwargs)  # type: ignore[arg-type]
    assert err.value.details["field"] == field


def test_duplicate_child_ids_are_refused() -> None:
    with pytest.raises(InvalidSpec, match="duplicate child id 'a'"):
        validate_children(SupervisorFlags(), [ChildSpec("a", Echo), ChildSpec("a", Echo)])


def test_simple_one_for_one_takes_exactly_one_template() -> None:
    flags = SupervisorFlags(Strategy.SIMPLE_ONE_FOR_ONE)
    with pytest.raises(InvalidSpec, match="exactly one template"):
        validate_children(flags, [ChildSpec("a", Echo), ChildSpec("b", Echo)])
    with pytest.raises(InvalidSpec, match="exactly one template"):
        validate_children(flags, [])
    assert len(validate_children(flags, [ChildSpec("a", Echo)])) == 1


def test_children_must_be_specs() -> None:
    with pytest.raises(InvalidSpec) as err:
        validate_children(SupervisorFlags(), [ChildSpec("a", Echo), "b"])
    assert err.value.details["field"] == "children[1]"


# -- restart intensity ---------------------------------------------------------


def test_intensity_allows_up_to_the_limit_within_the_period() -> None:
    times: tuple[float, ...] = ()
    times, exceeded = add_restart(times, 0.0, intensity=2, period=5.0)
    assert not exceeded
    times, exceeded = add_restart(times, 1.0, intensity=2, period=5.0)
    assert not exceeded
    times, exceeded = add_restart(times, 2.0, intensity=2, period=5.0)
    assert exceeded


def test_restarts_older_than_the_period_are_forgotten() -> None:
    times: tuple[float, ...] = ()
    for now in (0.0, 5.5, 11.0, 16.5, 22.0):
        times, exceeded = add_restart(times, now, intensity=1, period=5.0)
        assert not exceeded
        assert times == (now,)


def test_zero_intensity_never_restarts() -> None:
    assert add_restart((), 0.0, intensity=0, period=5.0)[1]


@given(
    st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), max_size=30),
    st.integers(min_value=0, max_value=10),
    st.floats(min_value=0.001, max_value=1e5, allow_nan=False),
)
def test_intensity_matches_its_definition(
    stamps: list[float], intensity: int, period: float
) -> None:
    stamps.sort()
    kept: tuple[float, ...] = ()
    for now in stamps:
        kept, exceeded = add_restart(kept, now, intensity, period)
        window = [t for t in stamps[: stamps.index(now) + 1] if now - t <= period]
        assert set(kept) <= set(window)
        assert exceeded == (len(kept) > intensity)
        assert all(now - t <= period for t in kept)
