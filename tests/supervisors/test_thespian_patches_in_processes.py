"""Supervisors' Thespian patches in real processes: every actor process runs
each of them (asked of a probe actor forked like every actor:
``tests/thespian_probe.py``), an address pickled by a patched process loads
in a process without the patches, and ``SUPERVISORS_PLAIN_THESPIAN=1`` keeps
only the correctness patches. The patches themselves are tested in
``tests/unit/test_thespian_*.py`` and ``tests/unit/test_stack_chunk.py``."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from thespian.actors import ActorAddress
from thespian.system.transport.IPBase import TCPv4ActorAddress

import supervisors
from supervisors import System
from supervisors._thespian.installer import PLAIN_THESPIAN_ENV, in_force
from supervisors._thespian.patch_table import PATCHES
from tests.thespian_probe import patches_in_an_actor

pytestmark = pytest.mark.timeout(60)


def _address(port: int = 40123) -> ActorAddress:
    return ActorAddress(TCPv4ActorAddress("127.0.0.1", port))


def test_actor_processes_use_the_reused_selector(system: System) -> None:
    assert patches_in_an_actor(system)["poll_selector"] is True


def test_actor_processes_run_the_patched_loop(system: System) -> None:
    assert patches_in_an_actor(system)["transport_loop"] is True


def test_actor_processes_run_the_read_patch(system: System) -> None:
    assert patches_in_an_actor(system)["frame_read"] is True


def test_actor_processes_run_the_address_patch(system: System) -> None:
    assert patches_in_an_actor(system)["address_pickle"] is True


def test_actor_processes_run_their_loop_on_their_own_chunk(system: System) -> None:
    assert in_force(next(p for p in PATCHES if p.name == "stack_chunk"))
    assert patches_in_an_actor(system)["stack_chunk"] is True


def test_actor_processes_run_every_patch_of_the_table(system: System) -> None:
    assert patches_in_an_actor(system) == {p.name: True for p in PATCHES}


_UNPATCHED = """
import pickle, sys
from thespian.system.transport.IPBase import IPActorAddress, TCPv4ActorAddress
assert "__setstate__" not in IPActorAddress.__dict__
loaded = pickle.loads(sys.stdin.buffer.read())
local = TCPv4ActorAddress("127.0.0.1", 40123)
assert loaded.addressDetails == local and hash(loaded.addressDetails) == hash(local)
assert str(loaded.addressDetails) == str(local)
print(type(loaded.addressDetails.af).__name__)
"""


def test_a_process_without_the_patch_loads_the_address_as_an_equal_one() -> None:
    # Thespian alone (no supervisors import): the integers stay integers there.
    done = subprocess.run([sys.executable, "-c", _UNPATCHED], input=pickle.dumps(_address(), 3),
                          capture_output=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "int"


_PLAIN = """
import sys
import supervisors
from supervisors._thespian.installer import in_force
from supervisors._thespian.patch_table import PATCHES, PatchKind
wrong = [p.name for p in PATCHES if in_force(p) != (p.kind is PatchKind.CORRECTNESS)]
assert not wrong, wrong
print("ok")
"""


def test_the_plain_switch_keeps_only_the_correctness_patches_in_a_fresh_process() -> None:
    root = Path(supervisors.__file__).parent.parent
    env = {**os.environ, PLAIN_THESPIAN_ENV: "1", "PYTHONPATH": str(root)}
    env.pop("SUPERVISORS_LOG_FILE", None)
    done = subprocess.run([sys.executable, "-c", _PLAIN], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"
