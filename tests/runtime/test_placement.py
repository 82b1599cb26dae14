"""Placement by capability on one system: a placement the local system
satisfies runs locally; one no live system satisfies fails at once, naming
the requirements (no convention needed for either)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

import hayata_py as hy
from examples.drills.graph import config
from tests.helpers import find


def test_a_placement_the_local_system_satisfies_runs_here(tmp_path: Path) -> None:
    with hy.AgentSystem(tmp_path / "data", capabilities={"gpu": True}) as system:
        agent = system.start_agent(dataclasses.replace(
            config(), placement={"gpu": True}, node_placement={"right": {"gpu": True}}))
        row = find(system.tree(), "node", "node:right")
        assert row is not None and row["remote"] is False
        assert row["pid"] in {p.pid for p in system.processes()}
        inv = agent.run({"effects": str(tmp_path / "effects")})
        assert agent.wait(inv, timeout=60).ok


@pytest.mark.parametrize("where", ["agent", "node"])
def test_a_placement_no_system_satisfies_fails_fast(tmp_path: Path, where: str) -> None:
    with hy.AgentSystem(tmp_path / "data", capabilities={"gpu": True}) as system:
        needs = {"gpu": True, "region": "mars"}
        cfg = dataclasses.replace(config(), placement=needs) if where == "agent" \
            else dataclasses.replace(config(), node_placement={"right": needs})
        began = time.monotonic()
        with pytest.raises(hy.HayataError) as info:
            system.start_agent(cfg)
        assert time.monotonic() - began < 5.0
        assert info.value.code == "agent_start_failed"
        assert "no live actor system satisfies requirements" in str(info.value)
        assert "'region': 'mars'" in str(info.value)
        assert system.agents() == []


def test_placement_is_validated() -> None:
    from hayata_py._config import validate_config

    with pytest.raises(hy.ConfigError) as info:
        validate_config(dataclasses.replace(config(), node_placement={"nope": {"gpu": True}}))
    assert info.value.details["field"] == "node_placement"
    with pytest.raises(hy.ConfigError) as info:
        validate_config(dataclasses.replace(config(), placement={"gpu": [1]}))
    assert info.value.details["field"] == "placement"
    with pytest.raises(hy.ConfigError) as info:
        validate_config(dataclasses.replace(config(), lease_seconds=0.1))
    assert info.value.details["field"] == "lease_seconds"
    with pytest.raises(hy.ConfigError) as info:
        hy.Liveness(heartbeat=0)
    assert info.value.details["field"] == "liveness.heartbeat"
