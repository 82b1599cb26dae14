"""Bad input at the durable boundary: clear errors, nothing changed."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

import hayata_py as hy
from examples.drills.graph import config
from hayata_py.store import open_store


def digest(path: Path) -> str:
    con = sqlite3.connect(path)
    try:
        rows = [con.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
                for t in ("alembic_version", "hayata_invocations", "hayata_tasks")]
    finally:
        con.close()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def test_unencodable_state_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with hy.AgentSystem(tmp_path / "data") as system:
        bad = hy.AgentConfig("s", {"n": "tests.graph_nodes:worker"},
                             "tests.graph_nodes:scripted", state={"opened": {1, 2}})
        with pytest.raises(hy.ConfigError) as err:
            system.start_agent(bad)
        assert err.value.details["field"] == "state" and "state.opened" in str(err.value)
        assert system.agents() == []


def test_database_from_a_newer_schema_is_refused_unchanged(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with hy.AgentSystem(data) as system:
        agent = system.start_agent(config())
        inv = agent.run({"effects": str(tmp_path / "fx")})
        assert agent.wait(inv, 60).ok
    db = data / "hayata.db"
    con = sqlite3.connect(db)
    con.execute("UPDATE alembic_version SET version_num = '9999_from_the_future'")
    con.commit()
    con.close()
    before = digest(db)
    with pytest.raises(hy.SchemaTooNew, match="9999_from_the_future"):
        hy.AgentSystem(data)
    assert digest(db) == before


def test_corrupted_checkpoint_fails_the_agent_start_with_the_record_named(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    gate = tmp_path / "gate"
    system = hy.AgentSystem(data)
    agent = system.start_agent(config())
    inv = agent.run({"effects": str(tmp_path / "fx"), "gates": {"fetch": str(gate)}})
    with open_store(system.store_url) as store:
        assert store.get_invocation(inv) is not None
    system.kill()
    con = sqlite3.connect(data / "hayata.db")
    con.execute("UPDATE hayata_invocations SET state = ?", (b"\x01\xc1garbage",))
    con.commit()
    con.close()
    before = digest(data / "hayata.db")
    with hy.AgentSystem(data) as again:
        with pytest.raises(hy.HayataError) as err:
            again.start_agent(config())
        assert err.value.code == "agent_start_failed"
        assert "CorruptRecord" in str(err.value) and f"invocation {inv}" in str(err.value)
        assert "state" in str(err.value)
    assert digest(data / "hayata.db") == before
