"""What a running AgentSystem refuses, on real processes: a second system on
its admin port (which leaves the first running), an agent that cannot start,
a second agent of the same id, an unknown agent. The refusals made before any
process starts are in ``tests/unit/test_config.py`` and
``tests/unit/test_bad_input_config.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import hayata_py as hy
from tests.graph_nodes import mock_node, once_policy

pytestmark = pytest.mark.timeout(120)


def config(**overrides: Any) -> hy.AgentConfig:
    fields: dict[str, Any] = {"id": "a", "nodes": {"mock": mock_node},
                              "decision_policy": once_policy}
    fields.update(overrides)
    return hy.AgentConfig(**fields)


def test_start_agent_validates_and_refuses_duplicates(agents: hy.AgentSystem) -> None:
    with pytest.raises(hy.ConfigError):
        agents.start_agent(config(nodes={"l": lambda ctx: {}}))
    assert agents.agents() == []
    agents.start_agent(config())
    with pytest.raises(hy.AgentAlreadyStarted):
        agents.start_agent(config())
    assert agents.agents() == ["a"]
    with pytest.raises(hy.AgentNotFound):
        agents.agent("b")
    agents.stop_agent("a")
    assert agents.agents() == []
    with pytest.raises(hy.AgentNotFound):
        agents.stop_agent("a")


def test_an_admin_port_in_use_is_refused_and_its_system_keeps_running(
        tmp_path: Path) -> None:
    """Regression: Thespian attached the new system to the running one's admin, and
    the failed start then shut that system down."""
    with hy.AgentSystem(tmp_path / "a") as running:
        agent = running.start_agent(hy.AgentConfig(
            id="a", nodes={"mock": "tests.graph_nodes:mock_node"},
            decision_policy="tests.graph_nodes:once_policy"))
        port = running.admin_port
        with pytest.raises(hy.ConfigError) as err:
            hy.AgentSystem(tmp_path / "b", admin_port=port)
        assert err.value.details["field"] == "admin_port"
        assert str(port) in str(err.value)
        result = agent.wait(agent.run("still here"), 30)
        assert result.ok, result
