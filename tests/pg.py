"""The real PostgreSQL server the tests use (127.0.0.1:5432, trust auth).

Unreachable means failing tests, never skipped ones.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from typing import Any

import psycopg

PG_HOST = "127.0.0.1"
PG_PORT = 5432
PG_USERS = ("postgres", "root")


def admin_connect() -> tuple[psycopg.Connection[Any], str]:
    """An autocommit connection to database ``test`` and the user that worked."""
    errors = []
    for user in PG_USERS:
        try:
            conn = psycopg.connect(host=PG_HOST, port=PG_PORT, user=user, dbname="test",
                                   autocommit=True, connect_timeout=10)
        except psycopg.OperationalError as exc:
            errors.append(f"{user}: {exc}")
            continue
        return conn, user
    raise RuntimeError(f"PostgreSQL at {PG_HOST}:{PG_PORT} is unreachable: {errors}")


@contextlib.contextmanager
def fresh_database(prefix: str) -> Iterator[str]:
    """Create a uniquely named database; yield its SQLAlchemy URL; drop it after."""
    admin, user = admin_connect()
    name = f"{prefix}_{secrets.token_hex(6)}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield f"postgresql+psycopg://{user}@{PG_HOST}:{PG_PORT}/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
