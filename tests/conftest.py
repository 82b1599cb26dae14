"""Shared fixtures: every test must end with no actor process it started."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import actor_processes, alive


@pytest.fixture(autouse=True)
def no_leaked_processes() -> Iterator[None]:
    """Fail a test that leaves a Thespian process running (and kill it)."""
    before = actor_processes()
    yield
    import time

    deadline = time.monotonic() + 10.0
    leaked = actor_processes() - before
    while leaked and time.monotonic() < deadline:
        time.sleep(0.01)
        leaked = {pid for pid in actor_processes() - before if alive(pid)}
    for pid in leaked:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not leaked, f"test leaked actor processes: {sorted(leaked)}"


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    return tmp_path / "supervisors.jsonl"


@pytest.fixture
def system(log_file: Path) -> Iterator[object]:
    from supervisors import System

    with System(log_file=log_file) as sysm:
        yield sysm
