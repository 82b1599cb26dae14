"""The guard that keeps ``tests/unit`` honest: no process, no database server.

While a unit test runs (its fixtures' setup, the test itself, its teardown),
every way Python has to start a process and every way to reach the PostgreSQL
server is replaced by a refusal: ``subprocess`` (so ``asyncio``'s subprocesses
too), ``os.fork``/``forkpty``/``posix_spawn``/``system`` (so ``multiprocessing``'s
fork start and Thespian's actor processes), ``multiprocessing``'s spawn and
forkserver starts, ``psycopg``'s connects, and a socket connected to the
server's port (or its Unix socket). The refused call raises
:class:`NotAUnitTest`, a ``BaseException`` so that an ``except Exception`` in
the code under test does not swallow it, and is recorded, so the test fails
even when something caught it (a thread, say). SQLite files and loopback
sockets to anything else stay allowed.
"""

from __future__ import annotations

import contextlib
import multiprocessing.util
import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NoReturn

import psycopg
import pytest

from tests.pg import ENV_URL, PG_PORT, from_url

# The os functions that make a process (os.spawn*, os.popen and pty go through these).
_OS_STARTERS = ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system")


class NotAUnitTest(BaseException):
    """A unit test tried to start a process or reach the database server."""


@dataclass
class Guard:
    """What one unit test tried and was refused, in order."""

    refused: list[str] = field(default_factory=list)

    def refuse(self, what: str) -> NoReturn:
        self.refused.append(what)
        raise NotAUnitTest(f"{what}: a test in tests/unit starts no process and reaches no "
                           "database server; it belongs in the folder of its layer")

    def check(self) -> None:
        """Fail the test if anything was refused (even if the refusal was caught)."""
        refused, self.refused = self.refused, []
        if refused:
            pytest.fail("tests/unit refused: " + "; ".join(refused), pytrace=False)


def database_ports() -> set[int]:
    """The ports of the tests' PostgreSQL server: the machine's, and the session's (tests/pg.py)."""
    ports = {PG_PORT}
    url = os.environ.get(ENV_URL)
    if url:
        ports.add(from_url(url).port)
    return ports


def _to_database(sock: socket.socket, address: Any, ports: set[int]) -> bool:
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        return isinstance(address, tuple) and len(address) >= 2 and address[1] in ports
    if sock.family == socket.AF_UNIX:
        name = os.fsdecode(address) if isinstance(address, (str, bytes)) else ""
        return ".s.PGSQL." in name
    return False


@contextlib.contextmanager
def guarded(guard: Guard) -> Iterator[None]:
    """Refuse, through ``guard``, every process start and database connect until the end."""
    ports = database_ports()

    def refuser(what: str) -> Callable[..., NoReturn]:
        def refused(*args: Any, **kwargs: Any) -> NoReturn:
            guard.refuse(what)
        return refused

    def execute_child(popen: subprocess.Popen[Any], args: Any, *rest: Any) -> NoReturn:
        guard.refuse(f"subprocess {args!r}")

    connect = socket.socket.connect
    connect_ex = socket.socket.connect_ex

    def checked_connect(sock: socket.socket, address: Any) -> None:
        if _to_database(sock, address, ports):
            guard.refuse(f"a socket to the database server at {address!r}")
        connect(sock, address)

    def checked_connect_ex(sock: socket.socket, address: Any) -> int:
        if _to_database(sock, address, ports):
            guard.refuse(f"a socket to the database server at {address!r}")
        return connect_ex(sock, address)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "_execute_child", execute_child)
        for name in _OS_STARTERS:
            if hasattr(os, name):
                patch.setattr(os, name, refuser(f"os.{name}"))
        patch.setattr(multiprocessing.util, "spawnv_passfds",
                      refuser("a multiprocessing spawn/forkserver start"))
        patch.setattr(psycopg, "connect", refuser("psycopg.connect"))
        patch.setattr(psycopg.Connection, "connect", refuser("psycopg.Connection.connect"))
        patch.setattr(psycopg.AsyncConnection, "connect",
                      refuser("psycopg.AsyncConnection.connect"))
        patch.setattr(socket.socket, "connect", checked_connect)
        patch.setattr(socket.socket, "connect_ex", checked_connect_ex)
        yield
