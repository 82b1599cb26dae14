"""Each PostgreSQL connection names the process that holds it.

``pg_stat_activity.application_name`` is ``hayata_py pid N`` for the store's
pooled connections and the edge's light writer, in the process that opened
the connection (a forked child's own connections name the child), unless the
URL names the application itself. An operator (and the takeover fault of the
chaos campaign) can then tell which process holds a transaction open.
"""

from __future__ import annotations

import os

import psycopg
import pytest

from hayata_py.store import SqlTaskStore
from hayata_py.store._fast.writer import TaskWriter
from tests.store.util import invocation

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(60)]


def _names(url: str) -> set[str]:
    """The application names of every other connection to ``url``'s database."""
    plain = url.replace("+psycopg", "")
    with psycopg.connect(plain, autocommit=True) as conn:
        rows = conn.execute("select application_name from pg_stat_activity "
                            "where datname = current_database() and pid <> pg_backend_pid()")
        return {str(name) for (name,) in rows}


def _open_connection(store: SqlTaskStore) -> None:
    store.create_invocation(invocation("inv-1"), owner="me", lease_seconds=30.0)


def test_store_and_writer_connections_name_their_process(pg_url: str) -> None:
    store = SqlTaskStore(pg_url)
    writer = TaskWriter(pg_url)
    try:
        _open_connection(store)
        writer._conn, writer._error = writer._connect()
        assert _names(pg_url) == {f"hayata_py pid {os.getpid()}"}
    finally:
        writer.close()
        store.close()


def test_a_forked_child_names_itself(pg_url: str) -> None:
    store = SqlTaskStore(pg_url)
    _open_connection(store)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        code = 1
        try:
            store.get_invocation("inv-1")  # a connection of the child's own
            os.write(write, ",".join(sorted(_names(pg_url))).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    try:
        with os.fdopen(read) as pipe:
            seen = set(pipe.read().split(","))
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert {f"hayata_py pid {child}", f"hayata_py pid {os.getpid()}"} <= seen
    finally:
        store.close()


def test_the_urls_own_application_name_wins(pg_url: str) -> None:
    named = f"{pg_url}?application_name=billing"
    store = SqlTaskStore(named)
    writer = TaskWriter(named)
    try:
        _open_connection(store)
        writer._conn, writer._error = writer._connect()
        assert _names(pg_url) == {"billing"}
    finally:
        writer.close()
        store.close()
