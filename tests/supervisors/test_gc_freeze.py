"""``System(gc_freeze=True)``: the objects of the process that starts a system
are moved out of its collector's reach just before the actor processes are
forked from it; by default the collector is left alone. Each case runs in a
fresh interpreter, so this test process's own collector is left as it was."""

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


def test_gc_freeze_freezes_what_the_starting_process_holds() -> None:
    before, during = _freeze_counts("{'gc_freeze': True}")
    assert before == 0
    assert during > 1000


def test_by_default_the_collector_is_left_alone() -> None:
    assert _freeze_counts("{}") == (0, 0)


def test_gc_freeze_must_be_a_bool() -> None:
    with pytest.raises(SupervisorError) as err:
        System(gc_freeze="yes")  # type: ignore[arg-type]
    assert err.value.code == "invalid_option"
    assert err.value.details["field"] == "gc_freeze"
