"""Supervisors' Thespian patches in real processes: every actor process runs
each of them (asked of a probe actor forked like every actor:
``tests/thespian_probe.py``), and an address pickled by a patched process loads
in a process without the patches. The patches themselves are tested in
``tests/unit/test_thespian_*.py`` and ``tests/unit/test_stack_chunk.py``."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest
from thespian.actors import ActorAddress
from thespian.system.transport.IPBase import TCPv4ActorAddress

from supervisors import System
from supervisors import _speed as T
from tests.thespian_probe import patches_in_an_actor

pytestmark = pytest.mark.timeout(60)


def _address(port: int = 40123) -> ActorAddress:
    return ActorAddress(TCPv4ActorAddress("127.0.0.1", port))


def test_actor_processes_use_the_reused_selector(system: System) -> None:
    assert patches_in_an_actor(system)["selector"] is True


def test_actor_processes_run_the_patched_loop(system: System) -> None:
    assert patches_in_an_actor(system)["loop"] is True


def test_actor_processes_run_the_read_patch(system: System) -> None:
    assert patches_in_an_actor(system)["read"] is True


def test_actor_processes_run_the_address_patch(system: System) -> None:
    assert patches_in_an_actor(system)["address"] is True


def test_actor_processes_run_their_loop_on_their_own_chunk(system: System) -> None:
    assert T.install_stack_patch() is True
    assert patches_in_an_actor(system)["stack"] is True


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
