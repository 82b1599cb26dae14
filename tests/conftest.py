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

#: The Agent Server API conformance suite drives a running server; it is
#: collected only when one is given (tests/serve_api/conftest.py).
SERVE_API = Path(__file__).parent / "serve_api"
#: agent-chat-ui in a browser (``make test-ui``): collected only when named.
UI = Path(__file__).parent / "ui"


def _named(path: Path, config: pytest.Config) -> bool:
    """Whether the command line names ``path`` or something inside it."""
    for arg in config.args:
        given = Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
        if given == path or path in given.parents:
            return True
    return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Leave tests/serve_api out of a run that names no server to drive, and
    tests/ui out of a run that does not name it."""
    if collection_path == SERVE_API:
        given = config.getoption("server_url", default=None) or os.environ.get("SERVE_API_URL")
        return True if not given else None
    if collection_path == UI:
        return None if _named(UI, config) else True
    return None


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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Keep each phase's report on the test item (``item.report_call``), so a
    fixture's teardown can tell whether its test failed."""
    outcome = yield
    setattr(item, f"report_{call.when}", outcome.get_result())  # type: ignore[attr-defined]


def print_log_tail(log: Path, limit: int = 80) -> None:
    """Print the last ``limit`` lines of a system's JSON-lines log (every
    supervisor decision: starts, exits, restarts, shutdown timeouts)."""
    if log.exists():
        lines = log.read_text(errors="replace").splitlines()
        print(f"--- the last {min(limit, len(lines))} of {len(lines)} lines of {log}:")
        print("\n".join(lines[-limit:]))


@pytest.fixture
def agents(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    """A fresh AgentSystem with its data dir under tmp_path. If the test fails,
    the end of its system's log is printed (pytest shows it with the failure):
    a failure seen once leaves what its supervisors decided."""
    import hayata_py as hy

    with hy.AgentSystem(tmp_path / "data") as system:
        yield system
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        print_log_tail(tmp_path / "data" / "hayata.log.jsonl")


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
