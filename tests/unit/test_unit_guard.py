"""The guard of tests/unit (``tests/unit/guard.py``) refuses every way to start
a process or reach the database server, records the refusal even where it was
caught, and lets through what unit tests may use (threads, SQLite, other
loopback sockets)."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import socket
import sqlite3
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy

from tests.unit.guard import Guard, NotAUnitTest, database_ports

pytestmark = pytest.mark.timeout(30)


def _noop() -> None:
    pass


def _asyncio_subprocess() -> None:
    async def start() -> None:
        await asyncio.create_subprocess_exec("true")
    asyncio.run(start())


def _socket_to_the_database() -> None:
    with socket.socket() as sock:
        sock.connect(("127.0.0.1", min(database_ports())))


def _socket_to_the_database_ex() -> None:
    with socket.socket() as sock:
        sock.connect_ex(("127.0.0.1", min(database_ports())))


def _unix_socket_to_the_database() -> None:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect("/var/run/postgresql/.s.PGSQL.5432")


STARTS: dict[str, Callable[[], Any]] = {
    "subprocess.run": lambda: subprocess.run(["true"], check=False),
    "subprocess.Popen": lambda: subprocess.Popen(["true"]),
    "asyncio subprocess": _asyncio_subprocess,
    "os.fork": lambda: os.fork(),
    "os.system": lambda: os.system("true"),
    "os.posix_spawn": lambda: os.posix_spawn("/bin/true", ["true"], os.environ),
    "multiprocessing fork": lambda: multiprocessing.get_context("fork").Process(
        target=_noop).start(),
    "multiprocessing spawn": lambda: multiprocessing.get_context("spawn").Process(
        target=_noop).start(),
    "multiprocessing forkserver": lambda: multiprocessing.get_context("forkserver").Process(
        target=_noop).start(),
    "psycopg.connect": lambda: psycopg.connect("host=127.0.0.1 dbname=postgres"),
    "psycopg.Connection.connect": lambda: psycopg.Connection.connect(
        "host=127.0.0.1 dbname=postgres"),
    "SQLAlchemy on PostgreSQL": lambda: sqlalchemy.create_engine(
        "postgresql+psycopg://postgres@127.0.0.1/postgres").connect(),
    "a socket to the database": _socket_to_the_database,
    "connect_ex to the database": _socket_to_the_database_ex,
    "a Unix socket to the database": _unix_socket_to_the_database,
}


@pytest.mark.parametrize("start", STARTS.values(), ids=list(STARTS))
def test_every_way_to_start_a_process_or_reach_the_database_is_refused(
        start: Callable[[], Any], unit_guard: Guard) -> None:
    with pytest.raises(NotAUnitTest):
        start()
    assert unit_guard.refused, "refused without a record"
    unit_guard.refused.clear()  # this test meant it


def test_a_refusal_caught_in_a_thread_still_fails_the_test(unit_guard: Guard) -> None:
    def swallow() -> None:
        with contextlib.suppress(BaseException):
            subprocess.run(["true"], check=False)

    thread = threading.Thread(target=swallow)
    thread.start()
    thread.join(10)
    assert unit_guard.refused == ["subprocess ['true']"]
    with pytest.raises(pytest.fail.Exception, match="subprocess"):
        unit_guard.check()
    assert unit_guard.refused == []


def test_threads_sqlite_and_other_loopback_sockets_are_allowed(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "x.db") as db:
        assert db.execute("select 1").fetchone() == (1,)
    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'y.db'}")
    with engine.connect() as conn:
        assert conn.execute(sqlalchemy.text("select 2")).scalar() == 2
    engine.dispose()
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        assert port not in database_ports()
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            peer, _ = server.accept()
            peer.close()
    seen: list[int] = []
    thread = threading.Thread(target=lambda: seen.append(1))
    thread.start()
    thread.join(10)
    assert seen == [1]
