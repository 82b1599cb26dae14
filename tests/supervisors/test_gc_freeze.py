"""``System(gc_freeze=...)``: the objects of the process that starts a system
are moved out of its collector's reach just before the actor processes are
forked from it (unless told not to). Each case runs in a fresh interpreter, so
this test process's own collector is left as it was."""

from __future__ import annotations

import subprocess
import sys

import pytest

from supervisors import SupervisorError, System

pytestmark = pytest.mark.timeout(60)

_PROBE = """
import gc, sys
from supervisors import System
held = [object() for _ in range(1000)]
before = gc.get_freeze_count()
with System(**eval(sys.argv[1])):
    during = gc.get_freeze_count()
print(before, during)
"""


def _freeze_counts(options: str) -> tuple[int, int]:
    out = subprocess.run([sys.executable, "-c", _PROBE, options], check=True,
                         capture_output=True, text=True, timeout=60)
    before, during = out.stdout.split()
    return int(before), int(during)


def test_a_system_freezes_what_its_starting_process_holds() -> None:
    before, during = _freeze_counts("{}")
    assert before == 0
    assert during > 1000


def test_gc_freeze_false_leaves_the_collector_alone() -> None:
    assert _freeze_counts("{'gc_freeze': False}") == (0, 0)


def test_gc_freeze_must_be_a_bool() -> None:
    with pytest.raises(SupervisorError) as err:
        System(gc_freeze="yes")  # type: ignore[arg-type]
    assert err.value.code == "invalid_option"
    assert err.value.details["field"] == "gc_freeze"
