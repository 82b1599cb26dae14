"""``supervisors._stack.on_own_chunk`` and the patch that runs every actor's
loop through it (``supervisors/_speed.py`` ``install_stack_patch``).

A call that crosses the end of one of CPython's frame-stack chunks maps a
fresh chunk and unmaps it on return: its first page faults again on every
crossing. The minor page faults of a loop of calls show it. That actor
processes run their loop so: ``tests/supervisors/test_thespian_patches_in_processes.py``."""

from __future__ import annotations

import resource
from typing import Any

import pytest

from supervisors import _stack

pytestmark = pytest.mark.timeout(60)

CALLS = 2000


def _leaf(k: int) -> int:
    return _leaf(k - 1) if k else 0


def _faults_of_calls() -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(CALLS):
        _leaf(20)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def _descend(depth: int) -> int:
    return _descend(depth - 1) if depth else _faults_of_calls()


def _worst(call: Any) -> int:
    """The most page faults of the loop over starting depths that span more
    than one 16 KiB chunk (so at least one depth puts the loop across an end)."""
    return max(call(_descend, depth) for depth in range(0, 240, 3))


def test_a_loop_across_a_chunk_end_faults_on_every_call() -> None:
    # The condition the patch removes: without it, some depth costs a fault per call.
    assert _worst(lambda fn, depth: fn(depth)) >= CALLS


def test_a_loop_on_its_own_chunk_does_not_fault_per_call() -> None:
    assert _worst(_stack.on_own_chunk) < CALLS // 10


def test_on_own_chunk_passes_arguments_and_the_result() -> None:
    assert _stack.on_own_chunk(lambda a, *, b: (a, b), 1, b=2) == (1, 2)
    with pytest.raises(ZeroDivisionError):
        _stack.on_own_chunk(lambda: 1 / 0)

