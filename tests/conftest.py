"""Shared fixtures: every test must end with no actor process it started."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from supervisors._system import STARTED_SESSIONS, session_processes

if TYPE_CHECKING:
    from tests.pg import PgServer


@pytest.fixture(autouse=True)
def no_leaked_processes() -> Iterator[None]:
    """Fail a test that leaves a process of an actor system it started running.

    Every System records its session id; all its processes (admin, logger,
    actors) live in that session, so this sees exactly this test's processes,
    whatever else runs on the machine.
    """
    known = len(STARTED_SESSIONS)
    yield
    from tests.helpers import eventually

    sessions = STARTED_SESSIONS[known:]

    def leftovers() -> list[int]:
        return [p.pid for sid in sessions for p in session_processes(sid)]

    try:
        eventually(lambda: not leftovers(), timeout=10.0, message="no leftover processes")
    except AssertionError:
        leaked = leftovers()
        for pid in leaked:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        pytest.fail(f"test leaked actor processes: {sorted(leaked)}")


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    return tmp_path / "supervisors.jsonl"


@pytest.fixture
def system(log_file: Path) -> Iterator[object]:
    from supervisors import System

    with System(log_file=log_file) as sysm:
        yield sysm


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[object]:
    """A fresh AgentSystem with its data dir under tmp_path."""
    import hayata_py as hy

    with hy.AgentSystem(tmp_path / "data") as system:
        yield system


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The PostgreSQL server of this session: the machine's, or a throwaway one (tests/pg.py)."""
    from tests.pg import session_server

    with session_server() as server:
        yield server


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A fresh, empty PostgreSQL database (real server) for one test."""
    from tests.pg import fresh_database

    with fresh_database(pg_server, "hayata_rt") as url:
        yield url
