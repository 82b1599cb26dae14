"""Store fixtures: every store test runs once on SQLite and once on PostgreSQL.

PostgreSQL is real: the session creates a uniquely named database on the
session's server (127.0.0.1:5432, else a throwaway one: tests/pg.py) and
drops it at the end; each test gets its own schema in it. If no server can be
had the PostgreSQL cases fail - they are never skipped.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from hayata_py.store import SqlTaskStore
from hayata_py.store._fast.statements import Statements
from hayata_py.store._sql.engine import EngineHolder
from tests.pg import PgServer, fresh_database


class FakeClock:
    """A settable clock for lease and timestamp tests (no sleeping)."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="session")
def pg_database(pg_server: PgServer) -> Iterator[str]:
    """A fresh PostgreSQL database for this test session; yields its base URL."""
    with fresh_database(pg_server, "hayata_t") as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """URL of an empty store: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'hayata.db'}"
    base: str = request.getfixturevalue("pg_database")
    schema = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(base.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return f"{base}?options=-csearch_path%3D{schema}"


@pytest.fixture
def clock() -> FakeClock:
    """The store's clock; advance it instead of sleeping."""
    return FakeClock()


@pytest.fixture
def store(store_url: str, clock: FakeClock) -> Iterator[SqlTaskStore]:
    """An open store on ``store_url`` using ``clock``; closed after the test."""
    opened = SqlTaskStore(store_url, clock=clock)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def fast_commits(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """Whether each fast-path attempt (each :meth:`EngineHolder.write_all`, which
    every fast write runs) committed, in order."""
    seen: list[bool] = []
    original = EngineHolder.write_all

    def spy(self: EngineHolder, statements: Statements,
            durable: bool = True) -> bool:
        done = original(self, statements, durable)
        seen.append(done)
        return done

    monkeypatch.setattr(EngineHolder, "write_all", spy)
    yield seen
