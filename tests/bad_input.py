"""Hypothesis strategies and checks shared by the test_bad_input_*.py files (tests/unit,
tests/runtime, tests/store).

Every boundary is fed arbitrary values: each must be accepted, or refused with
an error of the project's hierarchy (:class:`hayata_py.HayataError`) that has
its stable ``code`` and names the field. Anything else (a ``TypeError`` from
deep inside, a ``RecursionError``, ...) is a bug.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import hayata_py as hy

FAST = settings(max_examples=100, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
"""Bounded, deadline-free: a few seconds per test even on a busy machine."""


class Opaque:
    """A value of no type any boundary knows."""

    def __repr__(self) -> str:
        return "Opaque()"


def _self_list() -> list[Any]:
    cycle: list[Any] = []
    cycle.append(cycle)
    return cycle


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=2**64 - 2, max_value=2**70),
    st.integers(min_value=-(2**70), max_value=-(2**63) + 1), st.floats(), st.text(max_size=12),
    st.text(alphabet=st.characters(codec=None, categories=["Cs", "Ll"]), max_size=3),
    st.binary(max_size=12),
)
"""Plain values, including ints beyond 64 bits, NaN/infinities and lone surrogates."""

odd = st.one_of(
    st.builds(Opaque), st.just(object()), st.frozensets(st.integers(), max_size=3),
    st.sets(st.text(max_size=3), max_size=3), st.just(Ellipsis), st.just(1j),
    st.builds(bytearray, st.binary(max_size=4)), st.builds(_self_list),
    st.just(print), st.just(math), st.just(type),
)
"""Values no durable field can hold (objects, sets, cycles, functions, modules)."""


def nested(leaf: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Lists, tuples and dicts (keys: str mostly, sometimes not) of ``leaf``."""
    keys = st.one_of(st.text(max_size=6), st.integers(), st.none(), st.binary(max_size=3),
                     st.tuples(st.integers()))
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.tuples(inner, inner),
            st.dictionaries(st.text(max_size=6), inner, max_size=4),
            st.dictionaries(keys, inner, max_size=3),
        ),
        max_leaves=12,
    )


anything = st.one_of(scalars, odd, nested(st.one_of(scalars, odd)))
"""Any value at all, plain or not, nested or not."""

plain = nested(scalars)
"""Values built of plain parts (some still unencodable: big ints, non-str keys)."""


def deep(depth: int) -> Any:
    """A list nested ``depth`` levels deep."""
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def assert_refusal(exc: BaseException, fields: set[str]) -> str:
    """``exc`` is a project error naming one of ``fields`` (or a sub-field of one);
    return that field."""
    assert isinstance(exc, hy.HayataError), f"{type(exc).__name__}: {exc}"
    assert exc.code and exc.code == exc.info().code
    field = str(exc.details.get("field", ""))
    root = field.split("[", 1)[0].split(".", 1)[0]
    assert field and (field in fields or root in fields), (field, str(exc))
    assert field in str(exc), str(exc)
    return field
